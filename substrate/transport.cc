// transport.cc — the backend-independent half of the substrate: the
// service thread's loop, the caller's wait loop and reply matching.
//
// Invariant: a handler never makes progress on the request channel (its
// sends only post), so the backend may run handlers from inside its own
// progress call without re-entering it.  The data path allocates nothing:
// pending replies live in a fixed table whose payload buffers are reused
// (or hold a buffer the backend lends, see reply_payload), and counters
// are per thread.
#include "transport.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "log.h"
#include "signal_mask.h"
#include "sockets/sockets_transport.h"
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif
#include "ucx/ucx_transport.h"

namespace tmk {

// The threads of a process are also ordered through other processes: a
// request handler's writes precede a send, whose consequences come back as
// a reply the calling thread then reads.  The hardware keeps that order
// along the chain of messages; ThreadSanitizer sees none of it, since the
// messages pass through uninstrumented memory.  Under it, sending and
// handling release, and receiving acquires, one anchor.
namespace {
#if defined(__SANITIZE_THREAD__)
char causal_anchor;
void causal_release() { __tsan_release(&causal_anchor); }
void causal_acquire() { __tsan_acquire(&causal_anchor); }
#else
void causal_release() {}
void causal_acquire() {}
#endif
}  // namespace


namespace {
thread_local bool serving_flag = false;  // this thread owns the request channel
thread_local bool service_flag = false;  // this thread is a transport's service thread
// This calling thread holds the request channel (channel_hold), serving or
// not; and it took in requests meanwhile, outside serving, that hand_back
// must see handled.
thread_local bool holding_flag = false;
thread_local bool taken_in_holding_flag = false;
// This calling thread sent while it held the request channel outside
// serving, and did not finish those sends there (send_and_finish): the
// wait that held it finishes them once it has let go (wait_until_done).
thread_local bool unfinished_holding_flag = false;

// A calling thread that holds the request channel outside serving, in a
// wait, where it runs the handlers of requests to the caller.
bool holding_outside_serving() { return holding_flag && !serving_flag; }

struct serving_scope {
  serving_scope() { serving_flag = true; }
  ~serving_scope() { serving_flag = false; }
};
using clock_type = std::chrono::steady_clock;

// Not FUTEX_PRIVATE: the word is in memory the job's processes share.
void futex_wake(std::uint32_t& word) {
  syscall(SYS_futex, &word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
}
// False when the timeout ended the wait.
bool futex_wait(std::uint32_t& word, std::uint32_t seen, const timespec& timeout) {
  return syscall(SYS_futex, &word, FUTEX_WAIT, seen, &timeout, nullptr, 0) == 0 ||
         errno != ETIMEDOUT;
}
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

// The signal a nudge sends (nudge_peers), ignored by default, so that one
// reaching a process that has not installed the handler yet or has let go
// of it does nothing.
constexpr int nudge_signal = SIGURG;
// The calling thread gives its core up for a turn, to the service thread
// woken on it if that one waits for the core.  Async-signal-safe, and
// harmless wherever it lands: inside a system call, which SA_RESTART
// resumes (all but the sleeps and polls that end early on any signal), or
// inside the runtime.
void on_nudge(int) {
  int saved = errno;
  sched_yield();
  errno = saved;
}
// Installs on_nudge unless the program handles the signal itself: true if
// the process takes nudges.
bool take_nudges() {
  static const bool taken = [] {
    struct sigaction before {};
    if (sigaction(nudge_signal, nullptr, &before) != 0) return false;
    if (before.sa_handler == on_nudge) return true;
    if ((before.sa_flags & SA_SIGINFO) != 0 || before.sa_handler != SIG_DFL) {
      TMK_LOG(info, "SIGURG has a handler of the program's: no nudges to this process");
      return false;
    }
    struct sigaction nudge {};
    nudge.sa_handler = on_nudge;
    nudge.sa_flags = SA_RESTART;
    sigemptyset(&nudge.sa_mask);
    return sigaction(nudge_signal, &nudge, nullptr) == 0;
  }();
  return taken;
}
}  // namespace

result<std::unique_ptr<transport>> transport::create(job& owner, const substrate_config& config,
                                                     const job::settings_list& also) {
  // A receiver drops what it cannot take (another data path's messages, a
  // request above its own TMK_MAX_MESSAGE), and the sender would wait for
  // ever: processes started by hand or by mpirun read their own
  // environments, so the settings are compared first.
  job::settings_list settings{{"TMK_SUBSTRATE", backend_name(config.backend)},
                              {"TMK_UCX_PATH", ucx_path_name(config.ucx_path)},
                              {"TMK_MAX_MESSAGE", std::to_string(config.max_message)}};
  settings.insert(settings.end(), also.begin(), also.end());
  status agreed = owner.agree(settings);
  if (!agreed) return agreed;
  program_signals_blocked blocked;  // for the threads UCX starts
  if (config.backend == backend_kind::sockets) return sockets_transport::create(owner, config);
  return ucx_transport::create(owner, config);
}

transport::transport(job& owner, const substrate_config& config)
    : job_(owner), config_(config), rank_(owner.rank()), size_(owner.size()),
      pending_(max_outstanding) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  caller_wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // Not this thread's affinity: pinned, it sees a single core.
  core_per_process_ = owner.core_per_process();
  ring_delay_ = std::chrono::microseconds(config.ring_delay_us);
  free_slots_.reserve(max_outstanding);
  for (std::uint32_t slot = max_outstanding; slot-- > 0;) free_slots_.push_back(slot);
}

transport_counters transport::counters() const {
  transport_counters sum;
  for (const thread_counters* of : {&caller_counters_, &service_counters_}) {
    sum.messages_sent += of->messages_sent.load(std::memory_order_relaxed);
    sum.bytes_sent += of->bytes_sent.load(std::memory_order_relaxed);
    sum.messages_received += of->messages_received.load(std::memory_order_relaxed);
    sum.bytes_received += of->bytes_received.load(std::memory_order_relaxed);
  }
  sum.service_wakeups = service_wakeups_.load(std::memory_order_relaxed);
  sum.service_held_wakeups = service_held_wakeups_.load(std::memory_order_relaxed);
  sum.nudges = nudges_.load(std::memory_order_relaxed);
  return sum;
}

transport::~transport() {
  stop();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (caller_wake_fd_ >= 0) close(caller_wake_fd_);
  for (int fd : caller_stat_fds_)
    if (fd >= 0) close(fd);
  if (service_epoll_ >= 0) close(service_epoll_);
}

bool transport::serving_requests() { return serving_flag; }
bool transport::on_service_thread() { return service_flag; }
bool transport::holds_request_channel() { return serving_flag || holding_flag; }
void transport::took_in_requests() {
  if (!serving_flag) taken_in_holding_flag = true;
}

status transport::start(request_handler handler) {
  if (service_.joinable()) return status(status_code::invalid_argument, "already started");
  static_assert(sizeof(doorbell) <= 64);
  // The backend decided (TMK_DOORBELL, TMK_NOTIFY, the job's shared lines)
  // and agreed with every other process: all ring or none.
  doorbells_ = supports_doorbell();
  if (doorbells_) {
    for (int rank = 0; rank < size_; ++rank)
      bells_.push_back(static_cast<doorbell*>(job_.shared_line(rank)));
    own_bell_ = &bell_of(rank_);
    publish_caller(true);
  }
  if (!doorbells_ && service_epoll_ < 0) {
    service_epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (service_epoll_ < 0) return errno_status("epoll_create1");
    epoll_event wake{};
    wake.events = EPOLLIN;
    wake.data.fd = wake_fd_;
    epoll_event request{};
    request.events = EPOLLIN | EPOLLONESHOT;
    request.data.fd = event_fd(channel::request);
    if (epoll_ctl(service_epoll_, EPOLL_CTL_ADD, wake_fd_, &wake) != 0 ||
        epoll_ctl(service_epoll_, EPOLL_CTL_ADD, request.data.fd, &request) != 0)
      return errno_status("epoll_ctl");
  }
  handler_ = std::move(handler);
  program_signals_blocked blocked;
  service_ = std::thread([this] {
    service_loop();
    std::lock_guard own(request_lock_);
    serving_scope serving;
    service_thread_exit();
  });
  // Named for ps, top -H and debuggers (from here, so that it has its name
  // before start returns).
  pthread_setname_np(service_.native_handle(), "tmk-service");
  job_.set_watchdog(
      [this](steady_time now, double limit) { return stuck_handler(now, limit); });
  return status::ok();
}

void transport::stop() {
  if (!service_.joinable()) return;
  job_.set_watchdog(nullptr);
  stopping_.store(true);
  if (doorbells_) {
    publish_caller(false);
    wake(bell_of(rank_));
  } else {
    ring_event_fd(wake_fd_);
  }
  service_.join();
  TMK_LOG(debug, "service thread woke %llu times; %llu nudges sent",
          static_cast<unsigned long long>(service_wakeups_.load()),
          static_cast<unsigned long long>(nudges_.load()));
}

// The service thread: make progress (the backend runs the handler for each
// request that arrived); when nothing came, spin for a while, then let go
// of the request channel and sleep on its event fd until a request or a
// stop wakes it.
//
// Spinning costs a core, sleeping costs a wake-up (on a virtual machine
// whose idle CPU has halted, tens of microseconds).  While the calling
// thread sleeps, its core is free: the service thread spins there for
// TMK_SERVICE_SPIN_US after each request.  While the caller runs, it
// computes (or spins in a wait, serving requests itself): the service
// thread spins only an eighth of that, for a burst.  After waking its own
// caller it sleeps at once, giving the caller the core.  With more
// processes of the job on the host than cores, it never spins.
void transport::service_loop() {
  const auto idle_window =
      std::chrono::microseconds(core_per_process_ ? config_.service_spin_us : 0);
  const auto busy_window =
      std::chrono::microseconds(core_per_process_ ? config_.service_spin_us / 8 : 0);
  auto last_activity = clock_type::now();
  unsigned idle_rounds = 0;
  // Activity since the clock was last read: the time is taken at the next
  // idle look at the clock, not after each request, whose reply is gone by
  // then but whose next request may be in (a clock read took 6.6% of a
  // ping-pong server's samples, BENCHMARKS.md).  The spin window then
  // counts from a few polls after the last request.
  bool active = false;

  std::unique_lock own(request_lock_);
  service_flag = true;
  serving_flag = true;
  const bool polling = config_.notify == notify_mode::poll;
  unsigned polls = 0;  // rounds of polling, busy or idle: a yield every 1024
  while (!stopping_.load(std::memory_order_relaxed)) {
    bool served = progress(channel::request) != 0;
    if (served) {
      active = true;
      idle_rounds = 0;
    }
    if (polling) {
      // Busy-polling never sleeps; it only yields now and then, and lets
      // go of the request channel meanwhile.  Its process's caller, on the
      // same core where each process has one, spins in its waits there
      // until the scheduler switches, and may take the channel and serve
      // what comes (serve_while_waiting), as it does while the service
      // thread sleeps: holding it, this thread left a lock acquire on 2
      // processes waiting for that switch, 0.5 ms (BENCHMARKS.md).  Taken
      // back without blocking: a caller's hand-back wakes no sleeper.  Not
      // taken back while the caller, spinning in a wait, asks for it: it
      // takes it within 16 rounds of its spin.  Retaken at once, the
      // channel went back to this thread whenever another process ran on
      // the core between the two threads (the hand-over test under a
      // loaded ctest: no echo served by the caller, 2 runs in 40).  Every
      // 1024 rounds, busy ones too: counting idle rounds only, a thread
      // whose requests came closer together than 1024 polls never let go
      // (the same test under ThreadSanitizer, where a poll of kernel
      // sockets took over 0.2 us: no echo served by the caller, 2 runs in
      // 15 on a host whose system calls took 1.1 us).
      if (++polls % 1024 == 0) {
        serving_flag = false;
        own.unlock();
        do std::this_thread::yield();
        while ((caller_asks_channel_.load(std::memory_order_relaxed) || !own.try_lock()) &&
               !stopping_.load(std::memory_order_relaxed));
        if (!own.owns_lock()) break;
        serving_flag = true;
      }
      continue;
    }
    if (served) continue;
    if ((++idle_rounds & 15) != 0) continue;  // the clock costs more than a poll
    if (active) {
      active = false;
      last_activity = clock_type::now();
      continue;
    }
    bool caller_free = caller_asleep_.load(std::memory_order_relaxed) &&
                       !caller_woken_.load(std::memory_order_relaxed);
    if (clock_type::now() - last_activity < (caller_free ? idle_window : busy_window)) continue;
    if (doorbells_) {
      if (!settled(channel::request)) continue;
      sleep_on_doorbell(own);
      last_activity = clock_type::now();
      continue;
    }
    if (!arm(channel::request)) continue;
    // Asleep, the thread lets go of the request channel: a caller spinning
    // in a wait may take it meanwhile and serve what comes.
    listen_for_requests(true);
    serving_flag = false;
    own.unlock();
    int ready;
    int wait_error = 0;  // errno from epoll_wait, before anything else can change it
    while (true) {
      epoll_event events[2];
      ready = epoll_wait(service_epoll_, events, 2, 1000);
      wait_error = ready < 0 ? errno : 0;
      if ((ready < 0 && wait_error != EINTR) || stopping_.load() || own.try_lock()) break;
      // Woken for a request that the caller holding the channel serves, or
      // by a hand-back whose channel a caller has taken again since: back
      // to sleep, deaf to the channel (epoll reported it once).  The
      // hand-back's wake-up is spent first: left in wake_fd_, it woke this
      // thread again at once for as long as the caller held the channel,
      // a whole spin window of its wait (sockets, 4 processes pinned two
      // to a core: a stencil passing 3000 barriers took 7.7-16.7 s, the
      // service threads two thirds of the CPU, all in epoll_wait; 0.8-0.9
      // s since).  A stop's ring emptied here is not missed: the stop sets
      // stopping_ before it rings, and stopping_ is looked at after.  The
      // handshake with hand_back: this thread marks itself deaf, then
      // tries the lock again; the caller lets go of it, then looks at the
      // mark, and rings if it finds it.
      service_held_wakeups_.fetch_add(1, std::memory_order_relaxed);
      nudged_.store(false);
      empty_event_fd(wake_fd_);
      if (stopping_.load()) break;
      service_deaf_.store(true);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (own.try_lock()) break;
    }
    if (!own.owns_lock()) own.lock();
    service_deaf_.store(false);
    serving_flag = true;
    if (nudged_.exchange(false) && !stopping_.load()) {  // hand_back's wake-up: spent
      empty_event_fd(wake_fd_);
    }
    // A stop, not an error, ends this thread: without it nothing would
    // answer this process's requests, and every other process would wait.
    if (ready < 0 && wait_error != EINTR)
      job_.fatal(std::string("service thread: epoll_wait: ") + strerror(wait_error));
    service_wakeups_.fetch_add(1, std::memory_order_relaxed);
    last_activity = clock_type::now();
  }
  serving_flag = false;
}

// Marked asleep before the last look at the channel, as a sender puts its
// message in before it looks at the mark (ring): either this thread sees
// the message or the sender sees the mark and rings.  A caller may take the
// channel meanwhile; a ring that reaches this thread then (one sent before
// the caller's mark was seen) makes it wait for the channel, woken.
//
// A message in is not always in sight, though: UCX's shared-memory FIFO
// hands messages over in the order their senders took places in it, and a
// message behind a place whose sender is still writing it (descheduled
// with more processes than cores, in the middle of a message of several
// parts) stays out of sight until that one is written.  A sender that then
// rings nobody (a one-way message sent unrung: a barrier's pushed diffs)
// left this thread asleep for its whole second with a rung request behind
// it (seen in 1 soak run of about 2000: stress on 8 processes).  So every
// sender with a ring counts its message in (the doorbell's rung_in) before
// it sends it, and this thread, finding fewer delivered, sleeps only
// briefly, 50 us and twice as long each time, up to the second, until
// they have come; a caller letting go of the channel with fewer delivered
// wakes it (hand_back).  Counted once the send had returned, a message
// could be delivered before it was counted (a send of 1 MiB returns once
// its receiver has taken it in), and the count of another sender's
// message, not in sight yet, then only made up the difference: this
// thread slept its whole second with that message waiting, whose sender
// had seen it awake and rung nobody (the crossing scenario on 8 processes
// under ThreadSanitizer, once).
void transport::sleep_on_doorbell(std::unique_lock<std::mutex>& own) {
  doorbell& mine = *own_bell_;
  std::uint32_t seen = word(mine.rings).load();
  word(mine.asleep).store(1);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // stop() rings after it sets stopping_: a ring counted in seen (missed
  // by the wait below) comes with stopping_ seen here.
  if (stopping_.load() || progress(channel::request) != 0) {
    word(mine.asleep).store(0);
    behind_sleep_ = {};
    return;
  }
  bool behind = undelivered() > 0;
  if (!behind)
    behind_sleep_ = {};
  else
    behind_sleep_ = std::min<std::chrono::microseconds>(
        std::chrono::seconds(1), behind_sleep_.count() == 0 ? std::chrono::microseconds(50)
                                                            : behind_sleep_ * 2);
  serving_flag = false;
  own.unlock();
  static constexpr timespec second{1, 0};
  const timespec brief{static_cast<time_t>(behind_sleep_.count() / 1000000),
                       static_cast<long>(behind_sleep_.count() % 1000000) * 1000};
  bool rung = futex_wait(mine.rings, seen, behind ? brief : second);
  word(mine.asleep).store(0);
  // A second's sleep, nothing undelivered when it began, ended by the
  // timeout with a message counted in and not delivered by anyone (no
  // caller holds the channel): one whose ring was missed, if it is in
  // sight now (a message counted in just before the timeout may not be
  // sent yet: its sender rings after it sends).  What needs no ring is
  // never counted in: one-way messages sent unrung (taken in at the
  // caller's next wait) and UCX's own protocol messages.  Counted now,
  // before the channel is taken (a caller may hold it for a while, and
  // what comes meanwhile is not late).
  std::int64_t missed = 0;
  if (!rung && !behind && word(mine.polled).load() == 0) missed = undelivered();
  own.lock();
  serving_flag = true;
  service_wakeups_.fetch_add(1, std::memory_order_relaxed);
  if (missed > 0) {
    std::uint64_t before = rung_delivered_.load(std::memory_order_relaxed);
    while (progress(channel::request) != 0) {
    }
    missed = std::min<std::int64_t>(
        missed, static_cast<std::int64_t>(rung_delivered_.load(std::memory_order_relaxed) - before));
  }
  if (missed > 0) {
    TMK_LOG(warn,
            "service thread: %lld message(s) waited a second for its doorbell, the last a %s "
            "from process %d (sent by %d, request %u)",
            static_cast<long long>(missed),
            last_rung_.kind == message_kind::request ? "request" : "one-way message",
            last_rung_.origin, last_rung_.sender, last_rung_.sequence);
  }
}

void transport::ring(int peer) {
  if (!doorbells_) return;
  doorbell& bell = bell_of(peer);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // One sender wins the exchange and wakes the sleeper; the others skip it.
  if (word(bell.polled).load() != 0 || word(bell.asleep).load() == 0 ||
      word(bell.asleep).exchange(0) == 0)
    return;
  wake(bell);
}

// A caller that came out of a wait this recently is taken to be on its way
// to the next one (a barrier's departure handled, the next synchronisation
// call entered): a few microseconds in the lock and barrier benchmarks.
constexpr auto recent_wait = std::chrono::microseconds(20);

// A request to a process whose service thread sleeps and whose caller
// holds no channel: rung now, unless that caller came out of a wait within
// recent_wait; then the ring is owed, for ring_delay_ (see send).
void transport::owe_ring(int peer, request_id id) {
  doorbell& bell = bell_of(peer);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (word(bell.polled).load() != 0 || word(bell.asleep).load() == 0) return;
  auto now = clock_type::now();
  auto left = std::chrono::nanoseconds(std::atomic_ref<std::uint64_t>(bell.left_wait_ns).load(
      std::memory_order_relaxed));
  if (now.time_since_epoch() - left > recent_wait) {
    ring(peer);
    return;
  }
  owed_rings_.push_back({peer, id, now + ring_delay_});
}

void transport::ring_owed(bool all, clock_type::time_point now) {
  std::erase_if(owed_rings_, [&](const owed_ring& owed) {
    const pending_reply& slot = pending_[owed.id & (max_outstanding - 1)];
    if (slot.id != owed.id || slot.done.load()) return true;
    if (!all && now < owed.due) return false;
    ring(owed.peer);
    return true;
  });
}

void transport::wake(doorbell& bell) {
  word(bell.rings).fetch_add(1);
  futex_wake(bell.rings);
}

void transport::publish_caller(bool taking) {
  bool takes = taking && config_.nudge_us > 0 && take_nudges();
  std::atomic_ref<std::int32_t>(own_bell_->caller_tid).store(0);
  std::atomic_ref<std::int32_t>(own_bell_->caller_pid).store(takes ? getpid() : 0);
  std::atomic_ref<std::int32_t>(own_bell_->caller_tid).store(takes ? gettid() : 0);
}

// A service thread woken while its caller computes on the same core waits
// for that caller to give the core up: the kernel's scheduler lets a
// running thread go on to the end of its slice, and a request to a process
// that computes without entering the runtime (serve_pending serves those
// that do), as SOR's processes do through their phases, waited 250-450 us
// that way (BENCHMARKS.md).  After TMK_NUDGE_US of a wait, each process an
// unanswered request went to whose service thread is awake or rung, whose
// caller holds no channel and is not asleep in a wait, and whose calling
// thread the kernel shows running or ready to run (caller_runs), gets a
// signal for that thread, whose handler yields the core.  Once a wait:
// nudged up to four times, SOR's first iteration on 2 processes took no
// less time (31 alternated pairs, 2026-11-28).
void transport::nudge_peers(std::span<const request_id> ids) {
  int last = -1;
  for (request_id id : ids) {
    const pending_reply& slot = pending_[id & (max_outstanding - 1)];
    int peer = slot.peer;
    if (slot.done.load() || peer < 0 || peer == rank_ || peer == last) continue;
    last = peer;
    doorbell& bell = bell_of(peer);
    if (word(bell.polled).load() != 0 || word(bell.asleep).load() != 0 ||
        word(bell.caller_asleep).load() != 0)
      continue;
    std::int32_t pid = std::atomic_ref<std::int32_t>(bell.caller_pid).load();
    std::int32_t tid = std::atomic_ref<std::int32_t>(bell.caller_tid).load();
    if (pid <= 0 || tid <= 0 || !caller_runs(peer, pid, tid)) continue;
    // A process that has ended meanwhile: nothing to nudge.
    if (syscall(SYS_tgkill, pid, tid, nudge_signal) == 0)
      nudges_.fetch_add(1, std::memory_order_relaxed);
  }
}

// A caller asleep in a system call holds no core, and a signal would end
// some of them early (poll, nanosleep: SA_RESTART does not resume those):
// only a caller the kernel shows running or ready to run is nudged.  The
// look costs a read of /proc (about 3 us on the machine of BENCHMARKS.md),
// once in a wait that has lasted TMK_NUDGE_US.
bool transport::caller_runs(int peer, std::int32_t pid, std::int32_t tid) {
  if (caller_stat_fds_.empty()) caller_stat_fds_.assign(static_cast<std::size_t>(size_), -1);
  int& fd = caller_stat_fds_[static_cast<std::size_t>(peer)];
  if (fd == -1) {
    std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fd = -2;
  }
  if (fd < 0) return false;
  // "tid (command) state ...": the command may hold anything, parentheses
  // and spaces too; the state follows the last parenthesis.
  char text[512];
  ssize_t length = pread(fd, text, sizeof text - 1, 0);
  if (length <= 0) return false;
  text[length] = '\0';
  const char* close = strrchr(text, ')');
  return close != nullptr && close[1] == ' ' && close[2] == 'R';
}

void transport::set_caller_idle(bool idle) {
  caller_woken_.store(false, std::memory_order_relaxed);
  // Ordered before the caller's last look at its replies (see reply_here).
  caller_asleep_.store(idle);
  if (own_bell_ != nullptr)
    word(own_bell_->caller_asleep).store(idle ? 1 : 0, std::memory_order_relaxed);
}

// A handler's run, counted for the watchdog.
class transport::handling_scope {
 public:
  handling_scope(handler_runs& runs, int origin) : runs_(runs) {
    runs_.origin.store(origin, std::memory_order_relaxed);
    raise();
  }
  ~handling_scope() { raise(); }
  handling_scope(const handling_scope&) = delete;
  handling_scope& operator=(const handling_scope&) = delete;

