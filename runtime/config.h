// config.h — the runtime's settings (TMK_* environment), read once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "settings.h"
#include "status.h"

namespace tmk {

struct runtime_config {
  std::size_t page_size = 4096;
  std::uint64_t shared_base = 0x600000000000ull;
  std::uint64_t shared_size = std::uint64_t{64} << 30;
  std::size_t gc_threshold = std::size_t{64} << 20;
  std::uint32_t max_locks = 65536;
  std::uint32_t max_barriers = 65536;
  std::uint32_t prefetch_pages = 16;
  std::string statistics_file;

  static result<runtime_config> from_environment();
};

std::span<const setting_description> runtime_settings();

}  // namespace tmk
