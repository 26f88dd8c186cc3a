// interval.h — intervals and their write notices.
//
// A process's execution is cut into intervals at releases, barriers and
// acquires (when it wrote something).  An interval record carries its
// owner, its index among the owner's intervals, the owner's vector time
// when it closed, and the pages it modified (its write notices).  The store
// holds, per owner, a contiguous run of records: everything after the last
// garbage collection up to the newest one known.  An acquire sends exactly
// the records the acquirer lacks, so runs stay contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <iterator>
#include <span>
#include <vector>

#include "message.h"
#include "vector_time.h"

namespace tmk {

// A set of page numbers, in increasing order, kept as runs of consecutive
// pages: write notices are mostly bands of arrays (an interval of SOR or
// Jacobi lists 500 to 1000 pages in one or two runs), so a record takes a
// few words where it took 4 bytes a page.  In messages (put_pages): the
// number of words, then per run the page number, or for a run of two pages
// or more the first with the top bit set and the count; a list of single
// pages is the plain list of words.
struct page_run {
  std::uint32_t first;
  std::uint32_t count;
  bool operator==(const page_run&) const = default;
};

class page_list {
 public:
  class iterator {
   public:
    using value_type = std::uint32_t;
    using difference_type = std::ptrdiff_t;
    using iterator_category = std::forward_iterator_tag;
    using reference = std::uint32_t;
    using pointer = void;
    iterator() = default;
    iterator(const page_run* run, std::uint32_t offset) : run_(run), offset_(offset) {}
    std::uint32_t operator*() const { return run_->first + offset_; }
    iterator& operator++() {
      if (++offset_ == run_->count) {
        ++run_;
        offset_ = 0;
      }
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const iterator&) const = default;

   private:
    const page_run* run_ = nullptr;
    std::uint32_t offset_ = 0;
  };

  page_list() = default;
  // From page numbers in increasing order, each once.
  explicit page_list(std::span<const std::uint32_t> sorted);
  page_list(std::initializer_list<std::uint32_t> sorted)
      : page_list(std::span<const std::uint32_t>(sorted.begin(), sorted.size())) {}

  iterator begin() const { return {runs_.data(), 0}; }
  iterator end() const { return {runs_.data() + runs_.size(), 0}; }
  std::size_t size() const { return size_; }  // pages
  bool empty() const { return size_ == 0; }
  bool contains(std::uint32_t page) const;
  std::span<const page_run> runs() const { return runs_; }
  // Adds count pages from first, all above every page held (a run that
  // continues the last one joins it); false, and nothing added, otherwise.
  bool append(std::uint32_t first, std::uint32_t count);
  bool operator==(const page_list&) const = default;

 private:
  std::vector<page_run> runs_;
  std::size_t size_ = 0;
};

void put_pages(message_writer& writer, const page_list& pages);
// Reads what put_pages wrote: pages below npages, increasing; false on
// anything else.
bool get_pages(message_reader& reader, std::uint32_t npages, page_list& out);

struct interval_record {
  std::int32_t owner = 0;
  std::uint32_t index = 0;  // 1, 2, ... per owner
  vector_time time;         // time[owner] == index
  page_list pages;
};

class interval_store {
 public:
  explicit interval_store(int nprocs) : runs_(nprocs), base_(nprocs, 0) {}

  int nprocs() const { return static_cast<int>(runs_.size()); }
  // Highest index held for owner (0: none ever).
  std::uint32_t known(int owner) const {
    return base_[owner] + static_cast<std::uint32_t>(runs_[owner].size());
  }
  // Highest index discarded by garbage collection.
  std::uint32_t base(int owner) const { return base_[owner]; }
  // Adds a record; a duplicate is ignored.  False if it would leave a gap.
  bool add(interval_record record);
  const interval_record* find(int owner, std::uint32_t index) const;
  // Appends every record (have[q], upto[q]] past the base to writer; false
  // if one is missing (never received).
  bool encode(message_writer& writer, const vector_time& have, const vector_time& upto) const;
  // The same, in owner order, as many records as fit in max_bytes (the
  // count included); reached: how far each owner's records went (at least
  // have).  The rest, (reached, upto], is for another message.
  bool encode_within(message_writer& writer, const vector_time& have, const vector_time& upto,
                     std::size_t max_bytes, vector_time& reached) const;
  // Discards every record up to upto (garbage collection).
  void discard_through(const vector_time& upto);
  // Bytes the records take.
  std::size_t bytes() const { return bytes_; }
  std::size_t count() const;

 private:
  bool encode_into(message_writer& writer, const vector_time& have, const vector_time& upto,
                   std::size_t max_bytes, std::uint32_t* reached) const;
  std::vector<std::deque<interval_record>> runs_;
  std::vector<std::uint32_t> base_;
  std::size_t bytes_ = 0;
};

// Reads the records encode() wrote, checking owners, indices, vector times
// and page numbers; false on anything malformed.
bool intervals_decode(message_reader& reader, int nprocs, std::uint32_t npages,
                      std::vector<interval_record>& out);

std::size_t interval_bytes(const interval_record& record);
// The bytes encode() writes for a record.
std::size_t encoded_bytes(const interval_record& record);

}  // namespace tmk
