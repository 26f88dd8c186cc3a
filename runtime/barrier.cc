// barrier.cc — barriers, and garbage collection at barriers.
//
// Every process closes its interval and sends process 0 its vector time and
// the intervals of its own that process 0 has not had from it; when all n
// have arrived, process 0 answers each with the intervals it lacks.  Cost:
// 2(n-1) messages plus one to itself.  Processes waiting at different
// barrier ids would wait forever: when all n wait and no id has all of
// them, the job stops with who waits where.
//
// Garbage collection: when a process's consistency data passes
// TMK_GC_THRESHOLD, the departure says so; process 0 brings every page it
// holds up to date (fetching diffs while the others still keep them), the
// others drop their out-of-date copies, all meet at a second barrier, and
// then every diff, twin, write notice and interval record goes.  Pages
// never seen since are fetched whole from process 0.
#include <algorithm>

#include "log.h"
#include "node.h"

namespace tmk {

namespace {
constexpr std::uint32_t collection_barrier = 0xffffffffu;  // beyond every user id
}  // namespace


void node::barrier(unsigned id) {
  if (id >= config_.max_barriers)
    fail("Tmk_barrier", "barrier id " + std::to_string(id) + " is out of range: ids go from 0 to " +
                            std::to_string(config_.max_barriers - 1) + " (TMK_MAX_BARRIERS)");
  counters_.barriers.fetch_add(1, std::memory_order_relaxed);
  if (nprocs_ == 1) return;
  barrier_round(id, false, "Tmk_barrier");
}

void node::barrier_round(std::uint32_t id, bool collection_phase, const char* call) {
  std::unique_lock lock(mutex_);
  close_interval();
  message_writer arrival(message_type::barrier_arrive);
  arrival.put<std::uint32_t>(id);
  arrival.put<std::uint8_t>(collection_phase ? 1 : 0);
  arrival.put<std::uint64_t>(consistency_bytes());
  std::byte* at = arrival.reserve(time_.size() * 4);
  memcpy(at, time_.data(), time_.size() * 4);
  vector_time sent = time_;
  sent[rank_] = barrier_sent_;
  if (!intervals_.encode(arrival, sent, time_)) protocol_failure("own interval missing");
  barrier_sent_ = time_[rank_];
  std::string what = std::string(call) + "(" + (id == collection_barrier ? std::string("garbage collection") : std::to_string(id)) + ")";
  lock.unlock();
  std::vector<std::byte> answer = await(send_request(0, arrival, what), what);
  lock.lock();
  message_reader reader(answer);
  if (reader.type() != message_type::barrier_depart) protocol_failure(what + ": malformed departure");
  std::uint8_t collect = reader.take<std::uint8_t>();
  if (!reader.ok() || !incorporate(reader)) protocol_failure(what + ": malformed departure");
  lock.unlock();
  if (collect && !collection_phase) collect_garbage();
}

void node::handle_barrier_arrival(const incoming_request& request, message_reader& reader) {
  std::uint32_t id = reader.take<std::uint32_t>();
  std::uint8_t collection_phase = reader.take<std::uint8_t>();
  std::uint64_t memory = reader.take<std::uint64_t>();
  vector_time time(nprocs_);
  for (auto& entry : time) reader.get(entry);
  std::vector<interval_record> records;
  if (!reader.ok() || rank_ != 0 || (id >= config_.max_barriers && id != collection_barrier) ||
      !intervals_decode(reader, nprocs_, npages_, records))
    return reject(request, "malformed barrier arrival");

  std::vector<std::pair<reply_token, message_writer>> departures;
  {
    std::lock_guard lock(mutex_);
    for (auto& record : records)
      if (!intervals_.add(std::move(record)))
        return reject(request, "barrier arrival with a gap in its intervals");

    auto& slot = barriers_[id];
    if (!slot) {
      slot = std::make_unique<barrier_episode>();
      slot->arrived.assign(nprocs_, false);
      slot->tokens.resize(nprocs_);
      slot->times.resize(nprocs_);
    }
    barrier_episode& episode = *slot;
    if (episode.arrived[request.origin])
      return reject(request, "process arrived twice at barrier " + std::to_string(id));
    episode.arrived[request.origin] = true;
    episode.tokens[request.origin] = request.token();
    episode.times[request.origin] = std::move(time);
    episode.collection_phase = collection_phase != 0;
    if (memory > config_.gc_threshold) episode.collect = true;
    ++episode.count;
    ++barrier_waiting_;
    if (episode.count == nprocs_) {
      vector_time newest(nprocs_, 0);
      for (const auto& arrived : episode.times) vector_time_merge(newest, arrived);
      // Every process has sent its own intervals: nobody may know more.
      for (int process = 0; process < nprocs_; ++process)
        for (int q = 0; q < nprocs_; ++q)
          if (episode.times[process][q] > intervals_.known(q))
            job_.fatal("Tmk_barrier: protocol error: process " + std::to_string(process) +
                       " claims intervals of process " + std::to_string(q) + " that it never sent");
      for (int process = 0; process < nprocs_; ++process) {
        message_writer departure(message_type::barrier_depart);
        departure.put<std::uint8_t>(episode.collect && !episode.collection_phase ? 1 : 0);
        if (!intervals_.encode(departure, episode.times[process], newest))
          protocol_failure("barrier " + std::to_string(id) + ": an interval is missing");
        departures.emplace_back(episode.tokens[process], std::move(departure));
      }
      barrier_waiting_ -= nprocs_;
      barriers_.erase(id);
    } else if (barrier_waiting_ == nprocs_) {
      std::string where;
      for (const auto& [other, waiting] : barriers_)
        for (int process = 0; process < nprocs_; ++process)
          if (waiting->arrived[process])
            where += (where.empty() ? "" : ", ") + std::string("process ") +
                     std::to_string(process) + " at " + std::to_string(other);
      job_.fatal("Tmk_barrier: every process waits, but at different barriers (" + where + ")");
    }
  }
  for (auto& [token, departure] : departures) reply(token, departure);
}

void node::collect_garbage() {
  std::unique_lock lock(mutex_);
  // The pages some interval since the last collection modified and whose
  // copy here lacks its diffs.
  // Each page once (a bit per page marks those taken), however many
  // intervals list it.
  std::vector<std::uint32_t> stale;
  std::vector<std::uint64_t> seen((npages_ + 63) / 64);
  for (int owner = 0; owner < nprocs_; ++owner) {
    if (owner == rank_) continue;
    for (std::uint32_t index = intervals_.base(owner) + 1; index <= time_[owner]; ++index) {
      const interval_record* record = intervals_.find(owner, index);
      if (record == nullptr) continue;
      for (std::uint32_t page : record->pages) {
        std::uint64_t bit = std::uint64_t{1} << (page % 64);
        if (seen[page / 64] & bit) continue;
        seen[page / 64] |= bit;
        for (int writer = 0; writer < nprocs_; ++writer)
          if (writer != rank_ && notified(writer, page) > applied(page, writer)) {
            stale.push_back(page);
            break;
          }
      }
    }
  }
  std::sort(stale.begin(), stale.end());
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
  barrier_round(collection_barrier, true, "garbage collection");
  lock.lock();
  std::vector<std::uint32_t> sealed;
  extras_.for_each([&](std::uint32_t page, page_extra& entry) {
    if (entry.twin != nullptr) {
      drop_twin(entry);
      set_state(page, page_state::read_only);
      sealed.push_back(page);
    }
  });
  protect_pages(sealed, page_state::read_only);
  extras_.clear();
  clear_notices();
  twinned_.clear();
  diff_bytes_ = 0;
  intervals_.discard_through(time_);
  counters_.gc_runs.fetch_add(1, std::memory_order_relaxed);
  TMK_LOG(debug, "garbage collection done");
}

}  // namespace tmk
