#include "allocator.h"

namespace tmk {

namespace {
std::uint64_t round_up(std::uint64_t value, std::uint64_t unit) {
  return (value + unit - 1) / unit * unit;
}
}  // namespace

shared_allocator::shared_allocator(std::uint64_t base, std::uint64_t size,
                                   std::uint64_t page_size)
    : base_(base), end_(base + size), page_size_(page_size), break_(base) {}

std::uint64_t shared_allocator::allocate(std::uint64_t size) {
  if (size == 0) size = 1;
  if (size > end_ - base_) return 0;
  std::uint64_t alignment = size >= page_size_ ? page_size_ : 16;
  size = round_up(size, alignment);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    std::uint64_t start = round_up(it->first, alignment);
    std::uint64_t block_end = it->first + it->second;
    if (start + size > block_end) continue;
    std::uint64_t before = start - it->first;
    std::uint64_t after = block_end - (start + size);
    std::uint64_t free_start = it->first;
    free_.erase(it);
    if (before) free_[free_start] = before;
    if (after) free_[start + size] = after;
    allocated_[start] = size;
    in_use_ += size;
    return start;
  }
  std::uint64_t start = round_up(break_, alignment);
  if (start > end_ || size > end_ - start) return 0;
  if (start > break_) add_free(break_, start - break_);
  break_ = start + size;
  allocated_[start] = size;
  in_use_ += size;
  return start;
}

std::uint64_t shared_allocator::extend(std::uint64_t increment) {
  std::uint64_t start = round_up(break_, page_size_);
  std::uint64_t size = round_up(increment, page_size_);
  if (start > end_ || size > end_ - start) return 0;
  if (start > break_) add_free(break_, start - break_);
  break_ = start + size;
  // sbrk space is never freed: it is not a block.
  in_use_ += size;
  return start;
}

bool shared_allocator::release(std::uint64_t address) {
  auto found = allocated_.find(address);
  if (found == allocated_.end()) return false;
  std::uint64_t size = found->second;
  allocated_.erase(found);
  in_use_ -= size;
  add_free(address, size);
  return true;
}

void shared_allocator::add_free(std::uint64_t address, std::uint64_t size) {
  auto next = free_.lower_bound(address);
  if (next != free_.end() && address + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == address) {
      previous->second += size;
      return;
    }
  }
  free_[address] = size;
}

}  // namespace tmk
