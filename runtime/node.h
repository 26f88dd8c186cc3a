// node.h — one process of a tmk job: its share of the protocol state and
// the operations behind the public Tmk_* calls.
//
// Protocol (homeless multiple-writer lazy release consistency):
// - The shared region is a memfd mapped twice: the application view at the
//   same address in every process, whose protections drive the protocol,
//   and the runtime view, always read-write, through which the runtime
//   copies pages and makes and applies diffs.
// - The first write to a read-only page makes a twin and opens the page
//   read-write.  The twin then spans intervals: every interval that closes
//   while the page is twinned lists it in its write notices, and the page
//   stays writable, so a page rewritten every interval costs one fault, not
//   one per interval.  Once sealed, the twin is speculative: an interval
//   lists the page only if it differs from the twin at the close, and after
//   8 closes in a row that find it unwritten (twin_idle_closes) the twin is
//   dropped and the page write-protected.
//   The page is sealed — its writes so far made a diff against the twin —
//   only in these cases:
//   * some process asks for those writes, or process 0 sends the page
//     whole: the diff is made against a copy of the page, which becomes
//     the twin, and the page stays writable;
//   * a write notice from another process for the page arrives, even one
//     whose writes the copy holds already: the application waits in a
//     synchronisation call, the twin becomes a copy of the page, and the
//     page stays writable unless the notice invalidates it (at a barrier,
//     even then if the diffs pushed with the departure complete it, the
//     twin taking them too);
//   * garbage collection, which takes write permission away and drops the
//     twin.
//   A sealed diff is labelled with the intervals it covers, [twin_start,
//   last closed]; for one page and writer these ranges never overlap.
//   Diffs are applied in the order of their first intervals, which is
//   happens-before order for every write in them because a twin never
//   spans a notice of another writer for its page: the writes of other
//   processes that a diff's writes follow come before its first interval.
//   (So a diff may also carry writes of the open interval made before the
//   seal.)
// - Each process records per page and writer how far it has applied that
//   writer's diffs and how far it has been notified; a fault fetches the
//   missing ranges from every writer at once and applies the diffs in
//   happens-before order (a range at the place of its first interval).  A
//   page never seen is first fetched whole from process 0, with what that
//   copy already contains — unless no interval of another process has
//   listed it: then it holds zeros, and needs no message.
// - Locks: a manager per lock (id % n) forwards requests to the last
//   requester; the releaser grants directly, with the intervals the
//   acquirer lacks; re-acquiring a lock this process released last costs
//   no message.  Barriers: process 0 gathers arrivals with their new
//   intervals and sends each process what it lacks.  Garbage collection,
//   when the diffs and intervals a process keeps pass TMK_GC_THRESHOLD,
//   brings process 0's pages up to date and discards every diff, twin and
//   interval; process 0 calls it, at a barrier or at any time, and every
//   process takes part at its next synchronisation call or from inside the
//   one it waits in.
// - The service thread (requests from other processes) and the application
//   thread share this state under mutex_, which is never held while waiting
//   for a message.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "Tmk.h"
#include "allocator.h"
#include "config.h"
#include "diff_store.h"
#include "populated.h"
#include "interval.h"
#include "job.h"
#include "message.h"
#include "transport.h"
#include "vector_time.h"

