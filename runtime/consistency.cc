// consistency.cc — closing intervals and incorporating other processes'.
//
// An interval closes at a release, a barrier arrival and an acquire when
// some page was written since it was last sealed; its write notices are
// those pages, which stay writable with their twins.  Incorporating an
// interval records, per page, that its writer has newer diffs, makes a diff
// of this process's unsaved writes to it, and invalidates a valid copy —
// unless the diffs that notice refers to are already applied.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "log.h"
#include "node.h"
#include "thread_scratch.h"

namespace tmk {

namespace {
// Closes in a row that an unwritten speculative twin survives.  FFT
// rewrites a page every third or fourth interval.
constexpr std::uint8_t twin_idle_closes = 8;

// Sets count bits of bits from first, a word at a time.
void mark_bits(std::uint64_t* bits, std::uint32_t first, std::uint32_t count) {
  while (count > 0) {
    std::uint32_t shift = first % 64;
    std::uint32_t taken = std::min(count, 64 - shift);
    std::uint64_t mask = taken == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << taken) - 1) << shift;
    bits[first / 64] |= mask;
    first += taken;
    count -= taken;
  }
}
}  // namespace

void node::close_interval() {
  // A twin made speculative (twinned with a faulting neighbour, or sealed
  // since the last close) is listed only if the page differs from it: a
  // page rewritten once in a while would otherwise be listed by every
  // interval, and each listing invalidates the copies of its readers.  An
  // unwritten one stays twinned and writable, unlisted, its next writes
  // belonging to the next interval; after twin_idle_closes closes in a row
  // unwritten, its twin is dropped and the page write-protected.  Comparing
  // a page costs about 0.1 us, protecting it again 4 us and its next write
  // fault 10 us on the machine of BENCHMARKS.md.  Twins do not count
  // against TMK_GC_THRESHOLD (collectable_bytes).
  std::size_t kept = 0;
  std::vector<std::uint32_t> unwritten;
  std::size_t spills_written = 0, spills_unwritten = 0;
  for (std::uint32_t page : twinned_) {
    page_extra* entry = extras_.find(page);
    if (entry == nullptr || entry->twin == nullptr) continue;
    if (entry->speculative) {
      bool same = memcmp(entry->twin, readable_page(page), page_size_) == 0;
      if (entry->first_spill) {
        ++(same ? spills_unwritten : spills_written);
        entry->first_spill = false;
        // Opened with another page's first write and never written: not a
        // page this process writes, for the rules that ask (make_writable's
        // batches, validate's edge of this process's data).
        if (same) written_bits_[page / 64] &= ~(std::uint64_t{1} << (page % 64));
      }
      if (same) {
        if (++entry->idle_closes < twin_idle_closes) {
          twinned_[kept++] = page;
          continue;
        }
        unwritten.push_back(page);
        continue;
      }
      entry->speculative = false;
    }
    twinned_[kept++] = page;
  }
  twinned_.resize(kept);
  judge_first_spills(spills_written, spills_unwritten);
  // Protected before their twins go: another thread of the program may
  // have written one since it was compared, and such a page keeps its
  // twin, written, and is opened again.  Dropped first and protected
  // after, its write was in no diff (api_worker's thread-calls scenario).
  protect_pages(unwritten, page_state::read_only);
  std::vector<std::uint32_t> reopened;
  for (std::uint32_t page : unwritten) {
    page_extra& entry = *extras_.find(page);
    if (memcmp(entry.twin, readable_page(page), page_size_) == 0) {
      drop_twin(entry);
      set_state(page, page_state::read_only);
      continue;
    }
    entry.speculative = false;
    entry.idle_closes = 0;
    twinned_.push_back(page);
    twinned_sorted_ = false;
    reopened.push_back(page);
  }
  protect_pages(reopened, page_state::read_write);
  if (!twinned_sorted_) {
    // Sorted up to the pages twinned out of order since the last interval,
    // usually a few: sort those and merge, not the whole list.
    auto tail = std::is_sorted_until(twinned_.begin(), twinned_.end());
    std::sort(tail, twinned_.end());
    std::inplace_merge(twinned_.begin(), tail, twinned_.end());
    twinned_.erase(std::unique(twinned_.begin(), twinned_.end()), twinned_.end());
    twinned_sorted_ = true;
  }
  std::vector<std::uint32_t> written;
  written.reserve(twinned_.size());  // grown a page at a time: 9 allocations a close in Jacobi
  for (std::uint32_t page : twinned_)
    if (!extras_.find(page)->speculative) written.push_back(page);
  // Written by another thread of the program since the last close, in
  // pages whose twins went since with a seal of those writes
  // (retire_twins).
  if (!written_since_close_.empty()) {
    written.insert(written.end(), written_since_close_.begin(), written_since_close_.end());
    written_since_close_.clear();
    std::sort(written.begin(), written.end());
    written.erase(std::unique(written.begin(), written.end()), written.end());
  }
  if (written.empty() || extends_last_interval(written)) return;
  ++time_[rank_];
  // The unwritten twins' next writes belong to the interval after this one.
  if (written.size() < twinned_.size())
    for (std::uint32_t page : twinned_) {
      page_extra& entry = *extras_.find(page);
      if (entry.speculative) entry.twin_start = time_[rank_] + 1;
    }
  interval_record record{rank_, time_[rank_], time_, page_list(written)};
  intervals_.add(std::move(record));
  counters_.intervals.fetch_add(1, std::memory_order_relaxed);
}

