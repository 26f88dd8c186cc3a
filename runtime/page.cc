// page.cc — page states, faults, twins, sealing and fetching.
//
// Invariants: a page has a twin exactly when it is read-write here; a
// sealed diff covers [twin_start, last closed interval] and ranges of one
// page never overlap; writer_progress.applied is always the end of a range
// the writer sealed (or the writer's last closed interval when a whole
// copy came from process 0), so a fetch asks for (applied, notified] and
// every diff it gets starts after applied.  Costs: a read fault on an
// invalid page is one round trip to each writer at once; a write fault one
// page copy and one mprotect; sealing one diff pass and one mprotect.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "diff.h"
#include "log.h"
#include "node.h"

namespace tmk {

namespace {
// Barriers for which a page's diffs follow a reader after it asked for them
// once.  Each time the reader faults on the page again, after the pushes
// lapsed, it buys twice as many, up to the most: a reader that keeps
// reading a page faults for it a logarithmic number of times, and one that
// stopped is pushed to for no longer than it read, or than the first 64
// barriers.  Those cover a program of tens of barriers (SOR's 20 at its
// default size) with no lapse: with 16, SOR at 2 processes faulted for its
// neighbours' rows again at its 9th iteration, 0.0173 s against 0.0139 s
// (A/B, medians of 7), and pushing a page read once for 64 barriers rather
// than 16 did not slow FFT's 60-iteration run.
constexpr std::uint32_t push_barriers = 64;
constexpr std::uint32_t most_push_barriers = 1024;
// Room in the diff store for new diffs, at least, for each diff a pass of
// shrink_diffs leaves kept (see there).
constexpr std::size_t room_per_kept_diff = 512;

int protection(page_state state) {
  switch (state) {
    case page_state::read_write: return PROT_READ | PROT_WRITE;
    case page_state::read_only: return PROT_READ;
    default: return PROT_NONE;
  }
}
}  // namespace

// Changes the application view's protection of pages, one mprotect per run
// of consecutive pages.  Every run of pages with a protection different
// from its neighbours is a kernel mapping; running out of them is reported
// with the limit that needs raising.
void node::protect_pages(std::vector<std::uint32_t>& pages, page_state state) {
  if (pages.empty()) return;
  std::sort(pages.begin(), pages.end());
  std::size_t start = 0;
  for (std::size_t i = 1; i <= pages.size(); ++i) {
    if (i < pages.size() && pages[i] == pages[i - 1] + 1) continue;
    if (i < pages.size() && pages[i] == pages[i - 1]) continue;
    std::byte* address = shared_base_ + static_cast<std::size_t>(pages[start]) * page_size_;
    std::size_t length = static_cast<std::size_t>(pages[i - 1] - pages[start] + 1) * page_size_;
    if (mprotect(address, length, protection(state)) != 0) {
      if (errno == ENOMEM) {
        long limit = 0;
        if (FILE* file = fopen("/proc/sys/vm/max_map_count", "r")) {
          if (fscanf(file, "%ld", &limit) != 1) limit = 0;
          fclose(file);
        }
        job_.fatal("mprotect of the shared region failed: the process has run out of memory "
                   "mappings (pages in a checkerboard of states; vm.max_map_count is " +
                   std::to_string(limit) +
                   "); raise it with sysctl -w vm.max_map_count=N or use a larger TMK_PAGE_SIZE");
      }
      job_.fatal(std::string("mprotect of the shared region failed: ") + strerror(errno));
    }
    start = i;
  }
}

// True if the page's memory is still a hole of the memfd: no process ever
// wrote it (process 0's copy would hold the writes it knows of).
bool node::never_written(std::uint32_t page) const {
  off_t start = static_cast<off_t>(page) * static_cast<off_t>(page_size_);
  off_t data = lseek(memfd_, start, SEEK_DATA);
  return data < 0 ? errno == ENXIO : data >= start + static_cast<off_t>(page_size_);
}

// Makes pages a hole of the memfd again: their memory goes back to the
// system and reads as zeros, as an unfetched page must.
void node::discard_pages(const std::vector<std::uint32_t>& pages) {
  for (std::uint32_t page : pages) filled_bits_[page / 64] &= ~(std::uint64_t{1} << (page % 64));
  for (std::uint32_t page : pages)
    fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              static_cast<off_t>(page) * static_cast<off_t>(page_size_),
              static_cast<off_t>(page_size_));
}

writer_progress& node::progress_of(page_extra& page, int writer) {
  for (auto& entry : page.writers)
    if (entry.writer == writer) return entry;
  page.writers.push_back({writer, 0});
  return page.writers.back();
}

bool node::handle_fault(void* address) {
  auto* at = static_cast<std::byte*>(address);
  if (at < shared_base_ || at >= shared_base_ + config_.shared_size) return false;
  if (in_forked_child()) {
    // Its faults would be served over its parent's connections.
    log_message(log_level::error,
                "shared memory touched (at %p) in process %d, a child the program forked "
                "after Tmk_startup: only the job's own processes may use shared memory",
                address, static_cast<int>(getpid()));
    _exit(1);
  }
  auto page = static_cast<std::uint32_t>((at - shared_base_) / static_cast<std::ptrdiff_t>(page_size_));
  inside in(*this, "a page fault", address);
  auto turn = caller_turn();
  // The program computed up to here: requests that came meanwhile may be
  // waiting for the core this thread holds (transport::serve_pending).
  link_->serve_pending();
  std::unique_lock lock(mutex_);
  switch (state_of(page)) {
    case page_state::read_write:
      return true;
    case page_state::read_only: {
      counters_.write_faults.fetch_add(1, std::memory_order_relaxed);
      std::vector<std::uint32_t> unmade = make_writable(page);
      lock.unlock();
      populate(unmade);
      return true;
    }
    case page_state::invalid:
    case page_state::unfetched:
      // A write to an invalid page faults again once the page is valid.
      counters_.read_faults.fetch_add(1, std::memory_order_relaxed);
      bool first_read = !read_before(page);
      read_bits_[page / 64] |= std::uint64_t{1} << (page % 64);
      validate(page, lock, first_read);
      return true;
  }
  return false;
}

std::uint32_t node::heap_end_page() const {
  std::uint64_t heap_break = known_heap_break();
  if (heap_break <= reinterpret_cast<std::uint64_t>(shared_base_)) return npages_;
  std::uint64_t above = heap_break - reinterpret_cast<std::uint64_t>(shared_base_);
  std::uint64_t pages = (above + page_size_ - 1) / page_size_;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(npages_, pages));
}

