// allocator_test — the shared heap never hands out overlapping blocks,
// aligns them, reuses freed space, refuses foreign pointers and returns 0
// when exhausted.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "allocator.h"

namespace {

using tmk::shared_allocator;

constexpr std::uint64_t base = 0x500000000000ull;

TEST(allocator, blocks_are_aligned_and_disjoint) {
  shared_allocator heap(base, 1 << 24, 4096);
  std::map<std::uint64_t, std::uint64_t> blocks;
  std::mt19937 random(3);
  for (int i = 0; i < 2000; ++i) {
    std::uint64_t size = random() % 3 == 0 ? 4096 + random() % 20000 : 1 + random() % 500;
    std::uint64_t at = heap.allocate(size);
    ASSERT_NE(at, 0u);
    EXPECT_EQ(at % (size >= 4096 ? 4096 : 16), 0u);
    auto next = blocks.lower_bound(at);
    if (next != blocks.end()) {
      EXPECT_LE(at + size, next->first);
    }
    if (next != blocks.begin()) {
      EXPECT_LE(std::prev(next)->first + std::prev(next)->second, at);
    }
    blocks[at] = size;
    if (random() % 3 == 0) {
      auto victim = blocks.begin();
      std::advance(victim, random() % blocks.size());
      EXPECT_TRUE(heap.release(victim->first));
      blocks.erase(victim);
    }
  }
}

TEST(allocator, freed_space_is_reused_and_merged) {
  shared_allocator heap(base, 1 << 20, 4096);
  std::uint64_t a = heap.allocate(8192), b = heap.allocate(8192), c = heap.allocate(8192);
  EXPECT_TRUE(heap.release(a));
  EXPECT_TRUE(heap.release(b));
  EXPECT_EQ(heap.allocate(16384), a);  // a and b merged
  (void)c;
}

TEST(allocator, foreign_and_double_frees_are_refused) {
  shared_allocator heap(base, 1 << 20, 4096);
  std::uint64_t a = heap.allocate(100);
  EXPECT_FALSE(heap.release(a + 16));
  EXPECT_TRUE(heap.release(a));
  EXPECT_FALSE(heap.release(a));
}

TEST(allocator, exhaustion_returns_zero) {
  shared_allocator heap(base, 1 << 16, 4096);
  EXPECT_NE(heap.allocate(1 << 15), 0u);
  EXPECT_EQ(heap.allocate(1 << 16), 0u);
  EXPECT_NE(heap.allocate(1 << 14), 0u);
  EXPECT_EQ(heap.extend(1 << 15), 0u);
}

TEST(allocator, sbrk_extends_at_the_break) {
  shared_allocator heap(base, 1 << 20, 4096);
  std::uint64_t first = heap.extend(100);
  std::uint64_t second = heap.extend(4096);
  EXPECT_EQ(first, base);
  EXPECT_EQ(second, base + 4096);
}

}  // namespace
