#include "diff.h"

#include <algorithm>
#include <cstring>

#include "thread_scratch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tmk {

namespace {

// Bit 15 of a run's count: the run carries byte masks.
constexpr std::uint16_t masked_run = 0x8000;
constexpr std::size_t max_run = diff_max_run;

inline bool word_equal(const std::byte* a, const std::byte* b, std::size_t word) {
  std::uint32_t x, y;
  memcpy(&x, a + word * diff_word, 4);
  memcpy(&y, b + word * diff_word, 4);
  return x == y;
}

// The byte mask of one word: bit b set when byte b differs.
inline unsigned word_nibble(const std::byte* twin, const std::byte* page) {
  std::uint32_t x, y;
  memcpy(&x, twin, 4);
  memcpy(&y, page, 4);
  std::uint32_t differ = x ^ y;
  // The high bit of each byte: set when the byte is not zero.
  std::uint32_t nonzero = (((differ & 0x7f7f7f7fu) + 0x7f7f7f7fu) | differ) & 0x80808080u;
  // Bits 7, 15, 23 and 31 gathered into bits 24 to 27.
  return ((nonzero >> 7) * 0x01020408u) >> 24 & 0xf;
}

// What one pass over both copies finds, per block of 64 words: bit i of
// changed[block] is set when word 64*block+i differs, and every_byte[block]
// when all the block's bytes differ (its words need no byte masks: data
// rewritten, the common case).  One call scans a whole page (so that the
// function chosen for this CPU is called once, not once per block) and
// returns whether any word differs.  The same pass copies b's blocks to
// copy (a diff's first run, if it starts at word 0, finds its words there;
// the stores cost next to nothing beside the loads and compares).  Words
// past the last whole block of 64 are left to the caller.
using scan_function = bool (*)(const std::byte* a, const std::byte* b, std::size_t blocks,
                               std::uint64_t* changed, bool* every_byte, std::byte* copy);

bool scan_portable(const std::byte* a, const std::byte* b, std::size_t blocks,
                   std::uint64_t* changed, bool* every_byte, std::byte* copy) {
  std::uint64_t any = 0;
  for (std::size_t block = 0; block < blocks; ++block) {
    const std::byte* x = a + block * 64 * diff_word;
    const std::byte* y = b + block * 64 * diff_word;
    std::uint64_t mask = 0;
#if defined(__SSE2__)
    __m128i least = _mm_set1_epi8(-1);
    for (int part = 0; part < 16; ++part) {
      __m128i p = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16 * part));
      __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 16 * part));
      auto same = static_cast<std::uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(p, q))));
      mask |= (~same & 0xf) << (4 * part);
      least = _mm_min_epu8(least, _mm_xor_si128(p, q));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(copy + block * 64 * diff_word + 16 * part), q);
    }
    every_byte[block] = _mm_movemask_epi8(_mm_cmpeq_epi8(least, _mm_setzero_si128())) == 0;
#else
    unsigned all = 0xf;
    for (std::size_t i = 0; i < 64; ++i) {
      unsigned nibble = word_nibble(x + i * diff_word, y + i * diff_word);
      if (nibble != 0) mask |= std::uint64_t{1} << i;
      all &= nibble;
    }
    every_byte[block] = all == 0xf;
    memcpy(copy + block * 64 * diff_word, y, 64 * diff_word);
