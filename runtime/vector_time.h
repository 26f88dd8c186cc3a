// vector_time.h — vector timestamps: entry q counts the intervals of
// process q that a process has seen (its own entry: the intervals it
// closed).  Interval a happened before b iff a's time is covered by b's and
// differs from it.
#pragma once

#include <cstdint>
#include <vector>

namespace tmk {

using vector_time = std::vector<std::uint32_t>;

// a >= b in every entry.
inline bool vector_time_covers(const vector_time& a, const vector_time& b) {
  for (std::size_t q = 0; q < a.size(); ++q)
    if (a[q] < b[q]) return false;
  return true;
}

// a happened before b.
inline bool vector_time_before(const vector_time& a, const vector_time& b) {
  return a != b && vector_time_covers(b, a);
}

// Entry-wise maximum into `into`.
inline void vector_time_merge(vector_time& into, const vector_time& other) {
  for (std::size_t q = 0; q < into.size(); ++q)
    if (other[q] > into[q]) into[q] = other[q];
}

// A total order consistent with happens-before: if a happened before b,
// the sum of a's entries is smaller.
inline std::uint64_t vector_time_sum(const vector_time& time) {
  std::uint64_t sum = 0;
  for (std::uint32_t entry : time) sum += entry;
  return sum;
}

}  // namespace tmk
