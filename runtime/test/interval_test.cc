// interval_test — vector-time order, the interval store and the encoding
// of intervals and write notices in messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "interval.h"
#include "message.h"
#include "vector_time.h"

namespace {

using namespace tmk;

TEST(vector_time, order_and_merge) {
  vector_time a{1, 0, 2}, b{1, 1, 2}, c{0, 3, 0};
  EXPECT_TRUE(vector_time_before(a, b));
  EXPECT_FALSE(vector_time_before(b, a));
  EXPECT_FALSE(vector_time_before(a, a));
  EXPECT_FALSE(vector_time_before(a, c));
  EXPECT_FALSE(vector_time_before(c, a));
  EXPECT_TRUE(vector_time_covers(b, a));
  vector_time merged = a;
  vector_time_merge(merged, c);
  EXPECT_EQ(merged, (vector_time{1, 3, 2}));
  EXPECT_LT(vector_time_sum(a), vector_time_sum(b));
}

interval_record make(int owner, std::uint32_t index, vector_time time,
                     std::vector<std::uint32_t> pages) {
  time[owner] = index;
  return {owner, index, std::move(time), page_list(pages)};
}

TEST(interval_store, keeps_contiguous_runs) {
  interval_store store(3);
  EXPECT_TRUE(store.add(make(1, 1, {0, 0, 0}, {5})));
  EXPECT_TRUE(store.add(make(1, 1, {0, 0, 0}, {5})));  // duplicate: ignored
  EXPECT_FALSE(store.add(make(1, 3, {0, 0, 0}, {5})));  // gap
  EXPECT_TRUE(store.add(make(1, 2, {2, 0, 0}, {6, 7})));
  EXPECT_EQ(store.known(1), 2u);
  EXPECT_EQ(store.known(0), 0u);
  ASSERT_NE(store.find(1, 2), nullptr);
  EXPECT_EQ(store.find(1, 2)->pages, (page_list{6, 7}));
  EXPECT_EQ(store.find(1, 3), nullptr);
  store.discard_through({0, 1, 0});
  EXPECT_EQ(store.find(1, 1), nullptr);
  EXPECT_NE(store.find(1, 2), nullptr);
  EXPECT_EQ(store.known(1), 2u);
  EXPECT_EQ(store.count(), 1u);
}

TEST(interval_store, encodes_what_the_receiver_lacks) {
  interval_store store(2);
  store.add(make(0, 1, {0, 0}, {1}));
  store.add(make(0, 2, {0, 0}, {2}));
  store.add(make(1, 1, {1, 0}, {3, 4}));
  message_writer writer(message_type::lock_grant);
  ASSERT_TRUE(store.encode(writer, {1, 0}, {2, 1}));
  message_reader reader(writer.bytes());
  EXPECT_EQ(reader.type(), message_type::lock_grant);
  std::vector<interval_record> records;
  ASSERT_TRUE(intervals_decode(reader, 2, 100, records));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].owner, 0);
  EXPECT_EQ(records[0].index, 2u);
  EXPECT_EQ(records[1].owner, 1);
  EXPECT_EQ(records[1].pages, (page_list{3, 4}));
  EXPECT_EQ(records[1].time, (vector_time{1, 1}));
  // An interval the store never had cannot be sent.
  message_writer missing(message_type::lock_grant);
  EXPECT_FALSE(store.encode(missing, {0, 0}, {3, 0}));
}