#endif
    changed[block] = mask;
    any |= mask;
  }
  return any != 0;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) bool scan_avx2(const std::byte* a, const std::byte* b,
                                               std::size_t blocks, std::uint64_t* changed,
                                               bool* every_byte, std::byte* copy) {
  std::uint64_t any = 0;
  for (std::size_t block = 0; block < blocks; ++block) {
    const std::byte* x = a + block * 64 * diff_word;
    const std::byte* y = b + block * 64 * diff_word;
    std::byte* to = copy + block * 64 * diff_word;
    std::uint64_t same = 0;
    __m256i least[2] = {_mm256_set1_epi8(-1), _mm256_set1_epi8(-1)};
#pragma GCC unroll 8
    for (int part = 0; part < 8; ++part) {
      __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 * part));
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32 * part));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + 32 * part), q);
      same |= static_cast<std::uint64_t>(
                  _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(p, q))))
              << (8 * part);
      least[part % 2] = _mm256_min_epu8(least[part % 2], _mm256_xor_si256(p, q));
    }
    __m256i low = _mm256_min_epu8(least[0], least[1]);
    every_byte[block] = _mm256_movemask_epi8(_mm256_cmpeq_epi8(low, _mm256_setzero_si256())) == 0;
    changed[block] = ~same;
    any |= ~same;
  }
  return any != 0;
}

__attribute__((target("avx512f,avx512bw"))) bool scan_avx512(const std::byte* a,
                                                             const std::byte* b,
                                                             std::size_t blocks,
                                                             std::uint64_t* changed,
                                                             bool* every_byte,
                                                             std::byte* copy) {
  std::uint64_t any = 0;
  for (std::size_t block = 0; block < blocks; ++block) {
    const std::byte* x = a + block * 64 * diff_word;
    const std::byte* y = b + block * 64 * diff_word;
    std::byte* to = copy + block * 64 * diff_word;
    __m512i q0 = _mm512_loadu_si512(y), q1 = _mm512_loadu_si512(y + 64),
            q2 = _mm512_loadu_si512(y + 128), q3 = _mm512_loadu_si512(y + 192);
    _mm512_storeu_si512(to, q0);
    _mm512_storeu_si512(to + 64, q1);
    _mm512_storeu_si512(to + 128, q2);
    _mm512_storeu_si512(to + 192, q3);
    __m512i d0 = _mm512_xor_si512(_mm512_loadu_si512(x), q0),
            d1 = _mm512_xor_si512(_mm512_loadu_si512(x + 64), q1),
            d2 = _mm512_xor_si512(_mm512_loadu_si512(x + 128), q2),
            d3 = _mm512_xor_si512(_mm512_loadu_si512(x + 192), q3);
    std::uint64_t mask = static_cast<std::uint64_t>(_mm512_test_epi32_mask(d0, d0)) |
                         static_cast<std::uint64_t>(_mm512_test_epi32_mask(d1, d1)) << 16 |
                         static_cast<std::uint64_t>(_mm512_test_epi32_mask(d2, d2)) << 32 |
                         static_cast<std::uint64_t>(_mm512_test_epi32_mask(d3, d3)) << 48;
    // The least byte of the four: not zero when every byte differs.
    __m512i least = _mm512_min_epu8(_mm512_min_epu8(d0, d1), _mm512_min_epu8(d2, d3));
    every_byte[block] = _mm512_test_epi8_mask(least, least) == ~std::uint64_t{0};
    changed[block] = mask;
    any |= mask;
  }
  return any != 0;
}
#endif

scan_function pick_scan_function() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return &scan_avx512;
  if (__builtin_cpu_supports("avx2")) return &scan_avx2;
#endif
  return &scan_portable;
}

scan_function scan_changes = pick_scan_function();

// The byte masks of count words, two to a byte, the low one first; returns
// whether some word changed in only some of its bytes.
using byte_mask_function = bool (*)(const std::byte* twin, const std::byte* page,
                                    std::size_t count, std::uint8_t* nibbles);

