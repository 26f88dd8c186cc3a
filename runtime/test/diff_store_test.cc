// diff_store_test — diffs made in the store's room stay exact and put,
// of every size across many chunks; the room a diff does not use goes to
// the next; after clear() the store fills the chunks it already has before
// it maps more; diffs rewritten smaller and compacted stay exact and leave
// their room to the next.
#include <gtest/gtest.h>

#include <algorithm>
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

// Keeps diffs of random sizes (a few bytes to a little over a page), each
// made in room for the largest diff of a page, until `total` bytes are
// kept, then checks that every one is still intact.
constexpr std::size_t most = 4700;

std::vector<kept_copy> fill(diff_store& store, std::mt19937& random, std::size_t total) {
  std::vector<kept_copy> copies;
  std::size_t kept = 0;
  while (kept < total) {
    std::size_t size = 1 + random() % most;
    kept_copy copy{test::random_bytes(random, size), {}};
    std::byte* room = store.room(most);
    EXPECT_NE(nullptr, room);
    if (room == nullptr) break;
    memcpy(room, copy.original.data(), size);
    copy.kept = store.keep_made(size);
    EXPECT_EQ(room, copy.kept.data());
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

TEST(diff_store, the_room_a_diff_leaves_goes_to_the_next) {
  diff_store store;
  std::byte* first = store.room(most);
  ASSERT_NE(nullptr, first);
  EXPECT_TRUE(store.keep_made(0).empty());  // an empty diff takes nothing
  EXPECT_EQ(first, store.room(most));
  EXPECT_EQ(first, store.keep_made(13).data());
  // Diffs are kept 8-byte aligned: runs are read a word at a time.
  EXPECT_EQ(first + 16, store.room(most));
  store.keep_made(8);
  EXPECT_EQ(first + 24, store.room(most));
  EXPECT_EQ(21u, store.bytes_kept());
  EXPECT_EQ(diff_store::chunk_bytes, store.bytes_mapped());
}

TEST(diff_store, a_diff_larger_than_a_chunk_gets_one_of_its_own) {
  std::mt19937 random(11);
  diff_store store;
  auto small = test::random_bytes(random, 100);
  auto large = test::random_bytes(random, diff_store::chunk_bytes + 12345);
  std::byte* small_room = store.room(small.size());
  ASSERT_NE(nullptr, small_room);
  memcpy(small_room, small.data(), small.size());
  auto small_kept = store.keep_made(small.size());
  std::byte* large_room = store.room(large.size());
  ASSERT_NE(nullptr, large_room);
  memcpy(large_room, large.data(), large.size());
  auto large_kept = store.keep_made(large.size());
  EXPECT_EQ(0, memcmp(large.data(), large_kept.data(), large.size()));
  EXPECT_EQ(0, memcmp(small.data(), small_kept.data(), small.size()));
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

// Diffs rewritten smaller (every other one to a third, some to nothing)
// and then compacted keep their bytes and their order, lie one after the
// other from the first chunk on, and leave the room after them to new
// diffs: the store maps no chunk until that room is full.
TEST(diff_store, compacted_diffs_stay_exact_and_leave_their_room_to_new_ones) {
  std::mt19937 random(5);
  diff_store store;
  auto copies = fill(store, random, 5 * diff_store::chunk_bytes / 2);
  std::size_t mapped = store.bytes_mapped();
  ASSERT_EQ(3 * diff_store::chunk_bytes, mapped);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    auto& copy = copies[i];
    std::size_t size = i % 2 == 0 ? copy.original.size() : i % 10 == 1 ? 0 : copy.original.size() / 3;
    auto shorter = test::random_bytes(random, size);
    copy.kept = store.rewrite(copy.kept, shorter.data(), size);
    copy.original = shorter;
    kept += size;
  }
  EXPECT_EQ(kept, store.bytes_kept());
  std::vector<std::span<const std::byte>*> live;
  for (auto& copy : copies) live.push_back(&copy.kept);
  store.compact(live);
  EXPECT_EQ(kept, store.bytes_kept());
  EXPECT_LT(store.bytes_used(), 2 * diff_store::chunk_bytes);
  EXPECT_FALSE(store.full(most));
  std::vector<std::span<const std::byte>> placed;
  for (const auto& copy : copies) {
    ASSERT_EQ(copy.original.size(), copy.kept.size());
    EXPECT_EQ(0, memcmp(copy.original.data(), copy.kept.data(), copy.kept.size()));
    if (!copy.kept.empty()) placed.push_back(copy.kept);
  }
  std::sort(placed.begin(), placed.end(), [](auto a, auto b) { return a.data() < b.data(); });
  for (std::size_t i = 1; i < placed.size(); ++i) {
    ASSERT_LE(placed[i - 1].data() + placed[i - 1].size(), placed[i].data()) << "diffs overlap";
  }
  // Compacting again moves nothing.
  std::vector<const std::byte*> where;
  for (const auto& copy : copies) where.push_back(copy.kept.data());
  store.compact(live);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (!copies[i].kept.empty()) {
      EXPECT_EQ(where[i], copies[i].kept.data());
    }
  }
  // The room freed takes new diffs before any chunk is mapped.
  std::size_t room_left = mapped - store.bytes_used();
  auto more = fill(store, random, room_left - diff_store::chunk_bytes / 2);
  EXPECT_EQ(mapped, store.bytes_mapped());
  for (const auto& copy : copies) {
    EXPECT_EQ(0, memcmp(copy.original.data(), copy.kept.data(), copy.kept.size()));
  }
}

TEST(diff_store, prepare_maps_the_first_chunk_that_diffs_then_fill) {
  std::mt19937 random(4);
  diff_store store;
  EXPECT_EQ(0u, store.bytes_mapped());
  ASSERT_TRUE(store.prepare());
  ASSERT_TRUE(store.prepare());  // once only
  EXPECT_EQ(diff_store::chunk_bytes, store.bytes_mapped());
  fill(store, random, diff_store::chunk_bytes - diff_store::chunk_bytes / 8);
  EXPECT_EQ(diff_store::chunk_bytes, store.bytes_mapped());
}

// node::shrink_diffs grows a store whose diffs kept leave it too little
// room: the chunk grow() maps takes the next diffs, full() stays false
// until the room of both is used, and the diffs in the first stay exact.
TEST(diff_store, a_grown_store_takes_new_diffs_in_its_new_chunk) {
  std::mt19937 random(5);
  diff_store store;
  ASSERT_TRUE(store.prepare());
  auto first = fill(store, random, diff_store::chunk_bytes - diff_store::chunk_bytes / 8);
  ASSERT_TRUE(store.grow());
  EXPECT_EQ(2 * diff_store::chunk_bytes, store.bytes_mapped());
  EXPECT_FALSE(store.full(diff_store::chunk_bytes / 4));
  auto second = fill(store, random, diff_store::chunk_bytes - diff_store::chunk_bytes / 8);
  EXPECT_EQ(2 * diff_store::chunk_bytes, store.bytes_mapped());
  EXPECT_TRUE(store.full(diff_store::chunk_bytes / 4));
  for (const auto* copies : {&first, &second})
    for (const auto& copy : *copies)
      EXPECT_EQ(0, memcmp(copy.original.data(), copy.kept.data(), copy.kept.size()));
}

}  // namespace
