// transport.h — the communication substrate the runtime talks through.
//
// Two channels per process, every peer multiplexed onto each (FAST/GM's two
// ports): the request channel, owned by a service thread that runs the
// request handler, and the reply channel, owned by the calling (compute)
// thread, which sends requests and waits for their replies.  A handler
// either replies to the request's origin, forwards the request to a third
// process (which then replies to the origin directly), or keeps the reply
// token and replies later from either thread.
//
// The service thread sleeps on the request channel's event fd when idle
// (TMK_NOTIFY=interrupt, after a short adaptive spin) or busy-polls
// (TMK_NOTIFY=poll).  A caller waiting for a reply spins for
// TMK_WAIT_SPIN_US, then blocks on the reply channel's event fd.  Every wait
// also watches the job's failure fd: a lost peer ends it with a peer_lost
// status that names the rank.
//
// One thread at a time owns the request channel (request_lock_): the
// service thread, except while it sleeps; then a caller that spins in a
// wait takes it and serves the requests that arrive, so that a request to a
// process whose caller is waiting is answered without waking a thread.  On
// a host with as many processes as cores this keeps a barrier or a lock
// hand-off from paying a thread wake-up.  The service thread sleeps in
// epoll, listening to the channel's event fd one-shot: a caller that takes
// the channel may stop that listening, so that what arrives during its
// wait wakes nobody (a woken thread takes a core from a spinning process),
// and restores it when it lets go.
//
// Doorbells (TMK_DOORBELL; UCX, every process of the job on this host, see
// job::shared_line): the service thread sleeps on a futex in memory the
// processes share, never arming the request channel, and a sender rings
// it after its message is in, only if the service thread sleeps and no
// caller holds the channel; a caller that will wait for the reply holds
// the ring back for TMK_RING_DELAY_US if a caller there has just left a
// wait, as it will take the channel in its next one.  Each such message is
// also counted in, so that a service thread or caller that finds fewer
// delivered knows one is still out of sight (sleep_on_doorbell).  Armed,
// UCX makes the first sender after every sleep signal the sleeper through
// a socket even when a spinning caller serves the channel, and arming and
// listening again cost the sleeper system calls of their own (about 1.2 us
// each on the machine of BENCHMARKS.md): a lock acquired from a waiting
// manager took 5 us, 2.4 with doorbells.  The doorbell also tells a
// caller whose request has waited TMK_NUDGE_US where the other process's
// calling thread is: one that runs is sent SIGURG, and yields its core to
// its service thread (nudge_peers).
//
// A request may also go to a peer's reply channel (send_request_to_caller),
// for its calling thread to handle in its next wait: a barrier's arrivals
// at a manager that has not arrived wake nobody there.
//
// Messages between two processes may be handled in a different order than
// they were sent (a rendezvous message is handled when its data is in; the
// tag path matches each size class separately): a caller that needs an
// order waits for the reply.  Nothing is lost.
//
// This base class holds what every backend shares: the service loop, the
// wait loop, reply matching, counters and size checks.  A backend (UCX,
// kernel sockets) supplies the channel primitives.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "substrate_config.h"
#include "job.h"
#include "status.h"