bool byte_masks_portable(const std::byte* twin, const std::byte* page, std::size_t count,
                         std::uint8_t* nibbles) {
  unsigned all = 0xf;
  for (std::size_t word = 0; word < count; ++word) {
    unsigned nibble = word_nibble(twin + word * diff_word, page + word * diff_word);
    all &= nibble;
    if (word % 2 == 0)
      nibbles[word / 2] = static_cast<std::uint8_t>(nibble);
    else
      nibbles[word / 2] = static_cast<std::uint8_t>(nibbles[word / 2] | (nibble << 4));
  }
  return all != 0xf;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) bool byte_masks_avx2(const std::byte* twin, const std::byte* page,
                                                     std::size_t count, std::uint8_t* nibbles) {
  std::uint32_t all = ~std::uint32_t{0};
  std::size_t word = 0;
  for (; word + 8 <= count; word += 8) {
    __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(twin + word * diff_word));
    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(page + word * diff_word));
    auto differ = ~static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(p, q)));
    memcpy(nibbles + word / 2, &differ, sizeof differ);
    all &= differ;
  }
  _mm256_zeroupper();  // SSE code after dirty upper halves runs several times slower
  bool rest = byte_masks_portable(twin + word * diff_word, page + word * diff_word, count - word,
                                  nibbles + word / 2);
  return rest || all != ~std::uint32_t{0};
}

__attribute__((target("avx512f,avx512bw"))) bool byte_masks_avx512(const std::byte* twin,
                                                                   const std::byte* page,
                                                                   std::size_t count,
                                                                   std::uint8_t* nibbles) {
  std::uint64_t all = ~std::uint64_t{0};
  std::size_t word = 0;
  for (; word + 16 <= count; word += 16) {
    __m512i p = _mm512_loadu_si512(twin + word * diff_word);
    __m512i q = _mm512_loadu_si512(page + word * diff_word);
    std::uint64_t differ = _mm512_cmpneq_epi8_mask(p, q);
    memcpy(nibbles + word / 2, &differ, sizeof differ);
    all &= differ;
  }
  _mm256_zeroupper();
  bool rest = byte_masks_portable(twin + word * diff_word, page + word * diff_word, count - word,
                                  nibbles + word / 2);
  return rest || all != ~std::uint64_t{0};
}
#endif

byte_mask_function pick_byte_masks() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    return &byte_masks_avx512;
  if (__builtin_cpu_supports("avx2")) return &byte_masks_avx2;
#endif
  return &byte_masks_portable;
}

byte_mask_function byte_masks = pick_byte_masks();

// Copies a run's words: a single word (the common case of scattered
// writes) without a call.
inline void copy_words(std::byte* to, const std::byte* from, std::size_t count) {
  if (count == 1)
    memcpy(to, from, diff_word);
  else
    memcpy(to, from, count * diff_word);
}

// Writes only the bytes of count words that their nibbles (two to a byte,
// the low one first) name.
using masked_copy_function = void (*)(std::byte* to, const std::byte* from,
                                      const std::byte* nibbles, std::size_t count);

void copy_masked_portable(std::byte* to, const std::byte* from, const std::byte* nibbles,
                          std::size_t count) {
  for (std::size_t word = 0; word < count; ++word) {
    unsigned nibble = (std::to_integer<unsigned>(nibbles[word / 2]) >> (4 * (word % 2))) & 0xf;
    if (nibble == 0xf) {
      memcpy(to + word * diff_word, from + word * diff_word, diff_word);
      continue;
    }
    for (unsigned i = 0; i < diff_word; ++i)
      if (nibble & (1u << i)) to[word * diff_word + i] = from[word * diff_word + i];
  }
}

#if defined(__x86_64__)
// Eight words at a time: their 32 mask bits become a byte mask (bit k
// selects byte k) for one blend.
__attribute__((target("avx2"))) void copy_masked_avx2(std::byte* to, const std::byte* from,
                                                      const std::byte* nibbles,
                                                      std::size_t count) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  std::size_t word = 0;
  for (; word + 8 <= count; word += 8) {
    std::uint32_t bits;
    memcpy(&bits, nibbles + word / 2, sizeof bits);
    __m256i mask = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
    mask = _mm256_cmpeq_epi8(_mm256_and_si256(mask, select), select);
    auto* target = reinterpret_cast<__m256i*>(to + word * diff_word);
    __m256i old = _mm256_loadu_si256(target);
    __m256i fresh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + word * diff_word));
    _mm256_storeu_si256(target, _mm256_blendv_epi8(old, fresh, mask));
  }
  _mm256_zeroupper();
  copy_masked_portable(to + word * diff_word, from + word * diff_word, nibbles + word / 2,
                       count - word);
}
#endif

