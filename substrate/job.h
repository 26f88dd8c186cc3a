// job.h — the processes of one job: how they are started, how they find
// each other, how they notice that one of them is gone, and how they end.
//
// Start-up (bootstrap):
//   fork    one host: process 0 forks the others after the program's own
//           option parsing; each child talks to process 0 over a socketpair.
//   mpi     under mpirun (or another PMI launcher): rank and size come from
//           the launcher, process 0 publishes a TCP control address once
//           through MPI, and the address blobs are exchanged with
//           MPI_Allgatherv.
//   manual  processes started by hand with TMK_RANK, TMK_NPROCS and
//           TMK_ROOT=host:port (where process 0 listens).
//   single  one process, nothing to connect.
// After start-up every process keeps one control connection to process 0
// (a star).  A monitor thread per process sends heartbeats and watches the
// connections: a process that dies closes its connection at once (process 0
// then tells everyone which rank was lost and, where it forked them, how it
// died); a process that stops answering is declared lost after
// TMK_PEER_TIMEOUT seconds.  Every wait on another process also watches
// failure_fd(), so no wait outlives a lost peer.  The end (finish) is
// collective over the same connections; process 0's exit status is
// non-zero if any process's is.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "substrate_config.h"
#include "net.h"
#include "status.h"

namespace tmk {

enum class launch_mode { single, fork, mpi, manual };
const char* launch_mode_name(launch_mode mode);

class job {
 public:
  // Starts the job.  nprocs_option is the -n given on the command line
  // (0: none).  In fork mode this returns once in every process.
  static result<std::unique_ptr<job>> start(const launch_config& config, int nprocs_option);
  // The number of processes start will make the job of, where that is
  // known before it starts; 0 under mpirun with no -n.
  static int planned_size(const launch_config& config, int nprocs_option);
  // The job of this process, once started (for the stop paths).
  static job* current();

