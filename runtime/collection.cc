// collection.cc — garbage collection: when every diff, twin, write notice
// and interval record can go, and how every process gets there together.
//
// A process whose diffs and interval records (collectable_bytes: not its
// twins or page bookkeeping, which it would make again at once) pass
// TMK_GC_THRESHOLD says so to process 0: in its barrier arrival, or, at a
// lock acquire or release, in a request of its own.
// Process 0 then calls a collection, numbered, one at a time: in the
// departures of that barrier, or in its answer and a message to every
// other process.  Each process takes part at its next synchronisation
// call, or at once if it waits in one (a lock's grant, a condition's
// wake-up, a barrier's departure), and then goes on waiting: a process
// that holds a lock which another waits for thus never stalls the
// collection, and a program that synchronises only with locks collects as
// often as one with barriers.
//
// Taking part: a barrier that merges every process's intervals, so that
// all know the same ones; process 0 brings every page it holds up to date
// (fetching diffs while the others still keep them), the others drop their
// out-of-date copies (fetched whole from process 0 when next used); a
// second barrier; then every diff, twin, write notice and interval record
// goes.  Every process leaves knowing every interval discarded, so a grant
// or a departure answered after it leaves those out (interval_store::
// encode), and diffs pushed before it are not applied after it.
//
// Tmk_exit starts with a barrier of its own, whose wait lets collections
// through as a user barrier's does: a process that has called it keeps
// taking part until every process has.
#include <algorithm>
#include <vector>

#include "log.h"
#include "node.h"

