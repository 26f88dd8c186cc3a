// node.cc — start-up, the shared region, message plumbing, request
// dispatch and the collective end of a process.
#include "node.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sigsegv.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "log.h"

namespace tmk {

namespace {
node* the_node = nullptr;
// The runtime's entry the calling thread is in (node::inside), if any.
thread_local const char* inside_runtime = nullptr;
// In a child the program forked after Tmk_startup: the runtime, its
// connections and its view of shared memory are its parent's.
bool forked_away = false;
void note_forked_away() { forked_away = true; }

// A program's own handlers of SIGSEGV and SIGBUS, as Tmk_startup found
// them (not UCX's, installed as its library loads): a fault outside the
// shared region goes on to them.  libsigsegv calls fault_handler with the
// address alone; take_fault, in front of it, keeps the kernel's details
// for the program's handler.
struct fault_actions {
  int signal_number;
  struct sigaction program;  // as Tmk_startup found it
  bool handled = false;      // the program had a handler of its own
  struct sigaction libsigsegv;
};
fault_actions fault_signals[] = {{SIGSEGV, {}}, {SIGBUS, {}}};
fault_actions& actions_of(int signal_number) {
  return fault_signals[signal_number == SIGSEGV ? 0 : 1];
}
thread_local int fault_signal = 0;
thread_local siginfo_t* fault_info = nullptr;
thread_local void* fault_context = nullptr;

void note_program_fault_handlers() {
  for (auto& fault : fault_signals) {
    if (sigaction(fault.signal_number, nullptr, &fault.program) != 0) continue;
    void* handler = (fault.program.sa_flags & SA_SIGINFO) != 0
                        ? reinterpret_cast<void*>(fault.program.sa_sigaction)
                        : reinterpret_cast<void*>(fault.program.sa_handler);
    if (handler == reinterpret_cast<void*>(SIG_DFL) || handler == reinterpret_cast<void*>(SIG_IGN))
      continue;
    Dl_info where{};
    fault.handled = !(dladdr(handler, &where) != 0 && where.dli_fname != nullptr &&
                      strstr(where.dli_fname, "libucs") != nullptr);
  }
}

void take_fault(int signal_number, siginfo_t* info, void* context) {
  int outer_signal = fault_signal;
  siginfo_t* outer_info = fault_info;
  void* outer_context = fault_context;
  fault_signal = signal_number;
  fault_info = info;
  fault_context = context;
  actions_of(signal_number).libsigsegv.sa_sigaction(signal_number, info, context);
  fault_signal = outer_signal;
  fault_info = outer_info;
  fault_context = outer_context;
}

int fault_handler(void* address, int) {
  node* self = the_node;
  if (self != nullptr && self->handle_fault(address)) return 1;
  // fault_signal is 0 for a signal take_fault is not in front of.
  if (fault_signal == 0 || !actions_of(fault_signal).handled)
    return 0;  // the default action: an ordinary crash
  // As if the program's handler had been the only one: it returns to the
  // faulting instruction, or does not return.
  const struct sigaction& program = actions_of(fault_signal).program;
  if ((program.sa_flags & SA_SIGINFO) != 0)
    program.sa_sigaction(fault_signal, fault_info, fault_context);
  else
    program.sa_handler(fault_signal);
  return 1;
}

// Runs when a process returns from main (or calls exit) without Tmk_exit:
// the end is collective all the same.
void exit_hook(int exit_status, void*) {
  // A child the program forked ends as a plain process: the job is its
  // parent's to end.
  if (the_node == nullptr || the_node->finished() || forked_away) return;
  node::inside in(*the_node, "exit");
  auto turn = the_node->caller_turn();
  the_node->exit(exit_status, true);
}
}  // namespace

node* node::instance() { return the_node; }

bool node::in_forked_child() { return forked_away; }

node::inside::inside(node& self, const char* what, const void* address) : before_(inside_runtime) {
  if (before_ != nullptr) {
    char entering[96];
    if (address != nullptr)
      snprintf(entering, sizeof entering, "shared memory touched (at %p)", address);
    else
      snprintf(entering, sizeof entering, "%s called", what);
    self.job_.fatal(std::string(entering) + " by a signal handler that interrupted " + before_ +
                    " on the same thread: a signal handler may not call Tmk_* or touch shared "
                    "memory while its thread is in the runtime");
  }
  inside_runtime = what;
}

node::inside::~inside() { inside_runtime = before_; }

node::node(job& owner, std::unique_ptr<transport> link, const runtime_config& config,
           bool statistics)
    : job_(owner),
      link_(std::move(link)),
      config_(config),
      rank_(owner.rank()),
      nprocs_(owner.size()),
      print_statistics_(statistics),
      page_size_(config.page_size),
      npages_(static_cast<std::uint32_t>(config.shared_size / config.page_size)),
      message_limit_(link_->config().max_message),
      fetch_limit_(static_cast<std::uint32_t>(std::clamp<std::size_t>(
          (message_limit_ - std::min(message_limit_, message_overhead)) / reply_bytes_per_page(),
          1, 2 * std::size_t{config.prefetch_pages}))),
      notices_(owner.size(), nullptr),
      extras_(static_cast<std::uint32_t>(config.shared_size / config.page_size)),
      first_write_reach_(config.prefetch_pages),
      twins_(config.page_size),
      time_(owner.size(), 0),
      intervals_(owner.size()),
      deadlock_patience_(rank_ == 0 && config.deadlock_check > 0
                             ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(config.deadlock_check))
                             : std::chrono::steady_clock::duration::max()) {}