// True if the writes of the interval closing now can belong to this
// process's last interval instead: it lists every page written, each of
// them unsealed since (its diff will cover that interval and these
// writes together), and nothing from another process came in since it
// closed (the same vector time).  A process that takes a lock again and
// again with no one else asking for it (spinning on a flag under a lock,
// a work queue served locally) then adds no interval at each release: it
// added one each time, each listing the page it last wrote (its twin
// kept), 1000 for 1000 empty critical sections, and the grant that ended
// the run carried them all (358 kB in lock-pushes on 2 processes).
// Another process that has heard of that interval sees these writes with
// it when it fetches its diff, as a seal's diff may also hold writes of
// the open interval (seal_while_writable); one that has fetched it since
// sealed the pages, and the interval closes as a new one.
bool node::extends_last_interval(std::span<const std::uint32_t> written) {
  const interval_record* last = intervals_.find(rank_, time_[rank_]);
  if (last == nullptr || last->time != time_) return false;
  for (std::uint32_t page : written)
    if (extras_.find(page)->twin_start > time_[rank_] || !last->pages.contains(page)) return false;
  return true;
}

// Intervals that travel in a grant or a departure: as many as fit in
// max_bytes, and if some do not, a mark naming this process and how far
// they go, from which the receiver asks for the rest (read_intervals).
// Every message then fits TMK_MAX_MESSAGE: a process that heard of
// nobody for a long time lacks every interval made meanwhile (with 3000
// turns under a lock between two barriers, many-intervals, a grant of
// 192-240 kB on 4-8 processes, and departures as large).
bool node::put_intervals(message_writer& writer, const vector_time& have, const vector_time& upto,
                         std::size_t max_bytes) {
  if (vector_time_covers(have, upto)) {  // most departures and grants: a few ns
    writer.put<std::uint32_t>(0);
    writer.put<std::uint8_t>(0);
    return true;
  }
  thread_local thread_scratch<vector_time> reached_kept;
  vector_time& reached = reached_kept.get();
  if (!intervals_.encode_within(writer, have, upto, max_bytes, reached)) return false;
  bool whole = true;
  for (int q = 0; q < nprocs_; ++q) whole = whole && reached[q] >= upto[q];
  writer.put<std::uint8_t>(whole ? 0 : 1);
  if (!whole) {
    writer.put<std::uint32_t>(static_cast<std::uint32_t>(rank_));
    writer.put_array(upto);
  }
  return true;
}

std::size_t node::intervals_mark_bytes() const { return 1 + 4 + 4 * static_cast<std::size_t>(nprocs_); }