masked_copy_function pick_masked_copy() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return &copy_masked_avx2;
#endif
  return &copy_masked_portable;
}

masked_copy_function copy_masked = pick_masked_copy();

std::size_t run_bytes(std::size_t count, bool masked) {
  return count * diff_word + (masked ? (count + 1) / 2 : 0);
}

void put_header(std::byte* at, std::size_t first, std::size_t count, bool masked) {
  diff_run_header header{static_cast<std::uint16_t>(first),
                         static_cast<std::uint16_t>(count | (masked ? masked_run : 0))};
  memcpy(at, &header, sizeof header);
}

// The nibbles of a run's words (bit b for byte b written), one a byte;
// added to those in into (merge) or in their place.
template <bool merge = false>
void unpack_nibbles(const diff_run_header& header, const std::byte* after_words, std::uint8_t* into) {
  std::size_t count = header.word_count & max_run;
  if ((header.word_count & masked_run) == 0) {
    memset(into, 0xf, count);
    return;
  }
  const auto* packed = reinterpret_cast<const std::uint8_t*>(after_words);
  std::size_t i = 0;
#if defined(__SSE2__)
  // Sixteen nibbles at a time: the low ones and the high ones, interleaved.
  const __m128i low_nibbles = _mm_set1_epi8(0xf);
  for (; i + 16 <= count; i += 16) {
    __m128i both = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed + i / 2));
    __m128i low = _mm_and_si128(both, low_nibbles);
    __m128i high = _mm_and_si128(_mm_srli_epi16(both, 4), low_nibbles);
    __m128i nibbles = _mm_unpacklo_epi8(low, high);
    auto* at = reinterpret_cast<__m128i*>(into + i);
    if constexpr (merge) nibbles = _mm_or_si128(nibbles, _mm_loadu_si128(at));
    _mm_storeu_si128(at, nibbles);
  }
#endif
  for (; i < count; ++i) {
    auto nibble = static_cast<std::uint8_t>(packed[i / 2] >> (4 * (i % 2)) & 0xf);
    into[i] = merge ? static_cast<std::uint8_t>(into[i] | nibble) : nibble;
  }
}

// Calls each(header, words, after_words) for every run of a well formed
// diff.
template <typename Each>
void for_each_run(std::span<const std::byte> diff, Each each) {
  std::size_t at = 0;
  while (at < diff.size()) {
    diff_run_header header;
    memcpy(&header, diff.data() + at, sizeof header);
    at += sizeof header;
    std::size_t count = header.word_count & max_run;
    each(header, diff.data() + at, diff.data() + at + count * diff_word);
    at += run_bytes(count, (header.word_count & masked_run) != 0);
  }
}

}  // namespace

bool diff_select_code(diff_code code) {
  switch (code) {
    case diff_code::best:
      scan_changes = pick_scan_function();
      byte_masks = pick_byte_masks();
      copy_masked = pick_masked_copy();
      return true;
#if defined(__x86_64__)
    case diff_code::avx512:
      if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
          !__builtin_cpu_supports("avx2"))
        return false;
      scan_changes = &scan_avx512;
      byte_masks = &byte_masks_avx512;
      copy_masked = &copy_masked_avx2;
      return true;
    case diff_code::avx2:
      if (!__builtin_cpu_supports("avx2")) return false;
      scan_changes = &scan_avx2;
      byte_masks = &byte_masks_avx2;
      copy_masked = &copy_masked_avx2;
      return true;
#else
    case diff_code::avx512:
    case diff_code::avx2:
      return false;
#endif
    case diff_code::portable:
      scan_changes = &scan_portable;
      byte_masks = &byte_masks_portable;
      copy_masked = &copy_masked_portable;
      return true;
  }
  return false;
}

