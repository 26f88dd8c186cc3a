// job.cc — start-up, loss detection and the collective end (see job.h).
//
// Control messages are framed as {u32 type, u32 length, payload}.  Only the
// monitor thread reads the connections once it runs; any thread may write
// (under the connection's mutex).  Costs: one heartbeat per peer every
// TMK_PEER_TIMEOUT/4 seconds; nothing on the data path.
#include "job.h"

#include <dirent.h>
#include <fcntl.h>
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "log.h"
#include "signal_mask.h"

namespace tmk {

namespace {

enum control_type : std::uint32_t {
  control_hello = 1,      // rank + secret (TCP modes)
  control_blob = 2,       // start-up blob of the sender
  control_table = 3,      // every blob, from process 0
  control_heartbeat = 4,  //
  control_bye = 5,        // the sender called finish with this status
  control_fin = 6,        // every process called finish
  control_abort = 7,      // "rank text": a process stopped the job
  control_lost = 8,       // "rank text": a process was lost (from process 0, or to it from one that found it)
  control_refused = 9,    // "text": process 0 turned this connection away
};

struct frame_header {
  std::uint32_t type;
  std::uint32_t length;
};

constexpr std::uint32_t max_control_payload = 64u << 20;

job* current_job = nullptr;

std::string encode_blobs(const std::vector<std::string>& blobs) {
  std::string out;
  for (const auto& blob : blobs) {
    std::uint32_t length = static_cast<std::uint32_t>(blob.size());
    out.append(reinterpret_cast<const char*>(&length), sizeof length);
    out += blob;
  }
  return out;
}

result<std::vector<std::string>> decode_blobs(const std::string& data, int count) {
  std::vector<std::string> blobs;
  std::size_t at = 0;
  for (int i = 0; i < count; ++i) {
    std::uint32_t length;
    if (at + sizeof length > data.size())
      return status(status_code::protocol_error, "truncated start-up table");
    memcpy(&length, data.data() + at, sizeof length);
    at += sizeof length;
    if (at + length > data.size())
      return status(status_code::protocol_error, "truncated start-up table");
    blobs.push_back(data.substr(at, length));
    at += length;
  }
  return blobs;
}

// A setting's seconds as given: 30, 0.5 (std::to_string wrote 30.000000).
std::string seconds_text(double seconds) {
  char text[32];
  snprintf(text, sizeof text, "%g", seconds);
  return text;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8 && ranks.size() > 10) {
      text += " and " + std::to_string(ranks.size() - 8) + " more";
      break;
    }
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return text;
}

bool launched_by_mpi() {
  return getenv("OMPI_COMM_WORLD_SIZE") != nullptr || getenv("PMIX_RANK") != nullptr ||
         getenv("PMI_RANK") != nullptr;
}

std::string random_secret() {
  std::random_device device;
  char text[33];
  snprintf(text, sizeof text, "%08x%08x%08x%08x", device(), device(), device(), device());
  return text;
}

}  // namespace

struct job::connection {
  int rank = -1;
  int fd = -1;
  // Fork mode, at process 0: the child, -1 once reaped.  Once the monitor
  // runs, the monitor thread (death_reason) and a thread stopping the job
  // (die) may both reap it: pid is read and written under reap_mutex
  // (reap_child, kill_child), so that neither signals a pid the other
  // reaped, which the system may have given to another process.
  pid_t pid = -1;
  std::mutex reap_mutex;
  std::mutex write_mutex;
  std::string input;  // bytes read but not yet a whole frame
  steady_time last_heard = std::chrono::steady_clock::now();
  // Cleared by the monitor thread; read by any thread that broadcasts.
  std::atomic<bool> open{true};
  bool said_bye = false;
  // A control message timed out, perhaps part-written: nothing more can
  // follow it (under write_mutex).
  bool jammed = false;
};

const char* launch_mode_name(launch_mode mode) {
  switch (mode) {
    case launch_mode::single: return "single";
    case launch_mode::fork: return "fork";
    case launch_mode::mpi: return "mpi";
    case launch_mode::manual: return "manual";
  }
  return "?";
}

job* job::current() { return current_job; }

int job::local_processes() const {
  switch (mode_) {
    case launch_mode::fork: return size_;
    case launch_mode::mpi:
      if (const char* local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) return atoi(local);
      if (const char* local = getenv("MPI_LOCALNRANKS")) return atoi(local);
      return 1;
    default: return 1;
  }
}

