// allocator.h — the shared heap's bookkeeping, kept at process 0 outside
// the shared pages.  First fit over free blocks below a break that grows
// upward; blocks of a page or more are page-aligned (so that large arrays
// do not share pages with small objects), smaller ones 16-byte aligned;
// freed blocks merge with their free neighbours.  Tmk_sbrk moves the break.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>

namespace tmk {

class shared_allocator {
 public:
  shared_allocator(std::uint64_t base, std::uint64_t size, std::uint64_t page_size);

  // The address of a new block, or 0 when the region is exhausted.
  std::uint64_t allocate(std::uint64_t size);
  // Extends the heap by increment bytes at the break (page-aligned); 0 when
  // exhausted.
  std::uint64_t extend(std::uint64_t increment);
  // Frees a block allocate() returned; false if address is not one.
  bool release(std::uint64_t address);
  std::uint64_t bytes_in_use() const { return in_use_; }
  std::uint64_t break_address() const { return break_; }

 private:
  void add_free(std::uint64_t address, std::uint64_t size);

  std::uint64_t base_;
  std::uint64_t end_;
  std::uint64_t page_size_;
  std::uint64_t break_;
  std::uint64_t in_use_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;                  // address -> size
  std::unordered_map<std::uint64_t, std::uint64_t> allocated_;   // address -> size
};

}  // namespace tmk