// One vectorised pass over both copies marks the changed words in a bit
// mask, and the blocks of 64 words whose every byte changed (a page that
// did not change costs only that pass), and copies the page behind the
// first run's header; the runs are then read off the mask, each found with
// a count of trailing zeros, and written out one after another.  A run
// whose words already lie where the pass copied them (the first run, when
// it starts at word 0: a page rewritten whole) is not copied again.  A run
// that is not all in blocks changed in every byte gets its byte masks from
// a second pass over its own words, and carries them if some word changed
// in only some of its bytes, so that applying it leaves that word's other
// bytes alone (another process may have written them: bytes are separate
// objects in C).
std::size_t diff_create(const std::byte* twin, const std::byte* page, std::size_t page_size,
                        std::byte* out) {
  const std::size_t words = page_size / diff_word;
  const std::size_t blocks = words / 64;
  std::uint64_t masks[diff_max_page / diff_word / 64 + 1];
  bool every_byte[diff_max_page / diff_word / 64 + 1];
  std::byte* const copied = out + sizeof(diff_run_header);  // word w at copied + 4w
  bool changed = scan_changes(twin, page, blocks, masks, every_byte, copied);
  if (words % 64 != 0) {
    std::uint64_t tail = 0;
    for (std::size_t word = blocks * 64; word < words; ++word)
      if (!word_equal(twin, page, word)) tail |= std::uint64_t{1} << (word % 64);
    masks[blocks] = tail;
    every_byte[blocks] = false;
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

  thread_local thread_scratch<std::vector<std::uint8_t>> nibbles_kept;
  std::vector<std::uint8_t>& nibbles = nibbles_kept.get();
  if (nibbles.size() < words / 2 + 8) nibbles.resize(words / 2 + 8);
  // Runs are written in order, so everything written before a run lies
  // below where its words go: words the pass copied there are intact.
  std::byte* at = out;
  for (std::size_t first = next(0, true); first < words; first = next(first, true)) {
    std::size_t end = next(first, false);
    // A 15-bit count: a longer run is cut in pieces.
    for (; first < end;) {
      std::size_t count = std::min(end - first, max_run);
      const std::byte* from = page + first * diff_word;
      bool masked = false;
      if (count == 1) {  // scattered writes: no call
        nibbles[0] = static_cast<std::uint8_t>(word_nibble(twin + first * diff_word, from));
        masked = nibbles[0] != 0xf;
      } else if (!std::all_of(every_byte + first / 64, every_byte + (first + count - 1) / 64 + 1,
                              [](bool every) { return every; })) {
        masked = byte_masks(twin + first * diff_word, from, count, nibbles.data());
      }
      put_header(at, first, count, masked);
      at += sizeof(diff_run_header);
      if (at != copied + first * diff_word || first + count > blocks * 64)
        copy_words(at, from, count);
      at += count * diff_word;
      if (masked) {
        memcpy(at, nibbles.data(), (count + 1) / 2);
        at += (count + 1) / 2;
      }
      first += count;
    }
  }
  return static_cast<std::size_t>(at - out);
}

std::size_t diff_create(const std::byte* twin, const std::byte* page, std::size_t page_size,
                        std::vector<std::byte>& out) {
  const std::size_t start = out.size();
  out.resize(start + diff_max_bytes(page_size));
  std::size_t size = diff_create(twin, page, page_size, out.data() + start);
  out.resize(start + size);
  return size;
}

bool diff_valid(std::span<const std::byte> diff, std::size_t page_size) {
  const std::size_t words = page_size / diff_word;
  std::size_t at = 0;
  while (at < diff.size()) {
    diff_run_header header;
    if (diff.size() - at < sizeof header) return false;
    memcpy(&header, diff.data() + at, sizeof header);
    at += sizeof header;
    std::size_t count = header.word_count & max_run;
    std::size_t bytes = run_bytes(count, (header.word_count & masked_run) != 0);
    if (count == 0 || header.first_word + count > words || diff.size() - at < bytes) return false;
    at += bytes;
  }
  return true;
}

// Walks the runs itself rather than through for_each_run: that took 1.4
// times as long to apply 64 single words (diff_bench, 247 ns against 175).
bool diff_apply(std::byte* page, std::size_t page_size, std::span<const std::byte> diff) {
  if (!diff_valid(diff, page_size)) return false;
  std::size_t at = 0;
  while (at < diff.size()) {
    diff_run_header header;
    memcpy(&header, diff.data() + at, sizeof header);
    at += sizeof header;
    std::size_t count = header.word_count & max_run;
    bool masked = (header.word_count & masked_run) != 0;
    std::byte* to = page + header.first_word * diff_word;
    if (masked)
      copy_masked(to, diff.data() + at, diff.data() + at + count * diff_word, count);
    else
      copy_words(to, diff.data() + at, count);
    at += run_bytes(count, masked);
  }
  return true;
}


namespace {

// Of count nibbles (one a byte), the words with any byte (any) and those
// with some but not all of their bytes (partial), 64 to a mask; bits past
// count are clear.
void nibble_masks(const std::uint8_t* nibbles, std::size_t count, std::uint64_t* any,
                  std::uint64_t* partial) {
  for (std::size_t block = 0; block * 64 < count; ++block) {
    const std::uint8_t* at = nibbles + block * 64;
    std::size_t here = std::min<std::size_t>(64, count - block * 64);
    std::uint64_t none = 0, all = 0;
    std::size_t i = 0;
#if defined(__SSE2__)
    for (; i + 16 <= here; i += 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + i));
      none |= static_cast<std::uint64_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())))
              << i;
      all |= static_cast<std::uint64_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(0xf))))
             << i;
    }
