// transport.cc — the backend-independent half of the substrate: the
// service thread's loop, the caller's wait loop and reply matching.
//
// Invariant: a handler never makes progress on the request channel (its
// sends only post), so the backend may run handlers from inside its own
// progress call without re-entering it.  The data path allocates nothing:
// pending replies live in a fixed table whose payload buffers are reused,
// and counters are per thread.
#include "transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "log.h"
#include "sockets/sockets_transport.h"
#include "ucx/ucx_transport.h"

namespace tmk {

namespace {
thread_local bool service_thread_flag = false;
using clock_type = std::chrono::steady_clock;
}  // namespace

result<std::unique_ptr<transport>> transport::create(job& owner, const substrate_config& config) {
  if (config.backend == backend_kind::sockets) return sockets_transport::create(owner, config);
  return ucx_transport::create(owner, config);
}

transport::transport(job& owner, const substrate_config& config)
    : job_(owner), config_(config), rank_(owner.rank()), size_(owner.size()),
      pending_(max_outstanding) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) cores = CPU_COUNT(&allowed);
  core_per_process_ = owner.local_processes() <= cores;
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
  return sum;
}

transport::~transport() {
  stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool transport::on_service_thread() { return service_thread_flag; }

status transport::start(request_handler handler) {
  if (service_.joinable()) return status(status_code::invalid_argument, "already started");
  handler_ = std::move(handler);
  service_ = std::thread([this] {
    service_thread_flag = true;
    service_loop();
    service_thread_exit();
  });
  return status::ok();
}

void transport::stop() {
  if (!service_.joinable()) return;
  stopping_.store(true);
  std::uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
  service_.join();
}

// The service thread: make progress (the backend runs the handler for each
// request that arrived); when nothing came, spin for a while, then sleep on
// the request channel's event fd until a request or a stop wakes it.
//
// Spinning costs a core, sleeping costs a wake-up (on a virtual machine
// whose idle CPU has halted, tens of microseconds).  So the window adapts:
// while requests come closer than TMK_SERVICE_SPIN_US the thread spins that
// long, when they are sparser only an eighth of it; and while the calling
// thread itself sleeps in a wait, its core would sit idle, so the service
// thread spins there (up to idle_spin) — unless the host runs more
// processes of the job than it has cores, where every spin takes a core
// from someone's computation.
void transport::service_loop() {
  const auto max_spin = std::chrono::microseconds(core_per_process_ ? config_.service_spin_us
                                                                    : config_.service_spin_us / 8);
  const auto idle_spin = std::chrono::microseconds(core_per_process_ ? 10000 : 0);
  auto spin_window = max_spin;
  double gap_average_us = 0;
  auto last_activity = clock_type::now();
  auto last_request = last_activity;
  unsigned idle_rounds = 0;

  while (!stopping_.load(std::memory_order_relaxed)) {
    std::uint64_t before = service_counters_.messages_received.load(std::memory_order_relaxed);
    unsigned events = progress(channel::request);
    if (events == 0) {
      if (config_.notify == notify_mode::poll) {
        // Busy-polling never sleeps; it only yields now and then.
        if (++idle_rounds % 1024 == 0) std::this_thread::yield();
        continue;
      }
      if ((++idle_rounds & 15) != 0) continue;  // the clock costs more than a poll
      auto idle = clock_type::now() - last_activity;
      if (idle < spin_window) continue;
      // The caller's core is free, and requests have been coming: keep it.
      if (caller_asleep_.load(std::memory_order_relaxed) && idle < idle_spin &&
          clock_type::now() - last_request < idle_spin)
        continue;
      if (!arm(channel::request)) continue;
      pollfd fds[2] = {{event_fd(channel::request), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      int ready = poll(fds, 2, 1000);
      if (ready < 0 && errno != EINTR) {
        TMK_LOG(error, "service thread: poll: %s", strerror(errno));
        return;
      }
      service_wakeups_.fetch_add(1, std::memory_order_relaxed);
      last_activity = clock_type::now();
      continue;
    }
    auto now = clock_type::now();
    last_activity = now;
    if (service_counters_.messages_received.load(std::memory_order_relaxed) != before) {
      double gap = std::chrono::duration<double, std::micro>(now - last_request).count();
      gap_average_us = gap_average_us == 0 ? gap : 0.75 * gap_average_us + 0.25 * gap;
      spin_window = gap_average_us > static_cast<double>(config_.service_spin_us) ? max_spin / 8
                                                                                   : max_spin;
      last_request = now;
    }
  }
}

void transport::deliver_request(const wire_header& header, byte_span payload) {
  if ((header.kind != message_kind::request && header.kind != message_kind::one_way) ||
      header.origin < 0 || header.origin >= size_ || header.sender < 0 || header.sender >= size_) {
    TMK_LOG(warn, "dropped a malformed request (kind %d, origin %d, sender %d)",
            static_cast<int>(header.kind), header.origin, header.sender);
    return;
  }
  count(service_counters_.messages_received, 1);
  count(service_counters_.bytes_received, payload.size() + sizeof(wire_header));
  handler_(incoming_request{header.origin, header.sender, header.sequence,
                            header.kind == message_kind::one_way, payload});
}

transport::pending_reply* transport::find_pending(request_id id) {
  pending_reply& slot = pending_[id & (max_outstanding - 1)];
  return slot.id == id && id != 0 ? &slot : nullptr;
}

void transport::release_pending(pending_reply& slot) {
  free_slots_.push_back(static_cast<std::uint32_t>(&slot - pending_.data()));
  slot.id = 0;
  slot.done = false;
}

std::vector<std::byte>* transport::reply_destination(const wire_header& header,
                                                     std::size_t length) {
  pending_reply* slot = find_pending(header.sequence);
  if (header.kind != message_kind::reply || header.origin != rank_ || slot == nullptr ||
      slot->done) {
    TMK_LOG(warn, "dropped a reply nobody waits for (request %u from process %d)",
            header.sequence, header.sender);
    return nullptr;
  }
  slot->payload.resize(length);
  return &slot->payload;
}

void transport::reply_complete(const wire_header& header) {
  pending_reply* slot = find_pending(header.sequence);
  if (slot == nullptr) return;
  slot->done = true;
  count(caller_counters_.messages_received, 1);
  count(caller_counters_.bytes_received, slot->payload.size() + sizeof(wire_header));
}

status transport::check_size(int peer, std::size_t payload_length) const {
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
                       std::uint32_t sequence, parts payload) {
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
  status sent = post(from, peer, to, header, payload, length);
  if (sent) {
    thread_counters& mine = from == channel::request ? service_counters_ : caller_counters_;
    count(mine.messages_sent, 1);
    count(mine.bytes_sent, length + sizeof header);
  }
  return sent;
}

result<request_id> transport::send_request(int peer, parts payload) {
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
  slot.to_self = peer == rank_;
  status sent = send(channel::reply, peer, channel::request, message_kind::request, rank_, id,
                     payload);
  if (!sent) {
    release_pending(slot);
    return sent;
  }
  return id;
}

status transport::send_one_way(int peer, parts payload) {
  return send(channel::reply, peer, channel::request, message_kind::one_way, rank_, 0, payload);
}

status transport::reply(const reply_token& to, parts payload) {
  channel from = on_service_thread() ? channel::request : channel::reply;
  status sent = send(from, to.origin, channel::reply, message_kind::reply, to.origin,
                     to.sequence, payload);
  // A send left in flight by the calling thread would stall until it next
  // enters the substrate, which may be much later: finish it now.
  if (sent && from == channel::reply) sent = flush_channel(channel::reply);
  return sent;
}

status transport::forward(const incoming_request& request, int peer, parts payload) {
  if (!on_service_thread())
    return status(status_code::invalid_argument, "forward outside the service thread");
  return send(channel::request, peer, channel::request, message_kind::request, request.origin,
              request.sequence, payload);
}

status transport::flush() { return flush_channel(channel::reply); }

status transport::wait_reply(request_id id, std::vector<std::byte>& reply) {
  return wait_replies({&id, 1}, {&reply, 1});
}

// The reply's bytes are swapped into the caller's vector, and the caller's
// old buffer stays with the slot: a caller that reuses its vector makes no
// allocation after the first few requests.
status transport::wait_replies(std::span<const request_id> ids,
                               std::span<std::vector<std::byte>> replies) {
  for (request_id id : ids)
    if (find_pending(id) == nullptr)
      return status(status_code::invalid_argument, "wait for an unknown request");
  status waited = wait_until_done(ids);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    pending_reply* slot = find_pending(ids[i]);
    if (waited) replies[i].swap(slot->payload);
    release_pending(*slot);
  }
  return waited;
}

// Spin on the reply channel for TMK_WAIT_SPIN_US (a reply usually comes
// within a few microseconds), then block on its event fd and the job's
// failure fd.
status transport::wait_until_done(std::span<const request_id> ids) {
  auto all_done = [&] {
    for (request_id id : ids)
      if (!pending_[id & (max_outstanding - 1)].done) return false;
    return true;
  };
  // A request to this process's own service thread is answered sooner if
  // the caller gives that thread its core at once instead of spinning.
  bool to_self = false;
  for (request_id id : ids) to_self = to_self || pending_[id & (max_outstanding - 1)].to_self;
  auto spin_until = clock_type::now() + std::chrono::microseconds(
                                            to_self             ? 0
                                            : core_per_process_ ? config_.wait_spin_us
                                                                : config_.wait_spin_us / 4);
  for (unsigned round = 1;; ++round) {
    progress(channel::reply);
    if (all_done()) return status::ok();
    if (job_.failed()) return job_.failure();
    if ((round & 15) == 0 && clock_type::now() >= spin_until) break;
  }
  struct asleep_flag {
    std::atomic<bool>& flag;
    explicit asleep_flag(std::atomic<bool>& f) : flag(f) { flag.store(true, std::memory_order_relaxed); }
    ~asleep_flag() { flag.store(false, std::memory_order_relaxed); }
  } asleep(caller_asleep_);
  while (true) {
    if (!arm(channel::reply)) {
      progress(channel::reply);
      if (all_done()) return status::ok();
      continue;
    }
    pollfd fds[2] = {{event_fd(channel::reply), POLLIN, 0}, {job_.failure_fd(), POLLIN, 0}};
    int ready = poll(fds, 2, 1000);
    if (ready < 0 && errno != EINTR) return errno_status("poll for a reply");
    progress(channel::reply);
    if (all_done()) return status::ok();
    if (job_.failed()) return job_.failure();
  }
}

}  // namespace tmk