namespace tmk {

using byte_span = std::span<const std::byte>;
using request_id = std::uint32_t;

template <typename T>
byte_span as_bytes_of(const T& value) {
  return {reinterpret_cast<const std::byte*>(&value), sizeof value};
}

// The header every message carries in front of its payload.
// warm_up and warm_up_reply: the substrate's own start-up traffic
// (transport::warm_up), answered by the substrate and never counted.
// caller_request: a request that travels to the reply channel, for the
// receiver's calling thread (send_request_to_caller).
enum class message_kind : std::uint8_t {
  request = 1,
  one_way = 2,
  reply = 3,
  warm_up = 4,
  warm_up_reply = 5,
  caller_request = 6
};

struct wire_header {
  message_kind kind;
  // [0]: the backend's own (the UCX tag path marks an announcement);
  // [1]: unrung_flag for a message sent without a ring, uncounted_flag for
  // one the counters leave out.
  std::uint8_t reserved[3];
  std::int32_t origin;     // the process waiting for the reply
  std::int32_t sender;     // the process that sent this message
  std::uint32_t sequence;  // the origin's request number
};
static_assert(sizeof(wire_header) == 16);
// wire_header.reserved[1] of a one-way message sent unrung
// (send_one_way_unrung): its receiver expects no ring for it.
constexpr std::uint8_t unrung_flag = 1;
// wire_header.reserved[1] of a request or reply that counters() leaves out
// on both sides (send_request_uncounted, reply_uncounted).
constexpr std::uint8_t uncounted_flag = 2;

// Where a reply goes; may be kept and used later from either thread.
struct reply_token {
  std::int32_t origin = -1;
  std::uint32_t sequence = 0;
};

// A request as the handler sees it; payload is valid until it returns.
struct incoming_request {
  int origin;
  int sender;
  std::uint32_t sequence;
  bool one_way;
  byte_span payload;
  reply_token token() const { return {origin, sequence}; }
};

// Traffic counts.  Each thread keeps its own (no atomic read-modify-write
// on the data path); counters() adds them up.
struct transport_counters {
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t service_wakeups = 0;  // times the service thread slept and woke
  // Times it woke and found its caller holding the request channel, and
  // so slept again.
  std::uint64_t service_held_wakeups = 0;
  std::uint64_t nudges = 0;  // signals to another process's caller to yield (nudge_peers)
};

// Receive-buffer memory a backend preposts for a job of n processes.
struct buffer_footprint {
  std::size_t request_bytes;  // request channel
  std::size_t reply_bytes;    // reply channel
  std::size_t total() const { return request_bytes + reply_bytes; }
};

class transport;

// A reply's payload.  Where the backend can lend the buffer it received a
// reply in (UCX active messages, see ucx_transport::lend_minimum), the
// bytes stay there, uncopied, until the holder lets go: reset(), a move
// onto it, or its destruction, on the calling thread while the transport
// lives.  Otherwise, and for a reply a process gives itself, the bytes are
// its own.  Lent or not, they stay where they are until then: a reply's
// parts may be pointed into.
class reply_payload {
 public:
  reply_payload() = default;
  reply_payload(reply_payload&& other) noexcept { *this = std::move(other); }
  reply_payload& operator=(reply_payload&& other) noexcept;
  reply_payload(const reply_payload&) = delete;
  reply_payload& operator=(const reply_payload&) = delete;
  ~reply_payload() { reset(); }

  byte_span bytes() const { return lender_ != nullptr ? byte_span(lent_) : byte_span(owned_); }
  // The same bytes, the holder's to change until it lets go.
  std::span<std::byte> writable_bytes() {
    return lender_ != nullptr ? lent_ : std::span<std::byte>(owned_);
  }
  const std::byte* data() const { return bytes().data(); }
  std::size_t size() const { return bytes().size(); }
  bool empty() const { return size() == 0; }
  // Whether the bytes are in a backend's buffer.
  bool lent() const { return lender_ != nullptr; }
  // Gives a lent buffer back, or empties the bytes of its own.
  void reset();
  // The bytes into a vector (copied if lent), this emptied.
  void move_into(std::vector<std::byte>& into);

 private:
  friend class transport;
  std::vector<std::byte> owned_;
  std::span<std::byte> lent_;
  transport* lender_ = nullptr;
  void* handle_ = nullptr;
};

class transport {
 public:
  using request_handler = std::function<void(const incoming_request&)>;
  using parts = std::initializer_list<byte_span>;

  // Creates the configured backend and connects it to every process of the
  // job (uses job.allgather twice), once every process has the same
  // backend, data path and largest message, and the same values of the
  // settings in also (job.agree).
  static result<std::unique_ptr<transport>> create(job& owner, const substrate_config& config,
                                                   const job::settings_list& also = {});
  virtual ~transport();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const substrate_config& config() const { return config_; }
  job& owner() const { return job_; }
  transport_counters counters() const;
  // "ucx/am (posix, sysv, cma)" and the like.
  virtual std::string describe() const = 0;
  virtual buffer_footprint footprint(int nprocs) const = 0;