namespace tmk {

enum class page_state : std::uint8_t { unfetched, invalid, read_only, read_write };

// How far this process's copy of a page has applied one writer's diffs:
// every interval of that writer up to `applied` is in the page.
struct writer_progress {
  std::int32_t writer;
  std::uint32_t applied;
};

struct sealed_diff {
  std::uint32_t first;  // the intervals [first, last] of this process it covers
  std::uint32_t last;
  std::span<const std::byte> bytes;  // in diffs_ (diff_store.h)
};

// Another process's diff of a page, applied to the copy here and kept to
// go on with this process's lock grants (see push_to_acquirer).
struct forwarded_diff {
  std::int32_t writer;
  std::uint32_t first, last;
  std::vector<std::byte> bytes;
  bool latest;  // the last kept of its writer's
};

// A process that asked for this process's diffs of a page: until the
// barrier numbered `until`, the page's diffs go to it with each barrier.
// `span` is how many barriers its next request for the page buys.
struct page_reader {
  std::int32_t process;
  std::uint32_t until;
  std::uint32_t span;
};

struct page_extra {
  std::byte* twin = nullptr;
  std::uint32_t twin_start = 0;         // the interval the twin's first writes belong to
  bool speculative = false;             // twin equal to the page at the last close, maybe unwritten
  bool first_spill = false;             // opened with another page's first write, not yet judged
  std::uint8_t idle_closes = 0;         // closes in a row that found a speculative twin unwritten
  bool pushed_unread = false;           // pushed diffs brought the copy up to date, left protected,
                                        // and it has not been read since
  std::uint8_t mapped_pushes = 0;       // barrier pushes applied to the copy kept mapped read-only
                                        // since it was last left protected instead
  std::uint8_t sample_shift = 0;        // the next is left protected at 2^sample_shift of them
  std::vector<sealed_diff> diffs;       // this process's, in order
  std::uint32_t diffs_shrunk = 0;       // of them when shrink_diffs last made them smaller
  std::uint32_t diffs_emptied = 0;      // the first so many of them emptied by shrink_diffs
  std::vector<writer_progress> writers; // other processes'
  std::vector<page_reader> readers;     // who reads this process's writes to it
  std::vector<forwarded_diff> received; // other processes' diffs applied here lately, in order
};

// The diffs of a page that cover an interval of this process after
// `after` and none after `through`.  Both ends of the diffs' intervals
// only grow along the list (a seal's twin starts after the diff it made),
// so those diffs are one run of it, found by two binary searches.  A walk
// of the whole list instead cost a lock's grant and a diff request time
// in proportion to the diffs kept since the last collection: a 64 KiB
// block passed between 2 processes under a lock, every word written each
// time, took 0.34 ms a hand-off at first and 1.5 ms after 12,000.
inline std::span<const sealed_diff> diffs_between(const std::vector<sealed_diff>& diffs,
                                                  std::uint32_t after, std::uint32_t through) {
  auto begin = std::partition_point(diffs.begin(), diffs.end(),
                                    [&](const sealed_diff& d) { return d.last <= after; });
  auto end = std::partition_point(begin, diffs.end(),
                                  [&](const sealed_diff& d) { return d.first <= through; });
  return {begin, end};
}

// Per-entry state for the entries that have any: a two-level table (lookup
// is two indexes; a chunk of 2^chunk_bits entries is made on first use and
// never moved), so that a write notice or a lock lookup costs nanoseconds,
// not a hash lookup.
template <typename T, std::uint32_t chunk_bits>
class chunk_table {
 public:
  static constexpr std::uint32_t chunk_entries = 1u << chunk_bits;
  // In 64 bits: a count near 2^32 rounds up past 32.
  explicit chunk_table(std::uint32_t entries)
      : chunks_((std::uint64_t{entries} + chunk_entries - 1) / chunk_entries) {}
  T& at(std::uint32_t index) {
    auto& chunk = chunks_[index >> chunk_bits];
    if (!chunk) {
      chunk = std::make_unique<T[]>(chunk_entries);
      ++chunks_in_use_;
    }
    return chunk[index & (chunk_entries - 1)];
  }
  T* find(std::uint32_t index) {
    auto& chunk = chunks_[index >> chunk_bits];
    return chunk ? &chunk[index & (chunk_entries - 1)] : nullptr;
  }
  // Calls visit(index, entry) for every entry of every chunk in use.
  template <typename F>
  void for_each(F&& visit) {
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      if (chunks_[c])
        for (std::uint32_t i = 0; i < chunk_entries; ++i)
          visit(static_cast<std::uint32_t>(c * chunk_entries + i), chunks_[c][i]);
  }
  void clear() {
    for (auto& chunk : chunks_) chunk.reset();
    chunks_in_use_ = 0;
  }
  std::size_t bytes() const { return chunks_in_use_ * chunk_entries * sizeof(T); }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::size_t chunks_in_use_ = 0;
};

using page_table = chunk_table<page_extra, 12>;

// Counters behind Tmk_stat; the service thread updates some of them.
struct runtime_counters {
  std::atomic<unsigned long> diffs_created{0};
  std::atomic<unsigned long> diffs_applied{0};
  std::atomic<unsigned long> twins{0};
  std::atomic<unsigned long> read_faults{0};
  std::atomic<unsigned long> write_faults{0};
  std::atomic<unsigned long> page_fetches{0};
  std::atomic<unsigned long> diff_requests{0};
  std::atomic<unsigned long> intervals{0};
  std::atomic<unsigned long> write_notices{0};
  std::atomic<unsigned long> acquires{0};
  std::atomic<unsigned long> remote_acquires{0};
  std::atomic<unsigned long> barriers{0};
  std::atomic<unsigned long> gc_runs{0};
};

class node {
 public:
  static node* instance();
  // In a child the program forked after Tmk_startup, which may not use the
  // runtime or shared memory.
  static bool in_forked_child();
  // Tmk_startup.  Stops the program with a message on bad options.
  static void startup(int argc, char** argv);

