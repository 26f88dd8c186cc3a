// barrier.cc — barriers.
//
// Every process closes its interval and sends process 0 its vector time and
// the intervals of its own that process 0 has not had from it; when all n
// have arrived, process 0 answers each with the intervals it lacks.  (Where
// they do not fit in TMK_MAX_MESSAGE, an arriver sends the first of its
// own ahead, and a departure says where to ask for the rest: put_intervals
// and read_intervals.)  Cost:
// 2(n-1) messages plus one to itself, and one from each writer to each
// reader of the diffs it pushes (push_diffs).  Process 0's calling thread
// handles the arrivals, in its own wait at the barrier: nobody can leave
// before it arrives, and a request for its service thread would wake that
// thread while process 0 computes, on a core some process needs (in SOR on
// 2 processes, a barrier where that happened took 80-170 us instead of
// 15-20).  Processes waiting at different barrier ids would wait forever:
// when all n wait and no id has all of them, the job stops with who waits
// where.
//
// Garbage collection (collection.cc) uses two barriers of its own, with ids
// beyond every user id: an arrival's diffs and intervals above the threshold
// makes process 0 call a collection, and every departure carries the
// number of the newest one called.
#include <algorithm>
#include <iterator>

#include "diff.h"
#include "log.h"
#include "node.h"
#include "thread_scratch.h"