job::job(const launch_config& config, launch_mode mode, int rank, int size)
    : config_(config), mode_(mode), rank_(rank), size_(size) {
  cpu_set_t allowed;
  start_cores_ = sched_getaffinity(0, sizeof allowed, &allowed) == 0
                     ? CPU_COUNT(&allowed)
                     : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  failure_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

job::~job() {
  unwatch();
  {
    std::lock_guard lock(mutex_);
    stop_monitor_ = true;
  }
  ring_event_fd(wake_fd_);
  if (monitor_.joinable()) monitor_.join();
  for (auto& connection : connections_)
    if (connection && connection->fd >= 0) close(connection->fd);
  close(failure_fd_);
  close(wake_fd_);
  if (cpu_latency_fd_ >= 0) close(cpu_latency_fd_);
  if (shared_lines_ != nullptr) munmap(shared_lines_, shared_bytes_);
  if (current_job == this) current_job = nullptr;
}

int job::planned_size(const launch_config& config, int nprocs_option) {
  if (launched_by_mpi()) return nprocs_option;  // which must agree with mpirun's
  if (config.manual_rank) return config.nprocs;
  return nprocs_option != 0 ? nprocs_option : (config.nprocs != 0 ? config.nprocs : 1);
}

result<std::unique_ptr<job>> job::start(const launch_config& config, int nprocs_option) {
  if (current_job != nullptr)
    return status(status_code::invalid_argument, "the job was already started");
  std::unique_ptr<job> started;
  status outcome;
  if (launched_by_mpi()) {
    if (config.manual_rank)
      return status(status_code::invalid_argument,
                    "TMK_RANK is set but the process was started by mpirun; unset one of them");
    started.reset(new job(config, launch_mode::mpi, 0, 0));
    current_job = started.get();
    // Until the monitor runs (start_monitor), after the transport's own
    // exchange through MPI.
    started->watch(config.connect_timeout + 5,
                       "start-up under mpirun (a process never reached it; TMK_CONNECT_TIMEOUT)");
    outcome = started->start_mpi();
    if (outcome && nprocs_option != 0 && nprocs_option != started->size_)
      outcome = status(status_code::invalid_argument,
                       "-n " + std::to_string(nprocs_option) + " disagrees with the " +
                           std::to_string(started->size_) + " processes mpirun started");
  } else if (config.manual_rank) {
    int nprocs = config.nprocs;
    if (nprocs_option != 0 && nprocs_option != nprocs)
      return status(status_code::invalid_argument,
                    "-n " + std::to_string(nprocs_option) + " disagrees with TMK_NPROCS=" +
                        std::to_string(nprocs));
    started.reset(new job(config, launch_mode::manual, *config.manual_rank, nprocs));
    current_job = started.get();
    log_set_rank(started->rank_);
    outcome = started->start_manual();
  } else {
    int nprocs = planned_size(config, nprocs_option);
    launch_mode mode = nprocs == 1 ? launch_mode::single : launch_mode::fork;
    started.reset(new job(config, mode, 0, nprocs));
    // Made before the fork, so every process of the job has it.
    if (started->config_.secret.empty()) started->config_.secret = random_secret();
    current_job = started.get();
    log_set_rank(0);
    outcome = mode == launch_mode::fork ? started->start_fork(nprocs) : status::ok();
  }
  if (!outcome) {
    current_job = nullptr;
    return outcome;
  }
  started->bind_to_core();
  started->request_cpu_latency();
  return started;
}

// TMK_CPU_LATENCY_US: a PM QoS request, held as long as the file stays open
// (the kernel drops it at the last close, at exit at the latest), that no
// idle CPU of this host take longer than that to wake.  At 0 the idle loop
// polls instead of halting.  On the machine of BENCHMARKS.md a halted CPU
// took 10-25 us to run a woken service thread: a request to a process whose
// service thread slept took 13-15 us a round trip with requests 3 us apart,
// 24-30 with 100 us between them, and 3.0-3.6 with the request held.  It
// costs the power of CPUs that poll when idle, for as long as the job runs,
// hence no request unless asked.  One process alone wakes nobody.
void job::request_cpu_latency() {
  if (!config_.cpu_latency_us || size_ == 1) return;
  int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
  auto value = static_cast<std::int32_t>(*config_.cpu_latency_us);
  if (fd < 0 || write(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) {
    int error = errno;
    if (fd >= 0) close(fd);
    // Said by process 0, not by every process.
    if (rank_ == 0)
      TMK_LOG(warn, "TMK_CPU_LATENCY_US=%u: cannot ask for it through /dev/cpu_dma_latency (%s); "
              "idle CPUs sleep as they would", *config_.cpu_latency_us, strerror(error));
    else
      TMK_LOG(debug, "cannot ask for TMK_CPU_LATENCY_US: %s", strerror(error));
    return;
  }
  cpu_latency_fd_ = fd;
  TMK_LOG(debug, "idle CPUs asked to wake within %u us", *config_.cpu_latency_us);
}

// Pins this process (and every thread it starts later) to one of the cores
// it may run on, process k of the host on the k-th (modulo their number):
// a process that stays on its core keeps its data in that core's caches,
// and its service thread wakes where its computation runs instead of
// pushing another process's off.  TMK_BIND=auto, the default, pins when
// the job's processes on this host fill its cores evenly: one a core or
// fewer (left to the kernel, the callers of 2 processes on the 2 cores of
// BENCHMARKS.md started on the same core in about a third of the runs, and
// each then waited at barriers for the other's time slice: FFT took 6-22
// ms instead of 3.3), or the same number on each (4 or 8 on 2 cores: SOR
// on 4 took 0.71 times as long and on 8 0.85, Jacobi on 8 0.87-0.99, a
// barrier of 8 0.70, lock transfers between 4 and 8 processes 0.82-0.89;
// TSP 1.03 times as long).  Not 3 on 2 cores, where the core with two
// would hold the others back at every barrier (TSP took 1.05 times as long
// pinned, the others the same).  TMK_BIND=core pins always, TMK_BIND=none
// never.
void job::bind_to_core() {
  if (config_.bind == bind_mode::none) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  int cores = CPU_COUNT(&allowed);
  bool evenly = core_per_process() || local_processes() % cores == 0;
  if (cores <= 1 || (config_.bind == bind_mode::automatic && (!evenly || size_ == 1))) return;
  int local_rank = rank_;
  if (mode_ == launch_mode::mpi) {
    const char* value = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (value == nullptr) value = getenv("MPI_LOCALRANKID");
    if (value == nullptr) return;
    local_rank = atoi(value);
  } else if (mode_ == launch_mode::manual && config_.bind == bind_mode::automatic) {
    return;  // which processes share this host is not known
  }
  int wanted = local_rank % cores, seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (seen++ != wanted) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
      TMK_LOG(warn, "cannot pin process %d to CPU %d: %s", rank_, cpu, strerror(errno));
      return;
    }
    // Threads started later inherit the pin; those the process has already
    // (a launcher's or a sanitizer's, or the program's own started before
    // Tmk_startup) are pinned with it.  One that ended meanwhile: nothing
    // to do.
    if (DIR* tasks = opendir("/proc/self/task")) {
      pid_t self = gettid();
      while (dirent* task = readdir(tasks)) {
        pid_t thread = static_cast<pid_t>(atoi(task->d_name));
        if (thread > 0 && thread != self) sched_setaffinity(thread, sizeof one, &one);
      }
      closedir(tasks);
    }
    TMK_LOG(debug, "pinned to CPU %d", cpu);
    return;
  }
}