void node::startup(int argc, char** argv) {
  if (the_node != nullptr) {
    log_message(log_level::error, "Tmk_startup: called twice");
    ::exit(1);
  }
  note_program_fault_handlers();
  if (auto level = setting_value("TMK_LOG_LEVEL")) {
    static const char* const words[] = {"error", "warn", "info", "debug", "trace"};
    auto choice = parse_choice("TMK_LOG_LEVEL", *level, words);
    if (!choice) {
      log_message(log_level::error, "Tmk_startup: %s", choice.error().message().c_str());
      ::exit(1);
    }
    log_set_level(static_cast<log_level>(*choice));
  }
  auto stop = [](const status& why) {
    log_message(log_level::error, "Tmk_startup: %s", why.message().c_str());
    ::exit(1);
  };
  auto options = parse_command_line(argc, argv);
  if (!options) stop(options.error());
  auto launch = launch_config::from_environment();
  if (!launch) stop(launch.error());
  auto substrate = substrate_config::from_environment();
  if (!substrate) stop(substrate.error());
  auto config = runtime_config::from_environment();
  if (!config) stop(config.error());

  // Messages, diffs and twins of tens of kilobytes come and go with every
  // fault served.  glibc would hand freed memory at the top of a thread's
  // heap back to the system at once and fault in fresh zeroed pages for
  // the next message (a diff request served in 55 us instead of 37); it
  // keeps up to 64 MiB instead, and takes blocks below 32 MiB from the heap
  // rather than from mmap of their own.
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);

  // Every message the runtime makes is divided to fit, but for one page
  // with its diffs (checked here) and one interval's notices (as they go).
  // Checked before the others are forked where the number of processes is
  // known by then, so that one process says so, not each.
  auto one_page_fits = [&](int nprocs) -> status {
    std::size_t one_page =
        node::message_overhead + node::reply_bytes_per_page(config->page_size, nprocs);
    if (substrate->max_message >= one_page) return status::ok();
    return status(status_code::invalid_argument,
                  "TMK_MAX_MESSAGE=" + std::to_string(substrate->max_message) +
                      " bytes cannot carry a page of " + std::to_string(config->page_size) +
                      " bytes (TMK_PAGE_SIZE): a message with one page and its diffs takes up to " +
                      std::to_string(one_page) + " bytes");
  };
  const int planned = job::planned_size(*launch, options->nprocs);
  if (planned != 0)
    if (status fits = one_page_fits(planned); !fits) stop(fits);

  remember_startup_memory();  // before the others are forked
  auto started = job::start(*launch, options->nprocs);
  if (!started) stop(started.error());
  job* owner = started->release();  // lives as long as the process
  // Settings that size or place the shared region and the lock and
  // barrier tables: the same in every process, or nothing agrees.
  char base[32];
  snprintf(base, sizeof base, "%#llx", static_cast<unsigned long long>(config->shared_base));
  auto created = transport::create(
      *owner, *substrate,
      {{"TMK_PAGE_SIZE", std::to_string(config->page_size)},
       {"TMK_SHARED_SIZE", std::to_string(config->shared_size)},
       {"TMK_SHARED_BASE", base},
       {"TMK_MAX_LOCKS", std::to_string(config->max_locks)},
       {"TMK_MAX_BARRIERS", std::to_string(config->max_barriers)}});
  if (!created) owner->fatal("Tmk_startup: " + created.error().message());
  owner->start_monitor();

  the_node = new node(*owner, std::move(*created), *config, options->statistics);
  if (planned == 0)  // under mpirun with no -n: known only now
    if (status fits = one_page_fits(owner->size()); !fits)
      owner->fatal("Tmk_startup: " + fits.message());
  status mapped = the_node->map_region();
  if (!mapped) owner->fatal("Tmk_startup: " + mapped.message());
  if (the_node->rank_ == 0) {
    the_node->heap_ = std::make_unique<shared_allocator>(config->shared_base, config->shared_size,
                                                        config->page_size);
    the_node->gathered_statistics_.resize(the_node->nprocs_);
    // Opened now, so that a file that cannot be written stops the job
    // before it runs rather than after.
    const std::string& path = config->statistics_file;
    if (!path.empty() && (the_node->statistics_out_ = fopen(path.c_str(), "w")) == nullptr)
      owner->fatal("Tmk_startup: TMK_STATS=" + path + ": cannot write: " + strerror(errno));
  }
  if (the_node->nprocs_ > 1) {
    // The first chunks of twins and diffs, made now rather than in the
    // program's first write faults and first barrier (2 MiB each, zeroed
    // and, on a virtual machine, often fresh to the host as well: 6.5% of
    // the samples of SOR's first timed iteration at 2 processes).  Should
    // there be no memory for them, the first twin or diff asks again and
    // says so.
    the_node->twins_.prepare();
    the_node->diffs_.prepare();
  }
  the_node->install_fault_handler();
  node* self = the_node;
  self->link_->start([self](const incoming_request& request) { self->handle_request(request); });
  status warmed = self->link_->warm_up();
  if (!warmed) {
    if (warmed.code() == status_code::peer_lost) owner->fatal_lost(warmed, "Tmk_startup");
    owner->fatal("Tmk_startup: warming up the substrate: " + warmed.message());
  }

  Tmk_proc_id = static_cast<unsigned>(self->rank_);
  Tmk_nprocs = static_cast<unsigned>(self->nprocs_);
  Tmk_page_size = static_cast<unsigned>(self->page_size_);
  Tmk_npages = self->npages_;
  on_exit(exit_hook, nullptr);
  // After the job's own forks (its processes are no program's children).
  pthread_atfork(nullptr, nullptr, note_forked_away);
  TMK_LOG(info, "started: process %d of %d (%s), %s, shared region %#llx + %llu bytes",
          self->rank_, self->nprocs_, launch_mode_name(owner->mode()),
          self->link_->describe().c_str(), static_cast<unsigned long long>(config->shared_base),
          static_cast<unsigned long long>(config->shared_size));
}