// Within a byte budget, the records that fit go, in owner order, and
// `reached` says where the rest starts: encoding on from there, message
// after message, gives every record once and in order.  A budget that
// holds none sends none.
TEST(interval_store, encodes_what_fits_and_where_the_rest_starts) {
  interval_store store(3);
  std::vector<std::pair<int, std::uint32_t>> all;
  for (std::uint32_t index = 1; index <= 5; ++index)
    for (int owner = 0; owner < 3; ++owner) {
      store.add(make(owner, index, {index - 1, index - 1, index - 1}, {index, 10 + index, 11 + index}));
      all.emplace_back(owner, index);
    }
  // Each record: owner, index, 3 entries of time, 3 words of pages and their count.
  std::size_t record_bytes = encoded_bytes(*store.find(0, 1));
  EXPECT_EQ(record_bytes, 4u + 4 + 12 + 4 + 12);
  vector_time have{0, 0, 0}, upto{5, 5, 5}, reached;
  message_writer nothing(message_type::lock_grant);
  ASSERT_TRUE(store.encode_within(nothing, have, upto, 4 + record_bytes - 1, reached));
  EXPECT_EQ(reached, have);
  std::vector<std::pair<int, std::uint32_t>> got;
  int messages = 0;
  while (!vector_time_covers(have, upto)) {
    message_writer writer(message_type::lock_grant);
    ASSERT_TRUE(store.encode_within(writer, have, upto, 4 + 4 * record_bytes, reached));
    EXPECT_LE(writer.size(), 1 + 4 + 4 * record_bytes);
    message_reader reader(writer.bytes());
    reader.type();
    std::vector<interval_record> records;
    ASSERT_TRUE(intervals_decode(reader, 3, 100, records));
    ASSERT_FALSE(records.empty());
    for (const auto& record : records) {
      EXPECT_EQ(record.index, have[record.owner] + 1);
      have[record.owner] = record.index;
      got.emplace_back(record.owner, record.index);
    }
    EXPECT_EQ(have, reached);
    ++messages;
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(got, all);  // owner 0's five, then owner 1's, then owner 2's
  EXPECT_EQ(messages, 4);
}

// A receiver whose time predates a garbage collection (its lock request or
// barrier arrival was sent before it) has every discarded record since:
// only the later ones go.
TEST(interval_store, encodes_nothing_a_collection_discarded) {
  interval_store store(2);
  store.add(make(0, 1, {0, 0}, {1}));
  store.add(make(0, 2, {0, 0}, {2}));
  store.add(make(1, 1, {1, 0}, {3}));
  store.discard_through({2, 1});
  store.add(make(0, 3, {2, 1}, {4}));
  message_writer writer(message_type::lock_grant);
  ASSERT_TRUE(store.encode(writer, {0, 0}, {3, 1}));
  message_reader reader(writer.bytes());
  reader.type();
  std::vector<interval_record> records;
  ASSERT_TRUE(intervals_decode(reader, 2, 100, records));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].owner, 0);
  EXPECT_EQ(records[0].index, 3u);
  EXPECT_EQ(records[0].pages, (page_list{4}));
}

TEST(page_list, keeps_runs_of_consecutive_pages) {
  std::vector<std::uint32_t> pages{3, 4, 5, 9, 20, 21};
  page_list list(pages);
  EXPECT_EQ(list.size(), 6u);
  EXPECT_EQ(std::vector<std::uint32_t>(list.begin(), list.end()), pages);
  ASSERT_EQ(list.runs().size(), 3u);
  EXPECT_EQ(list.runs()[0], (page_run{3, 3}));
  EXPECT_EQ(list.runs()[1], (page_run{9, 1}));
  EXPECT_EQ(list.runs()[2], (page_run{20, 2}));
  for (std::uint32_t page = 0; page < 30; ++page)
    EXPECT_EQ(list.contains(page), std::find(pages.begin(), pages.end(), page) != pages.end()) << page;
  EXPECT_TRUE(page_list().empty());
  EXPECT_FALSE(page_list().contains(0));
  EXPECT_EQ(page_list().begin(), page_list().end());
}

TEST(page_list, travels_in_a_few_words) {
  std::vector<std::uint32_t> band(1000);
  for (std::uint32_t i = 0; i < band.size(); ++i) band[i] = 500 + i;
  band.push_back(1600);
  page_list list(band);
  message_writer writer(message_type::barrier_depart);
  put_pages(writer, list);
  EXPECT_EQ(writer.size(), 1 + 4 + 3 * 4u);  // type, word count, run (2 words), page
  message_reader reader(writer.bytes());
  reader.type();
  page_list back;
  ASSERT_TRUE(get_pages(reader, 2000, back));
  EXPECT_EQ(back, list);
  EXPECT_EQ(reader.remaining(), 0u);
  // A page list of single pages is a plain list of words.
  message_writer plain(message_type::barrier_depart);
  plain.put_words(std::vector<std::uint32_t>{2, 7, 8});
  message_reader plain_reader(plain.bytes());
  plain_reader.type();
  ASSERT_TRUE(get_pages(plain_reader, 10, back));
  EXPECT_EQ(back, (page_list{2, 7, 8}));
}

