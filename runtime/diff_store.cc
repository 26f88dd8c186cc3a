// diff_store.cc — chunks of populated memory that diffs are packed into.
#include "diff_store.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "populated.h"

namespace tmk {

namespace {
// Diffs are read as runs of 4-byte words and 2-byte headers.
constexpr std::size_t alignment = 8;
// The bytes a diff of size bytes takes in a chunk.
std::size_t footprint(std::size_t size) { return (size + alignment - 1) & ~(alignment - 1); }
}  // namespace

diff_store::~diff_store() {
  for (const chunk& each : chunks_) munmap(each.base, each.size);
}

std::byte* diff_store::room(std::size_t most) {
  std::size_t length = footprint(most);
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
  used_ += footprint(size);
  kept_ += size;
  return {at, size};
}

bool diff_store::full(std::size_t most) const {
  std::size_t length = footprint(most);
  if (current_ < chunks_.size() && chunks_[current_].size - used_ >= length) return false;
  for (std::size_t later = current_ + 1; later < chunks_.size(); ++later)
    if (chunks_[later].size >= length) return false;
  return true;
}

std::span<const std::byte> diff_store::rewrite(std::span<const std::byte> diff, const std::byte* bytes,
                                               std::size_t size) {
  auto* at = const_cast<std::byte*>(diff.data());
  if (size > 0) memmove(at, bytes, size);
  kept_ -= diff.size() - size;
  return {at, size};
}

void diff_store::compact(std::span<std::span<const std::byte>* const> live) {
  // Each diff's place, its chunk in the high half and its offset there in
  // the low (a chunk is smaller than 4 GiB), sorted as numbers: compared
  // through the spans, scattered over the pages' lists, sorting FFT's
  // 13000 diffs kept took a quarter of the pass (perf samples).
  std::vector<std::pair<std::uint64_t, std::span<const std::byte>*>> placed;
  placed.reserve(live.size());
  for (auto* diff : live) {
    if (diff->empty()) continue;
    auto in = std::find_if(chunks_.begin(), chunks_.end(), [&](const chunk& each) {
      return diff->data() >= each.base && diff->data() < each.base + each.size;
    });
    auto index = static_cast<std::uint64_t>(in - chunks_.begin());
    placed.emplace_back(index << 32 | static_cast<std::uint64_t>(diff->data() - in->base), diff);
  }
  std::sort(placed.begin(), placed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Each goes to the first place after the one before it that it fits:
  // never past where it is, as everything before it fits there too.
  current_ = 0;
  used_ = 0;
  for (const auto& each : placed) {
    std::span<const std::byte>* diff = each.second;
    std::size_t length = footprint(diff->size());
    while (chunks_[current_].size - used_ < length) {
      ++current_;
      used_ = 0;
    }
    std::byte* to = chunks_[current_].base + used_;
    if (to != diff->data()) memmove(to, diff->data(), diff->size());
    *diff = {to, diff->size()};
    used_ += length;
  }
}

std::size_t diff_store::bytes_used() const {
  std::size_t total = used_;
  for (std::size_t before = 0; before < current_ && before < chunks_.size(); ++before)
    total += chunks_[before].size;
  return total;
}

bool diff_store::prepare() { return !chunks_.empty() || add_chunk(chunk_bytes); }

bool diff_store::grow() { return add_chunk(chunk_bytes); }

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