  // Starts the service thread; handler runs on it (or on a waiting caller)
  // for every request.
  status start(request_handler handler);
  // Stops and joins the service thread.
  void stop();
  // True on a thread that owns the request channel now (handlers run there).
  static bool serving_requests();
  // True on a service thread; every other thread that uses a transport is
  // its calling thread, the owner of the reply channel.
  static bool on_service_thread();
  // True on a thread that holds the request channel, serving requests or
  // not (a waiting caller keeps it between looks, and may run handlers of
  // requests to the caller meanwhile).
  static bool holds_request_channel();
  // A backend that takes requests in out of the kernel without handling
  // them, on a thread that holds the channel but does not serve now, says
  // so: the thread handles them before it hands the channel back.
  static void took_in_requests();

  // Calling thread, once every process has started its service thread:
  // opens a connection to every process's both channels and sends each
  // size of message up to TMK_WARM_UP to the next process and back, so
  // that a program's first exchanges do not pay for opening them and for
  // memory touched the first time (BENCHMARKS.md).  None of it is counted.
  status warm_up();
  // Calling thread: sends a request; the reply is matched by the id.
  result<request_id> send_request(int peer, parts payload);
  // Calling thread: a request that the peer's calling thread handles, in
  // its next wait for a reply (at once if it waits now), instead of its
  // service thread: for a request nobody can answer before the peer itself
  // asks for something, as a barrier's manager answers arrivals only once
  // it has arrived.  It wakes no thread in a peer that computes (a woken
  // service thread takes a core from a process, or from this one, at its
  // barrier).  The handler runs on that thread as on the service thread,
  // and may reply at once or keep the token.  Not to this process itself.
  result<request_id> send_request_to_caller(int peer, parts payload);
  // Calling thread: send_request, but counters() leaves the request and its
  // reply (reply_uncounted) out on both sides: a question about the job
  // itself (the runtime's deadlock check), not the program's traffic.  Not
  // to this process itself.
  result<request_id> send_request_uncounted(int peer, parts payload);
  // Calling thread: an id for a request to this process that the caller
  // hands to the request handler itself instead of sending; the reply
  // comes as any reply to this process's own request does.
  result<request_id> expect_reply_here();
  // Either thread: a request that gets no reply.
  status send_one_way(int peer, parts payload);
  // The same for a message its receiver needs only once it waits for it
  // (a barrier's pushed diffs): no doorbell is rung, so that a receiver
  // still computing is not interrupted; it takes the message in at its
  // next look at its requests, its wait's if not before.  A message that
  // cannot go out at once (more than a shared-memory segment, or no room
  // yet in the receiver's ring) rings while it waits, as any send must.
  status send_one_way_unrung(int peer, parts payload);
  // Calling thread: waits for the reply to id and hands its payload to
  // reply, lent where the backend lends (what reply held before is let go
  // as the wait begins).
  // Ends with peer_lost if a process is lost meanwhile.
  status wait_reply(request_id id, reply_payload& reply);
  // The same, the payload copied into a vector if it was lent.
  status wait_reply(request_id id, std::vector<std::byte>& reply);
  // Waits for several replies at once (sent to different peers).
  status wait_replies(std::span<const request_id> ids, std::span<reply_payload> replies);
  status wait_replies(std::span<const request_id> ids, std::span<std::vector<std::byte>> replies);
  // Calling thread: wait_reply, but it ends with status_code::interrupted,
  // the request still outstanding (wait for it again later), once
  // interrupt_wait() has been called, during the wait or since the last
  // wait it ended; and with status_code::timeout, the request still
  // outstanding as well, once the wait has lasted patience.
  status wait_reply_interruptible(
      request_id id, reply_payload& reply,
      std::chrono::steady_clock::duration patience = std::chrono::steady_clock::duration::max());
  // Either thread: ends the calling thread's interruptible wait, the one
  // under way or the next.
  void interrupt_wait();
  // Calling thread: waits until every message it sent has left its buffers.
  status flush();
  // Calling thread: it is about to wait outside the substrate (or is done
  // with it), so its core is free for the service thread.
  void set_caller_idle(bool idle);
  // Calling thread, between waits and holding no lock of the layer above:
  // serves the requests that have come to this process if its service
  // thread has been rung for them and has not run yet; true if it served
  // any.  With doorbells only (see transport.cc).
  bool serve_pending();