void* job::shared_line(int of_rank) const {
  if (shared_lines_ == nullptr || of_rank < 0 || of_rank >= size_) return nullptr;
  return static_cast<std::byte*>(shared_lines_) + static_cast<std::size_t>(of_rank) * 64;
}

namespace {
// Objects of jobs whose process 0 died before it removed its object (killed
// while the others were connecting): the secret, and so the name, begins
// with that process's id.  An object whose maker is alive is left alone
// (whether it is a job starting or a process that took the id over).
void remove_dead_jobs_lines() {
  DIR* directory = opendir("/dev/shm");
  if (directory == nullptr) return;
  while (dirent* entry = readdir(directory)) {
    const char* name = entry->d_name;
    if (strncmp(name, "tmk-", 4) != 0) continue;
    char* end = nullptr;
    long maker = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '-' || maker <= 0) continue;
    if (kill(static_cast<pid_t>(maker), 0) == 0 || errno != ESRCH) continue;
    if (shm_unlink((std::string("/") + name).c_str()) == 0)
      TMK_LOG(info, "removed /dev/shm/%s, left by a job whose process 0 died", name);
  }
  closedir(directory);
}
}  // namespace

// Under mpirun on one host: process 0 makes the object, the others open
// it.  Without it (a host that does not share /dev/shm between them) the
// lines stay null and the substrate does without them.
void job::map_shared_lines(bool make) {
  if (make) remove_dead_jobs_lines();
  std::string name = "/tmk-" + config_.secret;
  std::size_t bytes = static_cast<std::size_t>(size_) * 64;
  int fd = shm_open(name.c_str(), make ? O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC : O_RDWR | O_CLOEXEC,
                    0600);
  struct stat about {};
  bool sized = fd >= 0 && (make ? ftruncate(fd, static_cast<off_t>(bytes)) == 0
                                : fstat(fd, &about) == 0 &&
                                      static_cast<std::size_t>(about.st_size) == bytes);
  void* lines = sized ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  int error = errno;
  if (fd >= 0) close(fd);
  if (lines == MAP_FAILED) {
    TMK_LOG(info, "no memory shared with the job's other processes (%s): %s", name.c_str(),
            fd >= 0 && !make && !sized ? "not the job's size" : strerror(error));
    if (make && fd >= 0) shm_unlink(name.c_str());
    return;
  }
  shared_lines_ = lines;
  shared_bytes_ = bytes;
}

status job::start_fork(int nprocs) {
  shared_bytes_ = static_cast<std::size_t>(nprocs) * 64;
  void* lines = mmap(nullptr, shared_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (lines == MAP_FAILED) return errno_status("mapping memory shared by the job's processes");
  shared_lines_ = lines;
  connections_.resize(nprocs);
  std::vector<int> child_ends(nprocs, -1);
  // On a failure, the children started so far are killed and reaped, and
  // the ends not handed to one are closed.
  auto undo = [&](status error) {
    for (int child = 1; child < nprocs; ++child) {
      if (connections_[child] && connections_[child]->pid > 0) {
        kill(connections_[child]->pid, SIGKILL);
        waitpid(connections_[child]->pid, nullptr, 0);
        connections_[child]->pid = -1;
      }
      if (child_ends[child] >= 0) close(child_ends[child]);
      child_ends[child] = -1;
    }
    return error;
  };
  for (int child = 1; child < nprocs; ++child) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      return undo(errno_status("socketpair for process " + std::to_string(child)));
    connections_[child] = std::make_unique<connection>();
    connections_[child]->rank = child;
    connections_[child]->fd = pair[0];
    child_ends[child] = pair[1];
  }
  // Every stream written out first: a child would write out a copy of what
  // a buffer still held, at its exit.
  fflush(nullptr);
  for (int child = 1; child < nprocs; ++child) {
    pid_t pid = ::fork();
    if (pid < 0) return undo(errno_status("fork of process " + std::to_string(child)));
    if (pid == 0) {
      // The child: keep only its own end, as connection [0] to process 0.
      rank_ = child;
      log_set_rank(child);
      int mine = child_ends[child];
      for (int other = 1; other < nprocs; ++other) {
        close(connections_[other]->fd);
        if (other != child) close(child_ends[other]);
      }
      // Event fds created before the fork are shared with the parent: each
      // process needs its own.
      close(failure_fd_);
      close(wake_fd_);
      failure_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      connections_.clear();
      connections_.resize(1);
      connections_[0] = std::make_unique<connection>();
      connections_[0]->rank = 0;
      connections_[0]->fd = mine;
      int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
      if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        if (!config_.all_stdout) dup2(null_fd, STDOUT_FILENO);
        close(null_fd);
      }
      return status::ok();
    }
    connections_[child]->pid = pid;
    close(child_ends[child]);
    child_ends[child] = -1;
  }
  return status::ok();
}

