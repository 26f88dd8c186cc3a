// diff.h — run-length encoded diffs between a page and its twin.
//
// A diff lists the 4-byte words of a page that differ from its twin, as
// runs: {u16 first word, u16 word count, the words}.  A run in which some
// word changed in only some of its bytes also carries a byte mask per word
// (a nibble, bit b for byte b, two to a byte, the low one first) after its
// words, and bit 15 of its count says so; applying it writes only those
// bytes.  Word runs with byte masks are what let two processes write
// different words of one page (false sharing), or different bytes of one
// word (a char array), and both writes survive.  Creating a diff reads
// both copies once, a vector register at a time; applying one copies each
// run (a masked one with a blend).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tmk {

inline constexpr std::size_t diff_word = 4;
// The largest page a diff can describe (word offsets are 16 bits).
inline constexpr std::size_t diff_max_page = 65536 * diff_word;

// The most words in one run (a 15-bit count); a longer one is cut.
inline constexpr std::size_t diff_max_run = 0x7fff;

struct diff_run_header {
  std::uint16_t first_word;
  std::uint16_t word_count;
};

// The most bytes the diff of a page of page_size bytes can take: single
// words with byte masks between unchanged ones, 4.5 bytes a word.
constexpr std::size_t diff_max_bytes(std::size_t page_size) {
  return page_size + page_size / 8 +
         sizeof(diff_run_header) * (page_size / diff_word / diff_max_run + 2);
}

// Writes to out, which has room for diff_max_bytes(page_size), the diff
// that turns twin into page (both page_size bytes); returns its size (0:
// no word changed).  Bytes of out past the diff may be written as well.
std::size_t diff_create(const std::byte* twin, const std::byte* page, std::size_t page_size,
                        std::byte* out);
// The same, appended to out.
std::size_t diff_create(const std::byte* twin, const std::byte* page, std::size_t page_size,
                        std::vector<std::byte>& out);

// Applies diff to page.  Returns false, changing nothing, if the diff is
// malformed (a run past the end of the page, a truncated run).
bool diff_apply(std::byte* page, std::size_t page_size, std::span<const std::byte> diff);

// Appends to out one diff whose application is that of diffs, applied in
// order, to any page: every byte some diff writes, with the value the last
// of them gives it (nothing if none writes a byte).  Returns false,
// appending nothing, if some diff is malformed (see diff_valid).
// page_size is a multiple of 8.
bool diff_merge(std::span<const std::span<const std::byte>> diffs, std::size_t page_size,
                std::vector<std::byte>& out);

// Writes to out, which has room for diff_max_bytes(page_size), what is
// left of the diff earlier once the bytes the diff later writes are taken
// out of it; returns its size (0: later writes every byte earlier does).
// Applied before later, it leaves what earlier does.  A word left with
// no bytes between two left with some may stay in a run, its byte mask
// empty.  May be larger than earlier by a few bytes (a run cut in two,
// byte masks where earlier's run had none); both diffs well formed for a
// page of page_size bytes.
std::size_t diff_subtract(std::span<const std::byte> earlier, std::span<const std::byte> later,
                          std::size_t page_size, std::byte* out);
// The same in two steps, for the bytes of several later diffs at once:
// diff_mark_written adds the bytes diff writes to written (a nibble a
// word, one a byte, as a diff's byte masks: bit b for byte b), and
// diff_subtract_written takes the bytes written marks out of earlier.
void diff_mark_written(std::span<const std::byte> diff, std::uint8_t* written);
std::size_t diff_subtract_written(std::span<const std::byte> earlier, const std::uint8_t* written,
                                  std::byte* out);
// Whether diff writes some byte that written marks: if not,
// diff_subtract_written would leave it as it is.
bool diff_writes_any(std::span<const std::byte> diff, const std::uint8_t* written);

// The code diffs are made and applied with: the best this CPU runs (the
// default), or one variant, so that tests cover each.  False if this CPU
// cannot run it.  Not to be called while diffs are being made.
enum class diff_code { best, avx512, avx2, portable };
bool diff_select_code(diff_code code);

// True if diff is well formed for a page of page_size bytes.
bool diff_valid(std::span<const std::byte> diff, std::size_t page_size);

}  // namespace tmk