  int rank() const { return rank_; }
  int nprocs() const { return nprocs_; }

  // The public calls; each stops the job with a message naming the call and
  // the reason on misuse.
  void* allocate(unsigned size);
  void* extend(unsigned increment);
  void release_block(void* pointer);
  void distribute(const void* pointer, int size);
  void barrier(unsigned id);
  void lock_acquire(unsigned id);
  void lock_release(unsigned id);
  void cond_wait(unsigned lock_id, unsigned cond_id);
  void cond_signal(unsigned lock_id, unsigned cond_id, bool broadcast);
  // Ends the job (Tmk_exit); within_exit when exit() is running already
  // (the program returned from main or called exit), which it then lets
  // go on if the job's status is the program's.
  void exit(int exit_status, bool within_exit = false);
  // The job has ended here: the program's exit handlers are running.
  bool finished() const { return finished_; }
  [[noreturn]] void fail(const char* call, const std::string& reason);
  // Notes the memory this process has as Tmk_startup begins (heap.cc).
  static void remember_startup_memory();
  void refresh_statistics();

  // A fault in the application view; false if address is not shared.
  bool handle_fault(void* address);

  // The calling side of the runtime (its channel for replies, its waits,
  // a fault's fetches) serves one thread of the process at a time: each
  // public call and each fault takes this turn first, so that a program's
  // threads that fault or call at once take turns (a thread may take it
  // again inside its own turn).
  std::unique_lock<std::recursive_mutex> caller_turn() {
    return std::unique_lock<std::recursive_mutex>(caller_turn_);
  }

  // While it lives, the calling thread is inside the runtime: in the call
  // named, in a page fault, or ending the process at exit.  A signal
  // handler of the program's that interrupts the thread there and calls
  // Tmk_* or touches shared memory would enter the runtime again in the
  // middle of changing its state, and wait for ever for a lock its own
  // thread holds: the job stops instead, with a message naming both.
  class inside {
   public:
    inside(node& self, const char* what, const void* address = nullptr);
    ~inside();
    inside(const inside&) = delete;
    inside& operator=(const inside&) = delete;

   private:
    const char* before_;
  };

 private:
  node(job& owner, std::unique_ptr<transport> link, const runtime_config& config, bool statistics);
  status map_region();
  void install_fault_handler();

  // Waiting for replies: a lost peer or a failed send stops the job with
  // what this process was doing.  to_caller: the peer's calling thread
  // handles the request when it next waits (transport::send_request_to_caller).
  request_id send_request(int peer, const message_writer& message, std::string_view what,
                          bool to_caller = false);
  // The id of a request sent, or the job stops naming what failed.
  request_id sent_or_stop(result<request_id>& id, std::string_view what);
  reply_payload await(request_id id, std::string_view what);
  void await_all(std::span<const request_id> ids, std::span<reply_payload> replies,
                 std::string_view what);
  // A wait for another process's synchronisation call (a lock's grant, a
  // condition's wake-up, a barrier's departure): a garbage collection
  // called meanwhile is taken part in from inside it, and it is recorded
  // for deadlock detection (deadlock.cc) as kind, wait_id, cond and id.
  // The reply goes into reply: one reused keeps its buffer for the next
  // (see grant_).
  enum class wait_kind : std::uint32_t { none, barrier, exit, lock, cond };
  void await_synchronization(request_id id, std::string_view what, reply_payload& reply,
                             wait_kind kind, std::uint32_t wait_id, std::uint32_t cond = 0);
  void check_replies(const status& waited, std::span<reply_payload> replies,
                     std::string_view what);
  void send_one_way(int peer, const message_writer& message, std::string_view what,
                    bool rung = true);
  void reply(const reply_token& to, const message_writer& message);
  // The same, the message's buffer given to a reply to this process itself.
  void reply(const reply_token& to, message_writer&& message);
  void replied(const reply_token& to, const status& sent);
  [[noreturn]] void protocol_failure(const std::string& what);

  // Requests from other processes (service thread).
  void handle_request(const incoming_request& request);
  void reject(const incoming_request& request, const std::string& why);

