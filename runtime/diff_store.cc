// diff_store.cc — chunks of populated memory that diffs are packed into.
#include "diff_store.h"

#include <sys/mman.h>

#include <algorithm>

#include "populated.h"

namespace tmk {

namespace {
// Diffs are read as runs of 4-byte words and 2-byte headers.
constexpr std::size_t alignment = 8;
}  // namespace

diff_store::~diff_store() {
  for (const chunk& each : chunks_) munmap(each.base, each.size);
}

std::byte* diff_store::room(std::size_t most) {
  std::size_t length = (most + alignment - 1) & ~(alignment - 1);
  // The first chunk from the current one on with room: after clear(), the
  // chunks mapped before are filled again in order.
  while (current_ < chunks_.size() && chunks_[current_].size - used_ < length) {
    ++current_;
    used_ = 0;
  }
  if (current_ == chunks_.size()) {
    if (!add_chunk(whole_huge_pages(std::max(chunk_bytes, length)))) return nullptr;
    used_ = 0;
  }
  return chunks_[current_].base + used_;
}

std::span<const std::byte> diff_store::keep_made(std::size_t size) {
  std::byte* at = chunks_[current_].base + used_;
  used_ += (size + alignment - 1) & ~(alignment - 1);
  kept_ += size;
  return {at, size};
}

bool diff_store::prepare() { return !chunks_.empty() || add_chunk(chunk_bytes); }

bool diff_store::add_chunk(std::size_t size) {
  std::byte* mapped = map_populated(size);
  if (mapped == nullptr) return false;
  chunks_.push_back({mapped, size});
  return true;
}

void diff_store::clear() {
  current_ = 0;
  used_ = 0;
  kept_ = 0;
}

std::size_t diff_store::bytes_mapped() const {
  std::size_t total = 0;
  for (const chunk& each : chunks_) total += each.size;
  return total;
}

}  // namespace tmk