status job::accept_children(int listen_fd, const std::string& where) {
  steady_time deadline = seconds_from_now(config_.connect_timeout);
  int arrived = 0;
  std::string refused;  // the last connection turned away, and why
  while (arrived < size_ - 1) {
    auto accepted = accept_until(listen_fd, deadline);
    if (!accepted) {
      if (accepted.error().code() != status_code::timeout) return accepted.error();
      std::vector<int> missing;
      for (int rank = 1; rank < size_; ++rank)
        if (!connections_[rank]) missing.push_back(rank);
      status late(status_code::timeout,
                  "process" + std::string(missing.size() > 1 ? "es " : " ") + rank_list(missing) +
                      " did not arrive at " + where + " within " +
                      seconds_text(config_.connect_timeout) + " s (TMK_CONNECT_TIMEOUT)" +
                      (refused.empty() ? "" : "; turned away: " + refused),
                  missing.front());
      abort_start(late.message());
      return late;
    }
    auto candidate = std::make_unique<connection>();
    candidate->fd = *accepted;
    std::uint32_t type;
    std::string payload;
    steady_time hello_deadline = std::min(deadline, std::chrono::steady_clock::now() +
                                                        std::chrono::seconds(5));
    status got = read_control(*candidate, type, payload, hello_deadline);
    int claimed = -1;
    std::string secret;
    if (got && type == control_hello && payload.size() >= 4) {
      std::uint32_t rank;
      memcpy(&rank, payload.data(), 4);
      claimed = static_cast<int>(rank);
      secret = payload.substr(4);
    }
    if (claimed < 1 || claimed >= size_ || connections_[claimed] || secret != config_.secret) {
      std::string why = !got ? got.message()
                        : (claimed < 1 || claimed >= size_)
                            ? "rank " + std::to_string(claimed) + " is not a process of this job of " +
                                  std::to_string(size_)
                        : connections_[claimed] ? "rank " + std::to_string(claimed) + " is taken"
                                                : "TMK_JOB_SECRET differs from process 0's";
      TMK_LOG(warn, "rejected a connection at %s: %s", where.c_str(), why.c_str());
      // Told why, the process turned away can say so instead of finding
      // its connection reset.
      if (got) {
        send_control(*candidate, control_refused, why);
        shutdown(candidate->fd, SHUT_WR);
        refused = "a process claiming rank " + std::to_string(claimed) + " (" + why + ")";
      }
      close(candidate->fd);
      continue;
    }
    candidate->rank = claimed;
    candidate->last_heard = std::chrono::steady_clock::now();
    connections_[claimed] = std::move(candidate);
    ++arrived;
  }
  return status::ok();
}

status job::start_manual() {
  auto root = parse_host_port(*config_.root);
  if (!root) return status(root.error()).context("TMK_ROOT");
  connections_.resize(rank_ == 0 ? size_ : 1);
  if (size_ == 1) return status::ok();
  if (rank_ == 0) {
    // Process 0 listens on every address, but the others look for it at
    // TMK_ROOT's host: a name that resolves nowhere, or not here, is said
    // now rather than as processes that never arrive.
    auto resolved = resolve_ipv4(root->first);
    if (!resolved) return status(resolved.error()).context("TMK_ROOT");
    auto here = local_addresses();
    if (resolved->rfind("127.", 0) != 0 &&
        std::find(here.begin(), here.end(), *resolved) == here.end())
      TMK_LOG(warn, "TMK_ROOT=%s: %s is not an address of this host, process 0's; the others "
                    "look for process 0 there",
              config_.root->c_str(), resolved->c_str());
    auto listening = tcp_listen(root->second, size_);
    if (!listening) return status(listening.error()).context("process 0 listening at TMK_ROOT");
    status outcome = accept_children(*listening, *config_.root);
    close(*listening);
    return outcome;
  }
  steady_time deadline = seconds_from_now(config_.connect_timeout);
  auto connected = tcp_connect(root->first, root->second, deadline);
  if (!connected)
    return status(status_code::timeout,
                  "process 0 did not arrive at " + *config_.root + ": " +
                      connected.error().message(),
                  0);
  return greet_root(*connected);
}

status job::greet_root(int fd) {
  connections_[0] = std::make_unique<connection>();
  connections_[0]->rank = 0;
  connections_[0]->fd = fd;
  std::uint32_t rank = static_cast<std::uint32_t>(rank_);
  std::string hello(reinterpret_cast<const char*>(&rank), 4);
  return send_control(*connections_[0], control_hello, hello + config_.secret);
}