// A write fault on a read-only page: twin it and open it.  Programs write
// arrays in order, so read-only pages after it are twinned and opened with
// it, up to TMK_PREFETCH_PAGES in all, in one mprotect: each of those is a
// write fault saved.  Those this process has written before, and, when
// this is its first write to the faulting page, as many others as the
// reach of first writes allows (a first sweep over an array: a run of SOR
// at 2 processes took 985 write faults each, 67 this way).  Such a twin is
// speculative until the page is found written: closes list it only then
// (see close_interval).  None above the heap's break as far as this
// process knows it (known_heap_break), where a correct program writes
// nothing: FFT's first write to its checksums, the last pages of its heap,
// opened 14 pages beyond them, their memory made for nothing: the checksum
// of its first iteration on 2 processes took 61-65 us so, 17-28 since.
// Returns the pages opened whose memory is not made yet, for populate.
std::vector<std::uint32_t> node::make_writable(std::uint32_t page) {
  std::vector<std::uint32_t> batch{page};
  bool first = !written_before(page);
  std::uint32_t reach = first ? first_write_reach(page) : 1;
  bool spilled = false;
  std::uint32_t end = heap_end_page();
  std::uint32_t spills = 0;
  for (std::uint32_t next = page + 1; next < end && batch.size() < config_.prefetch_pages &&
                                      state_of(next) == page_state::read_only;
       ++next) {
    if (!written_before(next)) {
      if (next - page >= reach) break;
      spilled = true;
      ++spills;
    }
    batch.push_back(next);
  }
  if (spilled) ++first_spill_batches_;
  if (first) last_first_spills_ = spills;
  // Memory not made yet (a hole: zeros never written here) is made once
  // the pages are open, not a fault a page (populate).
  std::vector<std::uint32_t> unfilled;
  std::copy_if(batch.begin(), batch.end(), std::back_inserter(unfilled),
               [&](std::uint32_t opened) { return !filled(opened); });
  mark_filled(unfilled);
  // Their twins are read through the file: the runtime view has not met
  // them (see move_runs).
  std::vector<std::byte*> unfilled_twins;
  for (std::uint32_t opened : batch) {
    page_extra& entry = extra(opened);
    entry.twin = twins_.take();
    if (entry.twin == nullptr) job_.fatal("out of memory for a twin page");
    if (std::binary_search(unfilled.begin(), unfilled.end(), opened))
      unfilled_twins.push_back(entry.twin);
    else
      memcpy(entry.twin, readable_page(opened), page_size_);
    entry.twin_start = time_[rank_] + 1;
    entry.speculative = opened != page;
    entry.first_spill = opened != page && !written_before(opened);
    entry.idle_closes = 0;
    if (!twinned_.empty() && twinned_.back() >= opened) twinned_sorted_ = false;
    twinned_.push_back(opened);
    ++twin_count_;
    written_bits_[opened / 64] |= std::uint64_t{1} << (opened % 64);
    set_state(opened, page_state::read_write);
  }
  read_through_file(unfilled, unfilled_twins);
  counters_.twins.fetch_add(batch.size(), std::memory_order_relaxed);
  protect_pages(batch, page_state::read_write);
  return unfilled;
}

// How many pages a first write to page opens, counting page: the reach of
// first writes.  It starts at TMK_PREFETCH_PAGES; each close sets it from
// the share of the pages opened so, beyond their faulting pages, that the
// program wrote (judge_first_spills).  Between closes: a page before page
// opened so and still unwritten (equal to its twin) shows a program that
// writes a page here and there, not a sweep, and the reach drops to a
// page; one opened so and written, or a first write to the page after the
// last one (each opened alone), shows a sweep and doubles it.  FFT on 8
// processes writes 2 pages of each 16 in its first sweeps (a process's
// rows of each block): opening 16 at each made every process twin 464
// pages where it wrote 57, each compared at closes and protected again,
// and kept in the way of the pushes of the rows it reads (136 read faults
// on process 0 instead of 40); a run took 16.9 ms instead of 11.9 (medians
// of 9, alternated), on 4 processes (8 pages of 16) 8.2 instead of 7.3.
//
// A first write with no twinned page before it, a jump, leaves the pages
// the last first write opened unconfirmed: a program may come back to
// them (FFT's transposes do), or may write a page here and there, far
// apart (a sparse array, a hash table), where each write opened the pages
// after it for nothing, each with a twin and its memory made: 1536 pages
// written a megabyte apart on each of 2 processes took 177 MB of twins
// and 98 MB of the shared file in each, where one page a write took 85
// and 6.  Past 16 MiB of such pages since the last close, first writes
// open their own page only, until a write next to the last one shows a
// sweep again: what a close would find is bounded.
std::uint32_t node::first_write_reach(std::uint32_t page) {
  bool jumped = true;
  if (page > 0 && state_of(page - 1) == page_state::read_write) {
    page_extra* before = extras_.find(page - 1);
    if (before != nullptr && before->twin != nullptr) {
      jumped = false;
      // The application's view of a page it may write is mapped already.
      const std::byte* contents = shared_base_ + static_cast<std::size_t>(page - 1) * page_size_;
      bool unwritten = before->first_spill && memcmp(before->twin, contents, page_size_) == 0;
      if (unwritten) {
        first_write_reach_ = 1;
      } else if (before->first_spill || last_first_write_ == page - 1) {
        first_write_reach_ = std::min(config_.prefetch_pages, first_write_reach_ * 2);
        unconfirmed_spills_ = 0;
      }
    }
  }
  if (jumped) {
    unconfirmed_spills_ += last_first_spills_;
    if (unconfirmed_spills_ * page_size_ >= (std::size_t{16} << 20)) first_write_reach_ = 1;
  }
  last_first_write_ = page;
  return first_write_reach_;
}

// At a close, the pages that first writes opened beyond their faulting
// pages since the last one, written or not: if the program wrote them all,
// the reach doubles; if not, it becomes the length of the runs it wrote, a
// page and the mean number written after it.
void node::judge_first_spills(std::size_t written, std::size_t unwritten) {
  std::size_t batches = std::exchange(first_spill_batches_, 0);
  unconfirmed_spills_ = 0;
  if (written + unwritten == 0 || batches == 0) return;
  std::uint32_t most = config_.prefetch_pages;
  if (unwritten == 0) {
    first_write_reach_ = std::min(most, first_write_reach_ * 2);
    return;
  }
  auto run = 1 + static_cast<std::uint32_t>((written + batches - 1) / batches);
  first_write_reach_ = std::clamp<std::uint32_t>(run, 1, most);
}

