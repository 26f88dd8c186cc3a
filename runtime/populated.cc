// populated.cc — chunks of memory made at once, in huge pages where the
// kernel allows them, and a pool of blocks carved from them.
#include "populated.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

namespace tmk {

std::byte* map_populated(std::size_t size) {
  // Mapped with a huge page to spare, then trimmed to a huge page boundary.
  std::size_t span = size + huge_page_bytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* start = static_cast<std::byte*>(raw);
  auto address = reinterpret_cast<std::uintptr_t>(raw);
  std::byte* base = start + (huge_page_bytes - address % huge_page_bytes) % huge_page_bytes;
  if (base > start) munmap(start, static_cast<std::size_t>(base - start));
  std::byte* end = start + span;
  if (base + size < end) munmap(base + size, static_cast<std::size_t>(end - (base + size)));
  madvise(base, size, MADV_HUGEPAGE);  // refused where huge pages are off: plain pages then
#if defined(MADV_POPULATE_WRITE)
  if (madvise(base, size, MADV_POPULATE_WRITE) == 0) return base;
  if (errno != EINVAL) {  // out of memory
    munmap(base, size);
    return nullptr;
  }
#endif
  // A kernel without MADV_POPULATE_WRITE: one write a page.
  for (std::size_t at = 0; at < size; at += 4096) base[at] = std::byte{0};
  return base;
}

page_pool::~page_pool() {
  for (std::byte* chunk : chunks_) munmap(chunk, chunk_bytes());
}

std::size_t page_pool::chunk_bytes() const { return whole_huge_pages(block_bytes_); }

bool page_pool::prepare() {
  if (!chunks_.empty()) return true;
  std::byte* block = take();
  if (block != nullptr) give(block);
  return block != nullptr;
}

std::byte* page_pool::take() {
  if (free_.empty()) {
    std::byte* chunk = map_populated(chunk_bytes());
    if (chunk == nullptr) return nullptr;
    chunks_.push_back(chunk);
    std::size_t blocks = chunk_bytes() / block_bytes_;
    free_.reserve(free_.size() + blocks);
    // Handed out from the chunk's start: the last pushed is taken first.
    for (std::size_t i = blocks; i-- > 0;) free_.push_back(chunk + i * block_bytes_);
  }
  std::byte* block = free_.back();
  free_.pop_back();
  return block;
}

void page_pool::give(std::byte* block) { free_.push_back(block); }

}  // namespace tmk