status job::start_mpi() {
  // Only the thread that starts the job calls MPI; the job's own threads
  // (the monitor, the service thread) run beside it.
  int provided;
  {
    program_signals_blocked blocked;  // for the threads MPI starts
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      return status(status_code::transport_error, "MPI_Init failed");
  }
  mpi_initialized_ = true;
  if (provided < MPI_THREAD_FUNNELED)
    TMK_LOG(warn, "this MPI library runs one thread a process only (MPI_THREAD_FUNNELED not "
                  "provided); tmk calls it from one thread but runs others beside it");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  log_set_rank(rank_);
  if (size_ > max_processes)
    return status(status_code::invalid_argument,
                  "mpirun started " + std::to_string(size_) + " processes; the limit is " +
                      std::to_string(max_processes));
  connections_.resize(rank_ == 0 ? size_ : 1);
  if (size_ == 1) return status::ok();

  // Process 0 publishes where it listens (every address it has, a port and
  // a fresh secret) once through MPI; the control star then runs over TCP.
  // With every process on this host (as the launcher tells), it also makes
  // the lines they share (shared_line), a POSIX shared memory object named
  // after the secret, which each maps before it connects and which process
  // 0 removes once all have connected.
  bool one_host = local_processes() == size_;
  std::string announcement;
  int listen_fd = -1;
  if (rank_ == 0) {
    auto listening = tcp_listen(0, size_);
    if (!listening) return listening.error();
    listen_fd = *listening;
    auto port = local_port(listen_fd);
    if (!port) return port.error();
    // The process id first: the name of the object says whose it is.
    config_.secret = std::to_string(getpid()) + "-" + random_secret();
    if (one_host) map_shared_lines(true);
    announcement = config_.secret + " " + std::to_string(*port);
    for (const auto& address : local_addresses()) announcement += " " + address;
  }
  int length = static_cast<int>(announcement.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  announcement.resize(length);
  MPI_Bcast(announcement.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank_ == 0) {
    status outcome = accept_children(listen_fd, "process 0's control port");
    close(listen_fd);
    if (shared_lines_ != nullptr) shm_unlink(("/tmk-" + config_.secret).c_str());
    return outcome;
  }
  std::vector<std::string> words;
  for (std::size_t at = 0; at < announcement.size();) {
    std::size_t end = announcement.find(' ', at);
    if (end == std::string::npos) end = announcement.size();
    words.push_back(announcement.substr(at, end - at));
    at = end + 1;
  }
  if (words.size() < 3) return status(status_code::protocol_error, "bad control announcement");
  config_.secret = words[0];
  if (one_host) map_shared_lines(false);
  auto port = static_cast<std::uint16_t>(std::stoi(words[1]));
  std::string tried;
  for (std::size_t i = 2; i < words.size(); ++i) {
    steady_time deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    auto connected = tcp_connect(words[i], port, deadline);
    if (!connected) {
      tried += " " + words[i];
      continue;
    }
    return greet_root(*connected);
  }
  return status(status_code::timeout, "cannot reach process 0's control port at" + tried, 0);
}

// A process that has not read its control connection for TMK_PEER_TIMEOUT
// (stopped, say) is silent: a send that has waited that long for room
// gives up, rather than hold the thread that sends (the monitor, process
// 0 handing out the start-up table) for ever.
status job::send_control(connection& to, std::uint32_t type, const std::string& payload,
                         steady_time deadline) {
  if (deadline == steady_time{}) deadline = seconds_from_now(config_.peer_timeout);
  frame_header header{type, static_cast<std::uint32_t>(payload.size())};
  std::string frame(reinterpret_cast<const char*>(&header), sizeof header);
  frame += payload;
  std::lock_guard lock(to.write_mutex);
  if (to.fd < 0) return status(status_code::peer_lost, "connection closed", to.rank);
  if (!to.jammed) {
    status sent = send_all(to.fd, frame.data(), frame.size(), deadline);
    if (sent.code() != status_code::timeout) return sent;
    to.jammed = true;
  }
  return status(status_code::peer_lost, "it has stopped reading its control connection", to.rank);
}

status job::read_control(connection& from, std::uint32_t& type, std::string& payload,
                         steady_time deadline) {
  frame_header header;
  status got = recv_all(from.fd, &header, sizeof header, deadline);
  if (!got) return got;
  if (header.length > max_control_payload)
    return status(status_code::protocol_error, "oversized control message");
  payload.resize(header.length);
  got = recv_all(from.fd, payload.data(), header.length, deadline);
  if (!got) return got;
  type = header.type;
  from.last_heard = std::chrono::steady_clock::now();
  return status::ok();
}

result<std::vector<std::string>> job::allgather(const std::string& mine) {
  if (size_ == 1) return std::vector<std::string>{mine};
  if (mode_ == launch_mode::mpi) {
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(size_), offsets(size_);
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int rank = 0; rank < size_; ++rank) {
      offsets[rank] = total;
      total += lengths[rank];
    }
    std::string all(total, '\0');
    MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                   MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> blobs;
    for (int rank = 0; rank < size_; ++rank) blobs.push_back(all.substr(offsets[rank], lengths[rank]));
    return blobs;
  }

  steady_time deadline = seconds_from_now(config_.connect_timeout);
  if (rank_ != 0) {
    std::uint32_t rank = static_cast<std::uint32_t>(rank_);
    status sent = send_control(*connections_[0], control_blob,
                               std::string(reinterpret_cast<const char*>(&rank), 4) + mine,
                               deadline);
    // Process 0 answers with the table, or tells why the job cannot start
    // (or why it turned this process away, which the failed send may
    // follow: the reason is read all the same).
    deadline += std::chrono::seconds(5);
    std::uint32_t type = 0;
    std::string payload;
    status got = read_control(*connections_[0], type, payload, deadline);
    if (got && type == control_refused)
      return status(status_code::invalid_argument, "process 0 turned this process away: " + payload,
                    0);
    if (!sent) return status(status_code::peer_lost, "process 0 is gone: " + sent.message(), 0);
    if (!got)
      return status(got.code() == status_code::timeout ? status_code::timeout
                                                       : status_code::peer_lost,
                    "waiting for process 0 at start-up: " + got.message(), 0);
    if (type == control_abort)
      return status(status_code::timeout, "process 0 stopped the job: " + payload.substr(4), 0);
    if (type != control_table)
      return status(status_code::protocol_error, "unexpected start-up message", 0);
    return decode_blobs(payload, size_);
  }

  std::vector<std::string> blobs(size_);
  std::vector<bool> arrived(size_, false);
  blobs[0] = mine;
  arrived[0] = true;
  int missing = size_ - 1;
  status outcome;
  while (missing > 0 && outcome) {
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (int rank = 1; rank < size_; ++rank)
      if (!arrived[rank]) {
        fds.push_back({connections_[rank]->fd, POLLIN, 0});
        ranks.push_back(rank);
      }
    double left = seconds_until(deadline);
    int ready = left <= 0 ? 0 : poll(fds.data(), fds.size(), static_cast<int>(left * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      std::vector<int> late;
      for (int rank = 1; rank < size_; ++rank)
        if (!arrived[rank]) late.push_back(rank);
      outcome = status(status_code::timeout,
                       "process" + std::string(late.size() > 1 ? "es " : " ") + rank_list(late) +
                           " did not arrive within " + seconds_text(config_.connect_timeout) +
                           " s (TMK_CONNECT_TIMEOUT)",
                       late.front());
      break;
    }
    for (std::size_t i = 0; i < fds.size() && outcome; ++i) {
      if (fds[i].revents == 0) continue;
      connection& from = *connections_[ranks[i]];
      std::uint32_t type;
      std::string payload;
      status got = read_control(from, type, payload, deadline);
      if (!got || type != control_blob || payload.size() < 4) {
        outcome = status(status_code::peer_lost,
                         "process " + std::to_string(from.rank) + " " +
                             (got ? std::string("sent a bad start-up message") : death_reason(from)) +
                             " during start-up",
                         from.rank);
        break;
      }
      blobs[from.rank] = payload.substr(4);
      arrived[from.rank] = true;
      --missing;
    }
  }
  if (!outcome) {
    abort_start(outcome.message());
    return outcome;
  }
  // Each process waits 5 s more than the others had to arrive.
  std::string table = encode_blobs(blobs);
  for (int rank = 1; rank < size_; ++rank) {
    status sent = send_control(*connections_[rank], control_table, table,
                               deadline + std::chrono::seconds(5));
    if (!sent) {
      std::string why = "process " + std::to_string(rank) +
                        " did not take the start-up table: " + sent.message();
      abort_start(why);
      return status(status_code::peer_lost, why, rank);
    }
  }
  return blobs;
}

status job::agree(const settings_list& settings) {
  std::string mine;
  for (const auto& [name, value] : settings) mine += name + '=' + value + '\n';
  auto all = allgather(mine);
  if (!all) return all.error();
  // The value of name in a blob of lines NAME=value, or "" if it is absent.
  auto value_in = [](const std::string& blob, const std::string& name) {
    std::string key = name + '=';
    for (std::size_t at = 0; at < blob.size();) {
      std::size_t end = blob.find('\n', at);
      if (end == std::string::npos) end = blob.size();
      if (blob.compare(at, key.size(), key) == 0)
        return blob.substr(at + key.size(), end - at - key.size());
      at = end + 1;
    }
    return std::string();
  };
  for (int rank = 1; rank < size_; ++rank) {
    if ((*all)[rank] == (*all)[0]) continue;
    for (const auto& [name, value] : settings) {
      std::string first = value_in((*all)[0], name), there = value_in((*all)[rank], name);
      if (first == there) continue;
      return status(status_code::invalid_argument,
                    name + " is " + there + " at process " + std::to_string(rank) + " but " +
                        first + " at process 0: every process of a job needs the same " + name,
                    rank);
    }
  }
  return status::ok();
}

// Process 0 cannot start the job: tells every process that came why, and
// lets the message arrive before the connections close (closing with
// unread input would reset them and lose it).
void job::abort_start(const std::string& why) {
  broadcast(control_abort, std::string(4, '\0') + why, -1);
  for (auto& to : connections_)
    if (to && to->fd >= 0) shutdown(to->fd, SHUT_WR);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  for (auto& to : connections_) {
    if (!to || to->fd < 0) continue;
    char sink[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd wait{to->fd, POLLIN, 0};
      if (poll(&wait, 1, 50) <= 0) continue;
      if (recv(to->fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
    }
  }
}

void job::broadcast(std::uint32_t type, const std::string& payload, int except_rank,
                    steady_time deadline) {
  for (auto& to : connections_)
    if (to && to->rank != except_rank && to->open) send_control(*to, type, payload, deadline);
}

void job::start_monitor() {
  unwatch();
  if (size_ == 1 || monitor_.joinable()) return;
  {
    program_signals_blocked blocked;
    monitor_ = std::thread([this] { monitor_loop(); });
  }
  pthread_setname_np(monitor_.native_handle(), "tmk-monitor");
}

status job::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void job::add_failure_listener(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  failure_listeners_.push_back(std::move(listener));
}

void job::set_watchdog(watchdog check) {
  std::lock_guard lock(watchdog_mutex_);
  watchdog_ = std::move(check);
}

void job::monitor_loop() {
  using namespace std::chrono;
  const auto interval = duration_cast<steady_clock::duration>(
      duration<double>(std::max(0.05, config_.peer_timeout / 4)));
  const auto timeout = duration_cast<steady_clock::duration>(duration<double>(config_.peer_timeout));
  steady_time last_beat = steady_clock::now();
  steady_time failed_at{};
  for (auto& from : connections_)
    if (from) from->last_heard = steady_clock::now();
  // A round comes at least every interval.  One that comes much later
  // finds this process itself stopped meanwhile (a job suspended, Ctrl-Z
  // and fg, for longer than TMK_PEER_TIMEOUT: every process lost every
  // other when it resumed) or starved of the CPU: the others' silence
  // then says nothing, and they are given a timeout afresh.  The stuck
  // handler watch runs on a clock that such a gap does not advance.
  steady_time last_round = steady_clock::now();
  steady_time watch_clock = last_round;

  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (stop_monitor_) return;
    }
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    std::vector<connection*> watched;
    for (auto& from : connections_)
      if (from && from->open) {
        fds.push_back({from->fd, POLLIN, 0});
        watched.push_back(from.get());
      }
    int wait_ms = static_cast<int>(duration_cast<milliseconds>(interval).count());
    if (failed()) wait_ms = 100;
    int ready = poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno != EINTR) {
      TMK_LOG(error, "monitor: poll: %s", strerror(errno));
      return;
    }
    if (ready > 0) {
      if (fds[0].revents) {
        empty_event_fd(wake_fd_);
      }
      for (std::size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents) handle_readable(*watched[i - 1]);
    }
    steady_time now = steady_clock::now();
    auto since_last_round = now - last_round;
    last_round = now;
    if (since_last_round > 2 * interval) {
      TMK_LOG(info,
              "monitor: this process was stopped or starved for %.1f s; the others' silence "
              "meanwhile is not held against them",
              duration<double>(since_last_round).count());
      for (auto& from : connections_)
        if (from) from->last_heard = now;
    }
    watch_clock += std::min<steady_clock::duration>(since_last_round, 2 * interval);
    if (now - last_beat >= interval) {
      last_beat = now;
      // A process that has not read its connection until the next beat
      // is stopped: the silence check below finds it, and no other
      // process waits for its beat meanwhile.
      broadcast(control_heartbeat, {}, -1, now + interval);
    }
    // A peer is watched until it leaves: its bye (at process 0) or the end
    // message (elsewhere).  In Tmk_exit too: a process stopped there
    // before its bye kept every other waiting for ever.
    if (!failed() && !fin_received_) {
      for (auto& from : connections_)
        if (from && from->open && !from->said_bye && now - from->last_heard > timeout) {
          peer_gone(*from, "sent no sign of life for " + seconds_text(config_.peer_timeout) +
                               " s (stopped or hung; TMK_PEER_TIMEOUT)");
          break;
        }
    }
    // Not while the job fails: a thread stuck on a lost peer is told of the
    // loss, or the process stops below.  Called outside the lock, which
    // fatal's exit may need.
    if (!failed()) {
      std::string stuck;
      {
        std::lock_guard lock(watchdog_mutex_);
        if (watchdog_) stuck = watchdog_(watch_clock, std::max(2 * config_.peer_timeout, 10.0));
      }
      if (!stuck.empty()) fatal("stuck: " + stuck);
    }
    // A failure nobody is waiting on: give a waiter a moment to report it
    // with what it was doing, then report it here.
    if (failed()) {
      if (failed_at == steady_time{}) failed_at = now;
      if (now - failed_at > milliseconds(1000)) {
        status lost = failure();
        fatal_lost(lost, "its computation");
      }
    }
  }
}