// Seals a page: the diff of its contents against the twin is recorded,
// and the twin takes that diff, starting with the next interval.  The
// twin is speculative: the page is listed again only if it is written.
// The application may be writing the page meanwhile: another of its
// threads, while this one waits in the runtime, or the program itself
// while the service thread serves a request.  Each word of the page is
// read for the diff once, and the twin becomes exactly what the diff
// says, not a second read of the page: a write the diff missed differs
// from the new twin and goes into the next diff; one it caught is in this
// diff (as a seal's diff may also hold writes of the open interval) and
// not again (a copy of the page made after the diff would take in, and
// lose, the writes made between the two).  Through readable_page
// (seal_in_place, a page the calling thread's own program waits on) or
// the runtime view (seal_while_writable, for a request, whose read races
// with the program's writes by design, and ThreadSanitizer, which sees
// the same address, would report it).
void node::seal(page_extra& entry, const std::byte* contents) {
  record_diff(entry, contents);
  entry.twin_start = time_[rank_] + 1;
  entry.speculative = true;
  entry.idle_closes = 0;
}

const sealed_diff& node::seal_in_place(std::uint32_t page, page_extra& entry) {
  seal(entry, readable_page(page));
  return entry.diffs.back();
}

// Without taking the page's write permission away: that mprotect would
// have to stop the application's CPU (a TLB shootdown, 270-310 us from the
// service thread on the machine of BENCHMARKS.md for a run of 16 pages)
// and would cost the application a write fault later.
void node::seal_while_writable(std::uint32_t page, page_extra& entry) {
  seal(entry, runtime_page(page));
}

// The diff of a page's contents (read through one of its views) against
// its twin, labelled with the intervals it covers, kept for the processes
// that ask for it; the twin takes it.  A page sealed in the open interval
// once its twin starts there (retire_twins, the twin sealed for a request
// before) and again before that interval is sent anywhere (its page
// written by another thread of the program in between, and twinned anew)
// would have two diffs labelled [open, open]: the second is merged into
// the first.  A reader asks for a page's diffs after the last interval it
// has (fetch_diffs) and applies a pushed diff only after the last it
// applied (apply_pushed), and a barrier pushes a page's last diff alone:
// each would have left one of the two out (api_worker's sealed-twice
// scenario: the reader lost the first seal's write in 3 rounds of 4; its
// thread-calls scenario on 5 processes stopped with "sent a bad diff" in
// 2-3 runs of 60).  No other process may have the first yet: the open
// interval's diffs are asked for, and pushes of them applied, only once
// their writer has closed it and made its notices known, and the twin
// starting in that interval is sealed before its diffs go anywhere.
void node::record_diff(page_extra& entry, const std::byte* contents) {
  if (diffs_.full(diff_max_bytes(page_size_))) shrink_diffs();
  std::byte* room = diffs_.room(diff_max_bytes(page_size_));
  if (room == nullptr) job_.fatal("out of memory for the diff of a page");
  std::size_t size = diff_create(entry.twin, contents, page_size_, room);
  diff_apply(entry.twin, page_size_, {room, size});
  counters_.diffs_created.fetch_add(1, std::memory_order_relaxed);
  std::uint32_t first = entry.twin_start, last = std::max(entry.twin_start, time_[rank_]);
  auto& diffs = entry.diffs;
  if (diffs.empty() || diffs.back().last < first) {
    sealed_diff sealed{first, last, diffs_.keep_made(size)};
    diff_bytes_ += sealed.bytes.size() + sizeof sealed;
    diffs.push_back(std::move(sealed));
    return;
  }
  sealed_diff& before = diffs.back();
  std::span<const std::byte> parts[] = {before.bytes, {room, size}};
  std::vector<std::byte> merged;
  if (!diff_merge(parts, page_size_, merged)) job_.fatal("a diff kept of a page is malformed");
  memcpy(room, merged.data(), merged.size());  // within the room: no diff of a page is larger
  diff_bytes_ -= before.bytes.size();
  diffs_.rewrite(before.bytes, nullptr, 0);
  before.bytes = diffs_.keep_made(merged.size());
  before.last = std::max(before.last, last);
  diff_bytes_ += before.bytes.size();
  // New bytes, for shrink_diffs to take out of the diffs before and to
  // move with the others.
  auto at = static_cast<std::uint32_t>(diffs.size() - 1);
  entry.diffs_shrunk = std::min(entry.diffs_shrunk, at);
  entry.diffs_emptied = std::min(entry.diffs_emptied, at);
}

void node::drop_twin(page_extra& entry) {
  twins_.give(entry.twin);
  entry.twin = nullptr;
  --twin_count_;
}

// Drops the twins of pages just protected (invalid now): the program can
// no longer write them, and what another of its threads wrote since their
// last seal, while this thread waited in the runtime, becomes a diff
// first instead of going with the twin.  Such writes came after the last
// close: the next close lists the page (written_since_close_).  In a
// program of one thread the page equals its twin here (sealed when the
// notice came), and the twin just goes.
void node::retire_twins(const std::vector<std::uint32_t>& pages) {
  for (std::uint32_t page : pages) {
    page_extra* entry = extras_.find(page);
    if (entry == nullptr || entry->twin == nullptr) continue;
    bool sealed_since_close = entry->twin_start > time_[rank_];
    if (!sealed_since_close || memcmp(entry->twin, runtime_page(page), page_size_) != 0) {
      seal(*entry, runtime_page(page));
      if (sealed_since_close) written_since_close_.push_back(page);
    }
    drop_twin(*entry);
  }
}

