// fuzz_messages — libFuzzer target for what the runtime reads from the
// network: message fields, interval records with their write notices, and
// diffs applied to a page; and for diffs merged into one.  Whatever the
// bytes, decoding must either succeed with values in range or report
// failure, a refused diff must leave the page untouched, and the merge of
// a page's diffs must act as the diffs applied in order.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "diff.h"
#include "interval.h"
#include "message.h"

namespace {
constexpr int nprocs = 5;
constexpr std::uint32_t npages = 4096;
constexpr std::size_t page_size = 4096;

void require(bool condition) {
  if (!condition) abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {  // intervals and write notices, as in grants and departures
      tmk::message_reader reader(bytes);
      std::vector<tmk::interval_record> records;
      if (tmk::intervals_decode(reader, nprocs, npages, records)) {
        tmk::interval_store store(nprocs);
        for (auto& record : records) {
          require(record.owner >= 0 && record.owner < nprocs);
          require(record.time.size() == nprocs && record.time[record.owner] == record.index);
          for (std::uint32_t page : record.pages) require(page < npages);
          store.add(record);
        }
        tmk::message_writer writer(tmk::message_type::lock_grant);
        tmk::vector_time none(nprocs, 0), upto(nprocs, 0);
        for (int q = 0; q < nprocs; ++q) upto[q] = store.known(q);
        require(store.encode(writer, none, upto));
        // A part of them within a budget, and where the rest starts.
        tmk::vector_time reached;
        tmk::message_writer part(tmk::message_type::lock_grant);
        require(store.encode_within(part, none, upto, 4 + bytes.size() / 2, reached));
        require(part.size() <= 1 + 4 + bytes.size() / 2);
        tmk::message_reader back(part.bytes());
        back.type();
        std::vector<tmk::interval_record> first;
        require(tmk::intervals_decode(back, nprocs, npages, first));
        std::size_t expected = 0;
        for (int q = 0; q < nprocs; ++q) {
          require(reached[q] <= upto[q]);
          expected += reached[q];
        }
        require(first.size() == expected);
      }
      break;
    }
    case 1: {  // a diff applied to a page
      std::vector<std::byte> page(page_size, std::byte{0x5a}), before = page;
      bool valid = tmk::diff_valid(bytes, page_size);
      require(tmk::diff_apply(page.data(), page_size, bytes) == valid);
      if (!valid) require(page == before);
      break;
    }
    case 2: {  // a page edited over intervals: its diffs merged act as the diffs in order
      std::vector<std::byte> first(page_size, std::byte{0x5a}), page = first;
      std::vector<std::vector<std::byte>> made;
      tmk::message_reader reader(bytes);
      while (reader.remaining() > 0 && made.size() < 8) {
        auto twin = page;
        unsigned edits = reader.take<std::uint8_t>() % 16;
        for (unsigned e = 0; e < edits && reader.remaining() >= 4; ++e) {
          std::size_t at = reader.take<std::uint16_t>() % page_size;
          std::size_t length = std::min<std::size_t>(reader.take<std::uint8_t>(), page_size - at);
          std::memset(page.data() + at, reader.take<std::uint8_t>(), length);
        }
        made.emplace_back();
        tmk::diff_create(twin.data(), page.data(), page_size, made.back());
      }
      std::vector<std::span<const std::byte>> diffs(made.begin(), made.end());
      std::vector<std::byte> merged;
      require(tmk::diff_merge(diffs, page_size, merged));
      require(tmk::diff_valid(merged, page_size));
      require(tmk::diff_apply(first.data(), page_size, merged) && first == page);
      std::vector<std::byte> in_order(page_size, std::byte{0xa5}), at_once = in_order;
      for (auto diff : diffs) require(tmk::diff_apply(in_order.data(), page_size, diff));
      require(tmk::diff_apply(at_once.data(), page_size, merged));
      require(in_order == at_once);
      break;
    }
    default: {  // message fields: every read is bounds-checked
      tmk::message_reader reader(bytes);
      reader.type();
      while (reader.ok() && reader.remaining() > 0) {
        std::uint8_t kind = reader.take<std::uint8_t>();
        if (kind % 3 == 0) reader.get_bytes();
        else if (kind % 3 == 1) {
          std::vector<std::uint32_t> words;
          reader.get_words(words, 1024);
          require(!reader.ok() || words.size() <= 1024);
        } else {
          reader.take<std::uint64_t>();
        }
      }
      break;
    }
  }
  return 0;
}
