// deadlock.cc — a job whose processes all wait for each other stops, with
// what each one waits for.
//
// Processes waiting at barriers of different ids are caught by process 0
// as their arrivals come (barrier.cc).  Waits that involve locks and
// conditions are not: a process waiting at a barrier with a lock that
// another waits for, two processes each waiting for the lock the other
// holds, a process that reaches Tmk_exit holding a lock, a condition wait
// that nobody is left to signal.  Every process is alive and answers, so
// nothing else ends such a job.
//
// Process 0, once it has waited for another process's call (a grant, a
// wake-up, a departure) for TMK_DEADLOCK_CHECK (a second), and as often
// after, asks every process what it waits for: the synchronisation wait
// its calling thread is in, if any (none while it computes, faults, serves
// or collects garbage), and the request that wait is for.  If every
// process waits, it asks again at once, naming every wait, and each
// process says which of those requests are parked with it: kept as a
// lock's successor, as a condition's waiter or as an arrival at a barrier,
// to be answered only by a call of the program's (a release, a signal, the
// last arrival).  A request on its way, or answered and not yet taken, is
// parked nowhere.  If every process is in the same wait in both rounds and
// every request is parked, each process stayed in its wait from the first
// round to the second, no answer was on its way, and an answer needs a
// call that only a process out of its wait could make: the job stops.  (A
// garbage collection takes the processes out of their waits and back, and
// answers none.)  Cost: a few stores in each wait; while process 0 waits
// that long, two questions to every process each time it looks, left out
// of Tmk_stat's counts.
#include <algorithm>
#include <atomic>
#include <string>

#include "log.h"
#include "node.h"