// Makes page valid, and with it the pages after it, within
// TMK_PREFETCH_PAGES of it, in the same state (never seen, or invalid),
// whose fetches share the same messages: programs read shared arrays in
// order, and a fault costs a round trip, a page's diffs only their bytes.
// Pages valid here already are passed over, not an end: FFT's process 1 on
// 8 processes, reading its block of u (2 pages of each process's, its own
// among them), faulted 4 times for it where once does; all processes
// together sent 5.5 MB instead of 7.1 (fewer pages fetched one at a time
// and pushed after), and a run took 9.6 ms instead of 11.5 (medians of 9,
// alternated, with the change to written_bits_ in close_interval).
void node::validate(std::uint32_t page, std::unique_lock<std::mutex>& lock, bool first_read) {
  page_state wanted = state_of(page);
  std::vector<std::uint32_t> batch{page};
  // An invalid page only if this process has read it before, or reads the
  // faulting page for the first time (a first sweep over data others
  // wrote): each page fetched is a page whose diffs its writers push to
  // this process with the next barriers.  Not at the edge of this
  // process's own data, though (the faulting page or the one before it
  // written here): a process reading across that edge reads a
  // neighbour's boundary rows, not the neighbour's whole band (SOR's
  // process 0 fetched and was pushed 16 pages of its neighbour's where it
  // reads 2).  Never-seen pages always (process 0 seals those it still
  // writes, once, when it first sends them).
  bool sweep = first_read && !written_before(page) && (page == 0 || !written_before(page - 1));
  // A page pushed up to date and left protected (apply_pushed) faults to
  // show it is read: no message, and none for the pages after it either
  // (FFT's process 0, reading its block of work so, fetched the next
  // process's block, which it does not read, 148 kB an iteration).
  bool local = wanted == page_state::invalid && up_to_date(page);
  // Likewise a page never seen that no process has announced (zeros here,
  // no message): it takes no page that others wrote.  A first write to a
  // fresh array otherwise waited for the writers of the pages after it,
  // which it may never read: FFT's processes on 8 processes, writing the
  // last block of work in the first iteration, fetched the parts of
  // twiddle after it, each written by another process, and waited up to
  // 1.8 ms there for one busy on a shared core (all processes together
  // sent 1176 messages and 5416 kB instead of 1231 and 5541).
  bool quiet = wanted == page_state::unfetched && !noticed(page);
  auto joins = [&](std::uint32_t other) {
    return state_of(other) == wanted &&
           (wanted == page_state::unfetched || sweep || read_before(other)) &&
           (!local || up_to_date(other)) && (!quiet || !noticed(other));
  };
  // A sweep that skips pages (FFT's transposes read the first page of each
  // plane, then the second) also takes the invalid pages it passed over
  // just before the faulting one, which it comes back to: process 0 on 2
  // processes faulted 4 times for its block of u, the second page of the
  // other's first plane alone, now 3 (the first transpose 795 -> 668 us
  // and 845 -> 809, medians of 13 and 15, alternated).  Only pages between
  // the faulting one and a page the sweep read: FFT's processes on 8
  // processes, whose sweep starts at a block's first page, took the end of
  // the block before with it, which they do not read, and were pushed it
  // after (all processes sent 9.5 MB instead of 5.5).  Not pages never
  // seen: a page validated as zeros before its writer's notice comes (all
  // those before the first one written) turns invalid, and the next fault
  // finds them in two states.
  if (sweep && wanted == page_state::invalid) {
    std::vector<std::uint32_t> passed;
    bool trail = false;  // they follow a page the sweep read
    for (std::uint32_t prev = page; prev-- > 0 && page - prev < config_.prefetch_pages;) {
      if (held(prev)) {
        trail = read_before(prev);
        break;
      }
      if (!joins(prev)) break;
      passed.push_back(prev);
    }
    // Those nearest the faulting page, as many as a reply carries with it.
    passed.resize(std::min<std::size_t>(passed.size(), fetch_limit_ - 1));
    if (trail) batch.insert(batch.begin(), passed.rbegin(), passed.rend());
  }
  for (std::uint32_t next = page + 1; next < npages_ && next - page < config_.prefetch_pages &&
                                      batch.size() < fetch_limit_;
       ++next) {
    if (held(next)) continue;
    if (!joins(next)) break;
    batch.push_back(next);
  }
  staged_copies staged;
  if (wanted == page_state::unfetched) {
    // A page no interval of another process has listed was never written
    // where this process could see it (a write this process is ordered
    // after comes with its notice): all zeros, as its memory here, a hole,
    // is.  A program's fresh arrays cost no round trip to process 0.
    std::vector<std::uint32_t> copies;
    std::copy_if(batch.begin(), batch.end(), std::back_inserter(copies),
                 [&](std::uint32_t next) { return noticed(next); });
    if (!copies.empty()) fetch_whole_pages(copies, lock, staged);
  }
  fetch_diffs(batch, page, lock, std::move(staged));
  for (std::uint32_t fetched : batch) {
    set_state(fetched, page_state::read_only);
    if (page_extra* entry = extras_.find(fetched)) entry->pushed_unread = false;
  }
  protect_pages(batch, page_state::read_only);
}

// True if the copy here lacks no diff of another process that this one
// knows of.
bool node::up_to_date(std::uint32_t page) {
  for (int writer = 0; writer < nprocs_; ++writer)
    if (writer != rank_ && notified(writer, page) > applied(page, writer)) return false;
  return true;
}

// Makes the memory of a batch of pages just opened for writing, in the
// application's view, one system call per run instead of a fault per page
// at the program's first touch.  Made through the runtime view instead,
// as before, each page still cost the program that fault: a first write
// to 1024 fresh pages on 2 processes took 5.25 us a page that way, 4.44
// this way (medians of 8 alternated runs); the runtime's own reads of it
// while the program waits go through the application's view too
// (readable_page).  Only an
// optimisation: without MADV_POPULATE_WRITE the program's touches fault.
// Called with mutex_ let go: the pages are open already, and making 16
// fresh pages takes 50-60 us on the machine of BENCHMARKS.md, which a
// request for this process's pages would otherwise wait out.
void node::populate(const std::vector<std::uint32_t>& pages) {
#if defined(MADV_POPULATE_WRITE)
  std::size_t start = 0;
  for (std::size_t i = 1; i <= pages.size(); ++i) {
    if (i < pages.size() && pages[i] == pages[i - 1] + 1) continue;
    std::size_t length = static_cast<std::size_t>(pages[i - 1] - pages[start] + 1) * page_size_;
    madvise(shared_base_ + static_cast<std::size_t>(pages[start]) * page_size_, length,
            MADV_POPULATE_WRITE);
    start = i;
  }
#else
  (void)pages;
#endif
}

// Makes the memfd's memory for holes (ascending) while a fetch's request
// is out, one fallocate per run: the write through the file after the
// reply then only copies.  Their contents stay zeros until then.
void node::allocate(std::span<const std::uint32_t> holes) const {
  for (std::size_t start = 0, i = 1; i <= holes.size(); ++i) {
    if (i < holes.size() && holes[i] == holes[i - 1] + 1) continue;
    auto page_size = static_cast<off_t>(page_size_);
    fallocate(memfd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(holes[start]) * page_size,
              static_cast<off_t>(holes[i - 1] - holes[start] + 1) * page_size);
    start = i;
  }
}

void node::mark_filled(std::span<const std::uint32_t> pages) {
  for (std::uint32_t page : pages) filled_bits_[page / 64] |= std::uint64_t{1} << (page % 64);
}

