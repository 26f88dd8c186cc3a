#include "diff.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tmk {

namespace {

inline bool word_equal(const std::byte* a, const std::byte* b, std::size_t word) {
  std::uint32_t x, y;
  memcpy(&x, a + word * diff_word, 4);
  memcpy(&y, b + word * diff_word, 4);
  return x == y;
}

// Bit i set: word first+i differs (32 words, 128 bytes).
using mask_function = std::uint32_t (*)(const std::byte*, const std::byte*, std::size_t);

std::uint32_t changed_mask_portable(const std::byte* a, const std::byte* b, std::size_t first) {
  std::uint32_t mask = 0;
#if defined(__SSE2__)
  for (int part = 0; part < 8; ++part) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + (first + 4 * part) * diff_word));
    __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + (first + 4 * part) * diff_word));
    auto same = static_cast<std::uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(x, y))));
    mask |= same << (4 * part);
  }
  return ~mask;
#else
  for (std::size_t i = 0; i < 32; ++i)
    if (!word_equal(a, b, first + i)) mask |= 1u << i;
  return mask;
#endif
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) std::uint32_t changed_mask_avx2(const std::byte* a,
                                                                const std::byte* b,
                                                                std::size_t first) {
  std::uint32_t mask = 0;
  for (int part = 0; part < 4; ++part) {
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + (first + 8 * part) * diff_word));
    __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + (first + 8 * part) * diff_word));
    auto same = static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, y))));
    mask |= same << (8 * part);
  }
  return ~mask;
}
#endif

#if defined(__x86_64__)
__attribute__((target("avx512f"))) std::uint32_t changed_mask_avx512(const std::byte* a,
                                                                    const std::byte* b,
                                                                    std::size_t first) {
  __m512i x0 = _mm512_loadu_si512(a + first * diff_word);
  __m512i y0 = _mm512_loadu_si512(b + first * diff_word);
  __m512i x1 = _mm512_loadu_si512(a + (first + 16) * diff_word);
  __m512i y1 = _mm512_loadu_si512(b + (first + 16) * diff_word);
  std::uint32_t low = _mm512_cmpneq_epi32_mask(x0, y0);
  std::uint32_t high = _mm512_cmpneq_epi32_mask(x1, y1);
  return low | (high << 16);
}
#endif

mask_function pick_mask_function() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return &changed_mask_avx512;
  if (__builtin_cpu_supports("avx2")) return &changed_mask_avx2;
#endif
  return &changed_mask_portable;
}

const mask_function changed_mask = pick_mask_function();

}  // namespace

// A page that did not change costs one memcmp.  Otherwise one pass over
// both copies, 32 words at a time: a block with no change is skipped, a
// wholly changed one extends the current run, and a mixed one is split by
// its bit mask; each run is copied out as it closes.
std::size_t diff_create(const std::byte* twin, const std::byte* page, std::size_t page_size,
                        std::vector<std::byte>& out) {
  if (memcmp(twin, page, page_size) == 0) return 0;
  const std::size_t words = page_size / diff_word;
  const std::size_t start = out.size();
  // Built in a scratch buffer (the worst case, runs of one word between
  // unchanged ones, is page_size plus one header) and appended: growing the
  // vector first would clear memory only to overwrite it.
  thread_local std::vector<std::byte> scratch;
  if (scratch.size() < page_size + sizeof(diff_run_header))
    scratch.resize(page_size + sizeof(diff_run_header));
  std::byte* at = scratch.data();
  std::size_t run_start = 0;
  bool in_run = false;
  // Short runs gather in the scratch buffer; a long one goes straight to
  // the output (after what gathered), so that its words are copied once.
  auto close_run = [&](std::size_t end) {
    // A 16-bit count: a longer run is cut in pieces.
    for (std::size_t first = run_start; first < end; first += 65535) {
      std::size_t count = std::min<std::size_t>(end - first, 65535);
      diff_run_header header{static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(count)};
      if (count >= 64) {
        memcpy(at, &header, sizeof header);
        at += sizeof header;
        out.insert(out.end(), scratch.data(), at);
        at = scratch.data();
        out.insert(out.end(), page + first * diff_word, page + (first + count) * diff_word);
        continue;
      }
      memcpy(at, &header, sizeof header);
      memcpy(at + sizeof header, page + first * diff_word, count * diff_word);
      at += sizeof header + count * diff_word;
    }
    in_run = false;
  };
  std::size_t word = 0;
  for (; word + 32 <= words; word += 32) {
    std::uint32_t changed = changed_mask(twin, page, word);
    if (changed == 0) {
      if (in_run) close_run(word);
      continue;
    }
    if (changed == 0xffffffffu) {
      if (!in_run) run_start = word, in_run = true;
      continue;
    }
    // Walk the block's runs of changed and unchanged words.
    std::uint32_t bit = 0;
    while (bit < 32) {
      std::uint32_t rest = changed >> bit;
      if (rest & 1) {
        if (!in_run) run_start = word + bit, in_run = true;
        std::uint32_t ones = static_cast<std::uint32_t>(__builtin_ctz(~rest));
        bit += ones;
      } else {
        if (in_run) close_run(word + bit);
        if (rest == 0) break;
        bit += static_cast<std::uint32_t>(__builtin_ctz(rest));
      }
    }
  }
  for (; word < words; ++word) {
    bool same = word_equal(twin, page, word);
    if (same && in_run) close_run(word);
    else if (!same && !in_run) run_start = word, in_run = true;
  }
  if (in_run) close_run(words);
  out.insert(out.end(), scratch.data(), at);
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