namespace tmk {

namespace {
// The serial's states: at rest, its fields being written, in a wait.
constexpr std::uint64_t serial_states = 4;
constexpr std::uint64_t serial_writing = 1;
constexpr std::uint64_t serial_waiting = 2;

bool waiting(std::uint64_t serial) { return serial % serial_states == serial_waiting; }
}  // namespace

// The calling thread: the only writer of sync_wait_.
void node::begin_sync_wait(wait_kind kind, std::uint32_t id, std::uint32_t cond,
                           request_id request) {
  std::uint64_t serial = sync_wait_.serial.load(std::memory_order_relaxed);
  sync_wait_.serial.store(serial + serial_writing, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  sync_wait_.kind.store(static_cast<std::uint32_t>(kind), std::memory_order_relaxed);
  sync_wait_.id.store(id, std::memory_order_relaxed);
  sync_wait_.cond.store(cond, std::memory_order_relaxed);
  sync_wait_.request.store(request, std::memory_order_relaxed);
  sync_wait_.serial.store(serial + serial_waiting, std::memory_order_release);
}

void node::end_sync_wait() {
  std::uint64_t serial = sync_wait_.serial.load(std::memory_order_relaxed);
  sync_wait_.serial.store(serial - serial % serial_states + serial_states,
                          std::memory_order_release);
}

// Under mutex_: whether process's request of wait is kept here until a
// call of the program's answers it.
bool node::parked_here(int process, const wait_snapshot& wait) {
  auto is_it = [&](const reply_token& token) {
    return token.origin == process && token.sequence == wait.request;
  };
  switch (static_cast<wait_kind>(wait.kind)) {
    case wait_kind::lock: {
      const lock_state& state = lock_of(wait.id);
      return state.has_successor && is_it(state.successor);
    }
    case wait_kind::cond: {
      auto found = conds_.find((std::uint64_t{wait.id} << 32) | wait.cond);
      if (found == conds_.end()) return false;
      return std::any_of(found->second->waiters.begin(), found->second->waiters.end(),
                         [&](const cond_queue::waiter& waiter) {
                           return waiter.process == process && waiter.asked &&
                                  is_it(waiter.token);
                         });
    }
    case wait_kind::barrier:
    case wait_kind::exit: {
      if (rank_ != 0) return false;
      auto found = barriers_.find(static_cast<wait_kind>(wait.kind) == wait_kind::exit
                                      ? exit_barrier
                                      : wait.id);
      if (found == barriers_.end()) return false;
      const barrier_episode& episode = *found->second;
      return episode.arrived[static_cast<std::size_t>(process)] &&
             is_it(episode.tokens[static_cast<std::size_t>(process)]);
    }
    case wait_kind::none: break;
  }
  return false;
}

// Either thread: this process's wait, and which of waits (one a process,
// by rank; none in a first round) are parked here.
node::wait_snapshot node::own_wait_snapshot(std::span<const wait_snapshot> waits) {
  wait_snapshot snapshot;
  std::uint64_t first = sync_wait_.serial.load(std::memory_order_acquire);
  snapshot.kind = sync_wait_.kind.load(std::memory_order_relaxed);
  snapshot.id = sync_wait_.id.load(std::memory_order_relaxed);
  snapshot.cond = sync_wait_.cond.load(std::memory_order_relaxed);
  snapshot.request = sync_wait_.request.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  std::uint64_t again = sync_wait_.serial.load(std::memory_order_relaxed);
  if (first != again || !waiting(first)) {
    snapshot = wait_snapshot{};
  } else {
    snapshot.serial = first;
  }
  std::lock_guard lock(mutex_);
  for (std::size_t process = 0; process < waits.size(); ++process) {
    const wait_snapshot& wait = waits[process];
    if (parked_here(static_cast<int>(process), wait))
      snapshot.parked.push_back(static_cast<std::uint32_t>(process));
    if (static_cast<wait_kind>(wait.kind) == wait_kind::lock && lock_of(wait.id).held &&
        std::find(snapshot.held.begin(), snapshot.held.end(), wait.id) == snapshot.held.end())
      snapshot.held.push_back(wait.id);
  }
  return snapshot;
}

namespace {
void put_wait(message_writer& message, std::uint32_t kind, std::uint32_t id, std::uint32_t cond,
              std::uint32_t request) {
  message.put<std::uint32_t>(kind);
  message.put<std::uint32_t>(id);
  message.put<std::uint32_t>(cond);
  message.put<std::uint32_t>(request);
}
}  // namespace

void node::handle_wait_query(const incoming_request& request, message_reader& reader) {
  std::uint32_t count = reader.take<std::uint32_t>();
  if (!reader.ok() || (count != 0 && count != static_cast<std::uint32_t>(nprocs_)))
    return reject(request, "malformed wait query");
  std::vector<wait_snapshot> waits(count);
  for (auto& wait : waits) {
    wait.kind = reader.take<std::uint32_t>();
    wait.id = reader.take<std::uint32_t>();
    wait.cond = reader.take<std::uint32_t>();
    wait.request = reader.take<std::uint32_t>();
    bool lock_kind = static_cast<wait_kind>(wait.kind) == wait_kind::lock ||
                     static_cast<wait_kind>(wait.kind) == wait_kind::cond;
    if (wait.kind > static_cast<std::uint32_t>(wait_kind::cond) ||
        (lock_kind && wait.id >= config_.max_locks && wait.id != heap_lock()))
      return reject(request, "malformed wait query");
  }
  if (!reader.ok() || reader.remaining() != 0) return reject(request, "malformed wait query");
  wait_snapshot snapshot = own_wait_snapshot(waits);
  message_writer answer(message_type::wait_answer);
  answer.put<std::uint64_t>(snapshot.serial);
  put_wait(answer, snapshot.kind, snapshot.id, snapshot.cond, snapshot.request);
  answer.put_words(snapshot.parked);
  answer.put_words(snapshot.held);
  replied(request.token(), link_->reply_uncounted(request.token(), {answer.bytes()}));
}

// Process 0's calling thread: every process's answer, its own first.
std::vector<node::wait_snapshot> node::wait_snapshots(std::span<const wait_snapshot> waits,
                                                      std::string_view what) {
  message_writer query(message_type::wait_query);
  query.put<std::uint32_t>(static_cast<std::uint32_t>(waits.size()));
  for (const auto& wait : waits) put_wait(query, wait.kind, wait.id, wait.cond, wait.request);
  std::vector<request_id> ids;
  for (int process = 1; process < nprocs_; ++process) {
    auto id = link_->send_request_uncounted(process, {query.bytes()});
    ids.push_back(sent_or_stop(id, what));
  }
  std::vector<wait_snapshot> all;
  all.push_back(own_wait_snapshot(waits));
  std::vector<reply_payload> replies(ids.size());
  await_all(ids, replies, what);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    message_reader reader(replies[i].bytes());
    wait_snapshot snapshot;
    bool typed = reader.type() == message_type::wait_answer;
    snapshot.serial = reader.take<std::uint64_t>();
    snapshot.kind = reader.take<std::uint32_t>();
    snapshot.id = reader.take<std::uint32_t>();
    snapshot.cond = reader.take<std::uint32_t>();
    snapshot.request = reader.take<std::uint32_t>();
    if (!typed || !reader.get_words(snapshot.parked, waits.size()) ||
        !reader.get_words(snapshot.held, waits.size()) || reader.remaining() != 0)
      protocol_failure(std::string(what) + ": malformed answer from process " +
                       std::to_string(i + 1));
    all.push_back(std::move(snapshot));
  }
  return all;
}

void node::look_for_deadlock(std::string_view what) {
  auto in_wait = [](const wait_snapshot& snapshot) { return waiting(snapshot.serial); };
  std::string asking = std::string(what) + ", asking every process what it waits for";
  std::vector<wait_snapshot> first = wait_snapshots({}, asking);
  if (!std::all_of(first.begin(), first.end(), in_wait)) return;
  std::vector<wait_snapshot> second = wait_snapshots(first, asking);
  std::vector<bool> parked(static_cast<std::size_t>(nprocs_), false);
  for (const auto& answer : second)
    for (std::uint32_t process : answer.parked)
      if (process < parked.size()) parked[process] = true;
  for (int process = 0; process < nprocs_; ++process) {
    auto at = static_cast<std::size_t>(process);
    if (!in_wait(second[at]) || !second[at].same_wait(first[at])) {
      TMK_LOG(debug, "deadlock check: every process waited, then process %d went on", process);
      return;
    }
    if (!parked[at]) {
      TMK_LOG(debug, "deadlock check: every process waits; process %d's request is not parked",
              process);
      return;
    }
  }
  std::string who;
  for (int process = 0; process < nprocs_; ++process) {
    const wait_snapshot& wait = second[static_cast<std::size_t>(process)];
    who += (process == 0 ? "" : "; ") + std::string("process ") + std::to_string(process) +
           " in " + describe_wait(wait);
    for (std::size_t i = 0; i < wait.held.size(); ++i)
      who += (i == 0 ? ", holding lock " : " and lock ") + std::to_string(wait.held[i]);
  }
  job_.fatal("deadlock: every process waits, and none of the waits can end (" + who + ")");
}

std::string node::describe_wait(const wait_snapshot& wait) const {
  switch (static_cast<wait_kind>(wait.kind)) {
    case wait_kind::barrier: return "Tmk_barrier(" + std::to_string(wait.id) + ")";
    case wait_kind::exit: return "Tmk_exit";
    case wait_kind::lock:
      if (wait.id == heap_lock()) return "Tmk_malloc or Tmk_free (the heap's lock)";
      return "Tmk_lock_acquire(" + std::to_string(wait.id) + ")";
    case wait_kind::cond:
      return "Tmk_lock_cond_wait(" + std::to_string(wait.id) + ", " + std::to_string(wait.cond) + ")";
    case wait_kind::none: break;
  }
  return "no wait";
}

}  // namespace tmk