namespace {

// Moves whole pages between buffers and a file, one preadv or pwritev per
// run of consecutive pages; the part a short or failed call leaves (never
// seen on a memfd) goes through the mapping instead.  Why through the
// file: where a hypervisor shadows the page tables, as on the machine of
// BENCHMARKS.md, the first access to a page through a mapping costs a
// fault of 4-5 us, and making the page first 1.5 us more; a pwrite of 16
// fresh pages costs 1.1-1.6 us a page and a pread 0.6-0.9 (the same
// memcpy out of a mapping that is warm, 0.2).  A page fetched or served
// whole is often never touched through the runtime view after (a page
// only read): that fault is saved outright.  A page touched there later
// pays it then, as it did before.
template <bool to_file>
void move_runs(int fd, std::size_t page_size, std::byte* mapping,
               std::span<const std::uint32_t> pages, std::span<std::byte* const> buffers) {
  constexpr std::size_t max_run = 64;
  for (std::size_t start = 0; start < pages.size();) {
    std::size_t end = start + 1;
    while (end < pages.size() && end - start < max_run && pages[end] == pages[end - 1] + 1) ++end;
    iovec parts[max_run];
    for (std::size_t i = start; i < end; ++i) parts[i - start] = {buffers[i], page_size};
    off_t offset = static_cast<off_t>(pages[start]) * static_cast<off_t>(page_size);
    int count = static_cast<int>(end - start);
    ssize_t done = to_file ? pwritev(fd, parts, count, offset) : preadv(fd, parts, count, offset);
    std::size_t moved = done > 0 ? static_cast<std::size_t>(done) : 0;
    for (std::size_t i = start; i < end; ++i) {
      std::size_t begin = (i - start) * page_size;
      if (moved >= begin + page_size) continue;
      std::size_t skip = moved > begin ? moved - begin : 0;
      std::byte* in_mapping = mapping + static_cast<std::size_t>(pages[i]) * page_size + skip;
      if (to_file)
        memcpy(in_mapping, buffers[i] + skip, page_size - skip);
      else
        memcpy(buffers[i] + skip, in_mapping, page_size - skip);
    }
    start = end;
  }
}

}  // namespace

void node::read_through_file(std::span<const std::uint32_t> pages,
                             std::span<std::byte* const> into) const {
  move_runs<false>(memfd_, page_size_, runtime_view_, pages, into);
}

void node::write_through_file(std::span<const std::uint32_t> pages,
                              std::span<std::byte* const> from) {
  move_runs<true>(memfd_, page_size_, runtime_view_, pages, from);
  mark_filled(pages);
}

// Pages never seen here: process 0's copies, with how far each copy has
// applied each writer's diffs.
void node::fetch_whole_pages(const std::vector<std::uint32_t>& pages,
                             std::unique_lock<std::mutex>& lock, staged_copies& staged) {
  message_writer request(message_type::page_request);
  request.put_words(pages);
  std::string what = "fetching page " + std::to_string(pages.front()) + " from process 0";
  std::vector<std::uint32_t> holes;
  std::copy_if(pages.begin(), pages.end(), std::back_inserter(holes),
               [&](std::uint32_t page) { return !filled(page); });
  lock.unlock();
  request_id asked = send_request(0, request, what);
  allocate(holes);
  staged.answer = await(asked, what);
  lock.lock();
  message_reader reader(staged.answer.bytes());
  if (reader.type() != message_type::page_reply) protocol_failure("malformed page reply");
  for (std::uint32_t page : pages) {
    std::uint8_t served = reader.take<std::uint8_t>();
    // A page never written anywhere is all zeros, as an unfetched page is
    // here (its memory is a hole: never written, or punched when dropped).
    auto contents = served == 1 ? reader.get_bytes() : std::span<const std::byte>{};
    std::uint32_t count = reader.take<std::uint32_t>();
    if (!reader.ok() || served == 0 || served > 2 ||
        (served == 1 && contents.size() != page_size_) || count > static_cast<std::uint32_t>(nprocs_))
      protocol_failure("malformed page from process 0");
    if (served == 1) {
      staged.pages.push_back(page);
      std::byte* held = staged.answer.writable_bytes().data();
      staged.copies.push_back(held + (contents.data() - staged.answer.data()));
    }
    page_extra& entry = extra(page);
    for (std::uint32_t i = 0; i < count; ++i) {
      std::int32_t writer = reader.take<std::int32_t>();
      std::uint32_t applied = reader.take<std::uint32_t>();
      if (!reader.ok() || writer < 0 || writer >= nprocs_)
        protocol_failure("malformed page versions");
      if (writer == rank_) continue;
      writer_progress& progress = progress_of(entry, writer);
      progress.applied = std::max(progress.applied, applied);
    }
    set_state(page, page_state::invalid);
  }
  if (!reader.ok()) protocol_failure("malformed page reply");
  counters_.page_fetches.fetch_add(pages.size(), std::memory_order_relaxed);
}