// Under mutex_ (let go while the rest is asked for): what put_intervals
// wrote, and the rest from the process its mark names.  False if
// malformed.
bool node::read_intervals(message_reader& reader, std::vector<interval_record>& records,
                          std::unique_lock<std::mutex>& lock, std::string_view what) {
  if (!intervals_decode(reader, nprocs_, npages_, records)) return false;
  std::uint8_t more = reader.take<std::uint8_t>();
  if (!reader.ok() || more > 1) return false;
  if (more == 0) return true;
  std::uint32_t source = reader.take<std::uint32_t>();
  vector_time upto(static_cast<std::size_t>(nprocs_));
  for (auto& entry : upto) reader.get(entry);
  if (!reader.ok() || source >= static_cast<std::uint32_t>(nprocs_)) return false;
  vector_time have = time_;
  for (const auto& record : records) have[record.owner] = std::max(have[record.owner], record.index);
  if (static_cast<int>(source) == rank_) {
    // Process 0's own departure: the rest is in its store.
    for (int q = 0; q < nprocs_; ++q)
      for (std::uint32_t index = have[q] + 1; index <= upto[q]; ++index) {
        const interval_record* record = intervals_.find(q, index);
        if (record == nullptr) return false;
        records.push_back(*record);
      }
    return true;
  }
  lock.unlock();
  std::string asking = std::string(what) + ": asking process " + std::to_string(source) +
                       " for the rest of the intervals";
  while (!vector_time_covers(have, upto)) {
    message_writer request(message_type::intervals_request);
    request.put_array(have);
    request.put_array(upto);
    reply_payload answer = await(send_request(static_cast<int>(source), request, asking), asking);
    message_reader in(answer.bytes());
    std::size_t before = records.size();
    if (in.type() != message_type::intervals_reply || !intervals_decode(in, nprocs_, npages_, records) ||
        records.size() == before || in.remaining() != 0)
      protocol_failure(asking + ": malformed reply");
    for (std::size_t i = before; i < records.size(); ++i)
      have[records[i].owner] = std::max(have[records[i].owner], records[i].index);
  }
  lock.lock();
  return true;
}

void node::handle_intervals_request(const incoming_request& request, message_reader& reader) {
  vector_time have(static_cast<std::size_t>(nprocs_)), upto(static_cast<std::size_t>(nprocs_));
  for (auto& entry : have) reader.get(entry);
  for (auto& entry : upto) reader.get(entry);
  if (!reader.ok() || reader.remaining() != 0) return reject(request, "malformed intervals request");
  message_writer answer(message_type::intervals_reply);
  {
    std::lock_guard lock(mutex_);
    vector_time reached;
    // Process 0 holds a departure's intervals from the arrivals on, before
    // it takes them in itself.
    if (!intervals_.encode_within(answer, have, upto, message_limit_ - message_overhead, reached))
      return reject(request, "intervals asked for that this process does not hold");
    bool moved = false;
    for (int q = 0; q < nprocs_; ++q) moved = moved || reached[q] > std::max(have[q], intervals_.base(q));
    if (!moved && !vector_time_covers(reached, upto))
      job_.fatal("an interval's write notices exceed the largest message allowed, " +
                 std::to_string(message_limit_) + " bytes (TMK_MAX_MESSAGE)");
  }
  reply(request.token(), answer);
}

// At process 0: an arriver's own intervals ahead of its arrival, which
// would not fit in it (barrier_round); kept as an arrival's are.
void node::handle_intervals_ahead(const incoming_request& request, message_reader& reader) {
  std::vector<interval_record> records;
  if (rank_ != 0 || !intervals_decode(reader, nprocs_, npages_, records) || reader.remaining() != 0 ||
      std::any_of(records.begin(), records.end(),
                  [&](const interval_record& record) { return record.owner != request.origin; }))
    return reject(request, "malformed intervals ahead of an arrival");
  {
    std::lock_guard lock(mutex_);
    for (auto& record : records)
      if (!intervals_.add(std::move(record)))
        return reject(request, "intervals ahead of an arrival with a gap");
  }
  message_writer answer(message_type::intervals_reply);
  answer.put<std::uint32_t>(0);
  reply(request.token(), answer);
}

