// populated_test — populated chunks are whole, aligned and writable; a
// page pool hands out distinct blocks that hold what is written to them,
// across chunks, and hands a given-back block out again first.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "populated.h"

namespace {

using namespace tmk;

TEST(populated, chunks_are_aligned_to_a_huge_page_and_writable) {
  std::size_t size = 2 * huge_page_bytes;
  std::byte* chunk = map_populated(size);
  ASSERT_NE(chunk, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(chunk) % huge_page_bytes, 0u);
  memset(chunk, 0x5a, size);
  EXPECT_EQ(chunk[size - 1], std::byte{0x5a});
  EXPECT_EQ(munmap(chunk, size), 0);
}

TEST(page_pool, blocks_are_distinct_and_keep_their_contents_across_chunks) {
  const std::size_t block = 4096;
  page_pool pool(block);
  std::size_t count = 2 * huge_page_bytes / block + 3;  // three chunks
  std::vector<std::byte*> blocks;
  for (std::size_t i = 0; i < count; ++i) {
    std::byte* taken = pool.take();
    ASSERT_NE(taken, nullptr);
    memset(taken, static_cast<int>(i % 251), block);
    blocks.push_back(taken);
  }
  EXPECT_EQ(std::set<std::byte*>(blocks.begin(), blocks.end()).size(), count);
  EXPECT_EQ(pool.bytes_mapped(), 3 * huge_page_bytes);
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<std::byte> expected(block, std::byte(i % 251));
    ASSERT_EQ(memcmp(blocks[i], expected.data(), block), 0) << "block " << i;
  }
}

TEST(page_pool, a_block_given_back_is_taken_again_first) {
  page_pool pool(8192);
  std::byte* first = pool.take();
  std::byte* second = pool.take();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  pool.give(first);
  EXPECT_EQ(pool.take(), first);
  EXPECT_EQ(pool.bytes_mapped(), huge_page_bytes);
}

TEST(page_pool, blocks_larger_than_a_huge_page_get_chunks_of_their_own) {
  const std::size_t block = huge_page_bytes + 4096;
  page_pool pool(block);
  std::byte* one = pool.take();
  std::byte* two = pool.take();
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  memset(one, 1, block);
  memset(two, 2, block);
  EXPECT_EQ(one[block - 1], std::byte{1});
  EXPECT_EQ(two[0], std::byte{2});
  EXPECT_EQ(pool.bytes_mapped(), 2 * 2 * huge_page_bytes);
}

TEST(page_pool, prepare_maps_the_first_chunk_that_take_then_uses) {
  const std::size_t block = 4096;
  page_pool pool(block);
  EXPECT_EQ(pool.bytes_mapped(), 0u);
  ASSERT_TRUE(pool.prepare());
  EXPECT_EQ(pool.bytes_mapped(), huge_page_bytes);
  ASSERT_TRUE(pool.prepare());  // once only
  EXPECT_EQ(pool.bytes_mapped(), huge_page_bytes);
  for (std::size_t i = 0; i < huge_page_bytes / block; ++i) {
    std::byte* taken = pool.take();
    ASSERT_NE(taken, nullptr);
    memset(taken, 7, block);
  }
  EXPECT_EQ(pool.bytes_mapped(), huge_page_bytes);
}

}  // namespace
