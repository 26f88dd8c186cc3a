// config.h — the runtime's settings (TMK_* environment), read once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "settings.h"
#include "status.h"

namespace tmk {

// The shared region's default address: free in an ordinary process and
// outside AddressSanitizer's shadow and allocator; ThreadSanitizer allows
// fixed mappings only in its application ranges.
#if defined(__SANITIZE_THREAD__)
inline constexpr std::uint64_t default_shared_base = 0x7e8000000000ull;
#define TMK_DEFAULT_SHARED_BASE "0x7e8000000000"
#else
inline constexpr std::uint64_t default_shared_base = 0x500000000000ull;
#define TMK_DEFAULT_SHARED_BASE "0x500000000000"
#endif

struct runtime_config {
  std::size_t page_size = 4096;
  std::uint64_t shared_base = default_shared_base;
  std::uint64_t shared_size = std::uint64_t{64} << 30;
  std::size_t gc_threshold = std::size_t{64} << 20;
  std::uint32_t max_locks = 65536;
  std::uint32_t max_barriers = 65536;
  std::uint32_t prefetch_pages = 16;
  double deadlock_check = 1.0;  // seconds; 0: never
  std::string statistics_file;

  static result<runtime_config> from_environment();
};

std::span<const setting_description> runtime_settings();

}  // namespace tmk
