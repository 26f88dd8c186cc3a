// random_bytes.h — test data: bytes from a seeded generator, the same on
// every run.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace tmk::test {

inline std::vector<std::byte> random_bytes(std::mt19937& random, std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (auto& b : bytes) b = std::byte(random() & 0xff);
  return bytes;
}

}  // namespace tmk::test