// Fetches, from every writer at once (one request each, for all the pages),
// the diffs these pages lack, and applies them in happens-before order:
// each range at the place of its first interval (the sum of that
// interval's vector time orders it consistently with happens-before).
void node::fetch_diffs(const std::vector<std::uint32_t>& pages, std::uint32_t faulted,
                       std::unique_lock<std::mutex>& lock,
                       staged_copies staged) {
  struct wanted {
    std::uint32_t page;
    std::uint32_t from;  // exclusive
    std::uint32_t to;
    bool alone;  // the only writer whose diffs the page lacks
  };
  std::vector<std::vector<wanted>> asks(nprocs_);
  std::vector<int> writers;
  std::vector<std::pair<int, wanted>> lacking;  // this page's, by writer
  std::vector<std::uint32_t> holes;  // pages the diffs land on, not made here yet
  for (std::uint32_t page : pages) {
    lacking.clear();
    for (int writer = 0; writer < nprocs_; ++writer) {
      if (writer == rank_) continue;
      std::uint32_t newest = notified(writer, page);
      if (newest == 0) continue;
      std::uint32_t done = applied(page, writer);
      if (newest <= done) continue;
      lacking.push_back({writer, {page, done, newest, false}});
    }
    if (!lacking.empty() && !filled(page) &&
        !std::binary_search(staged.pages.begin(), staged.pages.end(), page))
      holes.push_back(page);
    for (auto& [writer, ask] : lacking) {
      if (asks[writer].empty()) writers.push_back(writer);
      ask.alone = lacking.size() == 1;
      asks[writer].push_back(ask);
    }
  }
  if (writers.empty()) {
    // A page served as all zeros stays a hole here until a diff lands on it.
    write_through_file(staged.pages, staged.copies);
    return;
  }

  std::string what = "fetching diffs of page " + std::to_string(faulted);
  lock.unlock();
  // A writer's reply may answer its first ranges only, the last of them
  // perhaps cut (see handle_diff_request): the rest is asked for again, of
  // every such writer at once, until every range is answered.  Nothing is
  // applied before: the diffs of all writers go in together, in order.
  struct received {
    std::uint32_t page;
    std::int32_t writer;
    std::uint32_t first, last;
    std::span<const std::byte> bytes;
    bool merged;              // asked for merged (alone): perhaps several of the writer's
    std::uint64_t order = 0;  // see below
  };
  std::vector<received> diffs;
  std::vector<reply_payload> replies;
  // Each writer's first range not answered yet.
  std::vector<std::size_t> open(static_cast<std::size_t>(nprocs_), 0);
  bool allocated = false;
  // The page faulted on, named in the first requests only (a request for
  // the rest names none: npages_).
  for (std::uint32_t named = faulted; !writers.empty(); named = npages_) {
    std::vector<request_id> ids;
    for (int writer : writers) {
      message_writer request(message_type::diff_request);
      request.put<std::uint32_t>(named);  // the others come along
      std::span<const wanted> rest = std::span(asks[writer]).subspan(open[writer]);
      request.put<std::uint32_t>(static_cast<std::uint32_t>(rest.size()));
      for (const auto& ask : rest) {
        request.put<std::uint32_t>(ask.page);
        request.put<std::uint32_t>(ask.from);
        request.put<std::uint32_t>(ask.to);
        request.put<std::uint32_t>(ask.alone ? diff_ask_merge : 0);
      }
      ids.push_back(send_request(writer, request, what));
    }
    counters_.diff_requests.fetch_add(writers.size(), std::memory_order_relaxed);
    if (!allocated) allocate(holes);
    allocated = true;
    std::size_t kept = replies.size();
    replies.resize(kept + ids.size());
    await_all(ids, std::span(replies).subspan(kept), what);
    std::vector<int> unanswered;
    for (std::size_t w = 0; w < writers.size(); ++w) {
      int writer = writers[w];
      auto malformed = [&] {
        protocol_failure("malformed diff reply from process " + std::to_string(writer));
      };
      message_reader reader(replies[kept + w].bytes());
      bool is_reply = reader.type() == message_type::diff_reply;
      std::uint32_t answered = reader.take<std::uint32_t>();
      std::uint32_t cut = reader.take<std::uint32_t>();
      std::span<wanted> rest = std::span(asks[writer]).subspan(open[writer]);
      if (!is_reply || answered == 0 || answered > rest.size() || cut > 1) malformed();
      for (std::uint32_t a = 0; a < answered; ++a) {
        wanted& ask = rest[a];
        std::uint32_t count = reader.take<std::uint32_t>();
        for (std::uint32_t k = 0; k < count && reader.ok(); ++k) {
          std::uint32_t first = reader.take<std::uint32_t>();
          std::uint32_t last = reader.take<std::uint32_t>();
          auto bytes = reader.get_bytes();
          if (!reader.ok() || first <= ask.from || first > last || !diff_valid(bytes, page_size_))
            protocol_failure("process " + std::to_string(writer) + " sent a bad diff of page " +
                             std::to_string(ask.page));
          diffs.push_back({ask.page, writer, first, last, bytes, ask.alone});
          ask.from = last;
        }
        if (!reader.ok() || (cut != 0 && a + 1 == answered && (count == 0 || ask.from >= ask.to)))
          malformed();
      }
      open[writer] += answered - cut;
      if (open[writer] < asks[writer].size()) unanswered.push_back(writer);
    }
    writers = std::move(unanswered);
  }
  lock.lock();

  for (int writer = 0; writer < nprocs_; ++writer)
    for (const auto& ask : asks[writer]) progress_of(extra(ask.page), writer).applied = ask.to;
  for (auto& diff : diffs) {
    const interval_record* record = intervals_.find(diff.writer, diff.first);
    diff.order = record ? vector_time_sum(record->time) : 0;
    writer_progress& progress = progress_of(extra(diff.page), diff.writer);
    progress.applied = std::max(progress.applied, diff.last);
  }
  std::stable_sort(diffs.begin(), diffs.end(), [](const received& a, const received& b) {
    if (a.page != b.page) return a.page < b.page;
    return a.order != b.order ? a.order < b.order : a.writer < b.writer;
  });
  // Pages not met through the runtime view yet (memory never made here:
  // process 0's pages start as holes of the memfd; or a copy just written
  // through the file) are assembled apart and written through the file
  // (see move_runs).  Applying diffs to 16 holes in place took 320-590 us
  // in FFT, faulting them in one at a time; making their memory first in
  // one call, 120-230 us.
  std::vector<std::uint32_t> unmade;
  for (const auto& diff : diffs)
    if (!filled(diff.page) && (unmade.empty() || unmade.back() != diff.page) &&
        !std::binary_search(staged.pages.begin(), staged.pages.end(), diff.page))
      unmade.push_back(diff.page);
  auto scratch = std::make_unique_for_overwrite<std::byte[]>(unmade.size() * page_size_);
  std::vector<std::byte*> unmade_copies(unmade.size());
  for (std::size_t i = 0; i < unmade.size(); ++i) unmade_copies[i] = scratch.get() + i * page_size_;
  read_through_file(unmade, unmade_copies);
  // Every page assembled apart, ascending: the staged copies and those.
  std::vector<std::uint32_t> apart;
  std::vector<std::byte*> apart_copies;
  for (std::size_t s = 0, u = 0; s < staged.pages.size() || u < unmade.size();) {
    bool staged_next = u == unmade.size() || (s < staged.pages.size() && staged.pages[s] < unmade[u]);
    apart.push_back(staged_next ? staged.pages[s] : unmade[u]);
    apart_copies.push_back(staged_next ? staged.copies[s++] : unmade_copies[u++]);
  }
  for (const auto& diff : diffs) {
    auto at = std::lower_bound(apart.begin(), apart.end(), diff.page);
    bool is_apart = at != apart.end() && *at == diff.page;
    diff_apply(is_apart ? apart_copies[at - apart.begin()] : runtime_page(diff.page), page_size_, diff.bytes);
    // Not a merged diff (asked for alone): its order among other writers'
    // diffs holds only here, where this writer's were all it lacked.
    if (!diff.merged) keep_received(extra(diff.page), diff.writer, diff.first, diff.last, diff.bytes);
  }
  write_through_file(apart, apart_copies);
  counters_.diffs_applied.fetch_add(diffs.size(), std::memory_order_relaxed);
}

