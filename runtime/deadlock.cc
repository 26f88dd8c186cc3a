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
// or collects garbage), and how many of the runtime's messages it has sent
// and taken in.  If every process waits, it asks again at once.  If the
// second answers repeat the first, with as many messages taken in as sent
// over all processes, then between the two rounds no process left its
// wait and no message was on its way or being handled (a message is
// counted sent before it goes, and taken only once handled, or once the
// wait for it as a reply has it): nothing can end any of the waits, and
// the job stops.  This is the counting of Mattern's four-counter
// termination detection; the questions themselves are not counted.  Cost:
// a few stores and counts in each wait and message; while process 0 waits
// that long, two questions to every process each time it looks.
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
void node::begin_sync_wait(wait_kind kind, std::uint32_t id, std::uint32_t cond) {
  std::uint64_t serial = sync_wait_.serial.load(std::memory_order_relaxed);
  sync_wait_.serial.store(serial + serial_writing, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  sync_wait_.kind.store(static_cast<std::uint32_t>(kind), std::memory_order_relaxed);
  sync_wait_.id.store(id, std::memory_order_relaxed);
  sync_wait_.cond.store(cond, std::memory_order_relaxed);
  sync_wait_.serial.store(serial + serial_waiting, std::memory_order_release);
}

void node::end_sync_wait() {
  std::uint64_t serial = sync_wait_.serial.load(std::memory_order_relaxed);
  sync_wait_.serial.store(serial - serial % serial_states + serial_states,
                          std::memory_order_release);
}

// Either thread.  The counts are read after the wait: a wait that ended
// before them has taken its reply in, or not yet counted it.
node::wait_snapshot node::own_wait_snapshot(std::span<const std::uint32_t> locks) {
  wait_snapshot snapshot;
  std::uint64_t first = sync_wait_.serial.load(std::memory_order_acquire);
  snapshot.kind = sync_wait_.kind.load(std::memory_order_relaxed);
  snapshot.id = sync_wait_.id.load(std::memory_order_relaxed);
  snapshot.cond = sync_wait_.cond.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  std::uint64_t again = sync_wait_.serial.load(std::memory_order_relaxed);
  if (first != again || !waiting(first)) {
    snapshot = wait_snapshot{};
  } else {
    snapshot.serial = first;
  }
  for (const message_tally* of : {&caller_tally_, &service_tally_}) {
    snapshot.sent += of->sent.load(std::memory_order_relaxed);
    snapshot.taken += of->taken.load(std::memory_order_relaxed);
  }
  std::lock_guard lock(mutex_);
  for (std::uint32_t id : locks)
    if (lock_of(id).held) snapshot.held.push_back(id);
  return snapshot;
}

void node::handle_wait_query(const incoming_request& request, message_reader& reader) {
  std::vector<std::uint32_t> locks;
  if (!reader.get_words(locks, static_cast<std::size_t>(nprocs_)) || reader.remaining() != 0 ||
      std::any_of(locks.begin(), locks.end(),
                  [&](std::uint32_t id) { return id >= config_.max_locks && id != heap_lock(); }))
    return reject(request, "malformed wait query");
  wait_snapshot snapshot = own_wait_snapshot(locks);
  message_writer answer(message_type::wait_answer);
  answer.put<std::uint64_t>(snapshot.serial);
  answer.put<std::uint32_t>(snapshot.kind);
  answer.put<std::uint32_t>(snapshot.id);
  answer.put<std::uint32_t>(snapshot.cond);
  answer.put<std::uint64_t>(snapshot.sent);
  answer.put<std::uint64_t>(snapshot.taken);
  answer.put_words(snapshot.held);
  replied(request.token(), link_->reply_uncounted(request.token(), {answer.bytes()}));
}

// Process 0's calling thread: every process's answer, its own first.
std::vector<node::wait_snapshot> node::wait_snapshots(std::span<const std::uint32_t> locks,
                                                      std::string_view what) {
  message_writer query(message_type::wait_query);
  query.put_words(locks);
  std::vector<request_id> ids;
  for (int process = 1; process < nprocs_; ++process) {
    auto id = link_->send_request_uncounted(process, {query.bytes()});
    if (!id) {
      if (id.error().code() == status_code::peer_lost) job_.fatal_lost(id.error(), std::string(what));
      job_.fatal(std::string(what) + ": " + id.error().message());
    }
    ids.push_back(*id);
  }
  std::vector<wait_snapshot> all;
  all.push_back(own_wait_snapshot(locks));
  std::vector<reply_payload> replies(ids.size());
  status waited = link_->wait_replies(ids, replies);
  if (!waited) {
    if (waited.code() == status_code::peer_lost) job_.fatal_lost(waited, std::string(what));
    job_.fatal(std::string(what) + ": " + waited.message());
  }
  for (std::size_t i = 0; i < replies.size(); ++i) {
    message_reader reader(replies[i].bytes());
    wait_snapshot snapshot;
    bool typed = reader.type() == message_type::wait_answer;
    snapshot.serial = reader.take<std::uint64_t>();
    snapshot.kind = reader.take<std::uint32_t>();
    snapshot.id = reader.take<std::uint32_t>();
    snapshot.cond = reader.take<std::uint32_t>();
    snapshot.sent = reader.take<std::uint64_t>();
    snapshot.taken = reader.take<std::uint64_t>();
    if (!typed || !reader.get_words(snapshot.held, locks.size()) || reader.remaining() != 0)
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
  // The second round also asks who holds the locks waited for.
  std::vector<std::uint32_t> locks;
  for (const auto& snapshot : first)
    if (snapshot.kind == static_cast<std::uint32_t>(wait_kind::lock) &&
        std::find(locks.begin(), locks.end(), snapshot.id) == locks.end())
      locks.push_back(snapshot.id);
  std::vector<wait_snapshot> second = wait_snapshots(locks, asking);
  std::uint64_t sent = 0, taken = 0;
  for (int process = 0; process < nprocs_; ++process) {
    const wait_snapshot& now = second[static_cast<std::size_t>(process)];
    if (!in_wait(now) || !now.same_wait(first[static_cast<std::size_t>(process)])) {
      TMK_LOG(debug, "deadlock check: every process waited, then process %d went on or took a message",
              process);
      return;
    }
    sent += now.sent;
    taken += now.taken;
  }
  if (sent != taken) {
    TMK_LOG(debug, "deadlock check: every process waits, with %lld messages on their way",
            static_cast<long long>(sent - taken));
    return;
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
