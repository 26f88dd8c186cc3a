// consistency.cc — closing intervals and incorporating other processes'.
//
// An interval closes at a release, a barrier arrival and an acquire when
// some page is twinned (written since it was last sealed); its write
// notices are the twinned pages, which stay writable.  Incorporating an
// interval records, per page, that its writer has newer diffs, seals the
// page first if this process has unsaved writes to it, and invalidates a
// valid copy — unless the diffs that notice refers to are already applied.
#include "log.h"
#include "node.h"

namespace tmk {

void node::close_interval() {
  std::size_t kept = 0;
  for (std::uint32_t page : twinned_) {
    page_extra* entry = extras_.find(page);
    if (entry != nullptr && entry->twin != nullptr) twinned_[kept++] = page;
  }
  twinned_.resize(kept);
  if (twinned_.empty()) return;
  if (!twinned_sorted_) {
    std::sort(twinned_.begin(), twinned_.end());
    twinned_.erase(std::unique(twinned_.begin(), twinned_.end()), twinned_.end());
    twinned_sorted_ = true;
  }
  ++time_[rank_];
  interval_record record{rank_, time_[rank_], time_, twinned_};
  intervals_.add(std::move(record));
  counters_.intervals.fetch_add(1, std::memory_order_relaxed);
}

bool node::incorporate(message_reader& reader) {
  std::vector<interval_record> records;
  if (!intervals_decode(reader, nprocs_, npages_, records)) return false;
  std::vector<std::uint32_t> invalidated;
  unsigned long notices = 0;
  for (auto& record : records) {
    int owner = record.owner;
    if (record.index <= time_[owner]) continue;
    if (record.index != time_[owner] + 1) return false;
    if (owner != rank_) {
      for (std::uint32_t page : record.pages) {
        page_extra& entry = extra(page);
        writer_progress& progress = progress_of(entry, owner);
        if (record.index > progress.notified) progress.notified = record.index;
        ++notices;
        if (record.index <= progress.applied) continue;
        // The application cannot write now, and the page is protected
        // from it below with the others.
        if (entry.twin != nullptr) seal(page, entry, false);
        page_state state = state_of(page);
        if (state == page_state::read_only || state == page_state::read_write) {
          set_state(page, page_state::invalid);
          invalidated.push_back(page);
        }
      }
    }
    time_[owner] = record.index;
    if (!intervals_.add(std::move(record))) return false;
  }
  protect_pages(invalidated, page_state::invalid);
  counters_.write_notices.fetch_add(notices, std::memory_order_relaxed);
  return true;
}

std::size_t node::consistency_bytes() const {
  return twin_count_ * page_size_ + diff_bytes_ + intervals_.bytes() + extras_.bytes();
}

}  // namespace tmk