// Under mutex_, when the diffs kept fill every chunk of their store: each
// diff gives up the bytes that the later diffs of its page (of this
// process) write too, and the store is compacted once a quarter of its
// room is free (diff_store::compact).  A program that rewrites its pages
// then keeps, of each diff, what no later one rewrote, and its store
// stops growing: Jacobi on 8 processes for 3000 iterations mapped 106
// chunks of 2 MiB (13 a process) and now maps the 16 made at start-up
// (BENCHMARKS.md).
//
// No program free of data races can tell.  A reader that gets a diff but
// not a later one that took byte b from it reads b only if the later
// write of b happened before its read or after it (anything else is a
// race).  Before: the reader knew of the later interval and asked for its
// diff too.  After: impossible, as that write came before this process
// sealed the later diff, and so before the reader's request was served.
// A reader that gets both applies them in order.
//
// Each diff against all the later ones, not only the next: the bytes a
// diff alone writes are most often written again a few intervals on (a
// double's exponent byte, changed now and then), and against the next one
// alone FFT's diffs kept 35-67% of their bytes.  Only pages with diffs
// made since the last pass, and of those only the new diffs are walked
// from the last, the bytes written after each gathered as the walk goes
// (a diff made smaller still adds what it wrote, as what it gave up is
// among them).  The diffs before them write no byte that a later one
// writes (the passes before made them so, and diffs only lose bytes), so
// all the new ones' bytes together are what can still be taken from them,
// and most of them hold bytes that no new diff writes: a page's bytes that
// settled long ago, in a diff of their own.  Walked every time, FFT's
// pages kept a diff from nearly every iteration so, and on 2 processes
// after 2000 iterations each pass made 3000 subtractions (now 1100) over
// 13000 diffs kept.
// Diffs stay in their places in their pages' lists, so a caller holding
// such a place (push_diffs) is not disturbed; their bytes move.
void node::shrink_diffs() {
  std::size_t used = diffs_.bytes_used();
  std::vector<std::span<const std::byte>*> live;
  shrink_scratch_.resize(diff_max_bytes(page_size_));
  shrink_written_.resize(page_size_ / diff_word);
  std::uint8_t* written = shrink_written_.data();
  auto make_smaller = [&](sealed_diff& diff) {
    std::size_t size = diff_subtract_written(diff.bytes, written, shrink_scratch_.data());
    if (size < diff.bytes.size()) {
      diff_bytes_ -= diff.bytes.size() - size;
      diff.bytes = diffs_.rewrite(diff.bytes, shrink_scratch_.data(), size);
    }
  };
  extras_.for_each([&](std::uint32_t, page_extra& entry) {
    auto& diffs = entry.diffs;
    const std::size_t fresh = std::max(entry.diffs_shrunk, entry.diffs_emptied);
    if (diffs.size() > fresh && diffs.size() > 1) {
      std::fill(shrink_written_.begin(), shrink_written_.end(), 0);
      for (std::size_t i = diffs.size() - 1; i-- > fresh;) {
        diff_mark_written(diffs[i + 1].bytes, written);
        if (!diffs[i].bytes.empty()) make_smaller(diffs[i]);
      }
      if (fresh > entry.diffs_emptied) {
        diff_mark_written(diffs[fresh].bytes, written);
        for (std::size_t i = entry.diffs_emptied; i < fresh; ++i)
          if (!diffs[i].bytes.empty() && diff_writes_any(diffs[i].bytes, written))
            make_smaller(diffs[i]);
      }
    }
    entry.diffs_shrunk = static_cast<std::uint32_t>(diffs.size());
    // Those emptied stay so: a program that rewrites its pages empties its
    // diffs as it goes, and later passes start after them.
    while (entry.diffs_emptied < diffs.size() && diffs[entry.diffs_emptied].bytes.empty())
      ++entry.diffs_emptied;
    for (std::size_t i = entry.diffs_emptied; i < diffs.size(); ++i)
      if (!diffs[i].bytes.empty()) live.push_back(&diffs[i].bytes);
  });
  // Moving every diff kept is worth it once a quarter of their room is
  // free (diffs made smaller in this pass and the ones before).
  if ((used - std::min(used, diffs_.bytes_kept())) * 4 >= used) diffs_.compact(live);
  // A pass costs some tenths of a microsecond for each diff kept (looked
  // at, placed, moved) whether or not it changes, and the next comes when
  // the room left is full: the store grows by a chunk while that room is
  // less than room_per_kept_diff bytes for each diff kept, up to a quarter
  // of TMK_GC_THRESHOLD, so that a pass's cost for each diff kept is
  // spread over that many bytes of new diffs.  FFT 32^3 on 2 processes
  // kept 13000 diffs after 2000 iterations (the bytes of its doubles that
  // settled, each in the diff that last changed it) in 2 MiB and passed
  // over them every 9 iterations; its run took 1.9-2.3 s with the store
  // grown so, against 2.8-3.2 s.
  std::size_t wanted = diffs_.bytes_kept() + live.size() * room_per_kept_diff;
  if (diffs_.bytes_mapped() < wanted && diffs_.bytes_mapped() < config_.gc_threshold / 4)
    diffs_.grow();
}

// Under mutex_: process reads page; its diffs go to it with the barriers
// for a while (see push_barriers).
void node::subscribe(std::uint32_t page, int process, bool faulted) {
  page_extra& reading = extra(page);
  auto known = std::find_if(reading.readers.begin(), reading.readers.end(),
                            [&](const page_reader& r) { return r.process == process; });
  if (known == reading.readers.end()) {
    if (reading.readers.empty()) subscribed_.push_back(page);
    reading.readers.push_back({process, barriers_done_ + push_barriers, push_barriers});
    return;
  }
  if (faulted) known->span = std::min(known->span * 2, most_push_barriers);
  known->until = std::max(known->until, barriers_done_ + (faulted ? known->span : push_barriers));
}