  ~job();
  job(const job&) = delete;
  job& operator=(const job&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  launch_mode mode() const { return mode_; }
  const launch_config& config() const { return config_; }
  // Processes of this job on this host (as far as the launch tells).
  int local_processes() const;
  // Whether this host has a core for each of them: counted over the cores
  // the process could run on at start-up, before TMK_BIND pinned it to one.
  bool core_per_process() const { return local_processes() <= start_cores_; }
  // A secret every process of this job knows (made at start-up, or
  // TMK_JOB_SECRET for processes started by hand): connections made after
  // start-up present it.
  const std::string& secret() const { return config_.secret; }

  // Start-up exchange: every process contributes one blob and receives all
  // of them, indexed by rank.  Fails (naming the missing ranks) if a process
  // does not arrive within TMK_CONNECT_TIMEOUT.
  result<std::vector<std::string>> allgather(const std::string& mine);

  // Settings that every process of the job must share, as (name, value
  // parsed), compared at start-up through allgather: processes started by
  // hand or by mpirun each read their own environment.  Fails, naming the
  // first setting that differs and the process where it does.
  using settings_list = std::vector<std::pair<std::string, std::string>>;
  status agree(const settings_list& settings);

  // Starts heartbeats and loss detection; call after allgather.
  void start_monitor();

  // Set once a peer is lost or the job is stopping.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The peer_lost status (rank and reason) once failed().
  status failure() const;
  // Set once finish was called: a process that said goodbye may be gone.
  bool finishing() const { return finishing_.load(); }
  // An eventfd that becomes readable once failed(); never drained.
  int failure_fd() const { return failure_fd_; }
  // Memory every process of the job maps, zeroed at start-up: one 64-byte
  // line per rank (shared_line(rank)).  Where process 0 forked the others,
  // or mpirun started all of them on this host; null otherwise (processes
  // on other hosts share nothing).
  void* shared_line(int of_rank) const;

  // Called on the monitor thread when a failure is recorded, so that a
  // blocked waiter can look at failed().
  void add_failure_listener(std::function<void()> listener);

  // A check the monitor makes each round (null: none): given the time and
  // a limit (twice TMK_PEER_TIMEOUT, 10 s at least), what in this process
  // is stuck past it, or "".  A stuck process stops the job, naming it
  // (fatal): its monitor lives and sends heartbeats, so no other process
  // would find it lost.  Replacing the check waits for a call in progress
  // to return.
  using watchdog = std::function<std::string(steady_time now, double limit_seconds)>;
  void set_watchdog(watchdog check);

  // A bound on a wait that has none of its own, one at a time: MPI's
  // (start-up, MPI_Finalize), and the substrate's warm-up at start-up, where
  // every process lives and answers the monitor, and a message that never
  // arrives means a transport that cannot reach its peer.  Past it the
  // process stops the job (fatal), saying what it waited for, until
  // unwatch.
  void watch(double seconds, const std::string& what);
  void unwatch();

  // Stops the whole job: prints message on standard error, tells every
  // process, and exits non-zero.  Safe from any thread; does not return.
  [[noreturn]] void fatal(const std::string& message);
  // A wait that ended because a peer was lost: prints which peer, why, and
  // what this process was doing, then exits non-zero.  A loss this process
  // found itself (a connection closed), before the job heard of it, is
  // told to the others first (through process 0), so that they name the
  // lost process rather than this one, which exits.
  [[noreturn]] void fatal_lost(const status& lost, const std::string& during);

  // Collective end: returns once every process has called finish; the
  // value is the status this process should exit with (at process 0 of a
  // forked job, the first non-zero status of any process).  The caller
  // keeps serving requests until finish returns.
  int finish(int exit_status);

 private:
  struct connection;
  job(const launch_config& config, launch_mode mode, int rank, int size);

  status start_fork(int nprocs);
  status start_manual();
  status start_mpi();
  status accept_children(int listen_fd, const std::string& where);
  // A process other than 0, connected to process 0 by fd: keeps the
  // connection and says hello (its rank and the job's secret).
  status greet_root(int fd);
  // deadline {}: TMK_PEER_TIMEOUT from now.
  status send_control(connection& to, std::uint32_t type, const std::string& payload,
                      steady_time deadline = {});
  status read_control(connection& from, std::uint32_t& type, std::string& payload,
                      steady_time deadline);

  void monitor_loop();
  void handle_readable(connection& from);
  void handle_message(connection& from, std::uint32_t type, const std::string& payload);
  void peer_gone(connection& from, const std::string& reason);
  void record_failure(int lost_rank, const std::string& reason);
  std::string death_reason(connection& from);
  bool reap_child(connection& child, int& wait_status);
  void kill_child(connection& child);
  bool unreaped(connection& child);
  [[noreturn]] void die(int exit_code);
  // deadline as send_control's, for each process.
  void broadcast(std::uint32_t type, const std::string& payload, int except_rank,
                 steady_time deadline = {});
  void bind_to_core();
  void request_cpu_latency();
  void abort_start(const std::string& why);
  void map_shared_lines(bool make);

  launch_config config_;
  launch_mode mode_;
  int rank_;
  int size_;
  int start_cores_ = 1;
  // Process 0: one connection per other rank (index = rank, [0] unused);
  // others: [0] is the connection to process 0.
  std::vector<std::unique_ptr<connection>> connections_;

  std::atomic<bool> failed_{false};
  std::atomic<bool> dying_{false};
  std::atomic<bool> finishing_{false};
  int failure_fd_ = -1;
  int wake_fd_ = -1;
  int cpu_latency_fd_ = -1;  // held open while the job runs (TMK_CPU_LATENCY_US)
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  status failure_;
  std::vector<std::function<void()>> failure_listeners_;
  std::mutex watchdog_mutex_;  // held while the monitor calls watchdog_
  watchdog watchdog_;
  int byes_ = 0;
  int first_bad_status_ = 0;
  bool fin_received_ = false;
  bool stop_monitor_ = false;
  std::thread monitor_;
  bool mpi_initialized_ = false;
  // MPI_Finalize, if this process called MPI_Init, under a watch.
  void finalize_mpi();
  std::thread watch_;
  bool watch_over_ = false;  // under mutex_
  // Mapped before the fork, or under mpirun a POSIX shared memory object.
  void* shared_lines_ = nullptr;
  std::size_t shared_bytes_ = 0;
};

}  // namespace tmk
