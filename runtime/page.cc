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
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "diff.h"
#include "log.h"
#include "node.h"

namespace tmk {

namespace {
int protection(page_state state) {
  switch (state) {
    case page_state::read_write: return PROT_READ | PROT_WRITE;
    case page_state::read_only: return PROT_READ;
    default: return PROT_NONE;
  }
}
}  // namespace

page_state node::state_of(std::uint32_t page) const {
  std::uint8_t initial = static_cast<std::uint8_t>(rank_ == 0 ? page_state::read_only
                                                              : page_state::unfetched);
  return static_cast<page_state>(states_[page] ^ initial);
}

void node::set_state(std::uint32_t page, page_state state) {
  std::uint8_t initial = static_cast<std::uint8_t>(rank_ == 0 ? page_state::read_only
                                                              : page_state::unfetched);
  states_[page] = static_cast<std::uint8_t>(state) ^ initial;
}

void node::protect(std::uint32_t page, page_state state) {
  std::vector<std::uint32_t> one{page};
  protect_pages(one, state);
}

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

writer_progress& node::progress_of(page_extra& page, int writer) {
  for (auto& entry : page.writers)
    if (entry.writer == writer) return entry;
  page.writers.push_back({writer, 0, 0});
  return page.writers.back();
}

bool node::handle_fault(void* address) {
  auto* at = static_cast<std::byte*>(address);
  if (at < shared_base_ || at >= shared_base_ + config_.shared_size) return false;
  auto page = static_cast<std::uint32_t>((at - shared_base_) / static_cast<std::ptrdiff_t>(page_size_));
  std::unique_lock lock(mutex_);
  switch (state_of(page)) {
    case page_state::read_write:
      return true;
    case page_state::read_only:
      counters_.write_faults.fetch_add(1, std::memory_order_relaxed);
      make_writable(page);
      return true;
    case page_state::invalid:
    case page_state::unfetched:
      // A write to an invalid page faults again once the page is valid.
      counters_.read_faults.fetch_add(1, std::memory_order_relaxed);
      validate(page, lock);
      return true;
  }
  return false;
}

void node::make_writable(std::uint32_t page) {
  page_extra& entry = extra(page);
  entry.twin = static_cast<std::byte*>(malloc(page_size_));
  if (entry.twin == nullptr) job_.fatal("out of memory for a twin page");
  memcpy(entry.twin, runtime_page(page), page_size_);
  entry.twin_start = time_[rank_] + 1;
  twinned_.push_back(page);
  ++twin_count_;
  counters_.twins.fetch_add(1, std::memory_order_relaxed);
  set_state(page, page_state::read_write);
  protect(page, page_state::read_write);
}

// Takes write permission away first, so that the application cannot write
// while the diff is made; its next write faults and makes a new twin.
void node::seal(std::uint32_t page, page_extra& entry) {
  protect(page, page_state::read_only);
  set_state(page, page_state::read_only);
  sealed_diff sealed{entry.twin_start, std::max(entry.twin_start, time_[rank_]), {}};
  diff_create(entry.twin, runtime_page(page), page_size_, sealed.bytes);
  diff_bytes_ += sealed.bytes.size() + sizeof sealed;
  entry.diffs.push_back(std::move(sealed));
  drop_twin(entry);
  counters_.diffs_created.fetch_add(1, std::memory_order_relaxed);
}

void node::drop_twin(page_extra& entry) {
  free(entry.twin);
  entry.twin = nullptr;
  --twin_count_;
}

void node::validate(std::uint32_t page, std::unique_lock<std::mutex>& lock) {
  if (state_of(page) == page_state::unfetched) fetch_whole_page(page, lock);
  fetch_diffs(page, lock);
  set_state(page, page_state::read_only);
  protect(page, page_state::read_only);
}

// A page never seen here: process 0's copy, with how far that copy has
// applied each writer's diffs.
void node::fetch_whole_page(std::uint32_t page, std::unique_lock<std::mutex>& lock) {
  message_writer request(message_type::page_request);
  request.put<std::uint32_t>(page);
  std::string what = "fetching page " + std::to_string(page) + " from process 0";
  lock.unlock();
  std::vector<std::byte> answer = await(send_request(0, request, what), what);
  lock.lock();
  message_reader reader(answer);
  auto contents = reader.type() == message_type::page_reply ? reader.get_bytes()
                                                             : std::span<const std::byte>{};
  std::uint32_t count = reader.take<std::uint32_t>();
  if (!reader.ok() || contents.size() != page_size_ || count > static_cast<std::uint32_t>(nprocs_))
    protocol_failure("malformed page from process 0");
  memcpy(runtime_page(page), contents.data(), page_size_);
  page_extra& entry = extra(page);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::int32_t writer = reader.take<std::int32_t>();
    std::uint32_t applied = reader.take<std::uint32_t>();
    if (!reader.ok() || writer < 0 || writer >= nprocs_) protocol_failure("malformed page versions");
    if (writer == rank_) continue;
    writer_progress& progress = progress_of(entry, writer);
    progress.applied = std::max(progress.applied, applied);
  }
  counters_.page_fetches.fetch_add(1, std::memory_order_relaxed);
  set_state(page, page_state::invalid);
}