// The shared region: a memfd, created now that this process exists as a
// node (after the fork), mapped at the fixed base for the application and
// anywhere, read-write, for the runtime.  One process alone needs no
// protocol: its view is simply read-write.
status node::map_region() {
  memfd_ = memfd_create("tmk-shared", MFD_CLOEXEC);
  if (memfd_ < 0) return errno_status("memfd_create for the shared region");
  if (ftruncate(memfd_, static_cast<off_t>(config_.shared_size)) != 0)
    return errno_status("sizing the shared region to " + std::to_string(config_.shared_size) +
                        " bytes");
  void* wanted = reinterpret_cast<void*>(config_.shared_base);
  int initial = nprocs_ == 1 ? PROT_READ | PROT_WRITE : (rank_ == 0 ? PROT_READ : PROT_NONE);
  void* view = mmap(wanted, config_.shared_size, initial,
                    MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_NORESERVE, memfd_, 0);
  if (view == MAP_FAILED || view != wanted) {
    int error = errno;
    if (view != MAP_FAILED) munmap(view, config_.shared_size);
    char text[160];
    snprintf(text, sizeof text, "the shared region's address %#llx (+%llu bytes) ",
             static_cast<unsigned long long>(config_.shared_base),
             static_cast<unsigned long long>(config_.shared_size));
    if (error == EEXIST || view != MAP_FAILED)
      return status(status_code::invalid_argument,
                    std::string(text) +
                        "is already in use in this process; choose another with TMK_SHARED_BASE");
    errno = error;
    return errno_status(std::string("mapping ") + text);
  }
  shared_base_ = static_cast<std::byte*>(view);
  void* runtime = mmap(nullptr, config_.shared_size, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_NORESERVE, memfd_, 0);
  if (runtime == MAP_FAILED) return errno_status("mapping the runtime view");
  runtime_view_ = static_cast<std::byte*>(runtime);
  void* states = mmap(nullptr, npages_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (states == MAP_FAILED) return errno_status("page table");
  states_ = static_cast<std::uint8_t*>(states);
  initial_state_ = static_cast<std::uint8_t>(rank_ == 0 ? page_state::read_only
                                                        : page_state::unfetched);
  // A bit per page, zero, committed only where bits are set.
  for (std::uint64_t** bitmap : {&read_bits_, &written_bits_, &filled_bits_, &noticed_bits_}) {
    void* bits = mmap(nullptr, (std::uint64_t{npages_} + 63) / 64 * 8, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (bits == MAP_FAILED) return errno_status("page table");
    *bitmap = static_cast<std::uint64_t*>(bits);
  }
  return status::ok();
}

void node::install_fault_handler() {
  // After UCX and MPI, which install handlers of their own: a fault outside
  // the region goes to the program's handler, if it had one when
  // Tmk_startup began, or else to the default action, an ordinary crash.
  if (nprocs_ == 1) return;
  if (sigsegv_install_handler(&fault_handler) < 0)
    job_.fatal("Tmk_startup: cannot catch page faults on this platform");
  for (auto& fault : fault_signals) {
    struct sigaction& installed = fault.libsigsegv;
    if (sigaction(fault.signal_number, nullptr, &installed) != 0 ||
        (installed.sa_flags & SA_SIGINFO) == 0)
      continue;  // libsigsegv does not catch this one here
    struct sigaction in_front = installed;
    in_front.sa_sigaction = take_fault;
    sigaction(fault.signal_number, &in_front, nullptr);
  }
}

// A request to this process itself is handled in place, on the calling
// thread (which holds no lock here), with no message: process 0 arriving
// at a barrier or a lock's manager taking its own lock would otherwise go
// through the substrate's loopback and wake its own service thread.
request_id node::send_request(int peer, const message_writer& message, std::string_view what,
                              bool to_caller) {
  if (peer == rank_ && !transport::serving_requests()) {
    auto id = link_->expect_reply_here();
    if (!id) job_.fatal(std::string(what) + ": " + id.error().message());
    handle_request(incoming_request{rank_, rank_, *id, false, message.bytes()});
    return *id;
  }
  auto id = to_caller && peer != rank_ ? link_->send_request_to_caller(peer, {message.bytes()})
                                        : link_->send_request(peer, {message.bytes()});
  return sent_or_stop(id, what);
}

request_id node::sent_or_stop(result<request_id>& id, std::string_view what) {
  if (!id) {
    if (id.error().code() == status_code::peer_lost) job_.fatal_lost(id.error(), std::string(what));
    job_.fatal(std::string(what) + ": " + id.error().message());
  }
  return *id;
}

reply_payload node::await(request_id id, std::string_view what) {
  reply_payload reply;
  await_all({&id, 1}, {&reply, 1}, what);
  return reply;
}

void node::await_all(std::span<const request_id> ids, std::span<reply_payload> replies,
                     std::string_view what) {
  check_replies(link_->wait_replies(ids, replies), replies, what);
}

void node::await_synchronization(request_id id, std::string_view what, reply_payload& reply,
                                 wait_kind kind, std::uint32_t wait_id, std::uint32_t cond) {
  status waited;
  begin_sync_wait(kind, wait_id, cond, id);
  while (true) {
    waited = link_->wait_reply_interruptible(id, reply, deadlock_patience_);
    if (waited.code() == status_code::timeout) {
      look_for_deadlock(what);
      continue;
    }
    if (waited.code() != status_code::interrupted) break;
    // A garbage collection is no wait for another process's call.
    end_sync_wait();
    collect_if_called();
    begin_sync_wait(kind, wait_id, cond, id);
  }
  end_sync_wait();
  check_replies(waited, {&reply, 1}, what);
}

void node::check_replies(const status& waited, std::span<reply_payload> replies,
                         std::string_view what) {
  if (!waited) {
    if (waited.code() == status_code::peer_lost) job_.fatal_lost(waited, std::string(what));
    job_.fatal(std::string(what) + ": " + waited.message());
  }
  for (auto& reply : replies)
    if (!reply.empty() && static_cast<message_type>(reply.bytes()[0]) == message_type::rejected) {
      message_reader reader(reply.bytes());
      reader.type();
      job_.fatal(std::string(what) + ": the request was refused: " + reader.get_string());
    }
}

void node::send_one_way(int peer, const message_writer& message, std::string_view what,
                        bool rung) {
  status sent = rung ? link_->send_one_way(peer, {message.bytes()})
                     : link_->send_one_way_unrung(peer, {message.bytes()});
  // From the application thread the send may still be in flight: finish
  // it, as nothing else may enter the substrate for a long time.
  if (sent && !transport::serving_requests()) sent = link_->flush();
  if (!sent) {
    if (sent.code() == status_code::peer_lost) job_.fatal_lost(sent, std::string(what));
    job_.fatal(std::string(what) + ": " + sent.message());
  }
}

// A reply that cannot go out (above TMK_MAX_MESSAGE, say) would leave its
// requester waiting for ever: the job stops, naming the cause.  A requester
// that is gone needs no reply.
void node::reply(const reply_token& to, const message_writer& message) {
  replied(to, link_->reply(to, {message.bytes()}));
}

void node::reply(const reply_token& to, message_writer&& message) {
  replied(to, link_->reply(to, message.take()));
}

void node::replied(const reply_token& to, const status& sent) {
  if (!sent && sent.code() != status_code::peer_lost)
    job_.fatal("replying to process " + std::to_string(to.origin) + ": " + sent.message());
}

void node::protocol_failure(const std::string& what) {
  job_.fatal("protocol error: " + what);
}

void node::fail(const char* call, const std::string& reason) {
  job_.fatal(std::string(call) + ": " + reason);
}

void node::reject(const incoming_request& request, const std::string& why) {
  TMK_LOG(warn, "refused a request from process %d: %s", request.origin, why.c_str());
  if (request.one_way) return;
  message_writer refusal(message_type::rejected);
  refusal.put_string(why);
  reply(request.token(), refusal);
}

void node::handle_request(const incoming_request& request) {
  message_reader reader(request.payload);
  message_type type = reader.type();
  if (!reader.ok()) return reject(request, "empty message");
  switch (type) {
    case message_type::lock_acquire: return handle_lock_request(request, reader);
    case message_type::barrier_arrive: return handle_barrier_arrival(request, reader);
    case message_type::diff_request: return handle_diff_request(request, reader);
    case message_type::page_request: return handle_page_request(request, reader);
    case message_type::allocate: return handle_allocate(request, reader);
    case message_type::release_block: return handle_release(request, reader);
    case message_type::distribute: return handle_distribute(request, reader);
    case message_type::cond_enqueue:
    case message_type::cond_wait:
    case message_type::cond_signal: return handle_cond(request, type, reader);
    case message_type::statistics: return handle_statistics(request, reader);
    case message_type::collection_request: return handle_collection_request(request, reader);
    case message_type::collection_call: return handle_collection_call(request, reader);
    case message_type::push_stop: return handle_push_stop(request, reader);
    case message_type::barrier_push: return handle_barrier_push(request, reader);
    case message_type::wait_query: return handle_wait_query(request, reader);
    case message_type::intervals_request: return handle_intervals_request(request, reader);
    case message_type::intervals_ahead: return handle_intervals_ahead(request, reader);
    default:
      return reject(request, "unknown message type " + std::to_string(static_cast<int>(type)));
  }
}

void node::refresh_statistics() {
  auto traffic = link_->counters();
  Tmk_stat.messages = traffic.messages_sent;
  Tmk_stat.bytes = traffic.bytes_sent;
  Tmk_stat.messages_received = traffic.messages_received;
  Tmk_stat.bytes_received = traffic.bytes_received;
  Tmk_stat.acquires = counters_.acquires.load();
  Tmk_stat.remote_acquires = counters_.remote_acquires.load();
  Tmk_stat.barriers = counters_.barriers.load();
  Tmk_stat.diffs_created = counters_.diffs_created.load();
  Tmk_stat.diffs_applied = counters_.diffs_applied.load();
  Tmk_stat.twins = counters_.twins.load();
  Tmk_stat.read_faults = counters_.read_faults.load();
  Tmk_stat.write_faults = counters_.write_faults.load();
  Tmk_stat.page_fetches = counters_.page_fetches.load();
  Tmk_stat.diff_requests = counters_.diff_requests.load();
  Tmk_stat.intervals = counters_.intervals.load();
  Tmk_stat.write_notices = counters_.write_notices.load();
  Tmk_stat.gc_runs = counters_.gc_runs.load();
}

namespace {
std::string statistics_json(int rank) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"process\": %d, \"acquires\": %lu, \"remote_acquires\": %lu, \"barriers\": %lu, "
           "\"messages\": %lu, \"bytes\": %lu, \"messages_received\": %lu, "
           "\"bytes_received\": %lu, \"diffs_created\": %lu, \"diffs_applied\": %lu, "
           "\"twins\": %lu, \"read_faults\": %lu, \"write_faults\": %lu, \"page_fetches\": %lu, "
           "\"diff_requests\": %lu, \"intervals\": %lu, \"write_notices\": %lu, "
           "\"gc_runs\": %lu}",
           rank, Tmk_stat.acquires, Tmk_stat.remote_acquires, Tmk_stat.barriers,
           Tmk_stat.messages, Tmk_stat.bytes, Tmk_stat.messages_received, Tmk_stat.bytes_received,
           Tmk_stat.diffs_created, Tmk_stat.diffs_applied, Tmk_stat.twins, Tmk_stat.read_faults,
           Tmk_stat.write_faults, Tmk_stat.page_fetches, Tmk_stat.diff_requests,
           Tmk_stat.intervals, Tmk_stat.write_notices, Tmk_stat.gc_runs);
  return text;
}
}  // namespace

