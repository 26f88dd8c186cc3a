// message_test.cc — message_writer keeps exactly the bytes put since its
// last restart, whatever memory it reuses, and message_reader takes them
// back in order.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "message.h"

namespace tmk {
namespace {

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return bytes;
}

TEST(message_writer, fields_read_back_in_order) {
  message_writer writer(message_type::lock_grant);
  writer.put<std::uint32_t>(0xdeadbeef);
  writer.put<std::int32_t>(-7);
  writer.put<std::uint8_t>(9);
  writer.put<std::uint64_t>(0x0123456789abcdefULL);
  std::vector<std::byte> blob = pattern(300, 1);
  writer.put_bytes(blob);
  std::vector<std::uint32_t> words{1, 2, 3, 4, 5};
  writer.put_words(words);
  writer.put_array(words);
  writer.put_string("barrier 3");
  EXPECT_EQ(writer.size(), 1 + 4 + 4 + 1 + 8 + 4 + 300 + 4 + 20 + 20 + 4 + 9);

  message_reader reader(writer.bytes());
  EXPECT_EQ(reader.type(), message_type::lock_grant);
  EXPECT_EQ(reader.take<std::uint32_t>(), 0xdeadbeefu);
  EXPECT_EQ(reader.take<std::int32_t>(), -7);
  EXPECT_EQ(reader.take<std::uint8_t>(), 9);
  EXPECT_EQ(reader.take<std::uint64_t>(), 0x0123456789abcdefULL);
  std::span<const std::byte> got = reader.get_bytes();
  EXPECT_TRUE(std::equal(got.begin(), got.end(), blob.begin(), blob.end()));
  std::vector<std::uint32_t> counted;
  EXPECT_TRUE(reader.get_words(counted, 100));
  EXPECT_EQ(counted, words);
  for (std::uint32_t word : words) EXPECT_EQ(reader.take<std::uint32_t>(), word);
  EXPECT_EQ(reader.get_string(), "barrier 3");
  EXPECT_TRUE(reader.ok());
  EXPECT_EQ(reader.remaining(), 0u);
}

// A message written in the memory of a longer one holds its own bytes
// alone, and the room it reserves is zeroed, not the earlier message's.
TEST(message_writer, a_restart_leaves_nothing_of_the_message_before) {
  message_writer writer(message_type::diff_reply);
  std::vector<std::byte> long_one = pattern(5000, 7);
  writer.put_bytes(long_one);
  writer.restart(message_type::lock_acquire);
  EXPECT_EQ(writer.size(), 1u);
  writer.put<std::uint32_t>(42);
  std::byte* room = writer.reserve(600);
  for (std::size_t i = 0; i < 600; ++i) ASSERT_EQ(room[i], std::byte{0}) << "byte " << i;
  EXPECT_EQ(writer.size(), 1u + 4 + 600);
  message_reader reader(writer.bytes());
  EXPECT_EQ(reader.type(), message_type::lock_acquire);
  EXPECT_EQ(reader.take<std::uint32_t>(), 42u);
  EXPECT_EQ(reader.remaining(), 600u);
}

// A count reserved first and written in place once known, through data(),
// after the message grew past its first memory; truncate drops what came
// after a point and the next field follows it.
TEST(message_writer, reserved_fields_and_truncation) {
  message_writer writer(message_type::diff_reply);
  std::size_t count_at = writer.size();
  writer.reserve(sizeof(std::uint32_t));
  std::vector<std::byte> part = pattern(1000, 3);
  for (int i = 0; i < 40; ++i) writer.put_bytes(part);  // 40 kB: moved several times
  std::uint32_t count = 40;
  memcpy(writer.data() + count_at, &count, sizeof count);
  std::size_t keep = writer.size();
  writer.put<std::uint32_t>(0xffffffff);
  writer.put_bytes(part);
  writer.truncate(keep);
  EXPECT_EQ(writer.size(), keep);
  writer.put<std::uint16_t>(77);

  message_reader reader(writer.bytes());
  EXPECT_EQ(reader.type(), message_type::diff_reply);
  EXPECT_EQ(reader.take<std::uint32_t>(), 40u);
  for (int i = 0; i < 40; ++i) {
    std::span<const std::byte> got = reader.get_bytes();
    ASSERT_TRUE(std::equal(got.begin(), got.end(), part.begin(), part.end())) << "part " << i;
  }
  EXPECT_EQ(reader.take<std::uint16_t>(), 77);
  EXPECT_TRUE(reader.ok());
  EXPECT_EQ(reader.remaining(), 0u);
}

// room_for makes the capacity of a large message at once; its bytes are
// the copies put, and take() hands over exactly them.  The writer starts
// again empty and whole.
TEST(message_writer, a_large_message_taken_whole) {
  message_writer writer(message_type::barrier_depart);
  std::vector<std::byte> page = pattern(4096, 11);
  writer.room_for(40 * (4 + page.size()));
  for (int i = 0; i < 40; ++i) {
    writer.put<std::uint32_t>(static_cast<std::uint32_t>(i));
    writer.put_array({reinterpret_cast<const std::uint32_t*>(page.data()), page.size() / 4});
  }
  std::size_t size = writer.size();
  std::vector<std::byte> taken = writer.take();
  ASSERT_EQ(taken.size(), size);
  message_reader reader(taken);
  EXPECT_EQ(reader.type(), message_type::barrier_depart);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(reader.take<std::uint32_t>(), static_cast<std::uint32_t>(i));
    std::span<const std::byte> rest = reader.rest();
    ASSERT_GE(rest.size(), page.size());
    ASSERT_TRUE(std::equal(page.begin(), page.end(), rest.begin())) << "page " << i;
    for (std::size_t word = 0; word < page.size() / 4; ++word) reader.take<std::uint32_t>();
  }
  EXPECT_EQ(reader.remaining(), 0u);

  writer.restart(message_type::lock_grant);
  writer.put<std::uint32_t>(5);
  message_reader again(writer.bytes());
  EXPECT_EQ(again.type(), message_type::lock_grant);
  EXPECT_EQ(again.take<std::uint32_t>(), 5u);
  EXPECT_EQ(again.remaining(), 0u);
}

}  // namespace
}  // namespace tmk