  // Either thread: replies to the origin of a request.
  status reply(const reply_token& to, parts payload);
  // The same with a payload of one buffer, which a reply to this process's
  // own request takes as it is, with no copy.
  status reply(const reply_token& to, std::vector<std::byte>&& payload);
  // The reply to a request sent with send_request_uncounted.
  status reply_uncounted(const reply_token& to, parts payload);
  // Inside a handler, on either thread: passes the request on to peer with
  // a new payload; peer replies to the original origin.
  status forward(const incoming_request& request, int peer, parts payload);

 protected:
  transport(job& owner, const substrate_config& config);

  enum class channel { request, reply };

  // --- what a backend supplies ---------------------------------------
  // Sends header+payload from the given channel (owned by the calling
  // thread) to peer's request or reply channel.
  virtual status post(channel from, int peer, channel to, const wire_header& header,
                      parts payload, std::size_t payload_length) = 0;
  // Makes progress on a channel; returns how many events were handled.
  // Requests that arrived are passed to deliver_request(), replies to
  // deliver_reply().
  virtual unsigned progress(channel which) = 0;
  // Prepares to sleep on a channel's event fd; false if events are pending.
  virtual bool arm(channel which) = 0;
  virtual int event_fd(channel which) const = 0;
  // Waits until every send the calling thread's channel started completes.
  virtual status flush_channel(channel which) = 0;
  // flush_channel(channel::reply), or, on a caller holding the request
  // channel outside serving, owed to the end of its wait.
  status finish_or_owe();
  // Called on the service thread before it exits.
  virtual void service_thread_exit() {}
  // Whether this process rings doorbells and sleeps on its own (see ring):
  // the backend's decision, the same in every process of the job.
  virtual bool supports_doorbell() const { return false; }
  // Nothing on the channel needs its owner's progress before it sleeps
  // (a send still going out moves only with it).
  virtual bool settled(channel) const { return true; }
  // Whether the request channel's event fd turns ready for every request
  // that comes, armed or not (kernel sockets), rather than only once armed
  // (UCX): a caller that takes the channel then mutes the service thread
  // in every wait (see serve_while_waiting).
  virtual bool signals_unarmed() const { return false; }
  // Receive buffers a channel cycles through, each filled by whichever
  // sender's message comes next, and the message size that fills one:
  // warm_up() sends every other process that many of that size, so that
  // each sender has touched each of them before the program starts (a
  // page of another process's buffers costs a fault the first time, tens
  // of microseconds on the machine of BENCHMARKS.md).  None by default.
  struct receive_ring {
    std::size_t depth = 0;
    std::size_t message_bytes = 0;
  };
  virtual receive_ring receive_ring_shape() const { return {}; }