bool node::incorporate(std::vector<interval_record>& records, std::vector<std::uint32_t>* still_mapped) {
  std::vector<std::uint32_t> invalidated;
  unsigned long notices = 0;
  for (auto& record : records) {
    int owner = record.owner;
    if (record.index <= time_[owner]) continue;
    if (record.index != time_[owner] + 1) return false;
    if (owner != rank_) {
      std::uint32_t* newest = notices_[owner];
      if (newest == nullptr) {
        void* made = mmap(nullptr, std::size_t{npages_} * sizeof(std::uint32_t),
                          PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (made == MAP_FAILED) job_.fatal("out of memory for write notices");
        newest = notices_[owner] = static_cast<std::uint32_t*>(made);
      }
      notices += record.pages.size();
      // A run of pages at a time: most notices name pages not held here
      // (each process's band of a grid, at every other process), which
      // need only these two marks, and are passed eight at a time.
      for (const page_run& run : record.pages.runs()) {
        std::fill_n(newest + run.first, run.count, record.index);
        mark_bits(noticed_bits_, run.first, run.count);
        for (std::uint32_t page = run.first, last = run.first + run.count; page < last; ++page) {
          if (page % 8 == 0 && last - page >= 8 && !any_held(page)) {
            page += 7;
            continue;
          }
          // Only a copy held here needs anything now.
          if (!held(page)) continue;
          // A twin never spans a notice of another writer for its page, even
          // one whose diffs the copy holds already (a whole copy from process
          // 0 carries writes of intervals not heard of yet): a diff is
          // ordered by its first interval, so writes made after hearing of
          // the other writer's must start a diff of their own, ordered after
          // it.  The writes so far become a diff and the twin takes it
          // (unless an earlier notice of this message did that already; the
          // program waits in this call, but another of its threads may be
          // writing the page: see seal), and the page stays writable, its
          // twin speculative: the next interval lists the page only if it
          // is written.
          page_extra& entry = extra(page);
          if (entry.twin != nullptr && entry.twin_start <= time_[rank_]) seal_in_place(page, entry);
          if (record.index <= applied(page, owner)) continue;  // in a range applied already
          set_state(page, page_state::invalid);
          if (still_mapped != nullptr) {
            still_mapped->push_back(page);
            continue;
          }
          invalidated.push_back(page);
        }
      }
    }
    time_[owner] = record.index;
    if (!intervals_.add(std::move(record))) return false;
  }
  protect_pages(invalidated, page_state::invalid);
  retire_twins(invalidated);
  counters_.write_notices.fetch_add(notices, std::memory_order_relaxed);
  return true;
}

std::uint32_t node::applied(std::uint32_t page, int writer) {
  page_extra* entry = extras_.find(page);
  if (entry != nullptr)
    for (const auto& progress : entry->writers)
      if (progress.writer == writer) return progress.applied;
  return 0;
}

void node::clear_notices() {
  for (std::uint32_t* array : notices_)
    if (array != nullptr) madvise(array, std::size_t{npages_} * sizeof(std::uint32_t), MADV_DONTNEED);
}

// A collection drops every twin and all page bookkeeping, but a process
// makes them again at its next writes and reads of the pages it keeps
// using: they are bounded by those pages, as its copies of them are, and
// do not count against TMK_GC_THRESHOLD.  Counted, a process whose written
// data alone passed it asked for a collection at every other barrier (SOR
// 4000x8000 on 2 processes, 64 MB of twins a process: 7 collections and
// 1.61 s, against 0.47 s on 1 process; counted only beyond what the last
// collection dropped, 1 collection and 0.45-0.75 s, against 0.25-0.30 s
// with none).  Diffs and interval records only a collection frees.
std::size_t node::collectable_bytes() const {
  return diff_bytes_ + received_bytes_ + intervals_.bytes();
}

}  // namespace tmk