TEST(page_list, refuses_malformed_lists) {
  auto decodes = [](std::vector<std::uint32_t> words, std::uint32_t npages) {
    message_writer writer(message_type::barrier_depart);
    writer.put_words(words);
    message_reader reader(writer.bytes());
    reader.type();
    page_list list;
    return get_pages(reader, npages, list);
  };
  constexpr std::uint32_t run = 0x80000000u;
  EXPECT_TRUE(decodes({1, run | 3, 4, 9}, 10));
  EXPECT_FALSE(decodes({3, 1}, 10));                   // decreasing
  EXPECT_FALSE(decodes({3, 3}, 10));                   // twice
  EXPECT_FALSE(decodes({run | 3, 4, 5}, 10));          // overlaps the run before
  EXPECT_FALSE(decodes({run | 3, 1}, 10));             // a run of one page
  EXPECT_FALSE(decodes({run | 3}, 10));                // a run without its count
  EXPECT_FALSE(decodes({run | 8, 3}, 10));             // a run past the last page
  EXPECT_FALSE(decodes({run | 8, 0xfffffff9u}, 10));   // a count that wraps around
  EXPECT_FALSE(decodes({10}, 10));                     // a page out of range
  message_writer lying(message_type::barrier_depart);
  lying.put<std::uint32_t>(3);
  lying.put<std::uint32_t>(1);
  message_reader reader(lying.bytes());
  reader.type();
  page_list list;
  EXPECT_FALSE(get_pages(reader, 10, list));           // fewer words than it says
}

TEST(interval_decode, refuses_malformed_records) {
  auto encode_one = [](std::int32_t owner, std::uint32_t index, vector_time time,
                       std::vector<std::uint32_t> pages) {
    message_writer writer(message_type::barrier_depart);
    writer.put<std::uint32_t>(1);
    writer.put<std::int32_t>(owner);
    writer.put<std::uint32_t>(index);
    for (auto entry : time) writer.put<std::uint32_t>(entry);
    writer.put_words(pages);
    return writer;
  };
  auto decodes = [](const message_writer& writer, std::uint32_t npages) {
    message_reader reader(writer.bytes());
    reader.type();
    std::vector<interval_record> records;
    return intervals_decode(reader, 2, npages, records);
  };
  EXPECT_TRUE(decodes(encode_one(1, 1, {0, 1}, {3}), 10));
  EXPECT_FALSE(decodes(encode_one(2, 1, {0, 1}, {3}), 10));   // no such process
  EXPECT_FALSE(decodes(encode_one(1, 0, {0, 0}, {3}), 10));   // index 0
  EXPECT_FALSE(decodes(encode_one(1, 2, {0, 1}, {3}), 10));   // time disagrees
  EXPECT_FALSE(decodes(encode_one(1, 1, {0, 1}, {10}), 10));  // page out of range
  message_writer truncated(message_type::barrier_depart);
  truncated.put<std::uint32_t>(1000000);
  EXPECT_FALSE(decodes(truncated, 10));
}

TEST(message, reader_checks_every_length) {
  message_writer writer(message_type::distribute);
  writer.put<std::uint32_t>(7);
  writer.put_string("abc");
  message_reader reader(writer.bytes());
  EXPECT_EQ(reader.type(), message_type::distribute);
  EXPECT_EQ(reader.take<std::uint32_t>(), 7u);
  EXPECT_EQ(reader.get_string(), "abc");
  EXPECT_TRUE(reader.ok());
  EXPECT_EQ(reader.take<std::uint64_t>(), 0u);
  EXPECT_FALSE(reader.ok());
  std::vector<std::byte> lying{std::byte{1}, std::byte{0xff}, std::byte{0xff}, std::byte{0}, std::byte{0}};
  message_reader liar(lying);
  liar.type();
  EXPECT_TRUE(liar.get_bytes().empty());
  EXPECT_FALSE(liar.ok());
}

}  // namespace