  // Pages (page.cc).
  // Kept XOR each page's initial state (read-only at process 0, unfetched
  // elsewhere), so that the array starts as zeros.  Inline: a barrier's
  // write notices look up every page they name (in Jacobi on 8 processes,
  // through a call per page, 3% of the samples).
  page_state state_of(std::uint32_t page) const {
    return static_cast<page_state>(states_[page] ^ initial_state_);
  }
  void set_state(std::uint32_t page, page_state state) {
    states_[page] = static_cast<std::uint8_t>(state) ^ initial_state_;
  }
  std::byte* runtime_page(std::uint32_t page) const {
    return runtime_view_ + static_cast<std::size_t>(page) * page_size_;
  }
  void protect_pages(std::vector<std::uint32_t>& pages, page_state state);
  page_extra& extra(std::uint32_t page) { return extras_.at(page); }
  bool never_written(std::uint32_t page) const;
  // The newest interval of writer known to modify page (0: none).
  std::uint32_t notified(int writer, std::uint32_t page) const {
    return notices_[writer] != nullptr ? notices_[writer][page] : 0;
  }
  std::uint32_t applied(std::uint32_t page, int writer);
  bool up_to_date(std::uint32_t page);
  void clear_notices();
  void populate(const std::vector<std::uint32_t>& pages);
  // Whole pages between buffers and the memfd, with one preadv or pwritev
  // per run of consecutive pages: no access through the runtime view.
  void read_through_file(std::span<const std::uint32_t> pages,
                         std::span<std::byte* const> into) const;
  void write_through_file(std::span<const std::uint32_t> pages,
                          std::span<std::byte* const> from);
  void mark_filled(std::span<const std::uint32_t> pages);
  void allocate(std::span<const std::uint32_t> holes) const;
  void discard_pages(const std::vector<std::uint32_t>& pages);
  bool read_before(std::uint32_t page) const {
    return (read_bits_[page / 64] >> (page % 64)) & 1;
  }
  // A copy of the page is valid here (readable by the application).
  bool held(std::uint32_t page) const {
    page_state state = state_of(page);
    return state == page_state::read_only || state == page_state::read_write;
  }
  // Some copy of the eight pages from first (a multiple of 8) is held:
  // their states in one word, held ones with bit 1 set.
  bool any_held(std::uint32_t first) const {
    static_assert(static_cast<int>(page_state::read_only) == 2 &&
                  static_cast<int>(page_state::read_write) == 3 &&
                  static_cast<int>(page_state::unfetched) < 2 &&
                  static_cast<int>(page_state::invalid) < 2);
    constexpr std::uint64_t every_byte = 0x0101010101010101;
    std::uint64_t states;
    memcpy(&states, states_ + first, sizeof states);
    return ((states ^ (initial_state_ * every_byte)) & (2 * every_byte)) != 0;
  }
  // Where the calling thread reads a page's bytes, under mutex_, while
  // the program waits in the runtime (a fault, a close, a seal at a
  // barrier or an acquire): through the application's view if the page
  // is held (mapped readable there, as the fault handler relies on, and
  // faulted in by the program's own accesses), else through the runtime
  // view.  A page the program writes is read by the runtime only at such
  // closes and seals, and through the runtime view each first read
  // faulted there (the close at FFT's first barrier 2 on 2 processes took
  // 66-86 us so, 26-34 us this way).  A page the program may be writing
  // meanwhile (seal_while_writable, for a request) is read through the
  // runtime view: that read races with the program's writes by design,
  // and ThreadSanitizer, which sees the same address, would report it.
  const std::byte* readable_page(std::uint32_t page) const {
    return held(page) ? shared_base_ + static_cast<std::size_t>(page) * page_size_
                      : runtime_page(page);
  }
  bool written_before(std::uint32_t page) const {
    return (written_bits_[page / 64] >> (page % 64)) & 1;
  }
  bool filled(std::uint32_t page) const { return (filled_bits_[page / 64] >> (page % 64)) & 1; }
  bool noticed(std::uint32_t page) const { return (noticed_bits_[page / 64] >> (page % 64)) & 1; }
  writer_progress& progress_of(page_extra& page, int writer);
  std::vector<std::uint32_t> make_writable(std::uint32_t page);
  std::uint32_t first_write_reach(std::uint32_t page);
  void judge_first_spills(std::size_t written, std::size_t unwritten);
  void seal(page_extra& extra, const std::byte* contents);
  const sealed_diff& seal_in_place(std::uint32_t page, page_extra& extra);
  void seal_while_writable(std::uint32_t page, page_extra& extra);
  void record_diff(page_extra& extra, const std::byte* contents);
  void shrink_diffs();
  void drop_twin(page_extra& extra);
  void retire_twins(const std::vector<std::uint32_t>& pages);
  void validate(std::uint32_t page, std::unique_lock<std::mutex>& lock, bool first_read = false);
  // Whole copies from process 0, brought up to date by fetch_diffs before
  // they are written to the memfd.
  struct staged_copies {
    reply_payload answer;              // holds them (diffs are applied there)
    std::vector<std::uint32_t> pages;  // ascending
    std::vector<std::byte*> copies;
  };
  void fetch_whole_pages(const std::vector<std::uint32_t>& pages, std::unique_lock<std::mutex>& lock,
                         staged_copies& staged);
  void fetch_diffs(const std::vector<std::uint32_t>& pages, std::uint32_t faulted,
                   std::unique_lock<std::mutex>& lock,
                   staged_copies staged = {});
  void handle_diff_request(const incoming_request& request, message_reader& reader);
  void subscribe(std::uint32_t page, int process, bool faulted);
  void handle_page_request(const incoming_request& request, message_reader& reader);

