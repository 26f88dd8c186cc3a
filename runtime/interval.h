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

#include <cstdint>
#include <deque>
#include <vector>

#include "message.h"
#include "vector_time.h"

namespace tmk {

struct interval_record {
  std::int32_t owner = 0;
  std::uint32_t index = 0;  // 1, 2, ... per owner
  vector_time time;         // time[owner] == index
  std::vector<std::uint32_t> pages;
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
  // Discards every record up to upto (garbage collection).
  void discard_through(const vector_time& upto);
  // Bytes the records take.
  std::size_t bytes() const { return bytes_; }
  std::size_t count() const;

 private:
  std::vector<std::deque<interval_record>> runs_;
  std::vector<std::uint32_t> base_;
  std::size_t bytes_ = 0;
};

// Reads the records encode() wrote, checking owners, indices, vector times
// and page numbers; false on anything malformed.
bool intervals_decode(message_reader& reader, int nprocs, std::uint32_t npages,
                      std::vector<interval_record>& out);

std::size_t interval_bytes(const interval_record& record);

}  // namespace tmk