// Fetches, from every writer at once, the diffs this page lacks, and
// applies them in happens-before order: each range at the place of its
// first interval (a total order consistent with happens-before: the sum of
// the interval's vector time).
void node::fetch_diffs(std::uint32_t page, std::unique_lock<std::mutex>& lock) {
  page_extra& entry = extra(page);
  struct wanted {
    std::int32_t writer;
    std::uint32_t from;  // exclusive
    std::uint32_t to;
  };
  std::vector<wanted> asks;
  for (const auto& progress : entry.writers)
    if (progress.notified > progress.applied)
      asks.push_back({progress.writer, progress.applied, progress.notified});
  if (asks.empty()) return;

  std::string what = "fetching diffs of page " + std::to_string(page);
  lock.unlock();
  std::vector<request_id> ids;
  for (const auto& ask : asks) {
    message_writer request(message_type::diff_request);
    request.put<std::uint32_t>(page);
    request.put<std::uint32_t>(ask.from);
    request.put<std::uint32_t>(ask.to);
    ids.push_back(send_request(ask.writer, request, what));
  }
  counters_.diff_requests.fetch_add(asks.size(), std::memory_order_relaxed);
  std::vector<std::vector<std::byte>> replies(ids.size());
  await_all(ids, replies, what);
  lock.lock();

  struct received {
    std::uint64_t order;
    std::int32_t writer;
    std::span<const std::byte> bytes;
  };
  std::vector<received> diffs;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    message_reader reader(replies[i]);
    if (reader.type() != message_type::diff_reply) protocol_failure("malformed diff reply");
    std::uint32_t count = reader.take<std::uint32_t>();
    std::uint32_t newest = asks[i].to;
    for (std::uint32_t k = 0; k < count && reader.ok(); ++k) {
      std::uint32_t first = reader.take<std::uint32_t>();
      std::uint32_t last = reader.take<std::uint32_t>();
      auto bytes = reader.get_bytes();
      if (!reader.ok() || first <= asks[i].from || first > last || !diff_valid(bytes, page_size_))
        protocol_failure("process " + std::to_string(asks[i].writer) + " sent a bad diff of page " +
                         std::to_string(page));
      const interval_record* record = intervals_.find(asks[i].writer, first);
      std::uint64_t order = record ? vector_time_sum(record->time) : 0;
      diffs.push_back({order, asks[i].writer, bytes});
      newest = std::max(newest, last);
    }
    if (!reader.ok()) protocol_failure("malformed diff reply");
    progress_of(entry, asks[i].writer).applied = newest;
  }
  std::stable_sort(diffs.begin(), diffs.end(), [](const received& a, const received& b) {
    return a.order != b.order ? a.order < b.order : a.writer < b.writer;
  });
  for (const auto& diff : diffs) diff_apply(runtime_page(page), page_size_, diff.bytes);
  counters_.diffs_applied.fetch_add(diffs.size(), std::memory_order_relaxed);
}

void node::handle_diff_request(const incoming_request& request, message_reader& reader) {
  std::uint32_t page = reader.take<std::uint32_t>();
  std::uint32_t from = reader.take<std::uint32_t>();
  std::uint32_t to = reader.take<std::uint32_t>();
  if (!reader.ok() || page >= npages_ || from >= to)
    return reject(request, "malformed diff request");
  message_writer answer(message_type::diff_reply);
  {
    std::lock_guard lock(mutex_);
    if (to > time_[rank_]) return reject(request, "diffs of intervals not closed yet");
    page_extra* found = extras_.find(page);
    std::uint32_t count = 0;
    std::size_t count_offset = answer.size();
    answer.reserve(sizeof count);
    if (found != nullptr) {
      page_extra& entry = *found;
      if (entry.twin != nullptr && entry.twin_start <= to) seal(page, entry);
      for (const auto& diff : entry.diffs)
        if (diff.last > from && diff.first <= to) {
          answer.put<std::uint32_t>(diff.first);
          answer.put<std::uint32_t>(diff.last);
          answer.put_bytes(diff.bytes);
          ++count;
        }
    }
    memcpy(answer.buffer().data() + count_offset, &count, sizeof count);
  }
  reply(request.token(), answer);
}

// Process 0's copy of a page: sealed first if its twin holds writes of a
// closed interval; the twin itself if it holds only writes of the open
// interval (which no one may see yet).
void node::handle_page_request(const incoming_request& request, message_reader& reader) {
  std::uint32_t page = reader.take<std::uint32_t>();
  if (!reader.ok() || page >= npages_ || rank_ != 0) return reject(request, "malformed page request");
  message_writer answer(message_type::page_reply);
  {
    std::lock_guard lock(mutex_);
    const std::byte* contents = runtime_page(page);
    page_extra* found = extras_.find(page);
    if (found != nullptr && found->twin != nullptr) {
      if (found->twin_start <= time_[rank_])
        seal(page, *found);
      else
        contents = found->twin;
    }
    answer.put_bytes({contents, page_size_});
    std::uint32_t count = 1;
    if (found != nullptr) count += static_cast<std::uint32_t>(found->writers.size());
    answer.put<std::uint32_t>(count);
    answer.put<std::int32_t>(rank_);
    answer.put<std::uint32_t>(time_[rank_]);
    if (found != nullptr)
      for (const auto& progress : found->writers) {
        answer.put<std::int32_t>(progress.writer);
        answer.put<std::uint32_t>(progress.applied);
      }
  }
  reply(request.token(), answer);
}

}  // namespace tmk