  // Intervals (consistency.cc).
  void close_interval();
  bool extends_last_interval(std::span<const std::uint32_t> written);
  // Pages this process could read that a notice invalidates are protected
  // from the application, except, with still_mapped: they are listed
  // there, invalid but still mapped as they were (a writable one with its
  // twin), for the caller to protect once it knows which pushed diffs
  // (which need no fault) bring up to date.
  bool incorporate(std::vector<interval_record>& records,
                   std::vector<std::uint32_t>* still_mapped = nullptr);
  bool put_intervals(message_writer& writer, const vector_time& have, const vector_time& upto,
                     std::size_t max_bytes);
  std::size_t intervals_mark_bytes() const;  // put_intervals' mark of a rest, at most
  bool read_intervals(message_reader& reader, std::vector<interval_record>& records,
                      std::unique_lock<std::mutex>& lock, std::string_view what);
  void handle_intervals_request(const incoming_request& request, message_reader& reader);
  void handle_intervals_ahead(const incoming_request& request, message_reader& reader);
  void send_intervals_ahead(std::unique_lock<std::mutex>& lock, std::size_t room,
                            std::string_view what);
  // What a collection frees for good: diffs and interval records
  // (consistency.cc).
  std::size_t collectable_bytes() const;

  // Locks and condition variables (lock.cc).
  void handle_lock_request(const incoming_request& request, message_reader& reader);
  void serve_lock_request(const incoming_request& request, std::uint32_t id,
                          const vector_time& requester_time);
  message_writer& make_grant(std::uint32_t id, const vector_time& requester_time, int requester);
  void push_to_acquirer(message_writer& grant, int acquirer, const vector_time& acquirer_time);
  void keep_received(page_extra& entry, std::int32_t writer, std::uint32_t first, std::uint32_t last,
                     std::span<const std::byte> bytes);
  void handle_cond(const incoming_request& request, message_type type, message_reader& reader);
  // Condition ids share the range of lock ids.
  void check_lock_id(const char* call, unsigned id, const char* kind = "lock");
  void acquire(std::uint32_t id);  // lock_acquire and lock_release without the checks
  void release(std::uint32_t id);
  std::uint32_t heap_lock() const;