void node::handle_statistics(const incoming_request& request, message_reader& reader) {
  std::int32_t from = reader.take<std::int32_t>();
  std::string json = reader.get_string();
  if (!reader.ok() || rank_ != 0 || from < 0 || from >= nprocs_)
    return reject(request, "malformed statistics");
  {
    std::lock_guard lock(mutex_);
    gathered_statistics_[from] = json;
  }
  reply(request.token(), message_writer(message_type::statistics_reply));
}

// False, having said why, if the file could not be written whole.
bool node::write_statistics_file() {
  FILE* out = std::exchange(statistics_out_, nullptr);
  {
    // Filled in by the service thread (handle_statistics), which runs yet.
    std::lock_guard lock(mutex_);
    fprintf(out, "{\"nprocs\": %d, \"processes\": [\n", nprocs_);
    for (int rank = 0; rank < nprocs_; ++rank)
      fprintf(out, "  %s%s\n",
              gathered_statistics_[rank].empty() ? "null" : gathered_statistics_[rank].c_str(),
              rank + 1 < nprocs_ ? "," : "");
  }
  fprintf(out, "]}\n");
  bool failed = ferror(out) != 0;
  int error = errno;
  if (fclose(out) != 0 && !failed) {
    failed = true;
    error = errno;
  }
  if (failed)
    log_message(log_level::error, "TMK_STATS=%s: cannot write: %s",
                config_.statistics_file.c_str(), strerror(error));
  return !failed;
}

