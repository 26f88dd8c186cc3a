// diff_test — diffs turn a twin into its page exactly, on random pages,
// pages where every word changed, and changes at the first and last word.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "diff.h"
#include "random_bytes.h"

namespace {

using namespace tmk;

// The diff is made twice: appended to a vector, and in room of exactly
// diff_max_bytes (on the heap, where AddressSanitizer sees a write past
// it) full of stale bytes, as the runtime makes it in its store; both give
// the same bytes.
void expect_round_trip(const std::vector<std::byte>& twin, const std::vector<std::byte>& page) {
  std::vector<std::byte> diff;
  diff_create(twin.data(), page.data(), page.size(), diff);
  ASSERT_LE(diff.size(), diff_max_bytes(page.size()));
  auto room = std::make_unique<std::byte[]>(diff_max_bytes(page.size()));
  memset(room.get(), 0xa5, diff_max_bytes(page.size()));
  std::size_t size = diff_create(twin.data(), page.data(), page.size(), room.get());
  ASSERT_EQ(diff.size(), size);
  ASSERT_EQ(0, memcmp(diff.data(), room.get(), size));
  ASSERT_TRUE(diff_valid(diff, page.size()));
  std::vector<std::byte> rebuilt = twin;
  ASSERT_TRUE(diff_apply(rebuilt.data(), rebuilt.size(), diff));
  EXPECT_EQ(0, memcmp(rebuilt.data(), page.data(), page.size()));
}

// Every test runs with each variant of the code this CPU can run (the
// vectorised scans and blends and their portable fallback).
class diff_code_variant : public ::testing::TestWithParam<diff_code> {
 protected:
  void SetUp() override {
    if (!diff_select_code(GetParam())) GTEST_SKIP() << "this CPU cannot run this variant";
  }
  void TearDown() override { diff_select_code(diff_code::best); }
};

std::string variant_name(const ::testing::TestParamInfo<diff_code>& info) {
  switch (info.param) {
    case diff_code::best: return "best";
    case diff_code::avx512: return "avx512";
    case diff_code::avx2: return "avx2";
    case diff_code::portable: return "portable";
  }
  return "unknown";
}

TEST_P(diff_code_variant, identical_pages_give_an_empty_diff) {
  std::vector<std::byte> page(4096, std::byte{7});
  std::vector<std::byte> diff;
  EXPECT_EQ(diff_create(page.data(), page.data(), page.size(), diff), 0u);
  EXPECT_TRUE(diff.empty());
}

TEST_P(diff_code_variant, random_changes_round_trip) {
  std::mt19937 random(12345);
  for (std::size_t size : {4096u, 8192u, 65536u}) {
    for (int trial = 0; trial < 200; ++trial) {
      auto twin = test::random_bytes(random, size);
      auto page = twin;
      int changes = static_cast<int>(random() % 300);
      for (int i = 0; i < changes; ++i) page[random() % size] = std::byte(random() & 0xff);
      expect_round_trip(twin, page);
    }
  }
}

TEST_P(diff_code_variant, every_word_changed) {
  std::mt19937 random(7);
  auto twin = test::random_bytes(random, 4096);
  auto page = twin;
  for (auto& b : page) b = ~b;
  std::vector<std::byte> diff;
  diff_create(twin.data(), page.data(), page.size(), diff);
  EXPECT_EQ(diff.size(), 4096u + sizeof(diff_run_header));  // one run
  expect_round_trip(twin, page);
}

// Runs of random lengths (single words to thousands, across the 64-word
// blocks the scan works in), on page sizes that are and are not multiples
// of a block, up to the largest page a diff describes, whose fully changed
// run is longer than a run's 15-bit count.
TEST_P(diff_code_variant, runs_of_every_length_on_every_page_size) {
  std::mt19937 random(99);
  for (std::size_t size : {std::size_t{4}, std::size_t{132}, std::size_t{1000}, std::size_t{4096},
                           std::size_t{4100}, std::size_t{65536}, diff_max_page}) {
    for (int trial = 0; trial < 50; ++trial) {
      auto twin = test::random_bytes(random, size);
      auto page = twin;
      std::size_t words = size / diff_word;
      for (int run = static_cast<int>(random() % 12); run > 0; --run) {
        std::size_t first = random() % words;
        std::size_t length = 1 + random() % (random() % 2 ? 8 : 3000);
        for (std::size_t w = first; w < std::min(words, first + length); ++w)
          page[w * diff_word + random() % diff_word] ^= std::byte{0x5a};
      }
      expect_round_trip(twin, page);
    }
    auto twin = test::random_bytes(random, size);
    auto page = twin;
    for (auto& b : page) b = ~b;
    std::vector<std::byte> diff;
    diff_create(twin.data(), page.data(), size, diff);
    std::size_t words = size / diff_word, runs = (words + 32766) / 32767;  // 15-bit counts
    EXPECT_EQ(diff.size(), size + runs * sizeof(diff_run_header)) << size;
    expect_round_trip(twin, page);
  }
}

TEST_P(diff_code_variant, first_and_last_words) {
  std::vector<std::byte> twin(4096, std::byte{0});
  auto page = twin;
  page[0] = std::byte{1};
  page[4095] = std::byte{2};
  std::vector<std::byte> diff;
  diff_create(twin.data(), page.data(), page.size(), diff);
  // Two runs of one word, each changed in one byte: a mask byte each.
  EXPECT_EQ(diff.size(), 2 * (sizeof(diff_run_header) + diff_word + 1));
  expect_round_trip(twin, page);
  // Each byte of one word changed, alternating words.
  for (std::size_t i = 0; i < 4096; i += 8) page[i + 4] = std::byte{9};
  expect_round_trip(twin, page);
}

// The largest diffs: words changed in one byte each (byte masks), alone
// or in runs of odd length between unchanged words, 4.5 bytes a word.
TEST_P(diff_code_variant, the_largest_diffs_fit_diff_max_bytes) {
  std::mt19937 random(5);
  for (std::size_t size : {std::size_t{4}, std::size_t{12}, std::size_t{4096}, std::size_t{4100},
                           diff_max_page}) {
    std::size_t words = size / diff_word;
    for (std::size_t run : {std::size_t{1}, std::size_t{3}, std::size_t{7}, words}) {
      auto twin = test::random_bytes(random, size);
      auto page = twin;
      for (std::size_t w = 0; w < words; w += run + 1)
        for (std::size_t k = w; k < std::min(words, w + run); ++k)
          page[k * diff_word + 1] ^= std::byte{0x10};
      std::vector<std::byte> diff;
      diff_create(twin.data(), page.data(), size, diff);
      EXPECT_GE(diff.size(), words * 4 + words / 2) << size << " " << run;
      expect_round_trip(twin, page);
    }
  }
}

TEST_P(diff_code_variant, two_writers_of_different_words_both_survive) {
  std::vector<std::byte> base(4096, std::byte{0});
  auto mine = base, theirs = base;
  std::memset(mine.data(), 0x11, 2048);
  std::memset(theirs.data() + 2048, 0x22, 2048);
  std::vector<std::byte> my_diff, their_diff;
  diff_create(base.data(), mine.data(), 4096, my_diff);
  diff_create(base.data(), theirs.data(), 4096, their_diff);
  auto merged = base;
  ASSERT_TRUE(diff_apply(merged.data(), 4096, their_diff));
  ASSERT_TRUE(diff_apply(merged.data(), 4096, my_diff));
  EXPECT_EQ(merged[0], std::byte{0x11});
  EXPECT_EQ(merged[4095], std::byte{0x22});
}

// Two processes write different bytes of one word (a char array): each
// diff names only its own bytes, and both writes survive in either order.
TEST_P(diff_code_variant, two_writers_of_different_bytes_of_one_word_both_survive) {
  std::vector<std::byte> base(4096, std::byte{0});
  auto first = base, second = base;
  first[100] = std::byte{1};
  second[101] = std::byte{2};
  for (std::size_t i = 0; i < 4096; i += 4) {  // every word, bytes 2 and 3 apart
    first[i + 2] = std::byte{0x33};
    second[i + 3] = std::byte{0x44};
  }
  std::vector<std::byte> first_diff, second_diff;
  diff_create(base.data(), first.data(), 4096, first_diff);
  diff_create(base.data(), second.data(), 4096, second_diff);
  for (bool first_last : {false, true}) {
    auto merged = base;
    ASSERT_TRUE(diff_apply(merged.data(), 4096, first_last ? second_diff : first_diff));
    ASSERT_TRUE(diff_apply(merged.data(), 4096, first_last ? first_diff : second_diff));
    EXPECT_EQ(merged[100], std::byte{1});
    EXPECT_EQ(merged[101], std::byte{2});
    for (std::size_t i = 0; i < 4096; i += 4) {
      ASSERT_EQ(merged[i + 2], std::byte{0x33}) << i;
      ASSERT_EQ(merged[i + 3], std::byte{0x44}) << i;
    }
  }
}

// A word changed in one byte costs its run a mask nibble, no more; a word
// changed in every byte none.
TEST_P(diff_code_variant, a_word_changed_in_part_carries_a_mask) {
  std::vector<std::byte> twin(4096, std::byte{0});
  auto page = twin;
  page[8] = std::byte{1};
  std::vector<std::byte> diff;
  diff_create(twin.data(), page.data(), page.size(), diff);
  EXPECT_EQ(diff.size(), sizeof(diff_run_header) + diff_word + 1);
  expect_round_trip(twin, page);
  std::memset(page.data() + 8, 0x7f, diff_word);
  diff.clear();
  diff_create(twin.data(), page.data(), page.size(), diff);
  EXPECT_EQ(diff.size(), sizeof(diff_run_header) + diff_word);
  // Runs of every length and offset whose words changed in part: the masks
  // start at odd and even words and end in half bytes.
  std::mt19937 random(5);
  for (int trial = 0; trial < 300; ++trial) {
    auto base = test::random_bytes(random, 4096);
    auto changed = base;
    std::size_t first = random() % 1024, length = 1 + random() % 200;
    for (std::size_t w = first; w < std::min<std::size_t>(1024, first + length); ++w)
      changed[w * diff_word + random() % diff_word] ^= std::byte{0x81};
    expect_round_trip(base, changed);
  }
}

TEST_P(diff_code_variant, malformed_diffs_are_refused_and_change_nothing) {
  std::vector<std::byte> page(4096, std::byte{5});
  auto before = page;
  auto make = [](std::uint16_t first, std::uint16_t count, std::size_t data) {
    std::vector<std::byte> diff(sizeof(diff_run_header) + data);
    diff_run_header header{first, count};
    memcpy(diff.data(), &header, sizeof header);
    return diff;
  };
  EXPECT_FALSE(diff_apply(page.data(), 4096, make(1020, 8, 32)));  // past the end
  EXPECT_FALSE(diff_apply(page.data(), 4096, make(0, 4, 8)));      // truncated
  EXPECT_FALSE(diff_apply(page.data(), 4096, make(0, 0, 0)));      // empty run
  EXPECT_FALSE(diff_apply(page.data(), 4096, make(0, 0x8000, 0)));  // empty masked run
  EXPECT_FALSE(diff_apply(page.data(), 4096, make(0, 0x8000 | 4, 16)));  // its masks missing
  EXPECT_FALSE(diff_apply(page.data(), 4096, make(1020, 0x8000 | 5, 23)));  // past the end
  std::vector<std::byte> stub(3);
  EXPECT_FALSE(diff_apply(page.data(), 4096, stub));
  EXPECT_EQ(page, before);
}

// A writer's diffs of one page over many intervals, merged into one diff
// for a reader that lacks them all: applied to any page, the merged diff
// leaves what the diffs applied in order leave, whatever bytes were
// written (0x00 and 0xff included, values written back, single bytes of
// a word).  Here it is a seventh to a fourth of their bytes together.
TEST_P(diff_code_variant, merged_diffs_act_as_the_diffs_in_order) {
  std::mt19937 random(11);
  for (std::size_t page_size : {std::size_t{4096}, std::size_t{8192}}) {
    auto page = test::random_bytes(random, page_size);
    std::vector<std::vector<std::byte>> diffs;
    std::size_t total = 0;
    for (int interval = 0; interval < 40; ++interval) {
      auto twin = page;
      int writes = static_cast<int>(random() % 200);
      for (int w = 0; w < writes; ++w) {
        std::size_t at = random() % page_size;
        switch (random() % 4) {
          case 0: page[at] = std::byte{0}; break;
          case 1: page[at] = std::byte{0xff}; break;
          case 2: page[at] = twin[random() % page_size]; break;
          default: page[at] = std::byte(random() & 0xff); break;
        }
      }
      if (interval % 10 == 9) std::memset(page.data() + 64, interval, 512);  // a long run
      diffs.emplace_back();
      diff_create(twin.data(), page.data(), page_size, diffs.back());
      total += diffs.back().size();
    }
    std::vector<std::span<const std::byte>> spans(diffs.begin(), diffs.end());
    std::vector<std::byte> merged{std::byte{0x7e}};  // appended after what is there
    ASSERT_TRUE(diff_merge(spans, page_size, merged));
    ASSERT_EQ(merged.front(), std::byte{0x7e});
    merged.erase(merged.begin());
    ASSERT_TRUE(diff_valid(merged, page_size));
    EXPECT_LE(merged.size() * 3, total);
    for (int reader = 0; reader < 3; ++reader) {
      auto in_order = test::random_bytes(random, page_size);
      auto at_once = in_order;
      for (const auto& diff : diffs) ASSERT_TRUE(diff_apply(in_order.data(), page_size, diff));
      ASSERT_TRUE(diff_apply(at_once.data(), page_size, merged));
      ASSERT_EQ(0, memcmp(in_order.data(), at_once.data(), page_size)) << page_size;
    }
  }
}

// A page rewritten whole at every interval merges into one diff of the page.
TEST_P(diff_code_variant, a_page_rewritten_many_times_merges_into_one_page) {
  std::vector<std::vector<std::byte>> diffs;
  std::vector<std::byte> twin(4096, std::byte{0}), page = twin;
  for (int interval = 1; interval <= 500; ++interval) {
    twin = page;
    std::memset(page.data(), interval % 251 + 1, page.size());
    diffs.emplace_back();
    diff_create(twin.data(), page.data(), page.size(), diffs.back());
  }
  std::vector<std::span<const std::byte>> spans(diffs.begin(), diffs.end());
  std::vector<std::byte> merged;
  ASSERT_TRUE(diff_merge(spans, 4096, merged));
  EXPECT_EQ(merged.size(), 4096 + sizeof(diff_run_header));
  std::vector<std::byte> rebuilt(4096, std::byte{0x42});
  ASSERT_TRUE(diff_apply(rebuilt.data(), 4096, merged));
  EXPECT_EQ(rebuilt, page);
}

TEST_P(diff_code_variant, merging_nothing_gives_nothing_and_a_malformed_diff_is_refused) {
  std::vector<std::byte> merged;
  ASSERT_TRUE(diff_merge({}, 4096, merged));
  EXPECT_TRUE(merged.empty());
  std::vector<std::byte> empty;
  std::vector<std::span<const std::byte>> nothing{empty, empty};
  ASSERT_TRUE(diff_merge(nothing, 4096, merged));
  EXPECT_TRUE(merged.empty());
  std::vector<std::byte> twin(4096, std::byte{0}), page = twin;
  page[10] = std::byte{1};
  std::vector<std::byte> good, truncated{std::byte{0}, std::byte{0}, std::byte{4}, std::byte{0}};
  diff_create(twin.data(), page.data(), 4096, good);
  std::vector<std::span<const std::byte>> spans{good, truncated};
  merged.assign(3, std::byte{9});
  EXPECT_FALSE(diff_merge(spans, 4096, merged));
  EXPECT_EQ(merged, std::vector<std::byte>(3, std::byte{9}));
}

// The bytes applying diff writes: those it changes in a page of zeros or
// in a page of ones.
std::vector<bool> bytes_written(std::span<const std::byte> diff, std::size_t page_size) {
  std::vector<std::byte> zeros(page_size, std::byte{0}), ones(page_size, std::byte{0xff});
  EXPECT_TRUE(diff_apply(zeros.data(), page_size, diff));
  EXPECT_TRUE(diff_apply(ones.data(), page_size, diff));
  std::vector<bool> written(page_size);
  for (std::size_t at = 0; at < page_size; ++at)
    written[at] = zeros[at] != std::byte{0} || ones[at] != std::byte{0xff};
  return written;
}

// What is left of an earlier diff once a later one's bytes are taken out
// writes exactly the earlier one's bytes that the later one does not, with
// the earlier one's values: applied before the later one, it leaves what
// both leave, on any page.  Pages rewritten whole, in part, a byte or a
// word at a time (byte masks that differ from one diff to the next, as a
// float's do), as doubles that settle (what is left, single words one
// apart, joined in runs), and not at all.
TEST_P(diff_code_variant, what_is_left_of_a_diff_under_a_later_one_acts_as_both) {
  std::mt19937 random(23);
  for (std::size_t page_size : {std::size_t{4096}, std::size_t{8192}}) {
    for (int trial = 0; trial < 200; ++trial) {
      auto page = test::random_bytes(random, page_size);
      std::vector<std::byte> diffs[2];
      for (auto& diff : diffs) {
        auto twin = page;
        switch (trial % 5) {
          case 0:  // a page rewritten whole
            for (auto& byte : page) byte ^= std::byte(1 + random() % 255);
            break;
          case 1:  // floats that change in their low bytes, now and then in their high ones
            for (std::size_t at = 0; at < page_size; at += 4) {
              page[at] ^= std::byte(1 + random() % 255);
              if (random() % 8 == 0) page[at + 3] ^= std::byte(1 + random() % 255);
            }
            break;
          case 2:  // bytes here and there
            for (int w = 1 + static_cast<int>(random() % 300); w > 0; --w)
              page[random() % page_size] ^= std::byte(1 + random() % 255);
            break;
          case 3:  // runs of words
            for (int r = static_cast<int>(random() % 6); r > 0; --r) {
              std::size_t from = random() % page_size / 4 * 4, length = 4 * (1 + random() % 200);
              for (std::size_t at = from; at < std::min(page_size, from + length); ++at)
                page[at] ^= std::byte{0x5a};
            }
            break;
          default:  // doubles settling, as FFT's do: what is left is high words one apart
            for (std::size_t at = 0; at < page_size; at += 8) {
              for (std::size_t b = 0; b < 6; ++b) page[at + b] ^= std::byte(1 + random() % 255);
              if (random() % 8 < (&diff == &diffs[0] ? 7u : 2u)) page[at + 6] ^= std::byte(1 + random() % 255);
              if (random() % 8 == 0) page[at + 7] ^= std::byte(1 + random() % 255);
            }
        }
        diff_create(twin.data(), page.data(), page_size, diff);
      }
      std::vector<std::byte> left(diff_max_bytes(page_size));
      left.resize(diff_subtract(diffs[0], diffs[1], page_size, left.data()));
      ASSERT_TRUE(diff_valid(left, page_size));
      auto earlier = bytes_written(diffs[0], page_size), later = bytes_written(diffs[1], page_size);
      auto kept = bytes_written(left, page_size);
      for (std::size_t at = 0; at < page_size; ++at) {
        ASSERT_EQ(kept[at], earlier[at] && !later[at]) << trial << " byte " << at;
      }
      for (int reader = 0; reader < 2; ++reader) {
        auto both = test::random_bytes(random, page_size);
        auto shrunk = both;
        ASSERT_TRUE(diff_apply(both.data(), page_size, diffs[0]));
        ASSERT_TRUE(diff_apply(both.data(), page_size, diffs[1]));
        ASSERT_TRUE(diff_apply(shrunk.data(), page_size, left));
        ASSERT_TRUE(diff_apply(shrunk.data(), page_size, diffs[1]));
        ASSERT_EQ(0, memcmp(both.data(), shrunk.data(), page_size)) << trial;
      }
      if (trial % 5 == 0) {
        EXPECT_TRUE(left.empty());
      }
      EXPECT_LE(left.size(), diffs[0].size() + 8);
    }
  }
  std::vector<std::byte> nothing, out(diff_max_bytes(4096));
  std::vector<std::byte> twin(4096, std::byte{0}), page = twin;
  page[5] = std::byte{3};
  std::vector<std::byte> one;
  diff_create(twin.data(), page.data(), 4096, one);
  EXPECT_EQ(0u, diff_subtract(nothing, one, 4096, out.data()));
  EXPECT_EQ(one.size(), diff_subtract(one, nothing, 4096, out.data()));
  EXPECT_EQ(0, memcmp(out.data(), one.data(), one.size()));
}

// Under several later diffs at once (node::shrink_diffs walks a page's
// diffs from the last, marking what each writes): what is left of each
// diff writes exactly its bytes that no later one writes, and the diffs so
// made smaller, applied in order, leave what the originals leave.  Doubles
// that settle, whose top bytes change now and then, and words rewritten
// here and there.
TEST_P(diff_code_variant, diffs_made_smaller_under_all_later_ones_act_as_the_originals) {
  std::mt19937 random(29);
  constexpr std::size_t page_size = 4096;
  for (int trial = 0; trial < 60; ++trial) {
    auto page = test::random_bytes(random, page_size);
    const auto start = page;
    std::vector<std::vector<std::byte>> diffs(2 + trial % 6);
    for (auto& diff : diffs) {
      auto twin = page;
      if (trial % 2 == 0) {
        for (std::size_t at = 0; at < page_size; at += 8) {
          for (std::size_t b = 0; b < 6; ++b) page[at + b] ^= std::byte(1 + random() % 255);
          if (random() % 4 == 0) page[at + 6] ^= std::byte(1 + random() % 255);
          if (random() % 16 == 0) page[at + 7] ^= std::byte(1 + random() % 255);
        }
      } else {
        for (int w = 1 + static_cast<int>(random() % 400); w > 0; --w)
          page[random() % page_size] ^= std::byte(1 + random() % 255);
      }
      diff_create(twin.data(), page.data(), page_size, diff);
    }
    std::vector<std::vector<std::byte>> smaller(diffs.size());
    smaller.back() = diffs.back();
    std::vector<std::uint8_t> written(page_size / diff_word, 0);
    for (std::size_t i = diffs.size() - 1; i-- > 0;) {
      diff_mark_written(smaller[i + 1], written.data());
      smaller[i].resize(diff_max_bytes(page_size));
      smaller[i].resize(diff_subtract_written(diffs[i], written.data(), smaller[i].data()));
      ASSERT_TRUE(diff_valid(smaller[i], page_size));
      auto kept = bytes_written(smaller[i], page_size), mine = bytes_written(diffs[i], page_size);
      std::vector<bool> after(page_size, false);
      for (std::size_t j = i + 1; j < diffs.size(); ++j) {
        auto theirs = bytes_written(diffs[j], page_size);
        for (std::size_t at = 0; at < page_size; ++at) after[at] = after[at] || theirs[at];
      }
      for (std::size_t at = 0; at < page_size; ++at)
        ASSERT_EQ(kept[at], mine[at] && !after[at]) << trial << " diff " << i << " byte " << at;
    }
    auto rebuilt = start;
    for (const auto& diff : smaller) ASSERT_TRUE(diff_apply(rebuilt.data(), page_size, diff));
    ASSERT_EQ(rebuilt, page) << trial;
    if (trial % 2 == 0 && diffs.size() >= 4) {
      std::size_t before = 0, after = 0;
      for (std::size_t i = 0; i + 1 < diffs.size(); ++i) {
        before += diffs[i].size();
        after += smaller[i].size();
      }
      EXPECT_LT(after * 4, before) << trial;  // the top bytes are written again soon
    }
  }
}

// node::shrink_diffs passes over a diff that writes none of the bytes the
// newer diffs write: diff_writes_any must say so exactly when some byte
// the diff writes is marked, whole words or single bytes, in runs with
// byte masks and without.
TEST_P(diff_code_variant, a_diff_writes_a_marked_byte_exactly_when_one_of_its_bytes_is_marked) {
  std::mt19937 random(31);
  constexpr std::size_t page_size = 4096, words = page_size / diff_word;
  int said_yes = 0, said_no = 0;
  for (int trial = 0; trial < 400; ++trial) {
    auto twin = test::random_bytes(random, page_size), page = twin;
    int changes = 1 + static_cast<int>(random() % (trial % 3 == 0 ? 2000 : 40));
    for (int c = 0; c < changes; ++c) page[random() % page_size] ^= std::byte(1 + random() % 255);
    std::vector<std::byte> diff;
    diff_create(twin.data(), page.data(), page_size, diff);
    auto writes = bytes_written(diff, page_size);
    std::vector<std::uint8_t> written(words, 0);
    int marks = trial % 4 == 0 ? 0 : 1 + static_cast<int>(random() % (trial % 4 == 1 ? 3 : 300));
    for (int m = 0; m < marks; ++m) {
      std::size_t word = random() % words;
      written[word] |= trial % 2 == 0 ? 0xf : static_cast<std::uint8_t>(1u << (random() % 4));
    }
    bool expected = false;
    for (std::size_t at = 0; at < page_size; ++at)
      expected = expected || (writes[at] && (written[at / diff_word] >> (at % diff_word) & 1) != 0);
    ASSERT_EQ(expected, diff_writes_any(diff, written.data())) << "trial " << trial;
    ++(expected ? said_yes : said_no);
  }
  std::vector<std::uint8_t> all(words, 0xf);
  EXPECT_FALSE(diff_writes_any({}, all.data()));
  EXPECT_GT(said_yes, 50);  // both answers, many times
  EXPECT_GT(said_no, 50);
}

INSTANTIATE_TEST_SUITE_P(all, diff_code_variant,
                         ::testing::Values(diff_code::best, diff_code::avx512, diff_code::avx2,
                                           diff_code::portable),
                         variant_name);

}  // namespace
