// lock.cc — distributed locks and the condition variables attached to them.
//
// Each lock has a manager (id % n) that remembers the last requester (the
// tail of the lock's distributed queue) and forwards each request to it.
// The tail grants at once if it holds the token and does not use the lock,
// otherwise it remembers the requester as its successor and grants at its
// release.  A grant carries the intervals the acquirer lacks, and the
// granter's diffs of pages the acquirer has been reading.  A process
// that holds the token takes the lock again with no message.  Cost of a
// remote acquire: 2 messages when the manager holds the token, 3 otherwise.
//
// Condition variables live at the lock's manager: a waiter joins the queue
// (acknowledged, before it releases the lock, so that no signal is lost),
// releases the lock, asks to be woken, and acquires the lock again.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>

#include "log.h"
#include "node.h"
#include "thread_scratch.h"

namespace tmk {

namespace {
// The most diff bytes a grant carries: a grant is on the acquirer's
// critical path, and a page left out costs it a fault as before.
constexpr std::size_t max_grant_push_bytes = 64 * 1024;
// Other processes' diffs kept to go on with grants (keep_received).
constexpr std::size_t max_received_bytes = 4 << 20;
}  // namespace

node::lock_state& node::lock_of(std::uint32_t id) {
  lock_state* state;
  if (id < near_lock_ids) {
    state = &locks_.at(id);
  } else {
    auto& slot = far_locks_[id];
    if (!slot) slot = std::make_unique<lock_state>();
    state = slot.get();
  }
  if (!state->started) {
    // Every lock starts free, its token at its manager.
    state->started = true;
    if (static_cast<int>(id % static_cast<std::uint32_t>(nprocs_)) == rank_) {
      state->token = true;
      state->tail = rank_;
    }
  }
  return *state;
}

void node::check_lock_id(const char* call, unsigned id, const char* kind) {
  if (id >= config_.max_locks)
    fail(call, std::string(kind) + " id " + std::to_string(id) +
                   " is out of range: ids go from 0 to " + std::to_string(config_.max_locks - 1) +
                   " (TMK_MAX_LOCKS)");
}

// Under mutex_: the grant carries the intervals the acquirer lacks and,
// as a barrier departure does, this process's diffs of the pages the
// acquirer has been fetching from it lately (see push_to_acquirer).
// Written into memory this thread keeps for its grants: no allocation.
message_writer& node::make_grant(std::uint32_t id, const vector_time& requester_time,
                                 int requester) {
  thread_local thread_scratch<message_writer> grant_kept;
  message_writer& grant = grant_kept.get(message_type::lock_grant);
  grant.restart(message_type::lock_grant);
  grant.put<std::uint32_t>(id);
  // The intervals in what the pushes leave (the rest asked for after).
  std::size_t room = message_limit_ - message_overhead - grant_push_budget() - 1 - 4 -
                     intervals_mark_bytes() - 4;
  if (!put_intervals(grant, requester_time, time_, room))
    protocol_failure("lock " + std::to_string(id) + ": an interval the acquirer lacks is gone");
  push_to_acquirer(grant, requester, requester_time);
  return grant;
}

// Under mutex_: data that migrates under a lock (a shared sum, a work
// queue) is read by each acquirer in turn, and the grant's notices
// would invalidate the acquirer's copy: a fault, a round trip for the diff
// and, on the machine of BENCHMARKS.md, an mprotect of 7-50 us each way.
// The diffs of this process's pages that the acquirer has read lately (a
// diff request made it a reader: subscribe) go with the grant instead, in
// the departure's form, and apply_pushed brings its copy up to date in
// place when they are all it lacks.  Only diffs of intervals the acquirer
// has not heard of, at most max_grant_push_bytes in all.
//
// With the other writers' diffs applied here lately (keep_received): a
// lock passed around three or more processes in turn leaves the acquirer
// lacking the writes of each holder since its own, of which this process,
// the last, has its own diffs, and the others' it was sent.  Without
// them every acquire of such data faulted and asked each of those holders
// for its diff (3 processes adding to a sum under one lock, 10,000 times
// each: a fault and 2 diff requests at nearly every acquire).
void node::push_to_acquirer(message_writer& grant, int acquirer, const vector_time& acquirer_time) {
  std::uint32_t count = 0;
  std::size_t count_offset = grant.size();
  grant.reserve(sizeof count);
  std::size_t budget = grant_push_budget();
  // Of each writer's diffs kept, those of intervals the acquirer has not
  // heard of, and else the last: it may have heard of an interval without
  // applying its diff (a page it has not read since), and then lacks it
  // all the same (it skips one it has applied).
  auto unseen_received = [&](const forwarded_diff& diff) {
    return diff.writer != acquirer &&
           (diff.last > acquirer_time[static_cast<std::size_t>(diff.writer)] || diff.latest);
  };
  if (acquirer != rank_)
    for (std::uint32_t page : subscribed_) {
      page_extra* entry = extras_.find(page);
      if (entry == nullptr || std::none_of(entry->readers.begin(), entry->readers.end(),
                                           [&](const page_reader& r) {
                                             return r.process == acquirer && r.until > barriers_done_;
                                           }))
        continue;
      if (entry->twin != nullptr && entry->twin_start <= time_[rank_]) seal_while_writable(page, *entry);
      // A page's diffs all or none: the acquirer applies none of a part.
      std::span<const sealed_diff> unseen = diffs_between(entry->diffs, acquirer_time[rank_], UINT32_MAX);
      std::size_t bytes = 0;
      for (const auto& diff : unseen) bytes += diff.bytes.size() + pushed_entry_bytes;
      for (const auto& diff : entry->received)
        if (unseen_received(diff)) bytes += diff.bytes.size() + pushed_entry_bytes;
      if (bytes > budget) continue;
      budget -= bytes;
      for (const auto& diff : unseen) {
        put_pushed(grant, page, diff);
        ++count;
      }
      for (const auto& diff : entry->received)
        if (unseen_received(diff)) {
          put_pushed(grant, diff.writer, page, diff.first, diff.last, diff.bytes);
          ++count;
        }
    }
  memcpy(grant.data() + count_offset, &count, sizeof count);
}

// Under mutex_: another process's diff of a page, just applied to the copy
// here, kept for this process's grants (push_to_acquirer) if some process
// reads the page from this one; the last two of each writer, of the pages
// that have readers, and no more than max_received_bytes in all until a
// collection frees them.
void node::keep_received(page_extra& entry, std::int32_t writer, std::uint32_t first,
                         std::uint32_t last, std::span<const std::byte> bytes) {
  if (entry.readers.empty() || received_bytes_ + bytes.size() > max_received_bytes) return;
  auto& kept = entry.received;
  auto of_writer = [&](const forwarded_diff& d) { return d.writer == writer; };
  auto previous = std::find_if(kept.begin(), kept.end(), of_writer);
  if (previous != kept.end() && !previous->latest) {  // two kept: the older goes
    received_bytes_ -= previous->bytes.size();
    kept.erase(previous);
    previous = std::find_if(kept.begin(), kept.end(), of_writer);
  }
  if (previous != kept.end()) previous->latest = false;
  kept.push_back({writer, first, last, std::vector<std::byte>(bytes.begin(), bytes.end()), true});
  received_bytes_ += bytes.size();
}

// Half the largest message at most, the rest for the grant's intervals.
std::size_t node::grant_push_budget() const { return std::min(max_grant_push_bytes, message_limit_ / 2); }

// The lock Tmk_malloc and Tmk_free take: an id past every user lock that
// process 0 manages.
std::uint32_t node::heap_lock() const {
  auto n = static_cast<std::uint32_t>(nprocs_);
  return (config_.max_locks + n - 1) / n * n;
}

void node::lock_acquire(unsigned id) {
  check_lock_id("Tmk_lock_acquire", id);
  counters_.acquires.fetch_add(1, std::memory_order_relaxed);
  acquire(id);
}

void node::acquire(std::uint32_t id) {
  if (nprocs_ == 1) {
    std::lock_guard lock(mutex_);
    lock_state& state = lock_of(id);
    if (state.held) fail("Tmk_lock_acquire", "lock " + std::to_string(id) + " is already held by this process");
    state.held = true;
    return;
  }
  collect_if_called();
  std::unique_lock lock(mutex_);
  lock_state& state = lock_of(id);
  if (state.held)
    fail("Tmk_lock_acquire", "lock " + std::to_string(id) + " is already held by this process");
  if (state.token && !state.waiting) {
    state.held = true;
    return;
  }
  state.waiting = true;
  // The calling thread's alone, and used up once the request is out.
  message_writer& request = lock_request_writer_;
  request.restart(message_type::lock_acquire);
  request.put<std::uint32_t>(id);
  request.put<std::uint8_t>(0);  // to the manager
  request.put_array(time_);
  int manager = static_cast<int>(id % static_cast<unsigned>(nprocs_));
  // Named in place: "Tmk_lock_acquire(N)" is past a std::string's own
  // room, and a heap string here was an allocation in every acquire.
  static constexpr std::string_view call = "Tmk_lock_acquire(";
  char name[call.size() + 12];
  call.copy(name, call.size());
  char* end = std::to_chars(name + call.size(), name + sizeof name - 1, id).ptr;
  *end++ = ')';
  std::string_view what(name, static_cast<std::size_t>(end - name));
  lock.unlock();
  reply_payload& answer = grant_;
  await_synchronization(send_request(manager, request, what), what, answer, wait_kind::lock, id);
  lock.lock();
  message_reader reader(answer.bytes());
  if (reader.type() != message_type::lock_grant || reader.take<std::uint32_t>() != id)
    protocol_failure(std::string(what) + ": malformed grant");
  std::vector<interval_record> records;
  if (!read_intervals(reader, records, lock, what))
    protocol_failure(std::string(what) + ": malformed intervals in the grant");
  close_interval();
  std::vector<std::uint32_t> still_mapped;
  if (!incorporate(records, &still_mapped))
    protocol_failure(std::string(what) + ": malformed intervals in the grant");
  std::vector<std::vector<std::uint32_t>> unread = apply_pushed(&reader, still_mapped, false);
  answer.reset();  // a lent buffer goes back now, not at the next acquire
  state.waiting = false;
  state.token = true;
  state.held = true;
  if (id != heap_lock()) counters_.remote_acquires.fetch_add(1, std::memory_order_relaxed);
  bool ask = collection_wanted();
  lock.unlock();
  stop_pushes(unread);
  if (ask) request_collection();
}

void node::lock_release(unsigned id) {
  check_lock_id("Tmk_lock_release", id);
  release(id);
}

void node::release(std::uint32_t id) {
  std::unique_lock lock(mutex_);
  lock_state& state = lock_of(id);
  if (!state.held)
    fail("Tmk_lock_release", "lock " + std::to_string(id) + " is not held by this process");
  state.held = false;
  if (nprocs_ == 1) return;
  close_interval();
  bool ask = collection_wanted();
  if (state.has_successor) {
    const message_writer& grant = make_grant(id, state.successor_time, state.successor.origin);
    reply_token successor = state.successor;
    state.has_successor = false;
    state.token = false;
    lock.unlock();
    reply(successor, grant);
  } else {
    lock.unlock();
  }
  if (ask) request_collection();
  collect_if_called();
}

void node::handle_lock_request(const incoming_request& request, message_reader& reader) {
  std::uint32_t id = reader.take<std::uint32_t>();
  std::uint8_t forwarded = reader.take<std::uint8_t>();
  // Kept by the thread that handles the request (no handler runs inside
  // another on one thread): no allocation for it in every acquire.
  thread_local thread_scratch<vector_time> requester_time_kept;
  vector_time& requester_time = requester_time_kept.get();
  requester_time.assign(static_cast<std::size_t>(nprocs_), 0);
  for (auto& entry : requester_time) reader.get(entry);
  if (!reader.ok() || (id >= config_.max_locks && id != heap_lock()))
    return reject(request, "malformed lock request");
  std::unique_lock lock(mutex_);
  if (!forwarded) {
    if (static_cast<int>(id % static_cast<std::uint32_t>(nprocs_)) != rank_)
      return reject(request, "lock request sent to a process that does not manage it");
    lock_state& managed = lock_of(id);
    int previous = managed.tail;
    managed.tail = request.origin;
    if (previous == request.origin)
      return reject(request, "lock " + std::to_string(id) + " requested twice by process " +
                                 std::to_string(request.origin));
    if (previous != rank_) {
      thread_local thread_scratch<message_writer> onward_kept;
      message_writer& onward = onward_kept.get(message_type::lock_acquire);
      onward.restart(message_type::lock_acquire);
      onward.put<std::uint32_t>(id);
      onward.put<std::uint8_t>(1);
      onward.put_array(requester_time);
      // Sent with mutex_ let go.  Handled in place (this process's own
      // acquire), the send is the calling thread's, which waits for room in
      // previous's FIFO; holding mutex_ meanwhile would keep this process's
      // service thread from emptying its own FIFO, and two processes doing
      // so towards each other could wait for ever.  Nothing here needs the
      // lock any more: the tail is this request's origin, so no later
      // request of this lock goes to previous before this one is granted.
      lock.unlock();
      status sent = link_->forward(request, previous, {onward.bytes()});
      if (!sent) TMK_LOG(error, "forwarding a lock request: %s", sent.message().c_str());
      return;
    }
  }
  serve_lock_request(request, id, requester_time);
}

// At the last requester (under mutex_): grant now if the lock is idle
// here, else remember the requester for the release.
void node::serve_lock_request(const incoming_request& request, std::uint32_t id,
                              const vector_time& requester_time) {
  lock_state& state = lock_of(id);
  if (state.token && !state.held && !state.waiting) {
    state.token = false;
    reply(request.token(), make_grant(id, requester_time, request.origin));
    return;
  }
  if (state.has_successor)
    return reject(request, "lock " + std::to_string(id) + " has two successors at process " +
                               std::to_string(rank_));
  state.has_successor = true;
  state.successor = request.token();
  state.successor_time = requester_time;
}

void node::cond_wait(unsigned lock_id, unsigned cond_id) {
  check_lock_id("Tmk_lock_cond_wait", lock_id);
  check_lock_id("Tmk_lock_cond_wait", cond_id, "condition");
  {
    std::lock_guard lock(mutex_);
    if (!lock_of(lock_id).held)
      fail("Tmk_lock_cond_wait", "lock " + std::to_string(lock_id) + " is not held by this process");
  }
  int manager = static_cast<int>(lock_id % static_cast<unsigned>(nprocs_));
  std::string what = "Tmk_lock_cond_wait(" + std::to_string(lock_id) + ", " + std::to_string(cond_id) + ")";
  message_writer enqueue(message_type::cond_enqueue);
  enqueue.put<std::uint32_t>(lock_id);
  enqueue.put<std::uint32_t>(cond_id);
  await(send_request(manager, enqueue, what), what);
  lock_release(lock_id);
  message_writer wait(message_type::cond_wait);
  wait.put<std::uint32_t>(lock_id);
  wait.put<std::uint32_t>(cond_id);
  reply_payload woken;
  await_synchronization(send_request(manager, wait, what), what, woken, wait_kind::cond, lock_id,
                        cond_id);
  lock_acquire(lock_id);
}

void node::cond_signal(unsigned lock_id, unsigned cond_id, bool broadcast) {
  const char* call = broadcast ? "Tmk_lock_cond_broadcast" : "Tmk_lock_cond_signal";
  check_lock_id(call, lock_id);
  check_lock_id(call, cond_id, "condition");
  {
    std::lock_guard lock(mutex_);
    if (!lock_of(lock_id).held)
      fail(call, "lock " + std::to_string(lock_id) + " is not held by this process");
  }
  int manager = static_cast<int>(lock_id % static_cast<unsigned>(nprocs_));
  message_writer signal(message_type::cond_signal);
  signal.put<std::uint32_t>(lock_id);
  signal.put<std::uint32_t>(cond_id);
  signal.put<std::uint8_t>(broadcast ? 1 : 0);
  std::string what = std::string(call) + "(" + std::to_string(lock_id) + ", " + std::to_string(cond_id) + ")";
  await(send_request(manager, signal, what), what);
}

void node::handle_cond(const incoming_request& request, message_type type, message_reader& reader) {
  std::uint32_t lock_id = reader.take<std::uint32_t>();
  std::uint32_t cond_id = reader.take<std::uint32_t>();
  std::uint8_t broadcast = type == message_type::cond_signal ? reader.take<std::uint8_t>() : 0;
  if (!reader.ok() || lock_id >= config_.max_locks || cond_id >= config_.max_locks ||
      static_cast<int>(lock_id % static_cast<std::uint32_t>(nprocs_)) != rank_)
    return reject(request, "malformed condition request");
  std::vector<reply_token> wake;
  {
    std::lock_guard lock(mutex_);
    auto& slot = conds_[(std::uint64_t{lock_id} << 32) | cond_id];
    if (!slot) slot = std::make_unique<cond_queue>();
    auto& waiters = slot->waiters;
    auto mine = std::find_if(waiters.begin(), waiters.end(), [&](const cond_queue::waiter& w) {
      return w.process == request.origin;
    });
    switch (type) {
      case message_type::cond_enqueue:
        if (mine != waiters.end()) return reject(request, "already waiting on this condition");
        waiters.push_back({request.origin});
        break;
      case message_type::cond_wait:
        if (mine == waiters.end()) return reject(request, "wait without joining the condition");
        if (mine->signalled) {
          waiters.erase(mine);
          break;
        }
        mine->asked = true;
        mine->token = request.token();
        return;
      default:
        for (auto it = waiters.begin(); it != waiters.end();) {
          if (it->signalled) {
            ++it;
            continue;
          }
          it->signalled = true;
          if (it->asked) {
            wake.push_back(it->token);
            it = waiters.erase(it);
          } else {
            ++it;
          }
          if (!broadcast) break;
        }
    }
  }
  for (const auto& token : wake) reply(token, message_writer(message_type::cond_reply));
  reply(request.token(), message_writer(message_type::cond_reply));
}

}  // namespace tmk