  // Barriers (barrier.cc).  A round returns the newest garbage collection
  // process 0 had called when the barrier ended.
  enum class barrier_kind : std::uint8_t { user, exit, collection_entry, collection_phase };
  // User barriers and Tmk_exit's wait for the program: their waits let a
  // garbage collection through, and if every process waits at such
  // barriers, at different ids, none will ever go on.
  static bool waits_for_program(barrier_kind kind) {
    return kind == barrier_kind::user || kind == barrier_kind::exit;
  }
  static constexpr std::uint32_t exit_barrier = 0xfffffffdu;  // beyond every user id
  static constexpr std::uint32_t collection_entry_barrier = 0xfffffffeu;
  static constexpr std::uint32_t collection_phase_barrier = 0xffffffffu;
  void handle_barrier_arrival(const incoming_request& request, message_reader& reader);
  std::uint32_t barrier_round(std::uint32_t id, barrier_kind kind, const char* call);
  // The messages of pushed diffs this process sends its readers itself,
  // at a barrier, by reader.
  using direct_pushes = std::vector<std::pair<int, message_writer>>;
  void push_diffs(message_writer& arrival, direct_pushes& direct);
  void handle_barrier_push(const incoming_request& request, message_reader& reader);
  std::uint32_t pushes_received(std::uint32_t barrier) const;
  void await_pushes(std::uint32_t expected, std::unique_lock<std::mutex>& lock,
                    std::string_view what);
  // Appends one pushed diff of this process's, as apply_pushed takes it:
  // writer, page, first and last interval, the bytes (pushed_entry_bytes
  // and the diff's own).
  static constexpr std::size_t pushed_entry_bytes = 20;
  // The most one page takes in a fetch's reply, with what labels it: its
  // copy with the versions of every writer (a page reply), or one diff of
  // it (a diff reply: a writer's diffs of a page it alone wrote are merged
  // into one); and the most a reply, or a message of pushed diffs, takes
  // besides its pages.
  static std::size_t reply_bytes_per_page(std::size_t page_size, int nprocs);
  std::size_t reply_bytes_per_page() const { return reply_bytes_per_page(page_size_, nprocs_); }
  std::size_t grant_push_budget() const;
  static constexpr std::size_t message_overhead = 64;
  void put_pushed(message_writer& message, std::uint32_t page, const sealed_diff& diff) const;
  static void put_pushed(message_writer& message, std::int32_t writer, std::uint32_t page,
                         std::uint32_t first, std::uint32_t last, std::span<const std::byte> bytes);
  // Returns, per writer, the pages this process stops taking its pushes of.
  // keep_read_only: a read-only copy brought up to date stays mapped (at a
  // barrier); otherwise only a writable one does (at a lock grant).  more:
  // the pushes of this barrier that other processes sent here themselves.
  std::vector<std::vector<std::uint32_t>> apply_pushed(
      message_reader* reader, std::vector<std::uint32_t>& still_mapped, bool keep_read_only,
      std::span<const std::vector<std::byte>> more = {});
  void stop_pushes(const std::vector<std::vector<std::uint32_t>>& unread);
  void handle_push_stop(const incoming_request& request, message_reader& reader);
  bool listed_between(int writer, std::uint32_t page, std::uint32_t after,
                      std::uint32_t before) const;

  // Garbage collection (collection.cc).
  bool collection_wanted();
  void request_collection();
  std::uint32_t answer_collection_request(std::uint32_t done);
  bool call_collection();
  void announce_collection(std::uint32_t number);
  void note_collection_call(std::uint32_t number);
  void collect_if_called();
  void collect_garbage();
  void handle_collection_request(const incoming_request& request, message_reader& reader);
  void handle_collection_call(const incoming_request& request, message_reader& reader);

  // Heap and distribution (heap.cc).
  void* allocate_unlocked(unsigned size);
  void handle_allocate(const incoming_request& request, message_reader& reader);
  void handle_release(const incoming_request& request, message_reader& reader);
  void handle_distribute(const incoming_request& request, message_reader& reader);
  void handle_statistics(const incoming_request& request, message_reader& reader);
  bool write_statistics_file();

  job& job_;
  std::unique_ptr<transport> link_;
  runtime_config config_;
  int rank_;
  int nprocs_;
  bool print_statistics_;
  std::size_t page_size_;
  std::uint32_t npages_;
  // The largest message the substrate takes (TMK_MAX_MESSAGE): a fetch
  // asks for no more pages than its reply can carry (fetch_limit_), and a
  // barrier's pushes to a reader go in as many messages as they fill.
  std::size_t message_limit_;
  std::uint32_t fetch_limit_;
  std::byte* shared_base_ = nullptr;   // the application view
  std::byte* runtime_view_ = nullptr;  // the same memory, always read-write
  int memfd_ = -1;
  std::recursive_mutex caller_turn_;  // see caller_turn