namespace tmk {

// Under mutex_, on the application thread: true once per collection, when
// this process's diffs and intervals have passed the threshold.
bool node::collection_wanted() {
  if (nprocs_ == 1 || collection_requested_ || collectable_bytes() <= config_.gc_threshold)
    return false;
  collection_requested_ = true;
  return true;
}

// Application thread, not under mutex_: asks process 0 for a collection
// and takes part at once in the one it calls, or in the one under way.
// The answer is awaited, not left to the call that process 0 sends every
// process: a process re-taking locks it holds the tokens of, sending no
// message, could otherwise pile up intervals for as long as its service
// thread waits for a core.
void node::request_collection() {
  std::uint32_t number;
  if (rank_ == 0) {
    number = answer_collection_request(collections_done_);
  } else {
    message_writer request(message_type::collection_request);
    request.put<std::uint32_t>(collections_done_);
    std::string what = "asking for garbage collection";
    reply_payload answer = await(send_request(0, request, what), what);
    message_reader reader(answer.bytes());
    number = reader.type() == message_type::collection_reply ? reader.take<std::uint32_t>() : 0;
    if (!reader.ok()) protocol_failure(what + ": malformed answer");
  }
  note_collection_call(number);
  collect_if_called();
}

// Process 0, not under mutex_: calls a collection for a process that has
// taken part in done of them, if none is under way; the collection it is
// to take part in (done: none).
std::uint32_t node::answer_collection_request(std::uint32_t done) {
  std::unique_lock lock(mutex_);
  if (collections_announced_ > done) return collections_announced_;
  if (!call_collection()) return done;
  std::uint32_t number = collections_announced_;
  lock.unlock();
  announce_collection(number);
  return number;
}

// Process 0, under mutex_: calls the next collection unless one is under
// way.
bool node::call_collection() {
  if (collections_announced_ != collections_finished_) return false;
  ++collections_announced_;
  return true;
}

// Process 0, either thread, not under mutex_: tells every process.
void node::announce_collection(std::uint32_t number) {
  TMK_LOG(debug, "calling garbage collection %u", number);
  message_writer call(message_type::collection_call);
  call.put<std::uint32_t>(number);
  for (int process = 1; process < nprocs_; ++process)
    send_one_way(process, call, "calling garbage collection");
  note_collection_call(number);
}

// Either thread: collection number has been called; if that is news, a
// wait that lets it through ends now.
void node::note_collection_call(std::uint32_t number) {
  std::uint32_t known = collections_called_.load();
  while (number > known)
    if (collections_called_.compare_exchange_weak(known, number)) {
      link_->interrupt_wait();
      return;
    }
}

void node::handle_collection_request(const incoming_request& request, message_reader& reader) {
  std::uint32_t done = reader.take<std::uint32_t>();
  if (!reader.ok() || rank_ != 0) return reject(request, "malformed garbage collection request");
  message_writer answer(message_type::collection_reply);
  answer.put<std::uint32_t>(answer_collection_request(done));
  reply(request.token(), answer);
}

void node::handle_collection_call(const incoming_request& request, message_reader& reader) {
  std::uint32_t number = reader.take<std::uint32_t>();
  if (!reader.ok()) return reject(request, "malformed garbage collection call");
  note_collection_call(number);
}

// Application thread, not under mutex_, at a synchronisation call or
// inside its wait: takes part in the collection called, if any.
void node::collect_if_called() {
  if (collections_called_.load(std::memory_order_acquire) <= collections_done_) return;
  {
    // Every twinned page is protected first, its twin kept until the end:
    // another thread of the program that writes one meanwhile faults, and
    // waits in the fault for this call to end, so that no write is made
    // while the collection seals, fetches and drops (a write made after
    // process 0 fetched the page's diff would go with the twin).  The
    // collection leaves these pages read-only in any case.
    std::lock_guard lock(mutex_);
    std::vector<std::uint32_t> twinned;
    extras_.for_each([&](std::uint32_t page, page_extra& entry) {
      if (entry.twin != nullptr) twinned.push_back(page);
    });
    protect_pages(twinned, page_state::read_only);
  }
  std::uint32_t number =
      barrier_round(collection_entry_barrier, barrier_kind::collection_entry, "garbage collection");
  collect_garbage();
  collections_done_ = number;
  collection_requested_ = false;
}

void node::collect_garbage() {
  std::unique_lock lock(mutex_);
  // The pages some interval since the last collection modified and whose
  // copy here lacks its diffs, each page once however many intervals list
  // it.  The listed pages are gathered and sorted rather than marked in a
  // bit per page of the region: that map (2 MB at the default 64G) was
  // zeroed, and under AddressSanitizer mapped afresh, at every collection.
  std::vector<std::uint32_t> listed;
  for (int owner = 0; owner < nprocs_; ++owner) {
    if (owner == rank_) continue;
    for (std::uint32_t index = intervals_.base(owner) + 1; index <= time_[owner]; ++index) {
      const interval_record* record = intervals_.find(owner, index);
      if (record != nullptr) listed.insert(listed.end(), record->pages.begin(), record->pages.end());
    }
  }
  std::sort(listed.begin(), listed.end());
  listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
  std::vector<std::uint32_t> stale;
  for (std::uint32_t page : listed)
    for (int writer = 0; writer < nprocs_; ++writer)
      if (writer != rank_ && notified(writer, page) > applied(page, writer)) {
        stale.push_back(page);
        break;
      }
  if (rank_ == 0) {
    for (std::uint32_t page : stale) {
      page_state state = state_of(page);
      if (state == page_state::invalid) validate(page, lock);
    }
  } else {
    std::vector<std::uint32_t> dropped;
    for (std::uint32_t page : stale)
      if (state_of(page) != page_state::unfetched) {
        set_state(page, page_state::unfetched);
        dropped.push_back(page);
      }
    protect_pages(dropped, page_state::unfetched);
    discard_pages(dropped);
  }
  lock.unlock();
  // Every process keeps its diffs until process 0 has what it needs.
  barrier_round(collection_phase_barrier, barrier_kind::collection_phase, "garbage collection");
  lock.lock();
  // Every twinned page was protected as the collection began
  // (collect_if_called): its twin goes, and it stays read-only.
  extras_.for_each([&](std::uint32_t page, page_extra& entry) {
    if (entry.twin != nullptr) {
      drop_twin(entry);
      set_state(page, page_state::read_only);
    }
  });
  extras_.clear();
  diffs_.clear();
  clear_notices();
  twinned_.clear();
  subscribed_.clear();
  diff_bytes_ = 0;
  received_bytes_ = 0;
  intervals_.discard_through(time_);
  counters_.gc_runs.fetch_add(1, std::memory_order_relaxed);
  TMK_LOG(debug, "garbage collection done");
}

}  // namespace tmk
