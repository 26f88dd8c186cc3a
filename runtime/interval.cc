#include "interval.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace tmk {

page_list::page_list(std::span<const std::uint32_t> sorted) {
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t end = i + 1;
    while (end < sorted.size() && sorted[end] == sorted[end - 1] + 1) ++end;
    runs_.push_back({sorted[i], static_cast<std::uint32_t>(end - i)});
    i = end;
  }
  size_ = sorted.size();
}

bool page_list::contains(std::uint32_t page) const {
  auto after = std::upper_bound(runs_.begin(), runs_.end(), page,
                                [](std::uint32_t p, const page_run& run) { return p < run.first; });
  return after != runs_.begin() && page - std::prev(after)->first < std::prev(after)->count;
}

bool page_list::append(std::uint32_t first, std::uint32_t count) {
  if (count == 0) return false;
  if (!runs_.empty()) {
    std::uint64_t end = std::uint64_t{runs_.back().first} + runs_.back().count;
    if (first < end) return false;
    if (first == end) {  // one run, as the constructor makes it
      runs_.back().count += count;
      size_ += count;
      return true;
    }
  }
  runs_.push_back({first, count});
  size_ += count;
  return true;
}

namespace {
constexpr std::uint32_t run_flag = 0x80000000u;

// Words a list takes in a message, besides its count.
std::uint32_t page_words(const page_list& pages) {
  std::uint32_t words = 0;
  for (const page_run& run : pages.runs()) words += run.count == 1 ? 1 : 2;
  return words;
}
}  // namespace

void put_pages(message_writer& writer, const page_list& pages) {
  std::uint32_t words = page_words(pages);
  writer.put<std::uint32_t>(words);
  std::byte* at = writer.reserve(std::size_t{words} * 4);
  for (const page_run& run : pages.runs()) {
    std::uint32_t head = run.count == 1 ? run.first : run.first | run_flag;
    memcpy(at, &head, 4);
    at += 4;
    if (run.count == 1) continue;
    memcpy(at, &run.count, 4);
    at += 4;
  }
}

bool get_pages(message_reader& reader, std::uint32_t npages, page_list& out) {
  out = page_list();
  std::uint32_t words = 0;
  // Every word stands for a page at least.
  if (!reader.get(words) || words > npages || reader.remaining() / 4 < words) return reader.fail();
  for (std::uint32_t i = 0; i < words; ++i) {
    std::uint32_t head = reader.take<std::uint32_t>(), count = 1;
    if (head & run_flag) {
      if (++i == words) return reader.fail();
      count = reader.take<std::uint32_t>();
      if (count < 2) return reader.fail();
      head &= ~run_flag;
    }
    if (head >= npages || count > npages - head || !out.append(head, count)) return reader.fail();
  }
  return reader.ok();
}

std::size_t interval_bytes(const interval_record& record) {
  return sizeof record + record.time.size() * 4 + record.pages.runs().size() * sizeof(page_run);
}

bool interval_store::add(interval_record record) {
  int owner = record.owner;
  if (record.index <= known(owner)) return true;
  if (record.index != known(owner) + 1) return false;
  bytes_ += interval_bytes(record);
  runs_[owner].push_back(std::move(record));
  return true;
}

const interval_record* interval_store::find(int owner, std::uint32_t index) const {
  if (owner < 0 || owner >= nprocs() || index <= base_[owner] || index > known(owner))
    return nullptr;
  return &runs_[owner][index - base_[owner] - 1];
}

// Records up to the base were discarded by a garbage collection, which
// every process leaves knowing them: a receiver whose vector time predates
// it (a lock request or a barrier arrival sent before) has them by now.
bool interval_store::encode(message_writer& writer, const vector_time& have,
                            const vector_time& upto) const {
  return encode_into(writer, have, upto, SIZE_MAX, nullptr);
}

bool interval_store::encode_within(message_writer& writer, const vector_time& have,
                                   const vector_time& upto, std::size_t max_bytes,
                                   vector_time& reached) const {
  reached.resize(runs_.size());
  return encode_into(writer, have, upto, max_bytes, reached.data());
}

// No allocation: encode() runs at every barrier arrival.
bool interval_store::encode_into(message_writer& writer, const vector_time& have,
                                 const vector_time& upto, std::size_t max_bytes,
                                 std::uint32_t* reached) const {
  std::size_t count_at = writer.size();
  writer.reserve(sizeof(std::uint32_t));
  std::size_t bytes = sizeof(std::uint32_t);
  std::uint32_t count = 0;
  bool full = false;
  for (int owner = 0; owner < nprocs(); ++owner) {
    std::uint32_t at = std::max(have[owner], base_[owner]);
    for (; !full && at < upto[owner]; ++at, ++count) {
      const interval_record* record = find(owner, at + 1);
      if (record == nullptr) return false;
      std::size_t size = encoded_bytes(*record);
      if (bytes + size > max_bytes) {
        full = true;
        break;
      }
      bytes += size;
      writer.put<std::int32_t>(record->owner);
      writer.put<std::uint32_t>(record->index);
      writer.put_array(record->time);
      put_pages(writer, record->pages);
    }
    if (reached != nullptr) reached[owner] = at;
  }
  memcpy(writer.data() + count_at, &count, sizeof count);
  return true;
}

std::size_t encoded_bytes(const interval_record& record) {
  return 4 + 4 + 4 * record.time.size() + 4 + 4 * std::size_t{page_words(record.pages)};
}

void interval_store::discard_through(const vector_time& upto) {
  for (int owner = 0; owner < nprocs(); ++owner)
    while (!runs_[owner].empty() && base_[owner] < upto[owner]) {
      bytes_ -= interval_bytes(runs_[owner].front());
      runs_[owner].pop_front();
      ++base_[owner];
    }
}

std::size_t interval_store::count() const {
  std::size_t total = 0;
  for (const auto& run : runs_) total += run.size();
  return total;
}

bool intervals_decode(message_reader& reader, int nprocs, std::uint32_t npages,
                      std::vector<interval_record>& out) {
  std::uint32_t count = 0;
  if (!reader.get(count)) return false;
  // Each record takes at least 12 bytes plus its vector time.
  if (count > reader.remaining() / (12 + 4u * nprocs)) return reader.fail();
  out.reserve(out.size() + count);
  for (std::uint32_t i = 0; i < count; ++i) {
    interval_record record;
    if (!reader.get(record.owner) || !reader.get(record.index)) return false;
    if (record.owner < 0 || record.owner >= nprocs || record.index == 0) return reader.fail();
    record.time.resize(nprocs);
    for (int q = 0; q < nprocs; ++q)
      if (!reader.get(record.time[q])) return false;
    if (record.time[record.owner] != record.index) return reader.fail();
    if (!get_pages(reader, npages, record.pages)) return false;
    out.push_back(std::move(record));
  }
  return true;
}

}  // namespace tmk
