// populated.h — memory the runtime keeps for itself (diffs, twins), made
// in whole chunks at once rather than faulted in a page at a time.
//
// On the virtual machine of BENCHMARKS.md a page of fresh memory costs
// 10.3 us faulted in at its first write, 1.6 us populated with the rest of
// a 1 MiB mapping in one call, and 0.11 us populated with the rest of a
// 2 MiB mapping in huge pages (diff_bench's fresh_page_faulted,
// fresh_page_populated, fresh_page_huge).  Chunks are therefore 2 MiB
// aligned and ask for huge pages: the kernel gives them where transparent
// huge pages are enabled for madvise or always, and plain pages otherwise.
#pragma once

#include <cstddef>
#include <vector>

namespace tmk {

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

// bytes rounded up to whole huge pages.
inline std::size_t whole_huge_pages(std::size_t bytes) {
  return (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
}

// size bytes (a multiple of huge_page_bytes), populated; null if there is
// no memory for them.  Released with munmap(address, size).
std::byte* map_populated(std::size_t size);

// Blocks of one size taken from populated chunks and given back for reuse,
// the last given first (its memory is the warmest).  Chunks stay mapped
// until the pool is destroyed.
class page_pool {
 public:
  explicit page_pool(std::size_t block_bytes) : block_bytes_(block_bytes) {}
  page_pool(const page_pool&) = delete;
  page_pool& operator=(const page_pool&) = delete;
  ~page_pool();

  // A block of block_bytes; null if no memory could be mapped for it.
  std::byte* take();
  // Maps the first chunk now, if none is yet; false if it could not be.
  bool prepare();
  void give(std::byte* block);
  std::size_t bytes_mapped() const { return chunks_.size() * chunk_bytes(); }

 private:
  std::size_t chunk_bytes() const;
  std::size_t block_bytes_;
  std::vector<std::byte*> chunks_;
  std::vector<std::byte*> free_;
};

}  // namespace tmk