  // --- what a backend calls ------------------------------------------
  // A request arrived on the request channel (service thread): runs the
  // handler at once.  payload needs to stay valid only until this returns.
  // Handlers never make progress on the request channel themselves, so a
  // backend may call this from inside its progress call.
  void deliver_request(const wire_header& header, byte_span payload);
  // A reply (or a caller_request) arrived on the reply channel: where its
  // payload goes, or null if nobody waits for it (logged and dropped).
  std::vector<std::byte>* reply_destination(const wire_header& header, std::size_t length);
  // The reply's payload is in place.
  void reply_complete(const wire_header& header);
  // A reply received whole to a request this process waits for, copied
  // into its slot: reply_destination, the copy and reply_complete in one
  // look-up.  False, nothing done, for anything else.
  bool take_reply(const wire_header& header, byte_span payload);
  // Calling thread: a reply received whole in a buffer of the backend's,
  // which the backend lends until release_lent(handle) (called on this
  // thread): true if it is kept so, as the payload of the request it
  // answers (and complete); false if nobody waits for it or it is not a
  // reply, to be received through reply_destination instead.
  bool lend_reply(const wire_header& header, std::span<std::byte> payload, void* handle);
  // Gives back a buffer lent by lend_reply.
  virtual void release_lent(void* /*handle*/) {}
  // Gives back the buffers lent to requests nobody waited for: called by a
  // lending backend before it closes its channels.
  void release_all_lent();
  status check_size(int peer, std::size_t payload_length) const {
    if (peer >= 0 && peer < size_ && payload_length <= config_.max_message) return status::ok();
    return size_failure(peer, payload_length);
  }
  status size_failure(int peer, std::size_t payload_length) const;
  // A reply to a request of this process's own caller: straight into the
  // waiting slot, no message.
  status reply_here(std::uint32_t sequence, parts payload);
  status reply_here(std::uint32_t sequence, std::vector<std::byte>&& payload);
  // send_request and reply with a message kind of the substrate's own.
  result<request_id> send_request(message_kind kind, int peer, parts payload,
                                  bool counted = true);
  status reply(message_kind kind, const reply_token& to, parts payload, bool counted = true);
  // A warm_up message (service thread): passed on or answered.
  void answer_warm_up(const wire_header& header, byte_span payload);
  // With doorbells: after a message to peer's request channel is in (and
  // again while one is still going out, its last part may follow a sleep),
  // wakes peer's service thread if it sleeps and no caller there polls.
  void ring(int peer);
  bool doorbells() const { return doorbells_; }
  // No more processes of this job on this host than cores.
  bool core_per_process() const { return core_per_process_; }
  // Rings held back: see send.
  struct owed_ring {
    int peer;
    request_id id;
    std::chrono::steady_clock::time_point due;
  };
  // Rings those owed for requests not answered yet: all of them, or those
  // due by now.  Calling thread only.
  void ring_owed(bool all, std::chrono::steady_clock::time_point now = {});
  // Holds back the ring for request id to peer, if peer's service thread
  // sleeps and no caller there polls.
  void owe_ring(int peer, request_id id);

  job& job_;
  substrate_config config_;
  int rank_;
  int size_;

 private:
  // Requests the calling thread has outstanding: a fixed table, the slot
  // index in the low bits of the request id, payload buffers reused.
  static constexpr std::uint32_t slot_bits = 12;
  static constexpr std::uint32_t max_outstanding = 1u << slot_bits;
  struct pending_reply {
    request_id id = 0;
    // Set by the caller thread (a reply through the reply channel) or by
    // either thread (a reply to this process's own request, reply_here).
    std::atomic<bool> done{false};
    // Filled by this process's own handler (expect_reply_here: a request to
    // itself, or what another process sends unasked, such as a barrier's
    // pushed diffs): its wait serves requests as often as a barrier's does.
    bool here = false;
    int peer = -1;  // where the request went (send_request), for nudge_peers
    std::vector<std::byte> payload;
    // Instead of payload: a buffer the backend lends (calling thread only).
    std::span<std::byte> lent;
    void* lent_handle = nullptr;
  };
  // Counters of one thread, read (not written) by others.
  struct thread_counters {
    std::atomic<std::uint64_t> messages_sent{0};
    std::atomic<std::uint64_t> bytes_sent{0};
    std::atomic<std::uint64_t> messages_received{0};
    std::atomic<std::uint64_t> bytes_received{0};
  };