void node::handle_diff_request(const incoming_request& request, message_reader& reader) {
  std::uint32_t faulted = reader.take<std::uint32_t>();
  std::uint32_t asked = reader.take<std::uint32_t>();
  if (!reader.ok() || asked == 0 || asked > reader.remaining() / 16)
    return reject(request, "malformed diff request");
  struct asked_range {
    std::uint32_t page, from, to, flags;
  };
  std::vector<asked_range> ranges(asked);
  for (auto& range : ranges) {
    range.page = reader.take<std::uint32_t>();
    range.from = reader.take<std::uint32_t>();
    range.to = reader.take<std::uint32_t>();
    range.flags = reader.take<std::uint32_t>();
    if (!reader.ok() || range.page >= npages_ || range.from >= range.to ||
        (range.flags & ~diff_ask_merge) != 0)
      return reject(request, "malformed diff request");
  }
  // The ranges answered, from the first, and whether the last of them is
  // cut (its later diffs left for the asker's next request): one reply
  // carries no more than TMK_MAX_MESSAGE takes, and the diffs of a page
  // made in many intervals can take more (30 diffs of alternate words of
  // a page, 134 kB, in merged-diffs; see fetch_diffs).  A diff alone
  // always fits (start-up refuses a smaller limit), so every reply
  // carries one at least.
  message_writer answer(message_type::diff_reply);
  std::size_t head = answer.size();
  answer.reserve(2 * sizeof(std::uint32_t));
  std::uint32_t answered = 0, cut = 0;
  {
    std::lock_guard lock(mutex_);
    for (const auto& range : ranges) {
      if (range.to > time_[rank_]) return reject(request, "diffs of intervals not closed yet");
      // The requester reads this page: its diffs go to it with the next
      // barriers (so that it need not fault for them), for a while.
      if (request.origin != rank_) subscribe(range.page, request.origin, range.page == faulted);
      page_extra* entry = extras_.find(range.page);
      if (entry != nullptr && entry->twin != nullptr && entry->twin_start <= range.to)
        seal_while_writable(range.page, *entry);
    }
    auto asked_for = [&](const asked_range& range) {
      page_extra* entry = extras_.find(range.page);
      return entry == nullptr ? std::span<const sealed_diff>{}
                              : diffs_between(entry->diffs, range.from, range.to);
    };
    // Room for every diff asked for at once (merged ones take no more).
    std::size_t bytes = 0;
    for (const auto& range : ranges)
      for (const auto& diff : asked_for(range)) bytes += diff.bytes.size() + 12;
    answer.room_for(std::min(bytes + 4 * ranges.size(), message_limit_));
    auto fits = [&](std::size_t more) {
      return answer.size() + more + message_overhead <= message_limit_;
    };
    for (const auto& range : ranges) {
      std::uint32_t page = range.page;
      std::uint32_t count = 0;
      if (!fits(sizeof count)) break;
      std::size_t count_offset = answer.size();
      answer.reserve(sizeof count);
      auto put_diff = [&](std::uint32_t first, std::uint32_t last, std::span<const std::byte> diff) {
        answer.put<std::uint32_t>(first);
        answer.put<std::uint32_t>(last);
        answer.put_bytes(diff);
        ++count;
      };
      std::span<const sealed_diff> wanted = asked_for(range);
      if ((range.flags & diff_ask_merge) != 0 && wanted.size() > 1) {
        merge_parts_.clear();
        for (const auto& diff : wanted) merge_parts_.push_back(diff.bytes);
        merged_.clear();
        if (!diff_merge(merge_parts_, page_size_, merged_))
          job_.fatal("a diff kept for page " + std::to_string(page) + " is malformed");
        if (fits(12 + merged_.size())) put_diff(wanted.front().first, wanted.back().last, merged_);
      } else {
        for (const auto& diff : wanted) {
          if (!fits(12 + diff.bytes.size())) break;
          put_diff(diff.first, diff.last, diff.bytes);
        }
      }
      if (count == 0 && !wanted.empty()) {
        answer.truncate(count_offset);  // left whole for the next request
        break;
      }
      cut = count > 0 && (range.flags & diff_ask_merge) == 0 && wanted.size() > count;
      memcpy(answer.data() + count_offset, &count, sizeof count);
      ++answered;
      if (cut != 0) break;
    }
  }
  memcpy(answer.data() + head, &answered, sizeof answered);
  memcpy(answer.data() + head + sizeof answered, &cut, sizeof cut);
  reply(request.token(), answer);
}

std::size_t node::reply_bytes_per_page(std::size_t page_size, int nprocs) {
  // A page reply's: served, the copy's length and bytes, the count of
  // versions and one (process, interval) pair per process at most.  A
  // diff reply's: the count, the first and last interval, the length and
  // the diff.
  std::size_t copy = 1 + 4 + page_size + 4 + 8 * static_cast<std::size_t>(nprocs);
  std::size_t diff = 4 + 4 + 4 + 4 + diff_max_bytes(page_size);
  return std::max(copy, diff);
}

// Process 0's copy of a page: sealed first if its twin holds writes of a
// closed interval (so that no copy ever lacks writes of a closed interval
// without saying so: garbage collection drops twins without diffs), and
// then, as a page twinned in the open interval is, served as its twin (no
// one may see writes of the open interval yet; a seal's twin is the copy
// its diff was made against).  The pages a fault asks for after the
// faulting one are served too: a reader that never saw them reads on, and
// a page left out would cost it a round trip of its own.
void node::handle_page_request(const incoming_request& request, message_reader& reader) {
  std::vector<std::uint32_t> pages;
  if (!reader.get_words(pages, 1024) || pages.empty() || rank_ != 0)
    return reject(request, "malformed page request");
  message_writer answer(message_type::page_reply);
  answer.room_for(pages.size() * (page_size_ + 24 + 8 * static_cast<std::size_t>(nprocs_)));
  // Copies read through the file (see move_runs), into their places in
  // the answer once it is whole.
  std::vector<std::uint32_t> read;
  std::vector<std::size_t> places;
  {
    std::lock_guard lock(mutex_);
    for (std::uint32_t page : pages)
      if (page >= npages_) return reject(request, "page out of range");
    for (std::uint32_t page : pages) {
      page_extra* found = extras_.find(page);
      if (found == nullptr || found->twin == nullptr) continue;
      // A page this process writes: the reader gets its next diffs with
      // the barriers, as after a diff request (subscribe), instead of
      // faulting for them once more first.
      subscribe(page, request.origin, page == pages.front());
      if (found->twin_start <= time_[rank_])
        seal_while_writable(page, *found);  // once for a page asked for twice
    }
    for (std::uint32_t page : pages) {
      // The copy holds this process's writes up to own_version; a page
      // twinned in the open interval is served as its twin.
      const std::byte* contents = runtime_page(page);
      std::uint32_t own_version = time_[rank_];
      page_extra* found = extras_.find(page);
      if (found != nullptr && found->twin != nullptr) {
        contents = found->twin;
        own_version = found->twin_start - 1;
      }
      if (contents != runtime_page(page)) {
        answer.put<std::uint8_t>(1);
        answer.put_bytes({contents, page_size_});
      } else if (never_written(page)) {
        answer.put<std::uint8_t>(2);  // all zeros: nothing to copy
      } else {
        answer.put<std::uint8_t>(1);
        answer.put<std::uint32_t>(static_cast<std::uint32_t>(page_size_));
        read.push_back(page);
        places.push_back(answer.size());
        answer.reserve(page_size_);
      }
      std::uint32_t count = 1;
      if (found != nullptr) count += static_cast<std::uint32_t>(found->writers.size());
      answer.put<std::uint32_t>(count);
      answer.put<std::int32_t>(rank_);
      answer.put<std::uint32_t>(own_version);
      if (found != nullptr)
        for (const auto& progress : found->writers) {
          answer.put<std::int32_t>(progress.writer);
          answer.put<std::uint32_t>(progress.applied);
        }
    }
    std::vector<std::byte*> into(read.size());
    for (std::size_t i = 0; i < read.size(); ++i) into[i] = answer.data() + places[i];
    read_through_file(read, into);
  }
  reply(request.token(), answer);
}

}  // namespace tmk
