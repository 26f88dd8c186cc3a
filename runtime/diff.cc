#include "diff.h"

#include <algorithm>
#include <cstring>

namespace tmk {

namespace {
inline bool word_equal(const std::byte* a, const std::byte* b, std::size_t word) {
  std::uint32_t x, y;
  memcpy(&x, a + word * diff_word, 4);
  memcpy(&y, b + word * diff_word, 4);
  return x == y;
}
inline bool pair_equal(const std::byte* a, const std::byte* b, std::size_t word) {
  std::uint64_t x, y;
  memcpy(&x, a + word * diff_word, 8);
  memcpy(&y, b + word * diff_word, 8);
  return x == y;
}
}  // namespace

std::size_t diff_create(const std::byte* twin, const std::byte* page, std::size_t page_size,
                        std::vector<std::byte>& out) {
  const std::size_t words = page_size / diff_word;
  const std::size_t start = out.size();
  std::size_t word = 0;
  while (word < words) {
    // Skip equal words, two at a time where possible.
    while (word + 1 < words && pair_equal(twin, page, word)) word += 2;
    while (word < words && word_equal(twin, page, word)) ++word;
    if (word >= words) break;
    // A run of changed words, at most what a 16-bit count holds.
    std::size_t first = word;
    std::size_t limit = std::min(words, first + 65535);
    ++word;
    while (word < limit && !word_equal(twin, page, word)) ++word;
    diff_run_header header{static_cast<std::uint16_t>(first),
                           static_cast<std::uint16_t>(word - first)};
    std::size_t at = out.size();
    std::size_t bytes = std::size_t{header.word_count} * diff_word;
    out.resize(at + sizeof header + bytes);
    memcpy(out.data() + at, &header, sizeof header);
    memcpy(out.data() + at + sizeof header, page + first * diff_word, bytes);
  }
  return out.size() - start;
}

bool diff_valid(std::span<const std::byte> diff, std::size_t page_size) {
  const std::size_t words = page_size / diff_word;
  std::size_t at = 0;
  while (at < diff.size()) {
    diff_run_header header;
    if (diff.size() - at < sizeof header) return false;
    memcpy(&header, diff.data() + at, sizeof header);
    at += sizeof header;
    std::size_t bytes = std::size_t{header.word_count} * diff_word;
    if (header.word_count == 0 || header.first_word + std::size_t{header.word_count} > words ||
        diff.size() - at < bytes)
      return false;
    at += bytes;
  }
  return true;
}

bool diff_apply(std::byte* page, std::size_t page_size, std::span<const std::byte> diff) {
  if (!diff_valid(diff, page_size)) return false;
  std::size_t at = 0;
  while (at < diff.size()) {
    diff_run_header header;
    memcpy(&header, diff.data() + at, sizeof header);
    at += sizeof header;
    std::size_t bytes = std::size_t{header.word_count} * diff_word;
    memcpy(page + header.first_word * diff_word, diff.data() + at, bytes);
    at += bytes;
  }
  return true;
}

}  // namespace tmk