// The collective end: statistics, then every process waits for all the
// others (serving their requests meanwhile), then the substrate goes down
// and the process ends as a C program does, through exit(): the program's
// exit handlers run, those registered before Tmk_startup too, and the
// streams it left open are written out.  Ended with _exit instead, a
// program's last lines to a file it did not close were lost.
void node::exit(int exit_status, bool within_exit) {
  if (exiting_) _exit(exit_status);
  exiting_ = true;
  // Every process reaches Tmk_exit before any goes on to leave; garbage
  // collections called meanwhile are taken part in from the wait.
  if (nprocs_ > 1) {
    note_collection_call(barrier_round(exit_barrier, barrier_kind::exit, "Tmk_exit"));
    collect_if_called();
  }
  refresh_statistics();
  std::string mine = statistics_json(rank_);
  if (print_statistics_) log_message(log_level::error, "statistics: %s", mine.c_str());
  if (!config_.statistics_file.empty() && rank_ == 0) {
    std::lock_guard lock(mutex_);
    gathered_statistics_[0] = mine;
  } else if (!config_.statistics_file.empty()) {
    message_writer message(message_type::statistics);
    message.put<std::int32_t>(rank_);
    message.put_string(mine);
    await(send_request(0, message, "Tmk_exit"), "Tmk_exit");
  }
  fflush(stdout);
  link_->set_caller_idle(true);  // this process only serves the others now
  int final_status = job_.finish(exit_status);
  if (statistics_out_ != nullptr && !write_statistics_file() && final_status == 0)
    final_status = 1;
  link_->stop();
  link_.reset();
  finished_ = true;
  if (!within_exit) ::exit(final_status);
  if (final_status == exit_status) return;  // exit() goes on
  // The job's status is not the program's (another process failed): exit()
  // cannot be told, so the streams are written out here.
  fflush(nullptr);
  _exit(final_status);
}

}  // namespace tmk
