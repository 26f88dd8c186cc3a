// diff_test — diffs turn a twin into its page exactly, on random pages,
// pages where every word changed, and changes at the first and last word.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "diff.h"

namespace {

using namespace tmk;

std::vector<std::byte> random_page(std::mt19937& random, std::size_t size) {
  std::vector<std::byte> page(size);
  for (auto& b : page) b = std::byte(random() & 0xff);
  return page;
}

void expect_round_trip(const std::vector<std::byte>& twin, const std::vector<std::byte>& page) {
  std::vector<std::byte> diff;
  diff_create(twin.data(), page.data(), page.size(), diff);
  ASSERT_TRUE(diff_valid(diff, page.size()));
  std::vector<std::byte> rebuilt = twin;
  ASSERT_TRUE(diff_apply(rebuilt.data(), rebuilt.size(), diff));
  EXPECT_EQ(0, memcmp(rebuilt.data(), page.data(), page.size()));
}

TEST(diff, identical_pages_give_an_empty_diff) {
  std::vector<std::byte> page(4096, std::byte{7});
  std::vector<std::byte> diff;
  EXPECT_EQ(diff_create(page.data(), page.data(), page.size(), diff), 0u);
  EXPECT_TRUE(diff.empty());
}

TEST(diff, random_changes_round_trip) {
  std::mt19937 random(12345);
  for (std::size_t size : {4096u, 8192u, 65536u}) {
    for (int trial = 0; trial < 200; ++trial) {
      auto twin = random_page(random, size);
      auto page = twin;
      int changes = static_cast<int>(random() % 300);
      for (int i = 0; i < changes; ++i) page[random() % size] = std::byte(random() & 0xff);
      expect_round_trip(twin, page);
    }
  }
}

TEST(diff, every_word_changed) {
  std::mt19937 random(7);
  auto twin = random_page(random, 4096);
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
// run is longer than a run's 16-bit count.
TEST(diff, runs_of_every_length_on_every_page_size) {
  std::mt19937 random(99);
  for (std::size_t size : {std::size_t{4}, std::size_t{132}, std::size_t{1000}, std::size_t{4096},
                           std::size_t{4100}, std::size_t{65536}, diff_max_page}) {
    for (int trial = 0; trial < 50; ++trial) {
      auto twin = random_page(random, size);
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
    auto twin = random_page(random, size);
    auto page = twin;
    for (auto& b : page) b = ~b;
    std::vector<std::byte> diff;
    diff_create(twin.data(), page.data(), size, diff);
    std::size_t words = size / diff_word, runs = (words + 65534) / 65535;
    EXPECT_EQ(diff.size(), size + runs * sizeof(diff_run_header)) << size;
    expect_round_trip(twin, page);
  }
}

TEST(diff, first_and_last_words) {
  std::vector<std::byte> twin(4096, std::byte{0});
  auto page = twin;
  page[0] = std::byte{1};
  page[4095] = std::byte{2};
  std::vector<std::byte> diff;
  diff_create(twin.data(), page.data(), page.size(), diff);
  EXPECT_EQ(diff.size(), 2 * (sizeof(diff_run_header) + diff_word));
  expect_round_trip(twin, page);
  // Each byte of one word changed, alternating words.
  for (std::size_t i = 0; i < 4096; i += 8) page[i + 4] = std::byte{9};
  expect_round_trip(twin, page);
}

TEST(diff, two_writers_of_different_words_both_survive) {
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

TEST(diff, malformed_diffs_are_refused_and_change_nothing) {
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
  std::vector<std::byte> stub(3);
  EXPECT_FALSE(diff_apply(page.data(), 4096, stub));
  EXPECT_EQ(page, before);
}

}  // namespace
