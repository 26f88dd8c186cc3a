#include "interval.h"

#include <algorithm>

namespace tmk {

std::size_t interval_bytes(const interval_record& record) {
  return sizeof record + record.time.size() * 4 + record.pages.size() * 4;
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
  auto from = [&](int owner) { return std::max(have[owner], base_[owner]); };
  std::uint32_t count = 0;
  for (int owner = 0; owner < nprocs(); ++owner)
    if (upto[owner] > from(owner)) count += upto[owner] - from(owner);
  writer.put<std::uint32_t>(count);
  for (int owner = 0; owner < nprocs(); ++owner)
    for (std::uint32_t index = from(owner) + 1; index <= upto[owner]; ++index) {
      const interval_record* record = find(owner, index);
      if (record == nullptr) return false;
      writer.put<std::int32_t>(record->owner);
      writer.put<std::uint32_t>(record->index);
      std::byte* time = writer.reserve(record->time.size() * 4);
      memcpy(time, record->time.data(), record->time.size() * 4);
      writer.put_words(record->pages);
    }
  return true;
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
    if (!reader.get_words(record.pages, npages)) return false;
    for (std::uint32_t page : record.pages)
      if (page >= npages) return reader.fail();
    out.push_back(std::move(record));
  }
  return true;
}

}  // namespace tmk
