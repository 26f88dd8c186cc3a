// diff_store_test — the store hands back exact, stable copies of diffs of
// every size across many chunks, and after clear() fills the chunks it
// already has before it maps more.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "diff_store.h"
#include "random_bytes.h"

namespace {

using namespace tmk;

struct kept_copy {
  std::vector<std::byte> original;
  std::span<const std::byte> kept;
};

// Keeps diffs of random sizes (a few bytes to a little over a page) until
// `total` bytes are kept, then checks that every copy is still intact.
std::vector<kept_copy> fill(diff_store& store, std::mt19937& random, std::size_t total) {
  std::vector<kept_copy> copies;
  std::size_t kept = 0;
  while (kept < total) {
    std::size_t size = 1 + random() % 4700;
    kept_copy copy{test::random_bytes(random, size), {}};
    auto stored = store.keep(copy.original);
    EXPECT_TRUE(stored.has_value());
    if (!stored) break;
    copy.kept = *stored;
    kept += size;
    copies.push_back(std::move(copy));
  }
  for (const auto& copy : copies) {
    EXPECT_EQ(copy.original.size(), copy.kept.size());
    EXPECT_EQ(0, memcmp(copy.original.data(), copy.kept.data(), copy.kept.size()));
  }
  return copies;
}

TEST(diff_store, copies_stay_exact_across_chunks) {
  std::mt19937 random(7);
  diff_store store;
  auto copies = fill(store, random, 5 * diff_store::chunk_bytes / 2);
  std::size_t total = 0;
  for (const auto& copy : copies) total += copy.original.size();
  EXPECT_EQ(total, store.bytes_kept());
  EXPECT_GE(store.bytes_mapped(), total);
  EXPECT_EQ(3 * diff_store::chunk_bytes, store.bytes_mapped());
}

TEST(diff_store, an_empty_diff_takes_no_memory) {
  diff_store store;
  auto kept = store.keep({});
  ASSERT_TRUE(kept.has_value());
  EXPECT_TRUE(kept->empty());
  EXPECT_EQ(0u, store.bytes_mapped());
}

TEST(diff_store, a_diff_larger_than_a_chunk_gets_one_of_its_own) {
  std::mt19937 random(11);
  diff_store store;
  auto small = test::random_bytes(random, 100);
  auto large = test::random_bytes(random, diff_store::chunk_bytes + 12345);
  auto small_kept = store.keep(small);
  auto large_kept = store.keep(large);
  ASSERT_TRUE(small_kept && large_kept);
  EXPECT_EQ(0, memcmp(large.data(), large_kept->data(), large.size()));
  EXPECT_EQ(0, memcmp(small.data(), small_kept->data(), small.size()));
  // The large one's chunk is whole huge pages: two.
  EXPECT_EQ(3 * diff_store::chunk_bytes, store.bytes_mapped());
}

TEST(diff_store, after_clear_the_chunks_are_used_again) {
  std::mt19937 random(3);
  diff_store store;
  fill(store, random, 2 * diff_store::chunk_bytes);
  std::size_t mapped = store.bytes_mapped();
  for (int round = 0; round < 3; ++round) {
    store.clear();
    EXPECT_EQ(0u, store.bytes_kept());
    fill(store, random, 2 * diff_store::chunk_bytes - diff_store::chunk_bytes / 8);
    EXPECT_EQ(mapped, store.bytes_mapped()) << "round " << round;
  }
}

TEST(diff_store, prepare_maps_the_first_chunk_that_keep_then_fills) {
  std::mt19937 random(4);
  diff_store store;
  EXPECT_EQ(0u, store.bytes_mapped());
  ASSERT_TRUE(store.prepare());
  ASSERT_TRUE(store.prepare());  // once only
  EXPECT_EQ(diff_store::chunk_bytes, store.bytes_mapped());
  fill(store, random, diff_store::chunk_bytes - diff_store::chunk_bytes / 8);
  EXPECT_EQ(diff_store::chunk_bytes, store.bytes_mapped());
}

}  // namespace