 private:
  void raise() {
    runs_.count.store(runs_.count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  handler_runs& runs_;
};

void transport::deliver_request(const wire_header& header, byte_span payload) {
  if (header.kind == message_kind::warm_up && header.origin >= 0 && header.origin < size_) {
    // Ordered like a request: one passed back here is answered into the
    // slot its sender, this process's caller, filled in before it sent.
    causal_acquire();
    answer_warm_up(header, payload);
    causal_release();
    return;
  }
  if ((header.kind != message_kind::request && header.kind != message_kind::one_way) ||
      header.origin < 0 || header.origin >= size_ || header.sender < 0 || header.sender >= size_) {
    TMK_LOG(warn, "dropped a malformed request (kind %d, origin %d, sender %d)",
            static_cast<int>(header.kind), header.origin, header.sender);
    return;
  }
  if ((header.reserved[1] & uncounted_flag) == 0) {
    count(service_counters_.messages_received, 1);
    count(service_counters_.bytes_received, payload.size() + sizeof(wire_header));
  }
  if (header.kind == message_kind::request || (header.reserved[1] & unrung_flag) == 0) {
    last_rung_ = header;
    rung_delivered_.store(rung_delivered_.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
  }
  causal_acquire();
  {
    handling_scope running(handling_[0], header.origin);
    handler_(incoming_request{header.origin, header.sender, header.sequence,
                              header.kind == message_kind::one_way, payload});
  }
  causal_release();
}

// A handler never waits for another process's answer, only for its own
// sends to leave, which a lost peer ends within TMK_PEER_TIMEOUT, and for
// the runtime's lock, which no thread holds for long: one that has run for
// twice that (10 s at least) is stuck in this process (a lock never let
// go, a wait for itself), and every process that waits for its answer
// would wait for ever.
std::string transport::stuck_handler(steady_time now, double limit_seconds) {
  for (int which = 0; which < 2; ++which) {
    std::uint64_t count = handling_[which].count.load(std::memory_order_acquire);
    if (count % 2 == 0 || count != watched_count_[which]) {
      watched_count_[which] = count;
      watched_since_[which] = now;
      continue;
    }
    double seconds = std::chrono::duration<double>(now - watched_since_[which]).count();
    if (seconds < limit_seconds) continue;
    char text[160];
    snprintf(text, sizeof text,
             "the handler of a request from process %d%s has not returned in %.1f s "
             "(twice TMK_PEER_TIMEOUT, 10 s at least)",
             handling_[which].origin.load(std::memory_order_relaxed),
             which == 0 ? "" : " to the calling thread", seconds);
    return text;
  }
  return {};
}

transport::pending_reply* transport::find_pending(request_id id) {
  pending_reply& slot = pending_[id & (max_outstanding - 1)];
  return slot.id == id && id != 0 ? &slot : nullptr;
}

void transport::give_back_lent(pending_reply& slot) {
  if (slot.lent_handle == nullptr) return;
  release_lent(slot.lent_handle);
  slot.lent_handle = nullptr;
  slot.lent = {};
}

void transport::release_pending(pending_reply& slot) {
  give_back_lent(slot);
  free_slots_.push_back(static_cast<std::uint32_t>(&slot - pending_.data()));
  slot.id = 0;
  slot.done = false;
}

void transport::release_all_lent() {
  for (pending_reply& slot : pending_) give_back_lent(slot);
}

reply_payload& reply_payload::operator=(reply_payload&& other) noexcept {
  if (this == &other) return *this;
  reset();
  owned_.swap(other.owned_);
  lent_ = other.lent_;
  lender_ = other.lender_;
  handle_ = other.handle_;
  other.lent_ = {};
  other.lender_ = nullptr;
  other.handle_ = nullptr;
  return *this;
}

void reply_payload::move_into(std::vector<std::byte>& into) {
  if (lender_ != nullptr)
    into.assign(lent_.begin(), lent_.end());
  else
    into.swap(owned_);
  reset();
}

void reply_payload::reset() {
  if (lender_ != nullptr) {
    lender_->release_lent(handle_);
    lender_ = nullptr;
    handle_ = nullptr;
    lent_ = {};
  }
  owned_.clear();
}

std::vector<std::byte>* transport::reply_destination(const wire_header& header,
                                                     std::size_t length) {
  if (header.kind == message_kind::caller_request) {
    if (header.origin != header.sender || header.origin < 0 || header.origin >= size_ ||
        header.origin == rank_) {
      TMK_LOG(warn, "dropped a malformed request for the caller (origin %d, sender %d)",
              header.origin, header.sender);
      return nullptr;
    }
    caller_request& entry = caller_requests_.emplace_back();
    entry.header = header;
    if (!spare_payloads_.empty()) {
      entry.payload.swap(spare_payloads_.back());
      spare_payloads_.pop_back();
    }
    entry.payload.resize(length);
    return &entry.payload;
  }
  pending_reply* slot = waiting_slot(header);
  if (slot == nullptr) return nullptr;
  slot->payload.resize(length);
  return &slot->payload;
}

transport::pending_reply* transport::waiting_slot(const wire_header& header) {
  if (header.kind == message_kind::warm_up_reply && header.sequence == 0)
    return nullptr;  // warm_up()'s opening of a reply channel: answers nothing
  pending_reply* slot = find_pending(header.sequence);
  if ((header.kind != message_kind::reply && header.kind != message_kind::warm_up_reply) ||
      header.origin != rank_ || slot == nullptr || slot->done) {
    TMK_LOG(warn, "dropped a reply nobody waits for (request %u from process %d)",
            header.sequence, header.sender);
    return nullptr;
  }
  return slot;
}

bool transport::lend_reply(const wire_header& header, std::span<std::byte> payload, void* handle) {
  if (header.kind == message_kind::caller_request) return false;
  pending_reply* slot = waiting_slot(header);
  if (slot == nullptr) return false;
  slot->payload.clear();
  slot->lent = payload;
  slot->lent_handle = handle;
  reply_complete(header);
  return true;
}

bool transport::take_reply(const wire_header& header, byte_span payload) {
  if (header.kind != message_kind::reply || header.origin != rank_) return false;
  pending_reply* slot = find_pending(header.sequence);
  if (slot == nullptr || slot->done.load(std::memory_order_relaxed)) return false;
  slot->payload.assign(payload.begin(), payload.end());
  finish_reply(*slot, header, payload.size());
  return true;
}

void transport::reply_complete(const wire_header& header) {
  if (header.kind == message_kind::caller_request) {
    for (caller_request& entry : caller_requests_)
      if (!entry.done && entry.header.sender == header.sender &&
          entry.header.sequence == header.sequence) {
        entry.done = true;
        count(caller_counters_.messages_received, 1);
        count(caller_counters_.bytes_received, entry.payload.size() + sizeof(wire_header));
        break;
      }
    return;
  }
  pending_reply* slot = find_pending(header.sequence);
  if (slot == nullptr) return;
  finish_reply(*slot, header, slot->lent_handle != nullptr ? slot->lent.size() : slot->payload.size());
}

void transport::finish_reply(pending_reply& slot, const wire_header& header, std::size_t length) {
  slot.done.store(true, std::memory_order_release);
  causal_acquire();
  if (header.kind == message_kind::warm_up_reply || (header.reserved[1] & uncounted_flag) != 0)
    return;
  count(caller_counters_.messages_received, 1);
  count(caller_counters_.bytes_received, length + sizeof(wire_header));
}

status transport::size_failure(int peer, std::size_t payload_length) const {
  if (peer < 0 || peer >= size_)
    return status(status_code::invalid_argument,
                  "no process " + std::to_string(peer) + " in a job of " + std::to_string(size_));
  if (payload_length > config_.max_message)
    return status(status_code::message_too_large,
                  "a message of " + std::to_string(payload_length) + " bytes to process " +
                      std::to_string(peer) + " exceeds the largest allowed, " +
                      std::to_string(config_.max_message) + " bytes (TMK_MAX_MESSAGE)");
  return status::ok();
}

status transport::send(channel from, int peer, channel to, message_kind kind, int origin,
                       std::uint32_t sequence, parts payload, bool rung, bool counted) {
  std::size_t length = 0;
  for (const auto& part : payload) length += part.size();
  status checked = check_size(peer, length);
  if (!checked) return checked;
  if (job_.failed()) return job_.failure();
  wire_header header{};
  header.kind = kind;
  header.origin = origin;
  header.sender = rank_;
  header.sequence = sequence;
  if (!rung) header.reserved[1] |= unrung_flag;
  if (!counted) header.reserved[1] |= uncounted_flag;
  // The backend does not wait for room then (ucx post): see send_and_finish.
  if (from == channel::reply && holding_outside_serving()) unfinished_holding_flag = true;
  // A request the caller will wait for may hold back its ring for a
  // moment (owe_ring), in case a caller at peer takes the channel and
  // serves it first.  Rung at once, the woken service thread took a core
  // from a spinning thread (most often the caller that was about to serve
  // the request) and then found the channel taken: a lock acquired from a
  // manager that had just left a barrier took 0.97 us in most acquires and
  // 7.5-14 us in 10% to over half of them (means of 1000 per run: 2.0-11.5
  // us); held back 3 us, means of 0.96-1.8 us, 90th percentiles 1.0-1.35.
  // The ring is rung in the wait once due, before this thread yields its
  // core or sleeps, when the wait ends and the reply has not come, and
  // before another request, one-way message or finished reply goes out
  // (flush, send_and_finish), so that nothing waits on a ring not rung.
  // From the reply channel: the calling thread, the one that owns it.
  bool deferrable = false;
  if (to == channel::request && from == channel::reply && doorbells_) {
    deferrable = kind == message_kind::request && ring_delay_.count() > 0;
    if (!deferrable && !owed_rings_.empty()) ring_owed(true);
  }
  // Counted in before it is sent, so that the peer never finds more
  // delivered than counted (see sleep_on_doorbell); a send that fails
  // takes its count back.
  const bool counted_in = to == channel::request && doorbells_ &&
                          (kind == message_kind::request || (kind == message_kind::one_way && rung));
  if (counted_in) std::atomic_ref<std::uint64_t>(bell_of(peer).rung_in).fetch_add(1);
  causal_release();
  status sent = post(from, peer, to, header, payload, length);
  if (counted_in && !sent) std::atomic_ref<std::uint64_t>(bell_of(peer).rung_in).fetch_sub(1);
  if (sent && to == channel::request && rung) {
    if (deferrable)
      owe_ring(peer, sequence);
    else
      ring(peer);
  }
  if (sent && peer == rank_ && to == channel::reply)
    caller_woken_.store(true, std::memory_order_relaxed);
  if (sent && counted && kind != message_kind::warm_up && kind != message_kind::warm_up_reply) {
    thread_counters& mine = from == channel::request ? service_counters_ : caller_counters_;
    count(mine.messages_sent, 1);
    count(mine.bytes_sent, length + sizeof header);
  }
  return sent;
}

result<request_id> transport::take_slot(bool here) {
  if (free_slots_.empty())
    return status(status_code::exhausted, "more than " + std::to_string(max_outstanding) +
                                              " requests outstanding");
  std::uint32_t index = free_slots_.back();
  free_slots_.pop_back();
  if (++next_generation_ >= (1u << (32 - slot_bits))) next_generation_ = 1;
  request_id id = (next_generation_ << slot_bits) | index;
  pending_reply& slot = pending_[index];
  slot.id = id;
  slot.done = false;
  slot.here = here;
  slot.peer = -1;
  return id;
}

namespace {
// A warm_up message: the reply's size, then the process to pass it on to
// (or -1), then filler up to the size being sent.
struct warm_up_ask {
  std::uint64_t reply_bytes;
  std::int32_t pass_to;
};
constexpr std::size_t warm_up_ask_bytes = sizeof(std::uint64_t) + sizeof(std::int32_t);
constexpr std::size_t warm_up_batch = 512;  // requests outstanding at once
// Through UCX's shared memory, a message above a fragment (8 KiB) names
// its sender's endpoint to the receiver, and the first such message on an
// endpoint waits for a round trip that wires it up (in SOR's first timed
// barrier when only the next process had been sent one): every channel
// between every two processes carries one.
constexpr std::size_t warm_up_fragmented_bytes = 16384;
}  // namespace

// A first exchange pays for what is made on first use: the endpoint to a
// process, a size class's send buffers (mapped and registered: 0.56 ms
// once, measured in a 2-process FFT), and every page touched the first
// time (about 10 us each on the machine of BENCHMARKS.md) in the shared
// memory a message is copied through and in the buffers a large one is
// built, sent and assembled in.  Before this, FFT's first iterations paid
// for it all: its 400 KB round trips took 5.3 ms the first time and
// 0.1-0.3 ms after.
//
// Every step ends within TMK_CONNECT_TIMEOUT, or the process stops saying
// so (job::watch): every process is in Tmk_startup then, alive and
// answering the monitor, and a message that never arrives is a transport
// that cannot reach its peer.  Processes started by hand in network
// namespaces of one machine, UCX choosing its shared-memory transports,
// whose wake-ups do not cross namespaces, all spun in their first sends
// for ever.
status transport::warm_up() {
  if (size_ == 1) return status::ok();
  // 0 (TMK_WARM_UP=0): only the first exchange with every process, which
  // shows it reachable, with requests and replies of a few bytes.
  std::size_t largest = std::min(config_.warm_up_bytes, config_.max_message);
  auto step_watched = [this] {
    job_.watch(job_.config().connect_timeout,
               "a step of the substrate's warm-up at start-up, its first messages with the other "
               "processes (the transport may not reach them: see UCX_TLS in the README, \"On a "
               "cluster\"; TMK_CONNECT_TIMEOUT)");
  };
  struct unwatched_at_end {
    job& owner;
    ~unwatched_at_end() { owner.unwatch(); }
  } at_end{job_};
  step_watched();
  std::vector<std::byte> message(std::max(largest, warm_up_ask_bytes));
  auto ask = [&](int peer, std::uint64_t reply_bytes, std::int32_t pass_to,
                 std::size_t bytes) -> result<request_id> {
    memcpy(message.data(), &reply_bytes, sizeof reply_bytes);
    memcpy(message.data() + sizeof reply_bytes, &pass_to, sizeof pass_to);
    return send_request(message_kind::warm_up, peer,
                        {byte_span{message.data(), std::max(bytes, warm_up_ask_bytes)}});
  };
  // A reply this thread sends itself (a barrier's manager arriving last, a
  // lock released to a waiting process) goes from its own channel to the
  // requester's reply channel, which the messages below do not travel: a
  // warm-up reply to no request (sequence 0, dropped there) goes down it.
  // It is not waited for: the peer completes the connection whenever it
  // next waits for a reply.
  std::size_t fragmented = std::min(warm_up_fragmented_bytes, largest);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    status opened = send(channel::reply, peer, channel::reply, message_kind::warm_up_reply, peer, 0,
                         {byte_span{message.data(), fragmented}});
    if (!opened) return opened;
  }
  // Every other process: a request to it answered on this process's reply
  // channel, and one it passes back to this process's request channel (as
  // a lock's manager passes a request on).
  std::vector<request_id> ids;
  auto await_asked = [&]() -> status {
    if (ids.empty()) return status::ok();
    std::vector<reply_payload> replies(ids.size());
    status done = wait_replies(ids, replies);
    ids.clear();
    step_watched();
    return done;
  };
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    for (std::int32_t pass_to : {std::int32_t{-1}, std::int32_t{rank_}}) {
      auto id = ask(peer, fragmented, pass_to, fragmented);
      if (!id) return id.error();
      ids.push_back(*id);
    }
    if (ids.size() >= warm_up_batch) {
      status done = await_asked();
      if (!done) return done;
    }
  }
  status done = await_asked();
  if (!done || largest == 0) return done;
  // The receive buffers of every other process's channels, from each of
  // this process's (a sender's channel maps a receiver's buffers apart from
  // its other channel): a round per process, each process sending to a
  // different one in each round, so that the messages to a channel come
  // from one sender at a time and fill its buffers in turn, with a quarter
  // more for rounds that overlap.  This process's reply channel fills the
  // peer's reply channel (fillers that answer nothing) and request channel
  // (requests); the peer's request channel answers into this process's
  // reply channel and passes half the requests back to its request
  // channel.  Its request channel fills the peer's channels in the peer's
  // round.
  receive_ring ring = receive_ring_shape();
  std::size_t ring_bytes = std::min(ring.message_bytes, largest);
  if (ring.depth > 0 && ring_bytes >= warm_up_ask_bytes) {
    std::size_t count = ring.depth + ring.depth / 4;
    for (int step = 1; step < size_; ++step) {
      int peer = (rank_ + step) % size_;
      for (std::size_t i = 0; i < count; ++i) {
        status filled = send(channel::reply, peer, channel::reply, message_kind::warm_up_reply,
                             peer, 0, {byte_span{message.data(), ring_bytes}});
        if (!filled) return filled;
      }
      for (std::size_t i = 0; i < 2 * count; ++i) {
        bool passed = i % 2 == 1;
        auto id = ask(peer, passed ? 0 : ring_bytes, passed ? rank_ : -1, ring_bytes);
        if (!id) return id.error();
        ids.push_back(*id);
        if (ids.size() >= warm_up_batch) {
          done = await_asked();
          if (!done) return done;
        }
      }
      done = await_asked();
      if (!done) return done;
    }
    done = flush_channel(channel::reply);
    if (!done) return done;
  }
  // The next process: requests and replies of every size, doubling.
  int next = (rank_ + 1) % size_;
  for (std::size_t bytes = 64;; bytes = std::min(bytes * 2, largest)) {
    auto id = ask(next, bytes, -1, bytes);
    if (!id) return id.error();
    reply_payload reply;
    done = wait_reply(*id, reply);
    if (!done) return done;
    step_watched();
    if (bytes == largest) break;
  }
  return status::ok();
}

void transport::answer_warm_up(const wire_header& header, byte_span payload) {
  warm_up_ask ask{};
  if (payload.size() >= warm_up_ask_bytes) {
    memcpy(&ask.reply_bytes, payload.data(), sizeof ask.reply_bytes);
    memcpy(&ask.pass_to, payload.data() + sizeof ask.reply_bytes, sizeof ask.pass_to);
  }
  if (payload.size() < warm_up_ask_bytes || ask.pass_to < -1 || ask.pass_to >= size_) {
    // Answered all the same, empty: nobody waits for ever.
    TMK_LOG(warn, "a malformed warm-up message from process %d", header.sender);
    ask = {0, -1};
  }
  // A process whose TMK_MAX_MESSAGE is smaller answers with what it may send.
  ask.reply_bytes = std::min<std::uint64_t>(ask.reply_bytes, config_.max_message);
  status sent = status::ok();
  if (ask.pass_to >= 0 && ask.pass_to != rank_) {
    std::vector<std::byte> passed(payload.begin(), payload.end());
    std::int32_t none = -1;
    memcpy(passed.data() + sizeof ask.reply_bytes, &none, sizeof none);
    sent = send_and_finish(ask.pass_to, channel::request, message_kind::warm_up, header.origin,
                           header.sequence, {byte_span{passed}});
  } else {
    std::vector<std::byte> filler(ask.reply_bytes);
    sent = reply(message_kind::warm_up_reply, {header.origin, header.sequence},
                 {byte_span{filler}});
  }
  if (!sent) TMK_LOG(warn, "answering a warm-up message: %s", sent.message().c_str());
}

result<request_id> transport::send_request(int peer, parts payload) {
  return send_request(message_kind::request, peer, payload);
}

result<request_id> transport::send_request_to_caller(int peer, parts payload) {
  if (peer == rank_)
    return status(status_code::invalid_argument,
                  "a request to this process's own caller: it hands it to its handler itself");
  return send_request(message_kind::caller_request, peer, payload);
}

result<request_id> transport::send_request(message_kind kind, int peer, parts payload,
                                           bool counted) {
  auto id = take_slot();
  if (!id) return id;
  channel to = kind == message_kind::caller_request ? channel::reply : channel::request;
  // A caller_request rings nobody: no service thread to nudge for it.
  pending_[*id & (max_outstanding - 1)].peer = to == channel::request ? peer : -1;
  status sent = send(channel::reply, peer, to, kind, rank_, *id, payload, true, counted);
  if (!sent) {
    release_pending(*find_pending(*id));
    return sent;
  }
  return id;
}

result<request_id> transport::send_request_uncounted(int peer, parts payload) {
  if (peer == rank_)
    return status(status_code::invalid_argument, "an uncounted request to this process itself");
  return send_request(message_kind::request, peer, payload, false);
}

result<request_id> transport::expect_reply_here() { return take_slot(true); }

status transport::send_one_way(int peer, parts payload) {
  channel from = serving_requests() ? channel::request : channel::reply;
  return send(from, peer, channel::request, message_kind::one_way, rank_, 0, payload);
}

status transport::send_one_way_unrung(int peer, parts payload) {
  channel from = serving_requests() ? channel::request : channel::reply;
  return send(from, peer, channel::request, message_kind::one_way, rank_, 0, payload, false);
}

status transport::reply(const reply_token& to, parts payload) {
  return reply(message_kind::reply, to, payload);
}

status transport::reply(const reply_token& to, std::vector<std::byte>&& payload) {
  if (to.origin == rank_) return reply_here(to.sequence, std::move(payload));
  return reply(message_kind::reply, to, {payload});
}

status transport::reply(message_kind kind, const reply_token& to, parts payload, bool counted) {
  if (to.origin == rank_) return reply_here(to.sequence, payload);
  return send_and_finish(to.origin, channel::reply, kind, to.origin, to.sequence, payload,
                         counted);
}

status transport::reply_uncounted(const reply_token& to, parts payload) {
  if (to.origin == rank_)
    return status(status_code::invalid_argument, "an uncounted reply to this process itself");
  return reply(message_kind::reply, to, payload, false);
}

// A send left in flight by the calling thread would stall until it next
// enters the substrate, which may be much later: it is finished now.
//
// Not while this thread holds the request channel outside serving: a send
// waiting for room in a process whose caller does the same, both holding
// their channels, would wait for ever, as nobody drained either request
// channel (UCX: caller-push with every handler run holding the channel,
// stopped by the watchdog).  The wait that holds it finishes them once it
// has let go.
status transport::send_and_finish(int peer, channel to, message_kind kind, int origin,
                                  std::uint32_t sequence, parts payload, bool counted) {
  channel from = serving_requests() ? channel::request : channel::reply;
  if (from == channel::reply && !owed_rings_.empty()) ring_owed(true);  // see send
  status sent = send(from, peer, to, kind, origin, sequence, payload, true, counted);
  if (sent && from == channel::reply) sent = finish_or_owe();
  return sent;
}

status transport::finish_or_owe() {
  return holding_outside_serving() ? status::ok() : flush_channel(channel::reply);
}

// Process 0 arriving at its own barrier, a lock manager granting its own
// request: the reply needs no message (through UCX, a loopback costs tens
// of microseconds when the service thread replies).  The slot was filled
// in before the request went out; its payload is the caller's again once
// done is set.  A caller asleep in its wait is woken through
// caller_wake_fd_: it sets caller_asleep_ before its last look at done,
// this thread sets done before it looks at caller_asleep_, so that one of
// the two sees the other.
status transport::reply_here(std::uint32_t sequence, parts payload) {
  pending_reply* slot = slot_to_fill(sequence);
  if (slot == nullptr) return status::ok();
  std::size_t length = 0;
  for (const auto& part : payload) length += part.size();
  slot->payload.resize(length);
  std::byte* at = slot->payload.data();
  for (const auto& part : payload) {
    if (!part.empty()) memcpy(at, part.data(), part.size());
    at += part.size();
  }
  filled(*slot);
  return status::ok();
}

// Process 0's own barrier departure carries the diffs pushed to it (148 kB
// in FFT on 2 processes): swapped in, not copied.
status transport::reply_here(std::uint32_t sequence, std::vector<std::byte>&& payload) {
  pending_reply* slot = slot_to_fill(sequence);
  if (slot == nullptr) return status::ok();
  slot->payload.swap(payload);
  filled(*slot);
  return status::ok();
}

transport::pending_reply* transport::slot_to_fill(std::uint32_t sequence) {
  pending_reply* slot = find_pending(sequence);
  if (slot == nullptr || slot->done.load(std::memory_order_acquire)) {
    TMK_LOG(warn, "dropped a reply nobody waits for (request %u from this process)", sequence);
    return nullptr;
  }
  return slot;
}

void transport::filled(pending_reply& slot) {
  slot.done.store(true);
  caller_woken_.store(true, std::memory_order_relaxed);
  if (caller_asleep_.load()) {
    ring_event_fd(caller_wake_fd_);
  }
}

status transport::forward(const incoming_request& request, int peer, parts payload) {
  return send_and_finish(peer, channel::request, message_kind::request, request.origin,
                         request.sequence, payload);
}

status transport::flush() {
  ring_owed(true);
  return finish_or_owe();
}

status transport::wait_reply(request_id id, reply_payload& reply) {
  return wait_replies({&id, 1}, {&reply, 1});
}

status transport::wait_reply(request_id id, std::vector<std::byte>& reply) {
  return wait_replies({&id, 1}, {&reply, 1});
}

// Bytes of its own are swapped into the caller's reply, and the caller's
// old buffer stays with the slot: a caller that reuses its reply makes no
// allocation after the first few requests.
void transport::hand_over(pending_reply& slot, reply_payload& reply) {
  reply.reset();
  if (slot.lent_handle != nullptr) {
    reply.lent_ = slot.lent;
    reply.lender_ = this;
    reply.handle_ = slot.lent_handle;
    slot.lent = {};
    slot.lent_handle = nullptr;
  } else {
    reply.owned_.swap(slot.payload);
  }
  release_pending(slot);
}

status transport::wait_replies(std::span<const request_id> ids,
                               std::span<reply_payload> replies) {
  for (request_id id : ids)
    if (find_pending(id) == nullptr)
      return status(status_code::invalid_argument, "wait for an unknown request");
  // What the replies held goes back now, while the requests are out,
  // rather than once they are answered: giving a lent buffer back to UCX
  // took 20-30 ns of a 4 KiB round trip's 0.75 us by the clock.
  for (reply_payload& reply : replies) reply.reset();
  status waited = wait_until_done(ids);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    pending_reply* slot = find_pending(ids[i]);
    if (waited)
      hand_over(*slot, replies[i]);
    else
      release_pending(*slot);
  }
  return waited;
}

status transport::wait_replies(std::span<const request_id> ids,
                               std::span<std::vector<std::byte>> replies) {
  std::vector<reply_payload> received(ids.size());
  status waited = wait_replies(ids, received);
  if (waited)
    for (std::size_t i = 0; i < ids.size(); ++i) received[i].move_into(replies[i]);
  return waited;
}

status transport::wait_reply_interruptible(request_id id, reply_payload& reply,
                                           clock_type::duration patience) {
  if (find_pending(id) == nullptr)
    return status(status_code::invalid_argument, "wait for an unknown request");
  status waited = wait_until_done({&id, 1}, true, patience);
  if (waited.code() == status_code::interrupted || waited.code() == status_code::timeout)
    return waited;  // the slot stays
  pending_reply* slot = find_pending(id);
  if (waited)
    hand_over(*slot, reply);
  else
    release_pending(*slot);
  return waited;
}

// The same handshake as reply_here's: the waiter marks itself asleep
// before its last look at interrupt_, this thread sets interrupt_ before it
// looks at caller_asleep_.
void transport::interrupt_wait() {
  interrupt_.store(true);
  if (caller_asleep_.load()) {
    ring_event_fd(caller_wake_fd_);
  }
}

// The handler may send and wait for its sends to leave: that progress of
// the reply channel only queues what comes, the entry being handled is out
// of the queue already.
bool transport::serve_caller_requests() {
  if (!handler_) return false;  // kept until start() gives a handler
  bool served = false;
  while (caller_request_ready()) {
    caller_request entry = std::move(caller_requests_.front());
    caller_requests_.pop_front();
    causal_acquire();
    {
      handling_scope running(handling_[1], entry.header.origin);
      handler_(incoming_request{entry.header.origin, entry.header.sender, entry.header.sequence,
                                false, entry.payload});
    }
    causal_release();
    entry.payload.clear();
    spare_payloads_.push_back(std::move(entry.payload));
    served = true;
  }
  return served;
}

// A service thread woken for a request while its caller computes waits
// for the core that caller holds, pinned to the same one or sharing a
// busy host, and the kernel's scheduler often lets the caller run on
// until it enters a wait or the next tick (BENCHMARKS.md: 250-450 us for
// some of SOR's first-phase faults).  A caller that enters the substrate
// meanwhile, for a fault of its own, serves the request itself.  Only
// with doorbells, which tell whether the service thread has been rung and
// not run: it sleeps unrung in most calls (one load), and a request whose
// ring is held back is rung within TMK_RING_DELAY_US.  Without them the
// hand-back re-arms the channel, and a woken service thread may find it
// taken (sockets: FFT on 2 processes took 1.02 times as long this way).
bool transport::serve_pending() {
  if (!doorbells_ || serving_flag) return false;
  if (word(own_bell_->asleep).load(std::memory_order_relaxed) != 0) return false;
  channel_hold hold{std::unique_lock(request_lock_, std::defer_lock)};
  bool served = serve_while_waiting(hold);
  hand_back(hold);
  return served;
}

bool transport::serve_while_waiting(channel_hold& hold) {
  if (!service_.joinable()) return false;
  if (!hold.own.owns_lock()) {
    if (!hold.own.try_lock()) return false;
    holding_flag = true;
    if (doorbells_) {
      word(own_bell_->polled).store(1);
    } else {
      if (mute_on_hold_) listen_for_requests(false);
      hold.muted = mute_on_hold_;
    }
  }
  serving_scope serving;
  if (progress(channel::request) == 0) return false;
  while (progress(channel::request) != 0) {
  }
  hold.served = true;
  return true;
}

// The channel is still armed from the service thread's last sleep, and
// listened to unless muted, if no request came.  If one came, it is armed
// again (pending events mean more to serve first, and a reply still going
// out may be waiting for this thread's own reply channel to drain it) and
// listened to (the wake-up of a service thread not muted ended the
// listening).  A request that came after this thread's last look makes the
// event fd ready, and the service thread wakes for it once it listens.  If
// the lock is taken after this thread let go, the service thread has it,
// awake.
//
// With more processes on the host than cores, the caller mutes the
// service thread in every wait, and a service thread that went deaf all
// the same is not armed for here: it is woken (wake_fd_) to take the
// channel back and arms it itself.  Armed and listened to from the caller
// instead, the channel of a deaf service thread at times stayed silent for
// a request that came afterwards, until the sleep's one-second timeout:
// with the caller yielding through its whole spin window (wait_until_done),
// the hand-back test on 8 processes, two at once on the 2 cores of
// BENCHMARKS.md, failed in about one run in three that way, and in none of
// 40 as here.  Where the signal went was not found.  Unmuted there, the
// service thread went deaf in most waits and each wake-up took a shared
// core: SOR and FFT on 8 processes ran 1.6 and 1.9 times as long.
// With a core per process, as before: muted only after a wait that served
// (an empty barrier on 2 processes took 5.6 us instead of 2.1 muting in
// every wait), and armed for when deaf (woken instead, SOR on 2 processes
// took 0.0105 s instead of 0.0093).  But kernel sockets make the channel
// ready for every request, armed or not (signals_unarmed): unmuted, the
// service thread woke for requests its caller served, and, each process
// pinned to its core, every such wake-up took the caller's core: a direct
// lock acquire took 22 us instead of 10, muted in every wait 9.8 (an
// empty barrier 11.3 us instead of 10.9).  The deaf mark is taken with an
// exchange, so that one stored by the service thread after this thread's
// look is never cleared unseen.
void transport::hand_back(channel_hold& hold) {
  if (!hold.own.owns_lock()) return;
  if (doorbells_) {
    // Unmarked before the last look, as the service thread marks itself
    // asleep (sleep_on_doorbell); a send still going out is finished here,
    // since nobody else moves it while the service thread sleeps.
    word(own_bell_->polled).store(0);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    {
      serving_scope serving;
      while ((progress(channel::request) != 0 || !settled(channel::request)) && !job_.failed())
        progress(channel::reply);
    }
    // A message whose sender saw the mark, and so rang nobody, that has not
    // come into sight yet (see sleep_on_doorbell): the service thread
    // watches for it.
    if (undelivered() > 0) ring(rank_);
    hold.served = false;
    holding_flag = taken_in_holding_flag = false;
    hold.own.unlock();
    return;
  }
  mute_on_hold_ = hold.served || !core_per_process_ || signals_unarmed();
  while (true) {
    bool deaf = service_deaf_.exchange(false);
    // Requests a send blocked outside serving took in (sockets) wait
    // here, out of the kernel, where no event tells of them.
    if (std::exchange(taken_in_holding_flag, false)) hold.served = true;
    if (deaf && !core_per_process_) {
      hold.muted = hold.served = false;
      holding_flag = false;
      hold.own.unlock();
      nudged_.store(true);
      ring_event_fd(wake_fd_);
      return;
    }
    if (hold.served || deaf) {
      serving_scope serving;
      // What has come is served first: listened to again with a request
      // waiting in it, the channel wakes the service thread at once, and
      // a caller entering its next wait takes the channel before that
      // thread runs, again and again (a request that came at the end of a
      // short wait stayed there through 40 wake-ups a wait under
      // ThreadSanitizer, the held-waits scenario).
      while (progress(channel::request) != 0 && !job_.failed()) {
      }
      // A send to a lost process may never finish: the job is ending then.
      while (!arm(channel::request) && !job_.failed()) {
        progress(channel::request);
        progress(channel::reply);
      }
    }
    if (hold.muted || hold.served || deaf) listen_for_requests(true);
    hold.muted = hold.served = false;
    holding_flag = false;
    hold.own.unlock();
    // The service thread may have woken (before the listening stopped, or
    // for a request that came after the last look) and gone deaf while this
    // thread held the lock.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!service_deaf_.load() || !hold.own.try_lock()) return;
    holding_flag = true;
  }
}

void transport::listen_for_requests(bool listen) {
  epoll_event request{};
  request.events = listen ? EPOLLIN | EPOLLONESHOT : 0;
  request.data.fd = event_fd(channel::request);
  if (epoll_ctl(service_epoll_, EPOLL_CTL_MOD, request.data.fd, &request) != 0)
    TMK_LOG(error, "epoll_ctl on the service thread's sleep: %s", strerror(errno));
}

// Spin on the reply channel for TMK_WAIT_SPIN_US, then block on its event
// fd and the job's failure fd.  A reply from a process that is itself
// waiting comes within a few microseconds; one from a process still
// computing, as at a barrier, comes when that process arrives, and a
// caller asleep by then pays a thread wake-up (tens of microseconds on the
// virtual machine of BENCHMARKS.md).  The default, 500 us, covers the
// usual skew between processes at a barrier: in two interleaved runs
// against 20 us (medians of 7, 2 processes), Jacobi took 0.302 and 0.313 s
// against 0.327 and 0.324, TSP 0.511 and 0.506 against 0.540 and 0.516;
// SOR and FFT did not change.
status transport::wait_until_done(std::span<const request_id> ids, bool interruptible,
                                  clock_type::duration patience) {
  auto all_done = [&] {
    for (request_id id : ids)
      if (!pending_[id & (max_outstanding - 1)].done.load()) return false;
    return true;
  };
  auto interrupted = [&] {
    return interruptible && interrupt_.load(std::memory_order_relaxed) && interrupt_.exchange(false);
  };
  // With more processes on the host than cores, a spinning caller holds a
  // core some other process needs: it yields the core between looks, so
  // that a process with work to do runs first.  Blocking at once instead
  // (after 5 us of spin) made every wait cost a wake-up signal and a
  // context switch: an empty barrier on 8 processes on the 2 cores of
  // BENCHMARKS.md took 160 us that way, 50 us yielding.
  const bool yielding = !core_per_process_;
  const bool polled = config_.notify == notify_mode::poll;
  const auto spin_window = std::chrono::microseconds(config_.wait_spin_us);
  struct asleep_scope {
    transport& self;
    explicit asleep_scope(transport& t) : self(t) { self.set_caller_idle(true); }
    ~asleep_scope() { self.set_caller_idle(false); }
  };
  // Woken by a message that is not yet the whole reply, the caller spins
  // again before it sleeps: the rest of a reply sent in fragments (above
  // 8 KiB through shared memory) follows within microseconds.  A caller
  // that slept again at once slowed the sender down: a 74 KB diff reply
  // took 390-575 us of the replier's CPU in one ucp_am_send_nbx, 250-300
  // us with this spin (the number of wake-up signals, counted with
  // strace, stayed the same, so where UCX spends the rest is not known).
  // The request channel while this thread spins and the service thread
  // sleeps.
  // Leaving, the rings owed for requests still unanswered are rung, and
  // the time is marked for senders (owe_ring): the wait's last look at the
  // clock, at most 16 rounds of spin before it ends, or the end of its last
  // sleep (with a clock read of its own, and a thread-local look in each
  // send, the bookkeeping cost about 0.02 us of an 8-byte round trip of 0.4).
  auto looked = clock_type::now();
  // Measured from the wait's first look at the clock, which it takes
  // anyway: a deadline the caller computed would cost a clock read in
  // every wait.
  const auto until = patience == clock_type::duration::max() ? clock_type::time_point::max()
                                                              : looked + patience;
  const auto nudge_at = doorbells_ && config_.nudge_us > 0
                            ? looked + std::chrono::microseconds(config_.nudge_us)
                            : clock_type::time_point::max();
  bool nudged = false;
  auto out_of_patience = [] { return status(status_code::timeout, "waited as long as asked"); };
  struct owed_scope {
    transport& self;
    const clock_type::time_point& looked;
    ~owed_scope() {
      if (!self.owed_rings_.empty()) self.ring_owed(true);
      if (self.own_bell_ != nullptr)
        std::atomic_ref<std::uint64_t>(self.own_bell_->left_wait_ns)
            .store(static_cast<std::uint64_t>(
                       std::chrono::nanoseconds(looked.time_since_epoch()).count()),
                   std::memory_order_relaxed);
    }
  } owed{*this, looked};
  struct hold_scope {
    transport& self;
    channel_hold hold;
    bool asked = false;  // caller_asks_channel_ set by this wait
    void ask(bool wanted) {
      if (asked == wanted) return;
      asked = wanted;
      self.caller_asks_channel_.store(wanted, std::memory_order_relaxed);
    }
    ~hold_scope() {
      ask(false);
      self.hand_back(hold);
      // Not in a wait inside one that still holds the channel; a failure
      // here is the job's, and every later wait reports it.
      if (!holding_outside_serving() && std::exchange(unfinished_holding_flag, false))
        (void)self.flush_channel(channel::reply);
    }
  } holding{*this, {std::unique_lock(request_lock_, std::defer_lock)}};
  // Every so many rounds the caller serves the requests that came to this
  // process (serve_while_waiting), a progress of the request worker each
  // time: every 4th round in a barrier or a lock's wait (interruptible),
  // where other processes' requests come to it (a direct lock acquire is
  // served by the manager's caller waiting at the benchmark's barrier),
  // and in a wait for what another process sends this one unasked (a
  // barrier's pushed diffs: expect_reply_here); every 16th in a wait for
  // replies to its own requests (a fetch, a ping-pong), where those looks
  // only delay the look that finds the reply: in 12 alternated pairs of
  // `pingpong` runs (2026-11-25) the 8-byte round trip took 0.96 times as
  // long (the median of the pairs' ratios), 4 KiB 1.02 times; lock
  // direct, an empty barrier and the applications within the noise.
  // Every round in a barrier's or a lock's wait where each process has a
  // core and doorbells (a look at the request channel is a look at
  // memory): alternated with every 4th (2026-12-03, paired ratios), a
  // direct lock acquire took 0.944 times as long (21 pairs), Jacobi on 2
  // processes 0.949 and 1/1.079 (11 pairs each, in either order), SOR
  // 0.971 and 1/1.004, FFT 0.983, TSP 0.959, an empty barrier 0.998.
  // Not with more processes than cores, where an empty barrier on 8
  // processes took 1.071 times as long, nor over kernel sockets, where a
  // look is a system call (an empty barrier 1.031, within the noise).
  bool served_here = interruptible || std::any_of(ids.begin(), ids.end(), [&](request_id id) {
                       return pending_[id & (max_outstanding - 1)].here;
                     });
  // Every round, every 4th or every 16th.
  const unsigned serve_mask =
      interruptible && core_per_process_ && doorbells_ ? 0 : served_here ? 3 : 15;
  while (true) {
    auto spin_until = looked + spin_window;
    for (unsigned round = 1;; ++round) {
      progress(channel::reply);
      if (serve_caller_requests()) spin_until = (looked = clock_type::now()) + spin_window;
      if (all_done()) return status::ok();
      if (interrupted()) return status(status_code::interrupted, "interrupted");
      if ((round & serve_mask) == 0) {
        bool served = serve_while_waiting(holding.hold);
        if (polled) holding.ask(!holding.hold.own.owns_lock());
        if (served) {
          spin_until = (looked = clock_type::now()) + spin_window;
          continue;
        }
      }
      if (job_.failed()) return job_.failure();
      if ((round & 15) == 0) {
        looked = clock_type::now();
        if (looked >= until) return out_of_patience();
        // Before this thread yields its core, for as long as others run.
        if (!owed_rings_.empty()) ring_owed(yielding, looked);
        if (!nudged && looked >= nudge_at) {
          nudged = true;
          nudge_peers(ids);
        }
        if (looked >= spin_until) break;
        if (yielding) sched_yield();
      }
    }
    ring_owed(true);
    holding.ask(false);
    hand_back(holding.hold);
    asleep_scope asleep(*this);
    // Arming fails while a send of this worker is in flight: one to a lost
    // process never completes, and the failure is this wait's to report.
    while (!arm(channel::reply)) {
      progress(channel::reply);
      if (all_done()) return status::ok();
      if (job_.failed()) return job_.failure();
    }
    if (all_done()) return status::ok();  // replied here meanwhile
    if (interrupted()) return status(status_code::interrupted, "interrupted");
    if (caller_request_ready()) continue;
    pollfd fds[3] = {{event_fd(channel::reply), POLLIN, 0},
                     {job_.failure_fd(), POLLIN, 0},
                     {caller_wake_fd_, POLLIN, 0}};
    // Every second at least (a lost peer also shows on failure_fd), and at
    // the end of the wait's patience.
    int timeout_ms = 1000;
    if (until != clock_type::time_point::max())
      timeout_ms = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(
          std::chrono::ceil<std::chrono::milliseconds>(until - looked).count(), 0, 1000));
    int ready = poll(fds, 3, timeout_ms);
    looked = clock_type::now();
    if (ready < 0 && errno != EINTR) return errno_status("poll for a reply");
    if (ready > 0 && (fds[2].revents & POLLIN) != 0) {
      empty_event_fd(caller_wake_fd_);
    }
    progress(channel::reply);
    if (all_done()) return status::ok();
    if (job_.failed()) return job_.failure();
    if (looked >= until) return out_of_patience();
  }
}

}  // namespace tmk