void job::handle_readable(connection& from) {
  char chunk[65536];
  ssize_t got = recv(from.fd, chunk, sizeof chunk, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    from.open = false;
    bool expected = finishing_.load() && (rank_ == 0 ? from.said_bye : fin_received_);
    if (!expected) peer_gone(from, death_reason(from));
    return;
  }
  from.last_heard = std::chrono::steady_clock::now();
  from.input.append(chunk, static_cast<std::size_t>(got));
  while (from.input.size() >= sizeof(frame_header)) {
    frame_header header;
    memcpy(&header, from.input.data(), sizeof header);
    if (header.length > max_control_payload) {
      from.open = false;
      peer_gone(from, "sent a malformed control message");
      return;
    }
    if (from.input.size() < sizeof header + header.length) break;
    std::string payload = from.input.substr(sizeof header, header.length);
    from.input.erase(0, sizeof header + header.length);
    handle_message(from, header.type, payload);
  }
}

void job::handle_message(connection& from, std::uint32_t type, const std::string& payload) {
  switch (type) {
    case control_heartbeat:
      break;
    case control_bye: {
      int exit_status = 0;
      if (payload.size() >= 4) memcpy(&exit_status, payload.data(), 4);
      std::lock_guard lock(mutex_);
      if (!from.said_bye) {
        from.said_bye = true;
        ++byes_;
        if (exit_status != 0 && first_bad_status_ == 0) first_bad_status_ = exit_status;
      }
      changed_.notify_all();
      break;
    }
    case control_fin: {
      TMK_LOG(debug, "finish: end message received");
      std::lock_guard lock(mutex_);
      fin_received_ = true;
      changed_.notify_all();
      break;
    }
    case control_abort:
    case control_lost: {
      int about = from.rank;
      if (payload.size() >= 4) memcpy(&about, payload.data(), 4);
      std::string text = payload.size() > 4 ? payload.substr(4) : std::string();
      if (type == control_abort) {
        if (rank_ == 0) broadcast(control_abort, payload, from.rank);
        if (!dying_.exchange(true)) {
          log_message(log_level::error, "stopping: process %d stopped the job%s%s", about,
                      text.empty() ? "" : ": ", text.c_str());
          die(1);
        }
      } else {
        // From a process that found the loss itself (fatal_lost): process 0
        // tells the others.
        if (rank_ == 0 && !failed()) {
          for (auto& to : connections_)
            if (to && to->rank != from.rank && to->rank != about && to->open)
              send_control(*to, control_lost, payload);
        }
        record_failure(about, text);
      }
      break;
    }
    default:
      TMK_LOG(warn, "ignored control message of unknown type %u from process %d", type, from.rank);
  }
}