  std::mutex mutex_;  // everything below
  std::uint8_t* states_ = nullptr;  // per page: state XOR its initial state
  std::uint8_t initial_state_ = 0;  // that initial state (state_of)
  std::uint64_t* read_bits_ = nullptr;  // per page: faulted on for reading here
  std::uint64_t* written_bits_ = nullptr;  // per page: twinned here before
  // Per page: its memory made through the runtime view (populate()); a page
  // written only through the application's view is not marked.
  std::uint64_t* filled_bits_ = nullptr;
  // Per page: an interval of another process listed it, ever (garbage
  // collection keeps these): a page never fetched and never listed holds
  // zeros wherever this process could look.
  std::uint64_t* noticed_bits_ = nullptr;
  // Write notices, per writer: the newest interval of that writer listing
  // each page, in an array over all pages made on the writer's first
  // notice (its memory is committed only where notices land).  Recording a
  // notice is one store; whether a page lacks diffs is looked up when it
  // faults, so notices for pages this process does not hold cost nothing
  // more.
  std::vector<std::uint32_t*> notices_;
  page_table extras_;
  std::vector<std::uint32_t> twinned_;  // pages with a twin (maybe stale entries)
  // Pages whose twins went (retire_twins) with a seal of writes made since
  // the last close: the next close lists them.
  std::vector<std::uint32_t> written_since_close_;
  std::vector<std::uint32_t> subscribed_;  // pages with readers (maybe stale entries)
  bool twinned_sorted_ = true;
  // How far a first write to a page opens the never-written pages after
  // it (make_writable); it adapts to how the program writes.
  std::uint32_t first_write_reach_;
  std::uint32_t last_first_write_ = 0;  // the page of the last first write
  std::size_t first_spill_batches_ = 0;  // first writes that opened more, since the last close
  // Never-written pages the last first write opened beyond its faulting
  // page, and those of first writes that no write next to them has
  // followed since the last close (first_write_reach).
  std::uint32_t last_first_spills_ = 0;
  std::size_t unconfirmed_spills_ = 0;
  std::size_t twin_count_ = 0;
  std::size_t diff_bytes_ = 0;
  std::size_t received_bytes_ = 0;      // of every page_extra's received diffs
  diff_store diffs_;                    // the bytes of every page_extra's diffs
  std::vector<std::byte> shrink_scratch_;  // shrink_diffs' diff being made smaller
  std::vector<std::uint8_t> shrink_written_;  // and the bytes written after it
  page_pool twins_;                     // the memory of every twin (populated.h)
  std::vector<std::span<const std::byte>> merge_parts_;  // diffs of a page to merge for a reader
  std::vector<std::byte> merged_;                         // and their merge
  vector_time time_;  // intervals incorporated, per process
  interval_store intervals_;
  std::uint32_t barrier_sent_ = 0;  // own intervals already sent to process 0
  std::uint32_t barriers_done_ = 0;  // barriers passed (readers' subscriptions count them)
  // User barriers passed: the same count at every process at each one
  // (garbage collections' barriers may run inside a user barrier's wait).
  std::uint32_t user_barriers_done_ = 0;
  // The application thread's last lock grant and user barrier departure,
  // emptied (reset) once read: the substrate fills a reply into the buffer
  // its slot was handed last, so a reply kept here saves the allocation a
  // fresh one cost at every acquire and barrier.
  reply_payload grant_;
  reply_payload departure_;

  struct lock_state {
    bool started = false;  // token and tail set for its manager (lock_of)
    bool token = false;    // this process may take the lock without a message
    bool held = false;
    bool waiting = false;  // requested, not yet granted
    bool has_successor = false;
    reply_token successor;
    vector_time successor_time;
    std::int32_t tail = -1;  // at the manager: the last requester
  };
  // The states of locks below near_lock_ids, in a chunk_table: a lookup is
  // two indexes, three of them on an acquire's critical path (kept in a
  // hash map, lock direct took 0.87 us against 0.83, medians of 11
  // alternated rounds).  Ids above (TMK_MAX_LOCKS goes up to 2^30, and the
  // heap's lock is past every user id) are kept in a hash map, so that a
  // high id does not make a table reaching it.
  static constexpr std::uint32_t near_lock_ids = 65536;
  chunk_table<lock_state, 8> locks_{near_lock_ids};
  std::unordered_map<std::uint32_t, std::unique_ptr<lock_state>> far_locks_;
  lock_state& lock_of(std::uint32_t id);
  struct cond_queue {
    struct waiter {
      std::int32_t process;
      bool signalled = false;
      bool asked = false;  // its wait request came; the reply is owed
      reply_token token;
    };
    std::deque<waiter> waiters;
  };
  std::unordered_map<std::uint64_t, std::unique_ptr<cond_queue>> conds_;

  struct barrier_episode {
    std::vector<std::uint32_t> direct;  // per process, the arrivals whose writers pushed to it
    std::vector<bool> arrived;
    std::vector<reply_token> tokens;
    std::vector<vector_time> times;
    int count = 0;
    bool collect = false;  // some arrival's diffs and intervals passed the threshold
    barrier_kind kind = barrier_kind::user;
  };