  void service_loop();
  pending_reply* find_pending(request_id id);
  // The slot of the request a reply answers, or null (logged) if nobody
  // waits for it.
  pending_reply* waiting_slot(const wire_header& header);
  // The same for reply_here: the slot of this process's own request, or
  // null (logged).
  pending_reply* slot_to_fill(std::uint32_t sequence);
  // reply_here's payload is in the slot: its caller may take it.
  void filled(pending_reply& slot);
  // The slot's reply, of length bytes, is in place: done, and counted.
  void finish_reply(pending_reply& slot, const wire_header& header, std::size_t length);
  // Hands a waited-for slot's payload over and frees the slot.
  void hand_over(pending_reply& slot, reply_payload& reply);
  friend class reply_payload;
  result<request_id> take_slot(bool here = false);  // here: pending_reply::here
  void release_pending(pending_reply& slot);
  // Gives the backend back the buffer a slot holds, if it holds one.
  void give_back_lent(pending_reply& slot);
  status wait_until_done(
      std::span<const request_id> ids, bool interruptible = false,
      std::chrono::steady_clock::duration patience = std::chrono::steady_clock::duration::max());
  status send(channel from, int peer, channel to, message_kind kind, int origin,
              std::uint32_t sequence, parts payload, bool rung = true, bool counted = true);
  // send() from the channel this thread owns now, finished before it
  // returns when that is the caller's channel.
  status send_and_finish(int peer, channel to, message_kind kind, int origin,
                         std::uint32_t sequence, parts payload, bool counted = true);
  static void count(std::atomic<std::uint64_t>& counter, std::uint64_t amount) {
    counter.store(counter.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  }

  // A caller spinning in a wait takes the request channel while the
  // service thread sleeps, serves the requests that come and holds it until
  // it stops spinning (see wait_until_done).
  struct channel_hold {
    std::unique_lock<std::mutex> own;
    bool muted = false;   // the service thread does not listen to the channel
    bool served = false;  // events handled since the service thread armed the channel
  };
  // Takes the channel if it is free and serves what has come; true if it
  // handled any.  Taking it, the caller mutes the service thread (stops its
  // sleep listening to the channel), so that a request that comes wakes
  // nobody, if its last wait served a request, the host's processes
  // outnumber its cores, or the channel signals unarmed (mute_on_hold_):
  // muting and listening again cost two system calls, wasted in a wait
  // that gets no request.
  bool serve_while_waiting(channel_hold& hold);
  // Runs the handler for each caller_request received whole, in the order
  // they began to arrive; true if it ran any.
  bool serve_caller_requests();
  // The oldest caller_request is received whole (they are handled in order).
  bool caller_request_ready() const {
    return !caller_requests_.empty() && caller_requests_.front().done;
  }
  // Lets go of the channel, armed, the service thread listening to it or
  // woken to take it back.
  void hand_back(channel_hold& hold);
  // Whether the service thread's sleep listens to the request channel's
  // event fd (once: epoll's one-shot mode) besides wake_fd_.
  void listen_for_requests(bool listen);

  // A process's doorbell, in its line of job::shared_line.
  // Plain words in the zeroed mapping, accessed through std::atomic_ref.
  struct doorbell {
    std::uint32_t rings;   // the futex word: one more per ring
    std::uint32_t asleep;  // the service thread sleeps on rings
    std::uint32_t polled;  // a spinning caller holds the channel
    std::uint32_t unused;
    std::uint64_t left_wait_ns;  // when the caller last left a wait (steady clock, ns)
    std::int32_t caller_pid;      // where a nudge goes (nudge_peers), or 0: none
    std::int32_t caller_tid;      // the calling thread there
    std::uint32_t caller_asleep;  // the caller sleeps (set_caller_idle): its core is free
    // Messages sent with a ring to this process's request channel, counted
    // by their senders before they send them (see sleep_on_doorbell).
    std::uint64_t rung_in;
  };
  doorbell& bell_of(int of_rank) const { return *bells_[static_cast<std::size_t>(of_rank)]; }
  // Every process's doorbell, from start() on where doorbells ring.
  std::vector<doorbell*> bells_;
  using word = std::atomic_ref<std::uint32_t>;
  // The service thread's sleep with doorbells: marked asleep, one last
  // look at the channel, then the futex until a ring, a stop or a second
  // (or less while messages counted in have not come: behind_sleep_).
  void sleep_on_doorbell(std::unique_lock<std::mutex>& own);
  // Counts a ring and wakes the thread asleep on it, if any.
  static void wake(doorbell& bell);
  // Messages counted in to this process's request channel (doorbell
  // rung_in) and not delivered yet: more than 0 when one has not come.
  // With doorbells only.
  std::int64_t undelivered() const {
    std::uint64_t in = std::atomic_ref<std::uint64_t>(own_bell_->rung_in).load();
    return static_cast<std::int64_t>(in - rung_delivered_.load(std::memory_order_relaxed));
  }
  // Calling thread, in a wait that has lasted TMK_NUDGE_US: signals the
  // calling thread of each process the wait's unanswered requests went to
  // whose service thread may be waiting for that thread's core, to yield it.
  void nudge_peers(std::span<const request_id> ids);
  // This process's caller takes nudges (start() to stop()).
  void publish_caller(bool taking);
  // Whether the kernel has peer's calling thread running or waiting for
  // a core (state R), not asleep in a system call.
  bool caller_runs(int peer, std::int32_t pid, std::int32_t tid);
  // Calling thread only: per peer, an open /proc stat file of its calling
  // thread, -1 before the first look, -2 if it cannot be read.
  std::vector<int> caller_stat_fds_;
  bool doorbells_ = false;

  request_handler handler_;
  // Handlers running, for the job's watchdog (stuck_handler): each count
  // is odd while a handler runs, raised at its start and at its end.  [0]
  // by the thread that holds the request channel, [1] by the calling
  // thread (requests to it); one writer each, so a load and a store.
  struct handler_runs {
    std::atomic<std::uint64_t> count{0};
    std::atomic<int> origin{-1};
  };
  class handling_scope;
  handler_runs handling_[2];
  // The monitor thread's last look at each count, and since when it is.
  std::uint64_t watched_count_[2] = {0, 0};
  steady_time watched_since_[2]{};
  std::string stuck_handler(steady_time now, double limit_seconds);
  std::thread service_;
  std::mutex request_lock_;  // ownership of the request channel
  std::atomic<bool> stopping_{false};
  // Set while the calling thread sleeps in a wait: its core is free, and
  // the service thread may spin there instead of sleeping.
  std::atomic<bool> caller_asleep_{false};
  // Set when the service thread has answered its own caller, who needs
  // the core back.
  std::atomic<bool> caller_woken_{false};
  // TMK_NOTIFY=poll: set while the calling thread spins in a wait and
  // found the request channel held by the service thread, which then,
  // once it lets go between polls, leaves the channel to the caller
  // instead of taking it back (service_loop).  Cleared when the caller
  // takes the channel, sleeps or leaves the wait.
  std::atomic<bool> caller_asks_channel_{false};
  // Set by interrupt_wait(), cleared by the interruptible wait it ends.
  std::atomic<bool> interrupt_{false};
  // No more processes of this job on this host than cores: a waiting
  // process's core is its own to spin on.
  bool core_per_process_ = true;
  int wake_fd_ = -1;  // stop() and hand_back() wake the service thread
  // Where the service thread sleeps: wake_fd_ and, one-shot, the request
  // channel's event fd.
  int service_epoll_ = -1;
  bool mute_on_hold_ = false;  // calling thread only
  // The service thread woke for a request while a spinning caller held the
  // channel (before the caller stopped its listening), and sleeps again:
  // the caller arms the channel for it when it lets go, or wakes it
  // through wake_fd_ (hand_back).
  std::atomic<bool> service_deaf_{false};
  std::atomic<bool> nudged_{false};  // hand_back wrote wake_fd_
  // Wakes the caller blocked in a wait when a reply was made here.
  int caller_wake_fd_ = -1;
  // caller_requests received (or being received) on the reply channel,
  // and payload buffers to reuse for the next: calling thread only.
  struct caller_request {
    wire_header header;
    std::vector<std::byte> payload;
    bool done = false;
  };
  std::deque<caller_request> caller_requests_;
  std::vector<std::vector<std::byte>> spare_payloads_;
  std::vector<pending_reply> pending_;
  std::vector<std::uint32_t> free_slots_;
  std::uint32_t next_generation_ = 1;
  thread_counters caller_counters_;
  thread_counters service_counters_;
  std::atomic<std::uint64_t> service_wakeups_{0};
  std::atomic<std::uint64_t> service_held_wakeups_{0};
  std::atomic<std::uint64_t> nudges_{0};  // sent by the calling thread
  // The last message delivered here that was sent with a ring (every
  // request, and every one-way message but those sent unrung) and how many
  // have been, by whichever thread holds the request channel (under
  // request_lock_; read by the service thread at its sleep's end without
  // it): set against the doorbell's rung_in (sleep_on_doorbell).
  wire_header last_rung_{};
  std::atomic<std::uint64_t> rung_delivered_{0};
  // How long the service thread sleeps while messages counted in have not
  // come (sleep_on_doorbell): twice as long each time, up to a second.
  std::chrono::microseconds behind_sleep_{0};
  // Rings held back (see send).
  std::chrono::microseconds ring_delay_{0};
  std::vector<owed_ring> owed_rings_;  // calling thread only
  doorbell* own_bell_ = nullptr;       // with doorbells
};

}  // namespace tmk