namespace tmk {

void node::barrier(unsigned id) {
  if (id >= config_.max_barriers)
    fail("Tmk_barrier", "barrier id " + std::to_string(id) + " is out of range: ids go from 0 to " +
                            std::to_string(config_.max_barriers - 1) + " (TMK_MAX_BARRIERS)");
  counters_.barriers.fetch_add(1, std::memory_order_relaxed);
  if (nprocs_ == 1) return;
  collect_if_called();
  note_collection_call(barrier_round(id, barrier_kind::user, "Tmk_barrier"));
  collect_if_called();
}

std::uint32_t node::barrier_round(std::uint32_t id, barrier_kind kind, const char* call) {
  std::unique_lock lock(mutex_);
  close_interval();
  std::string what = kind == barrier_kind::user ? std::string(call) + "(" + std::to_string(id) + ")"
                     : kind == barrier_kind::exit ? std::string(call)
                                                  : std::string(call) + "(garbage collection)";
  // Process 0 holds its own intervals; another's that take more than half
  // the largest message go ahead of its arrival, the rest in it.
  if (rank_ != 0 && time_[rank_] != barrier_sent_)
    send_intervals_ahead(lock, message_limit_ / 2, what);
  // This thread's alone: barrier_round runs on the calling thread, and
  // again inside its wait (a collection's barriers) only once this
  // arrival has gone out.
  message_writer& arrival = arrival_writer_;
  arrival.restart(message_type::barrier_arrive);
  arrival.put<std::uint32_t>(id);
  arrival.put<std::uint8_t>(static_cast<std::uint8_t>(kind));
  arrival.put<std::uint64_t>(collectable_bytes());
  arrival.put_array(time_);
  vector_time& sent = arrival_sent_;  // under mutex_, used up before it is let go
  sent = time_;
  if (rank_ != 0) sent[rank_] = barrier_sent_;
  if (!intervals_.encode(arrival, sent, time_)) protocol_failure("own interval missing");
  barrier_sent_ = time_[rank_];
  direct_pushes direct;
  if (kind == barrier_kind::user) {
    push_diffs(arrival, direct);
  } else {
    arrival.put_words({});  // pushed to nobody
  }
  lock.unlock();
  // Out of mutex_: a send of more than a segment waits for its reader to
  // take it in, whose handler may need this process's service thread.
  // Unrung: the reader needs them once its departure comes, and takes
  // them in then if not before.
  for (auto& [to, message] : direct)
    send_one_way(to, message, what + ": pushing diffs to process " + std::to_string(to), false);
  request_id arrived = send_request(0, arrival, what, true);
  // A user barrier's departure into departure_, whose buffer the next one
  // reuses; a collection's own barriers (perhaps inside a user barrier's
  // wait) into one of their own.
  reply_payload own;
  reply_payload& answer = kind == barrier_kind::user ? departure_ : own;
  if (waits_for_program(kind))
    await_synchronization(arrived, what, answer,
                          kind == barrier_kind::user ? wait_kind::barrier : wait_kind::exit, id);
  else
    await_all({&arrived, 1}, {&answer, 1}, what);
  lock.lock();
  message_reader reader(answer.bytes());
  if (reader.type() != message_type::barrier_depart) protocol_failure(what + ": malformed departure");
  std::uint32_t collection = reader.take<std::uint32_t>();
  std::uint32_t pushed_here = reader.take<std::uint32_t>();
  std::uint64_t heap_break = reader.take<std::uint64_t>();
  if (!reader.ok() || (kind != barrier_kind::user && pushed_here != 0))
    protocol_failure(what + ": malformed departure");
  std::vector<interval_record> records;
  if (!read_intervals(reader, records, lock, what)) protocol_failure(what + ": malformed departure");
  learn_heap_break(heap_break);
  // Only a user barrier's: a collection's barriers may run inside its wait,
  // before its pushes are due.
  std::vector<std::vector<std::byte>> direct_here;
  if (kind == barrier_kind::user) {
    await_pushes(pushed_here, lock, what);
    std::erase_if(early_pushes_, [&](early_push& early) {
      if (early.barrier != user_barriers_done_) return false;
      direct_here.push_back(std::move(early.bytes));
      return true;
    });
  }
  std::vector<std::uint32_t> still_mapped;
  if (!incorporate(records, &still_mapped)) protocol_failure(what + ": malformed departure");
  if (!reader.ok() || reader.remaining() != 0) protocol_failure(what + ": malformed departure");
  std::vector<std::vector<std::uint32_t>> unread =
      apply_pushed(nullptr, still_mapped, true, direct_here);
  answer.reset();  // a lent buffer goes back now, not at the next barrier
  ++barriers_done_;
  if (kind == barrier_kind::user) ++user_barriers_done_;
  lock.unlock();
  stop_pushes(unread);
  return collection;
}

void node::handle_barrier_arrival(const incoming_request& request, message_reader& reader) {
  std::uint32_t id = reader.take<std::uint32_t>();
  auto kind = static_cast<barrier_kind>(reader.take<std::uint8_t>());
  std::uint64_t memory = reader.take<std::uint64_t>();
  // Kept by the thread that handles the arrival, as the departures below
  // and their memory: with these, the episode's node of the map and the
  // arrival's memory kept (barrier_round), a barrier on 2 processes makes
  // 0.1 allocations instead of 12 (`barrier` of 10000 more rounds, malloc
  // counted with perf), and takes 1.80 us instead of 2.29 (medians of 12
  // alternated runs).
  thread_local thread_scratch<vector_time> time_kept;
  vector_time& time = time_kept.get();
  time.assign(static_cast<std::size_t>(nprocs_), 0);
  for (auto& entry : time) reader.get(entry);
  std::vector<interval_record> records;
  bool id_fits = kind == barrier_kind::user ? id < config_.max_barriers
                 : kind == barrier_kind::exit ? id == exit_barrier
                 : kind == barrier_kind::collection_entry ? id == collection_entry_barrier
                 : kind == barrier_kind::collection_phase && id == collection_phase_barrier;
  if (!reader.ok() || rank_ != 0 || !id_fits || !intervals_decode(reader, nprocs_, npages_, records))
    return reject(request, "malformed barrier arrival");
  // The processes this one pushed diffs to itself, each once for every
  // message: each is told, in its departure, how many such messages to
  // wait for.
  std::vector<std::uint32_t> direct;
  if (!reader.get_words(direct, reader.remaining() / 4) ||
      std::any_of(direct.begin(), direct.end(), [&](std::uint32_t to) {
        return to >= static_cast<std::uint32_t>(nprocs_) ||
               to == static_cast<std::uint32_t>(request.origin);
      }))
    return reject(request, "malformed barrier arrival");
  if (!reader.ok() || reader.remaining() != 0) return reject(request, "malformed barrier arrival");

  thread_local thread_scratch<std::vector<std::pair<reply_token, message_writer>>> departures_kept;
  auto& departures = departures_kept.get();
  std::size_t departing = 0;
  {
    std::lock_guard lock(mutex_);
    for (auto& record : records)
      if (!intervals_.add(std::move(record)))
        return reject(request, "barrier arrival with a gap in its intervals");

    auto found = barriers_.find(id);
    if (found == barriers_.end()) {
      // The episode of the barrier before, emptied, with its buffers and
      // its node of the map.
      if (!spare_episode_.empty()) {
        spare_episode_.key() = id;
        found = barriers_.insert(std::move(spare_episode_)).position;
      } else {
        auto made = std::make_unique<barrier_episode>();
        made->arrived.assign(nprocs_, false);
        made->direct.assign(nprocs_, 0);
        made->tokens.resize(nprocs_);
        made->times.assign(nprocs_, vector_time(nprocs_, 0));
        found = barriers_.emplace(id, std::move(made)).first;
      }
    }
    barrier_episode& episode = *found->second;
    if (episode.arrived[request.origin])
      return reject(request, "process arrived twice at barrier " + std::to_string(id));
    episode.arrived[request.origin] = true;
    for (std::uint32_t to : direct) ++episode.direct[to];
    episode.tokens[request.origin] = request.token();
    std::copy(time.begin(), time.end(), episode.times[request.origin].begin());
    episode.kind = kind;
    if (memory > config_.gc_threshold) episode.collect = true;
    ++episode.count;
    if (waits_for_program(kind)) ++barrier_waiting_;
    if (episode.count == nprocs_) {
      if (kind == barrier_kind::user && episode.collect && call_collection())
        TMK_LOG(debug, "barrier %u calls garbage collection %u", id, collections_announced_);
      if (kind == barrier_kind::collection_phase) collections_finished_ = collections_announced_;
      thread_local thread_scratch<vector_time> newest_kept;
      vector_time& newest = newest_kept.get();
      newest.assign(static_cast<std::size_t>(nprocs_), 0);
      for (const auto& arrived : episode.times) vector_time_merge(newest, arrived);
      // Every process has sent its own intervals: nobody may know more.
      for (int process = 0; process < nprocs_; ++process)
        for (int q = 0; q < nprocs_; ++q)
          if (episode.times[process][q] > intervals_.known(q))
            job_.fatal("Tmk_barrier: protocol error: process " + std::to_string(process) +
                       " claims intervals of process " + std::to_string(q) + " that it never sent");
      if (departures.size() < static_cast<std::size_t>(nprocs_))
        departures.resize(static_cast<std::size_t>(nprocs_),
                          {reply_token{}, message_writer(message_type::barrier_depart)});
      for (int process = 0; process < nprocs_; ++process) {
        auto& [token, departure] = departures[departing++];
        token = episode.tokens[process];
        departure.restart(message_type::barrier_depart);
        departure.put<std::uint32_t>(collections_announced_);
        departure.put<std::uint32_t>(episode.direct[process]);
        departure.put<std::uint64_t>(known_heap_break());
        std::size_t room = message_limit_ - message_overhead - departure.size() - intervals_mark_bytes();
        if (!put_intervals(departure, episode.times[process], newest, room))
          protocol_failure("barrier " + std::to_string(id) + ": an interval is missing");
      }
      if (waits_for_program(kind)) barrier_waiting_ -= nprocs_;
      std::fill(episode.arrived.begin(), episode.arrived.end(), false);
      std::fill(episode.direct.begin(), episode.direct.end(), 0);
      episode.count = 0;
      episode.collect = false;
      spare_episode_ = barriers_.extract(found);
    } else if (barrier_waiting_ == nprocs_) {
      std::string where;
      for (const auto& [other, waiting] : barriers_)
        for (int process = 0; process < nprocs_; ++process)
          if (waits_for_program(waiting->kind) && waiting->arrived[process])
            where += (where.empty() ? "" : ", ") + std::string("process ") +
                     std::to_string(process) + " at " +
                     (other == exit_barrier ? std::string("Tmk_exit") : std::to_string(other));
      job_.fatal("Tmk_barrier: every process waits, but at different barriers (" + where + ")");
    }
  }
  // This process's own departure last: it wakes this process's caller,
  // which may take the core from this thread before the others are sent.
  // Each keeps its memory for the next (this process's own takes the
  // buffer of the departure before, swapped out of the reply's slot).
  for (bool own : {false, true})
    for (std::size_t i = 0; i < departing; ++i)
      if ((departures[i].first.origin == rank_) == own)
        reply(departures[i].first, std::move(departures[i].second));
}

// Under mutex_ (let go while each part is out): this process's intervals
// not sent to process 0 yet, in parts ahead of its arrival, until what is
// left takes no more than room.  Process 0 keeps them as an arrival's.
void node::send_intervals_ahead(std::unique_lock<std::mutex>& lock, std::size_t room,
                                std::string_view what) {
  std::size_t left = 4;  // the bytes of what is not sent yet, the count included
  for (std::uint32_t index = barrier_sent_ + 1; index <= time_[rank_]; ++index)
    if (const interval_record* record = intervals_.find(rank_, index))
      left += encoded_bytes(*record);
  while (left > room) {
    vector_time have = time_, reached;
    have[rank_] = barrier_sent_;
    message_writer ahead(message_type::intervals_ahead);
    if (!intervals_.encode_within(ahead, have, time_, message_limit_ - message_overhead - 1, reached))
      protocol_failure("own interval missing");
    if (reached[rank_] == barrier_sent_)
      job_.fatal(std::string(what) + ": an interval's write notices exceed the largest message "
                 "allowed, " + std::to_string(message_limit_) + " bytes (TMK_MAX_MESSAGE)");
    std::string sending = std::string(what) + ": sending intervals ahead of the arrival";
    lock.unlock();
    reply_payload answer = await(send_request(0, ahead, sending), sending);
    lock.lock();
    if (message_reader(answer.bytes()).type() != message_type::intervals_reply)
      protocol_failure(sending + ": malformed reply");
    barrier_sent_ = reached[rank_];
    left -= ahead.size() - 1 - 4;  // its records, without its type and count
  }
}

// At a barrier arrival, under mutex_: the diffs of the pages this process
// writes (it has a twin) that other processes have asked for lately travel
// with the barrier to those readers, who then need not fault for them.
// The application waits in the barrier, so each page is diffed and its
// twin brought up to date in place: it stays writable, with no mprotect
// now and no write fault later.  Each reader gets its diffs in messages
// of its own (direct, to send once mutex_ is let go), and the arrival names
// each reader once for every message it gets, which its departure says
// it is to wait for.
// Through process 0, in the arrival and out again in the departures, every
// byte pushed crossed two messages and process 0 copied it twice: on 8
// processes, Jacobi's process 0 relayed the boundary rows of every pair of
// neighbours at every barrier.
void node::push_diffs(message_writer& arrival, direct_pushes& direct) {
  // Only pages with readers are looked at, not every page twinned.  A
  // reader whose pushes lapsed is kept for as long again, so that a fault
  // on the page then buys it a longer span; a page whose readers are all
  // gone leaves the list.
  std::vector<std::uint32_t> pages;
  std::size_t kept = 0;
  auto active = [&](const page_reader& r) { return r.until > barriers_done_; };
  for (std::uint32_t page : subscribed_) {
    page_extra* entry = extras_.find(page);
    if (entry == nullptr) continue;
    std::erase_if(entry->readers,
                  [&](const page_reader& r) { return r.until + r.span <= barriers_done_; });
    if (entry->readers.empty()) continue;
    subscribed_[kept++] = page;
    if (entry->twin != nullptr && entry->twin_start <= time_[rank_] &&
        std::any_of(entry->readers.begin(), entry->readers.end(), active))
      pages.push_back(page);
  }
  subscribed_.resize(kept);
  if (pages.empty()) {
    arrival.put_words({});
    return;
  }
  // Sealed first, so that each message is made the size of its diffs
  // (each one's place in its page's list, which later seals may move).
  std::vector<std::size_t> sealed_index(pages.size());
  std::vector<std::vector<std::size_t>> to_reader(static_cast<std::size_t>(nprocs_));
  for (std::size_t i = 0; i < pages.size(); ++i) {
    page_extra& entry = *extras_.find(pages[i]);
    seal_in_place(pages[i], entry);
    sealed_index[i] = entry.diffs.size() - 1;
    for (const auto& reader : entry.readers)
      if (active(reader) && reader.process != rank_)
        to_reader[static_cast<std::size_t>(reader.process)].push_back(i);
  }
  std::vector<const sealed_diff*> sealed(pages.size());
  for (std::size_t i = 0; i < pages.size(); ++i)
    sealed[i] = &extras_.find(pages[i])->diffs[sealed_index[i]];
  // As many messages to a reader as its diffs fill, each within the
  // substrate's largest (TMK_MAX_MESSAGE): FFT 64^3 on 2 processes pushed
  // 1.2 MB to each reader at every barrier, and that grows with the grid's
  // volume (600 MB at 512^3, above the default 256M).
  std::vector<std::uint32_t> targets;  // a reader once for each message
  for (std::size_t to = 0; to < to_reader.size(); ++to) {
    const auto& mine = to_reader[to];
    std::size_t begin = 0;
    while (begin < mine.size()) {
      std::size_t end = begin, bytes = message_overhead;
      while (end < mine.size() &&
             (end == begin ||
              bytes + sealed[mine[end]]->bytes.size() + pushed_entry_bytes <= message_limit_))
        bytes += sealed[mine[end++]]->bytes.size() + pushed_entry_bytes;
      message_writer message(message_type::barrier_push);
      message.room_for(bytes);
      message.put<std::uint32_t>(user_barriers_done_);
      message.put<std::uint32_t>(static_cast<std::uint32_t>(end - begin));
      for (std::size_t k = begin; k < end; ++k) put_pushed(message, pages[mine[k]], *sealed[mine[k]]);
      direct.emplace_back(static_cast<int>(to), std::move(message));
      targets.push_back(static_cast<std::uint32_t>(to));
      begin = end;
    }
  }
  arrival.put_words(targets);
}

void node::put_pushed(message_writer& message, std::uint32_t page, const sealed_diff& diff) const {
  put_pushed(message, rank_, page, diff.first, diff.last, diff.bytes);
}

// Another writer's diff, kept here (keep_received), in the same form.
void node::put_pushed(message_writer& message, std::int32_t writer, std::uint32_t page,
                      std::uint32_t first, std::uint32_t last, std::span<const std::byte> bytes) {
  message.put<std::int32_t>(writer);
  message.put<std::uint32_t>(page);
  message.put<std::uint32_t>(first);
  message.put<std::uint32_t>(last);
  message.put_bytes(bytes);
}

// One way, at a reader: a writer's pushes of a barrier, sent here directly
// (push_diffs).  Kept until this process passes that barrier; the wait for
// them (await_pushes) ends with the last one expected.
void node::handle_barrier_push(const incoming_request& request, message_reader& reader) {
  std::uint32_t barrier = reader.take<std::uint32_t>();
  if (!reader.ok() || request.origin == rank_)
    protocol_failure("malformed barrier push from process " + std::to_string(request.origin));
  std::span<const std::byte> rest = reader.rest();
  std::lock_guard lock(mutex_);
  if (barrier < user_barriers_done_)
    protocol_failure("process " + std::to_string(request.origin) + " pushed diffs for barrier " +
                     std::to_string(barrier) + ", passed here already");
  early_pushes_.push_back({barrier, std::vector<std::byte>(rest.begin(), rest.end())});
  // A waiter waits for the pushes of the barrier it is at.
  if (push_wait_.active && barrier == user_barriers_done_ &&
      pushes_received(barrier) >= push_wait_.expected) {
    push_wait_.active = false;
    reply_token waiter{rank_, push_wait_.slot};
    replied(waiter, link_->reply(waiter, {}));
  }
}

std::uint32_t node::pushes_received(std::uint32_t barrier) const {
  return static_cast<std::uint32_t>(std::count_if(
      early_pushes_.begin(), early_pushes_.end(),
      [&](const early_push& early) { return early.barrier == barrier; }));
}

// Under mutex_ (lock), at a departure that says expected messages of
// pushed diffs come straight from their writers: waits for those not here
// yet.  They were sent before their writers arrived, so they are on their
// way or taken in; a writer lost meanwhile ends the wait, and the job.
void node::await_pushes(std::uint32_t expected, std::unique_lock<std::mutex>& lock,
                        std::string_view what) {
  if (pushes_received(user_barriers_done_) >= expected) return;
  auto slot = link_->expect_reply_here();
  if (!slot) job_.fatal(std::string(what) + ": " + slot.error().message());
  push_wait_ = {true, expected, *slot};
  lock.unlock();
  reply_payload done;
  await_all({&*slot, 1}, {&done, 1}, std::string(what) + ", waiting for pushed diffs");
  lock.lock();
}

// At a barrier departure or a lock grant, under mutex_, after its
// intervals: applies the diffs pushed to this process — to a page only if
// they are every diff it lacks (applied in happens-before order);
// otherwise the page is left for its fault to fetch.  The application
// waits in the barrier or the acquire, and diffs are applied through the
// runtime's own view: a page the message's notices invalidated
// (still_mapped: read-only, or writable with its twin) and its pushed
// diffs complete again stays mapped as it was, with no mprotect either
// way; the rest of still_mapped is protected here.  At a grant only a
// writable copy stays mapped (data that migrates under the lock, written
// by each holder in turn): a read-only one is protected as one invalid
// before, so that a copy no longer read shows as unread and its pushes
// stop (there is no barrier count to make them lapse in a program of
// locks alone).  A page invalid before stays protected, up to date.
// Returns, per writer, the pages whose pushes this process no longer reads
// (no entries when there are none).
std::vector<std::vector<std::uint32_t>> node::apply_pushed(
    message_reader* reader, std::vector<std::uint32_t>& still_mapped, bool keep_read_only,
    std::span<const std::vector<std::byte>> more) {
  struct arrived {
    std::int32_t writer;
    std::uint32_t page, first, last;
    std::uint64_t order;
    std::span<const std::byte> bytes;
  };
  std::vector<arrived> diffs;
  auto take_section = [&](message_reader& section) {
    std::uint32_t count = section.take<std::uint32_t>();
    for (std::uint32_t i = 0; i < count && section.ok(); ++i) {
      arrived diff{};
      diff.writer = section.take<std::int32_t>();
      diff.page = section.take<std::uint32_t>();
      diff.first = section.take<std::uint32_t>();
      diff.last = section.take<std::uint32_t>();
      diff.bytes = section.get_bytes();
      if (!section.ok() || diff.writer < 0 || diff.writer >= nprocs_ || diff.writer == rank_ ||
          diff.page >= npages_ || diff.first == 0 || diff.first > diff.last ||
          !diff_valid(diff.bytes, page_size_))
        protocol_failure("malformed pushed diff in a barrier push or lock grant");
      // Pushed before a garbage collection that the departure came after:
      // the copy here has those writes already, or was dropped.
      if (diff.first <= intervals_.base(diff.writer)) continue;
      // Of an interval not heard of here: a push does not run ahead of
      // the notices.
      if (diff.last > time_[static_cast<std::size_t>(diff.writer)]) continue;
      const interval_record* record = intervals_.find(diff.writer, diff.first);
      diff.order = record ? vector_time_sum(record->time) : 0;
      diffs.push_back(diff);
    }
    if (!section.ok())
      protocol_failure("malformed pushed diffs in a barrier push or lock grant");
  };
  if (reader != nullptr) take_section(*reader);
  for (const auto& bytes : more) {
    message_reader section(bytes);
    take_section(section);
  }
  std::sort(diffs.begin(), diffs.end(), [](const arrived& a, const arrived& b) {
    if (a.page != b.page) return a.page < b.page;
    return a.order != b.order ? a.order < b.order : a.writer < b.writer;
  });
  std::sort(still_mapped.begin(), still_mapped.end());
  std::vector<std::vector<std::uint32_t>> unread;  // made at the first page to name (stop_pushes)
  unsigned long applied_count = 0;
  for (std::size_t from = 0; from < diffs.size();) {
    std::size_t to = from;
    while (to < diffs.size() && diffs[to].page == diffs[from].page) ++to;
    std::uint32_t page = diffs[from].page;
    // Every writer whose diffs this copy lacks must be covered: a diff
    // reaching its newest notice, with no interval of that writer listing
    // the page between what was applied and the diff's first.
    bool complete = state_of(page) == page_state::invalid;
    for (int writer = 0; writer < nprocs_ && complete; ++writer) {
      if (writer == rank_) continue;
      std::uint32_t done = applied(page, writer), newest = notified(writer, page);
      if (newest <= done) continue;
      complete = std::any_of(diffs.begin() + static_cast<long>(from), diffs.begin() + static_cast<long>(to),
                             [&](const arrived& d) {
                               return d.writer == writer && d.first > done && d.last >= newest &&
                                      !listed_between(writer, page, done, d.first);
                             });
    }
    if (complete) {
      page_extra& entry = extra(page);
      for (std::size_t i = from; i < to; ++i) {
        writer_progress& progress = progress_of(entry, diffs[i].writer);
        if (diffs[i].first <= progress.applied) continue;  // in the copy already
        diff_apply(runtime_page(page), page_size_, diffs[i].bytes);
        // Writable before the departure and still mapped so: the twin
        // takes the diffs too, so that the next diff holds this process's
        // writes alone (a copy of the page would take in, and lose, what
        // another thread of the program wrote since the seal).
        if (entry.twin != nullptr) diff_apply(entry.twin, page_size_, diffs[i].bytes);
        progress.applied = diffs[i].last;
        keep_received(entry, diffs[i].writer, diffs[i].first, diffs[i].last, diffs[i].bytes);
        ++applied_count;
      }
      bool mapped = std::binary_search(still_mapped.begin(), still_mapped.end(), page) &&
                    (keep_read_only || entry.twin != nullptr);
      if (mapped && entry.twin == nullptr && ++entry.mapped_pushes >= 1u << entry.sample_shift) {
        // A read-only copy kept mapped shows no reads: at its 1st, 3rd,
        // 7th, ... push (then every 64th) it is left protected instead,
        // so that its pushes stop if it is no longer read (FFT's process
        // 0 read the other half of u once, in the first transpose, and
        // was pushed it, 300 kB, at every iteration after, unless a lock
        // grant from the writer came to it first).  A copy still read
        // costs a fault with no message then.
        mapped = false;
        entry.mapped_pushes = 0;
        entry.sample_shift = static_cast<std::uint8_t>(std::min(entry.sample_shift + 1, 6));
      }
      if (!mapped) {
        // Invalid before this message (a lock grant brought the notice,
        // or an earlier barrier left it invalid), read-only at a grant, or
        // sampled as above: up to date now, but protected, so that the
        // next read, if any, shows (a fault that needs no message, which
        // clears pushed_unread).  A copy still unread at the next push is
        // not being read: its writers stop pushing it here (FFT's
        // processes read the other half of u once, in the first
        // transpose, and were pushed it, and opened it, at every iteration
        // after: 20% of a 30-iteration run at 8 processes).
        if (entry.pushed_unread && unread.empty()) unread.resize(static_cast<std::size_t>(nprocs_));
        if (entry.pushed_unread)
          for (std::size_t i = from; i < to; ++i)
            if (unread[diffs[i].writer].empty() || unread[diffs[i].writer].back() != page)
              unread[diffs[i].writer].push_back(page);
        entry.pushed_unread = true;
      } else if (entry.twin != nullptr) {
        set_state(page, page_state::read_write);
      } else {
        set_state(page, page_state::read_only);
      }
    }
    from = to;
  }
  // Of still_mapped, the pages left invalid lose their mapping.
  std::vector<std::uint32_t> invalidated;
  for (std::uint32_t page : still_mapped)
    if (state_of(page) == page_state::invalid) invalidated.push_back(page);
  protect_pages(invalidated, page_state::invalid);
  retire_twins(invalidated);
  counters_.diffs_applied.fetch_add(applied_count, std::memory_order_relaxed);
  return unread;
}

// Tells each writer which pages' pushes this process stops taking, and
// waits until each has taken it in, so that no barrier after the next one
// this process reaches pushes them (the writer may have arrived at that
// one already; a push on its way is applied all the same).  Sent one way,
// a stop could be outrun: barriers need no service thread, and a writer's
// service thread that held the request channel when the scheduler took
// its core (more threads on the host than cores) left it unread for 8 ms,
// over which the two processes of a run passed 25 barriers, each with the
// pushes it asked to stop (api scenario read-once, failing in 2 to 4 of
// 1200 runs under AddressSanitizer, eight at a time on 2 cores).  A stop
// is rare (once for each set of pages no longer read), and its round trip
// small against the pushes it ends.
void node::stop_pushes(const std::vector<std::vector<std::uint32_t>>& unread) {
  std::vector<request_id> sent;
  for (int writer = 0; writer < static_cast<int>(unread.size()); ++writer) {
    const auto& pages = unread[static_cast<std::size_t>(writer)];
    if (pages.empty()) continue;
    message_writer stop(message_type::push_stop);
    stop.put_words(pages);
    sent.push_back(send_request(writer, stop, "asking process " + std::to_string(writer) +
                                                  " to stop pushing diffs"));
  }
  if (sent.empty()) return;
  std::vector<reply_payload> answers(sent.size());
  await_all(sent, answers, "asking writers to stop pushing diffs");
  for (const auto& answer : answers)
    if (message_reader(answer.bytes()).type() != message_type::push_stop_reply)
      protocol_failure("malformed answer to a push stop");
}

void node::handle_push_stop(const incoming_request& request, message_reader& reader) {
  std::vector<std::uint32_t> pages;
  if (!reader.get_words(pages, npages_)) return reject(request, "malformed push stop");
  {
    std::lock_guard lock(mutex_);
    for (std::uint32_t page : pages) {
      page_extra* entry = page < npages_ ? extras_.find(page) : nullptr;
      if (entry == nullptr) continue;
      for (auto& reader_entry : entry->readers)
        if (reader_entry.process == request.origin)
          reader_entry.until = std::min(reader_entry.until, barriers_done_);
    }
  }
  reply(request.token(), message_writer(message_type::push_stop_reply));
}

// True if an interval of writer strictly between after and before lists page.
bool node::listed_between(int writer, std::uint32_t page, std::uint32_t after,
                          std::uint32_t before) const {
  for (std::uint32_t index = after + 1; index < before; ++index) {
    const interval_record* record = intervals_.find(writer, index);
    if (record == nullptr) return true;  // not known: assume it might
    if (record->pages.contains(page)) return true;
  }
  return false;
}

}  // namespace tmk