  // Pushed diffs that their writers sent here themselves (barrier_push),
  // kept until the user barrier they come with, numbered as
  // user_barriers_done_ counts it, is passed here; and the wait for the
  // last of them.
  struct early_push {
    std::uint32_t barrier;
    std::vector<std::byte> bytes;  // [count][diff]... as in a lock grant
  };
  std::vector<early_push> early_pushes_;
  struct push_wait {  // at the user barrier user_barriers_done_ counts
    bool active = false;
    std::uint32_t expected = 0;
    request_id slot = 0;
  } push_wait_;

  using barrier_map = std::unordered_map<std::uint32_t, std::unique_ptr<barrier_episode>>;
  barrier_map barriers_;
  barrier_map::node_type spare_episode_;  // the last one finished, for the next
  vector_time arrival_sent_;  // barrier_round's scratch: what process 0 has had from this one
  message_writer arrival_writer_{message_type::barrier_arrive};  // barrier_round's arrival
  message_writer lock_request_writer_{message_type::lock_acquire};  // acquire's request
  int barrier_waiting_ = 0;  // arrivals held at user and exit barriers, all ids (process 0)

  // Garbage collections, numbered from 1: the newest process 0 has called
  // (set by either thread), and those this process has taken part in and
  // whether it has asked for one since (the application thread's).
  std::atomic<std::uint32_t> collections_called_{0};
  std::uint32_t collections_done_ = 0;
  bool collection_requested_ = false;
  // Process 0: the newest collection called and the newest finished (one
  // at a time).
  std::uint32_t collections_announced_ = 0;
  std::uint32_t collections_finished_ = 0;

  std::unique_ptr<shared_allocator> heap_;  // process 0
  // The heap's break as far as this process knows it (an address; 0 while
  // it knows none): process 0's own allocator's, others' learned from their
  // allocations, barrier departures and distributions (heap_break_).  Under
  // mutex_.  A first write opens no pages above it along with the page it
  // faults on (see make_writable).
  std::uint64_t heap_break_ = 0;
  std::uint64_t known_heap_break() const { return heap_ ? heap_->break_address() : heap_break_; }
  void learn_heap_break(std::uint64_t address) { heap_break_ = std::max(heap_break_, address); }
  // The first page above the known break (npages_ while none is known).
  std::uint32_t heap_end_page() const;
  std::vector<std::string> gathered_statistics_;  // process 0, at exit
  FILE* statistics_out_ = nullptr;                // process 0: TMK_STATS, open from start-up

  runtime_counters counters_;
  bool exiting_ = false;
  bool finished_ = false;

  // Deadlock detection (deadlock.cc).  The synchronisation wait the
  // calling thread is in, if any, and the request it waits on, read by
  // whichever thread answers process 0's wait_query: serial moves at the
  // wait's start and end, and kind, id, cond and request change only
  // while it is not in the waiting state (a seqlock).
  struct wait_record {
    std::atomic<std::uint64_t> serial{0};
    std::atomic<std::uint32_t> kind{0}, id{0}, cond{0}, request{0};
  };
  wait_record sync_wait_;
  // Process 0 looks for a deadlock once a synchronisation wait has lasted
  // this long (TMK_DEADLOCK_CHECK), and again as often; the others never.
  const std::chrono::steady_clock::duration deadlock_patience_;
  void begin_sync_wait(wait_kind kind, std::uint32_t id, std::uint32_t cond, request_id request);
  void end_sync_wait();
  // One process's wait as a wait_query reports it, and, asked about every
  // process's wait, those whose requests wait here for a call (parked) and
  // the locks waited for that it holds.
  struct wait_snapshot {
    std::uint64_t serial = 0;  // in the waiting state: in a synchronisation wait
    std::uint32_t kind = 0, id = 0, cond = 0, request = 0;
    std::vector<std::uint32_t> parked;  // processes
    std::vector<std::uint32_t> held;    // lock ids
    bool same_wait(const wait_snapshot& other) const {
      return serial == other.serial && kind == other.kind && id == other.id &&
             cond == other.cond && request == other.request;
    }
  };
  wait_snapshot own_wait_snapshot(std::span<const wait_snapshot> waits);
  bool parked_here(int process, const wait_snapshot& wait);
  std::vector<wait_snapshot> wait_snapshots(std::span<const wait_snapshot> waits,
                                            std::string_view what);
  void handle_wait_query(const incoming_request& request, message_reader& reader);
  // Process 0, from inside a synchronisation wait of its own: stops the job
  // if every process waits for a call that none can make.
  void look_for_deadlock(std::string_view what);
  std::string describe_wait(const wait_snapshot& wait) const;
};

}  // namespace tmk