#endif
    for (; i < here; ++i) {
      none |= std::uint64_t{at[i] == 0} << i;
      all |= std::uint64_t{at[i] == 0xf} << i;
    }
    std::uint64_t inside = here == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << here) - 1;
    any[block] = ~none & inside;
    partial[block] = ~none & ~all & inside;
  }
}

}  // namespace

// Each run's nibbles added to written's, sixteen at a time.
void diff_mark_written(std::span<const std::byte> diff, std::uint8_t* written) {
  for_each_run(diff, [&](const diff_run_header& header, const std::byte*, const std::byte* after) {
    unpack_nibbles<true>(header, after, written + header.first_word);
  });
}

// Run by run, until one writes a marked byte: eight words of written at a
// time where the run writes whole words, a nibble a word where it has
// byte masks.
bool diff_writes_any(std::span<const std::byte> diff, const std::uint8_t* written) {
  std::size_t at = 0;
  while (at < diff.size()) {
    diff_run_header header;
    memcpy(&header, diff.data() + at, sizeof header);
    at += sizeof header;
    const std::size_t count = header.word_count & max_run;
    const bool masked = (header.word_count & masked_run) != 0;
    const std::uint8_t* over = written + header.first_word;
    if (!masked) {
      std::size_t i = 0;
      for (; i + 8 <= count; i += 8) {
        std::uint64_t marks;
        memcpy(&marks, over + i, 8);
        if (marks != 0) return true;
      }
      for (; i < count; ++i)
        if (over[i] != 0) return true;
    } else {
      const auto* packed = reinterpret_cast<const std::uint8_t*>(diff.data() + at + count * diff_word);
      for (std::size_t i = 0; i < count; ++i)
        if ((packed[i / 2] >> (4 * (i % 2)) & over[i] & 0xf) != 0) return true;
    }
    at += run_bytes(count, masked);
  }
  return false;
}