// Reaps a child that has exited: true with its wait status if this call
// reaped it.
bool job::reap_child(connection& child, int& wait_status) {
  std::lock_guard lock(child.reap_mutex);
  if (child.pid <= 0 || waitpid(child.pid, &wait_status, WNOHANG) != child.pid) return false;
  child.pid = -1;
  return true;
}

bool job::unreaped(connection& child) {
  std::lock_guard lock(child.reap_mutex);
  return child.pid > 0;
}

// Kills a child not reaped yet, and reaps it.
void job::kill_child(connection& child) {
  std::lock_guard lock(child.reap_mutex);
  if (child.pid <= 0) return;
  kill(child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
  child.pid = -1;
}

std::string job::death_reason(connection& from) {
  // Only process 0 of a forked job, the others' parent, can tell how a
  // process ended.
  const std::string closed = "closed its connection without Tmk_exit (it exited, crashed or was killed)";
  if (mode_ != launch_mode::fork || rank_ != 0) return closed;
  // The connection closes as the process dies; give the kernel a moment to
  // make it a zombie so that the reason can be told.
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (!unreaped(from)) break;  // reaped, by a thread stopping the job
    int wait_status;
    if (reap_child(from, wait_status)) {
      if (WIFSIGNALED(wait_status))
        return "died (killed by signal " + std::to_string(WTERMSIG(wait_status)) + ", " +
               strsignal(WTERMSIG(wait_status)) + ")";
      if (WIFEXITED(wait_status))
        return "exited with status " + std::to_string(WEXITSTATUS(wait_status)) +
               " without Tmk_exit";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return closed;
}

void job::peer_gone(connection& from, const std::string& reason) {
  int lost = rank_ == 0 ? from.rank : 0;
  if (rank_ == 0) {
    std::string payload(reinterpret_cast<const char*>(&lost), 4);
    broadcast(control_lost, payload + reason, lost);
    // A stopped process would be left behind: it goes with the job.
    if (mode_ == launch_mode::fork) kill_child(from);
  }
  record_failure(lost, reason);
}

void job::record_failure(int lost_rank, const std::string& reason) {
  std::vector<std::function<void()>> listeners;
  {
    std::lock_guard lock(mutex_);
    if (failed_.load()) return;
    failure_ = status(status_code::peer_lost,
                      "lost process " + std::to_string(lost_rank) + ": it " + reason, lost_rank);
    failed_.store(true, std::memory_order_release);
    listeners = failure_listeners_;
    changed_.notify_all();
  }
  ring_event_fd(failure_fd_);
  for (auto& listener : listeners) listener();
}

void job::fatal(const std::string& message) {
  if (dying_.exchange(true))
    while (true) pause();
  log_message(log_level::error, "%s", message.c_str());
  std::uint32_t rank = static_cast<std::uint32_t>(rank_);
  std::string payload(reinterpret_cast<const char*>(&rank), 4);
  broadcast(control_abort, payload + message, -1);
  die(1);
}

void job::fatal_lost(const status& lost, const std::string& during) {
  if (dying_.exchange(true))
    while (true) pause();
  log_message(log_level::error, "%s, during %s", lost.message().c_str(), during.c_str());
  // Unless told, process 0 could take this process's exit for the cause
  // (seen: "lost process 1: it exited with status 1 without Tmk_exit"
  // from process 0 when process 1 found process 2's sockets closed first).
  if (!failed() && lost.peer() >= 0 && lost.peer() != rank_) {
    std::uint32_t about = static_cast<std::uint32_t>(lost.peer());
    std::string payload(reinterpret_cast<const char*>(&about), 4);
    broadcast(control_lost,
              payload + "was found gone by process " + std::to_string(rank_) + " (" +
                  lost.message() + ")",
              lost.peer(), std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
  die(1);
}

void job::die(int exit_code) {
  if (mode_ == launch_mode::fork && rank_ == 0) {
    // Every child was told; give them a moment to say why, then make sure
    // none is left behind.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline) {
      bool any = false;
      for (auto& child : connections_) {
        if (!child) continue;
        int wait_status;
        reap_child(*child, wait_status);
        any = any || unreaped(*child);
      }
      if (!any) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (auto& child : connections_)
      if (child) kill_child(*child);
  }
  fflush(stdout);
  fflush(stderr);
  _exit(exit_code);
}

int job::finish(int exit_status) {
  finishing_.store(true);
  TMK_LOG(debug, "finish: start");
  if (size_ == 1) {
    // Started by mpirun all the same (mpirun -np 1), which wants
    // MPI_Finalize from every process it started.
    finalize_mpi();
    return exit_status;
  }
  auto failed_during_exit = [this] { fatal_lost(failure(), "Tmk_exit"); };
  if (rank_ != 0) {
    status sent = send_control(*connections_[0], control_bye,
                               std::string(reinterpret_cast<const char*>(&exit_status), 4));
    if (!sent) fatal_lost(status(status_code::peer_lost, "lost process 0: " + sent.message(), 0),
                          "Tmk_exit");
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return fin_received_ || failed_.load(); });
    if (!fin_received_) {
      lock.unlock();
      failed_during_exit();
    }
    TMK_LOG(debug, "finish: end seen");
  } else {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return byes_ == size_ - 1 || failed_.load(); });
    if (byes_ != size_ - 1) {
      lock.unlock();
      failed_during_exit();
    }
    lock.unlock();
    TMK_LOG(debug, "finish: every process said bye");
    broadcast(control_fin, {}, -1);
    if (exit_status == 0) exit_status = first_bad_status_;
  }
  {
    std::lock_guard lock(mutex_);
    stop_monitor_ = true;
  }
  ring_event_fd(wake_fd_);
  if (monitor_.joinable()) monitor_.join();
  TMK_LOG(debug, "finish: monitor stopped");

  if (mode_ == launch_mode::fork && rank_ == 0) {
    for (auto& child : connections_) {
      if (!child || !unreaped(*child)) continue;
      int wait_status = 0;
      // Children exit right after the end message; one that hangs in its
      // own teardown is not allowed to keep the job alive.
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      bool reaped = false;
      while (!(reaped = reap_child(*child, wait_status)) && unreaped(*child) &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!reaped && unreaped(*child)) {
        TMK_LOG(warn, "process %d did not exit after Tmk_exit; killing it", child->rank);
        kill_child(*child);
      }
      int child_status = reaped && WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 1;
      if (exit_status == 0) exit_status = child_status;
    }
  }
  finalize_mpi();
  return exit_status;
}

void job::finalize_mpi() {
  if (!mpi_initialized_) return;
  // Open MPI's MPI_Finalize waits for every process of the job.
  watch(10, "MPI_Finalize (a process of the job never reached it)");
  MPI_Finalize();
  unwatch();
  mpi_initialized_ = false;
}

void job::watch(double seconds, const std::string& what) {
  unwatch();
  {
    std::lock_guard lock(mutex_);
    watch_over_ = false;
  }
  program_signals_blocked blocked;
  watch_ = std::thread([this, seconds, what] {
    std::unique_lock lock(mutex_);
    if (changed_.wait_until(lock, seconds_from_now(seconds), [this] { return watch_over_; }))
      return;
    lock.unlock();
    // As any stop of the job: the others connected by then are told why.
    // A process still in the warm-up that only saw this one's connection
    // close said "lost process N" instead, naming no cause.
    char limit[32];
    snprintf(limit, sizeof limit, "%g", seconds);
    fatal(what + " did not end within " + limit + " s; stopping");
  });
  pthread_setname_np(watch_.native_handle(), "tmk-watch");
}

void job::unwatch() {
  if (!watch_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    watch_over_ = true;
  }
  changed_.notify_all();
  watch_.join();
}

}  // namespace tmk
