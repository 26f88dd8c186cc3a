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

// Change masks: bit i of masks[b] is set when word 64*b+i differs between
// the two copies.  One call scans a whole page (so that the function chosen
// for this CPU is called once, not once per block) and returns whether any
// word differs.  Words past the last whole block of 64 are left to the
// caller.
using scan_function = bool (*)(const std::byte*, const std::byte*, std::size_t blocks,
                               std::uint64_t* masks);

bool scan_portable(const std::byte* a, const std::byte* b, std::size_t blocks,
                   std::uint64_t* masks) {
  std::uint64_t any = 0;
  for (std::size_t block = 0; block < blocks; ++block) {
    const std::byte* x = a + block * 64 * diff_word;
    const std::byte* y = b + block * 64 * diff_word;
    std::uint64_t mask = 0;
#if defined(__SSE2__)
    for (int part = 0; part < 16; ++part) {
      __m128i p = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16 * part));
      __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 16 * part));
      auto same = static_cast<std::uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(p, q))));
      mask |= (~same & 0xf) << (4 * part);
    }
#else
    for (std::size_t i = 0; i < 64; ++i)
      if (!word_equal(x, y, i)) mask |= std::uint64_t{1} << i;
#endif
    masks[block] = mask;
    any |= mask;
  }
  return any != 0;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) bool scan_avx2(const std::byte* a, const std::byte* b,
                                               std::size_t blocks, std::uint64_t* masks) {
  std::uint64_t any = 0;
  for (std::size_t block = 0; block < blocks; ++block) {
    const std::byte* x = a + block * 64 * diff_word;
    const std::byte* y = b + block * 64 * diff_word;
    std::uint64_t same = 0;
    for (int part = 0; part < 8; ++part) {
      __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * part));
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32 * part));
      same |= static_cast<std::uint64_t>(
                  _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(p, q))))
              << (8 * part);
    }
    masks[block] = ~same;
    any |= ~same;
  }
  return any != 0;
}

__attribute__((target("avx512f"))) bool scan_avx512(const std::byte* a, const std::byte* b,
                                                    std::size_t blocks, std::uint64_t* masks) {
  std::uint64_t any = 0;
  for (std::size_t block = 0; block < blocks; ++block) {
    const std::byte* x = a + block * 64 * diff_word;
    const std::byte* y = b + block * 64 * diff_word;
    std::uint64_t mask = 0;
    for (int part = 0; part < 4; ++part) {
      __m512i p = _mm512_loadu_si512(x + 64 * part);
      __m512i q = _mm512_loadu_si512(y + 64 * part);
      mask |= static_cast<std::uint64_t>(_mm512_cmpneq_epi32_mask(p, q)) << (16 * part);
    }
    masks[block] = mask;
    any |= mask;
  }
  return any != 0;
}
#endif

scan_function pick_scan_function() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return &scan_avx512;
  if (__builtin_cpu_supports("avx2")) return &scan_avx2;
#endif
  return &scan_portable;
}

const scan_function scan_changes = pick_scan_function();

// Copies a run's words: a single word (the common case of scattered
// writes) without a call.
inline void copy_words(std::byte* to, const std::byte* from, std::size_t count) {
  if (count == 1)
    memcpy(to, from, diff_word);
  else
    memcpy(to, from, count * diff_word);
}

}  // namespace

// One vectorised pass over both copies marks the changed words in a bit
// mask (a page that did not change costs only that pass); the runs are then
// read off the mask, each found with a count of trailing zeros, and copied
// out.
std::size_t diff_create(const std::byte* twin, const std::byte* page, std::size_t page_size,
                        std::vector<std::byte>& out) {
  const std::size_t words = page_size / diff_word;
  const std::size_t blocks = words / 64;
  std::uint64_t masks[diff_max_page / diff_word / 64 + 1];
  bool changed = scan_changes(twin, page, blocks, masks);
  if (words % 64 != 0) {
    std::uint64_t tail = 0;
    for (std::size_t word = blocks * 64; word < words; ++word)
      if (!word_equal(twin, page, word)) tail |= std::uint64_t{1} << (word % 64);
    masks[blocks] = tail;
    changed |= tail != 0;
  }
  if (!changed) return 0;
  const std::size_t mask_count = (words + 63) / 64;
  // The first word at or after `from` that is changed (want_changed) or
  // unchanged; words past the end read as unchanged.
  auto next = [&](std::size_t from, bool want_changed) {
    std::size_t block = from / 64;
    if (block >= mask_count) return words;
    std::uint64_t bits = (want_changed ? masks[block] : ~masks[block]) & (~std::uint64_t{0} << (from % 64));
    while (bits == 0) {
      if (++block >= mask_count) return words;
      bits = want_changed ? masks[block] : ~masks[block];
    }
    return std::min(words, block * 64 + static_cast<std::size_t>(__builtin_ctzll(bits)));
  };

  const std::size_t start = out.size();
  // Short runs gather in a scratch buffer (the worst case, runs of one
  // word between unchanged ones, is page_size plus one header) and are
  // appended at the end; a long run goes straight to the output, after
  // what gathered, so that its words are copied once.  Growing the output
  // to the worst case first would clear memory only to overwrite it.
  thread_local std::vector<std::byte> scratch;
  if (scratch.size() < page_size + sizeof(diff_run_header))
    scratch.resize(page_size + sizeof(diff_run_header));
  std::byte* at = scratch.data();
  for (std::size_t first = next(0, true); first < words; first = next(first, true)) {
    std::size_t end = next(first, false);
    // A 16-bit count: a longer run is cut in pieces.
    for (; first < end; ) {
      std::size_t count = std::min<std::size_t>(end - first, 65535);
      diff_run_header header{static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(count)};
      memcpy(at, &header, sizeof header);
      at += sizeof header;
      if (count >= 64) {
        out.insert(out.end(), scratch.data(), at);
        at = scratch.data();
        out.insert(out.end(), page + first * diff_word, page + (first + count) * diff_word);
      } else {
        copy_words(at, page + first * diff_word, count);
        at += count * diff_word;
      }
      first += count;
    }
  }
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
    copy_words(page + header.first_word * diff_word, diff.data() + at, header.word_count);
    at += std::size_t{header.word_count} * diff_word;
  }
  return true;
}

}  // namespace tmk