std::size_t diff_subtract(std::span<const std::byte> earlier, std::span<const std::byte> later,
                          std::size_t page_size, std::byte* out) {
  thread_local thread_scratch<std::vector<std::uint8_t>> written_kept;
  std::vector<std::uint8_t>& written = written_kept.get();
  written.assign(page_size / diff_word, 0);
  diff_mark_written(later, written.data());
  return diff_subtract_written(earlier, written.data(), out);
}

// Run by run of earlier, the nibbles of its bytes not among written's,
// eight words at a time, and the stretches of words left with any, found
// in bit masks as diff_create's runs are.  A word left with none between two left with
// some but not all of their bytes joins the stretches on either side (its
// nibble 0: applying it writes nothing): those carry byte masks anyway,
// so that costs at most a byte, where a run of its own costs a header.
// A page of doubles that each interval changes (FFT) leaves single words
// one apart, high halves whose top bytes changed before but not since:
// 40 such pages of FFT's took 2.1 us each as 200-460 runs of a word, 0.8
// joined (diff_bench's diff_subtract_evolved_doubles: 1.65 and 0.88 us).
std::size_t diff_subtract_written(std::span<const std::byte> earlier, const std::uint8_t* written,
                                  std::byte* out) {
  thread_local thread_scratch<std::vector<std::uint8_t>> left_kept;
  thread_local thread_scratch<std::vector<std::uint64_t>> any_kept, partial_kept;
  std::vector<std::uint8_t>& left = left_kept.get();
  std::vector<std::uint64_t>& any = any_kept.get();
  std::vector<std::uint64_t>& partial = partial_kept.get();
  if (left.size() < max_run + 8) left.resize(max_run + 8);
  if (any.size() < max_run / 64 + 2) {
    any.resize(max_run / 64 + 2);
    partial.resize(max_run / 64 + 2);
  }
  std::byte* at = out;
  for_each_run(earlier, [&](const diff_run_header& header, const std::byte* values,
                            const std::byte* after) {
    const std::size_t count = header.word_count & max_run;
    const std::uint8_t* over = written + header.first_word;
    unpack_nibbles(header, after, left.data());
    constexpr std::uint64_t nibble_bits = 0x0f0f0f0f0f0f0f0full;
    std::size_t i = 0;
    for (; i + 8 <= count; i += 8) {
      std::uint64_t mine, theirs;
      memcpy(&mine, left.data() + i, 8);
      memcpy(&theirs, over + i, 8);
      mine &= ~theirs & nibble_bits;
      memcpy(left.data() + i, &mine, 8);
    }
    for (; i < count; ++i) left[i] = static_cast<std::uint8_t>(left[i] & ~over[i] & 0xf);
    const std::size_t blocks = (count + 63) / 64;
    nibble_masks(left.data(), count, any.data(), partial.data());
    for (std::size_t block = 0; block < blocks; ++block) {
      std::uint64_t before = partial[block] << 1 | (block > 0 ? partial[block - 1] >> 63 : 0);
      std::uint64_t after_it = partial[block] >> 1 | (block + 1 < blocks ? partial[block + 1] << 63 : 0);
      any[block] |= before & after_it;
    }
    // The first word at or after from that is taken (want) or not, as
    // diff_create's next (written out again: through one shared function
    // both took 7-10% longer, diff_bench).
    auto next = [&](std::size_t from, bool want) {
      std::size_t block = from / 64;
      if (block >= blocks) return count;
      std::uint64_t bits = (want ? any[block] : ~any[block]) & (~std::uint64_t{0} << (from % 64));
      while (bits == 0) {
        if (++block >= blocks) return count;
        bits = want ? any[block] : ~any[block];
      }
      return std::min(count, block * 64 + static_cast<std::size_t>(__builtin_ctzll(bits)));
    };
    for (std::size_t first = next(0, true); first < count; first = next(first, true)) {
      std::size_t end = next(first, false);
      if (end == first + 1) {  // scattered bytes left: no loops
        bool masked = left[first] != 0xf;
        put_header(at, header.first_word + first, 1, masked);
        memcpy(at + sizeof(diff_run_header), values + first * diff_word, diff_word);
        at += sizeof(diff_run_header) + diff_word;
        if (masked) *at++ = std::byte(left[first]);
        first = end;
        continue;
      }
      std::byte* run = at;
      at += sizeof(diff_run_header);
      copy_words(at, values + first * diff_word, end - first);
      at += (end - first) * diff_word;
      // Packed behind the words whether or not the run keeps them (room
      // for them is there: the run could have been a masked one).
      std::uint8_t every = 0xf;
      std::byte* packed = at;
      std::size_t k = first;
#if defined(__SSE2__)
      if (end - first >= 16) {
        const __m128i low = _mm_set1_epi16(0x000f), high = _mm_set1_epi16(0x00f0);
        __m128i least = _mm_set1_epi8(0xf);
        for (; k + 16 <= end; k += 16) {
          __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(left.data() + k));
          least = _mm_min_epu8(least, v);
          __m128i pairs = _mm_or_si128(_mm_and_si128(v, low), _mm_and_si128(_mm_srli_epi16(v, 4), high));
          _mm_storel_epi64(reinterpret_cast<__m128i*>(packed), _mm_packus_epi16(pairs, pairs));
          packed += 8;
        }
        alignas(16) std::uint8_t lanes[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(lanes), least);
        for (std::uint8_t lane : lanes) every &= lane;
      }
#endif
      for (; k + 1 < end; k += 2) {
        every &= left[k] & left[k + 1];
        *packed++ = std::byte(left[k] | left[k + 1] << 4);
      }
      if (k < end) {
        every &= left[k];
        *packed++ = std::byte(left[k]);
      }
      bool masked = every != 0xf;
      if (masked) at = packed;
      put_header(run, header.first_word + first, end - first, masked);
      first = end;
    }
  });
  return static_cast<std::size_t>(at - out);
}

// The diffs are applied to a page of zeros and to a page of ones: a byte
// some diff writes differs from the fill in at least one of the two (a
// byte written 0x00 in the ones, 0xff in the zeros), and the zeros then
// hold its last value.  The diff of those values against a twin that
// differs from them in exactly the written bytes is the merged diff, byte
// masks and all.
bool diff_merge(std::span<const std::span<const std::byte>> diffs, std::size_t page_size,
                std::vector<std::byte>& out) {
  thread_local thread_scratch<std::vector<std::byte>> zeros_kept, ones_kept, twin_kept;
  std::vector<std::byte>& zeros = zeros_kept.get();
  std::vector<std::byte>& ones = ones_kept.get();
  std::vector<std::byte>& twin = twin_kept.get();
  zeros.assign(page_size, std::byte{0});
  ones.assign(page_size, std::byte{0xff});
  twin.resize(page_size);
  for (auto diff : diffs)
    if (!diff_apply(zeros.data(), page_size, diff) || !diff_apply(ones.data(), page_size, diff))
      return false;
  constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7full, high = 0x8080808080808080ull;
  for (std::size_t at = 0; at < page_size; at += sizeof(std::uint64_t)) {
    std::uint64_t zero, one;
    memcpy(&zero, zeros.data() + at, sizeof zero);
    memcpy(&one, ones.data() + at, sizeof one);
    std::uint64_t moved = zero | ~one;  // a byte not zero where some diff wrote it
    std::uint64_t written = (((moved & low7) + low7) | moved) & high;
    std::uint64_t flip = (written >> 7) * 0xff;
    std::uint64_t other = zero ^ flip;
    memcpy(twin.data() + at, &other, sizeof other);
  }
  diff_create(twin.data(), zeros.data(), page_size, out);
  return true;
}

}  // namespace tmk
