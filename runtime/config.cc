#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "diff.h"

namespace tmk {

namespace {
const setting_description runtime_table[] = {
    {"TMK_PAGE_SIZE", "4096",
     "coherence unit in bytes: a power-of-two multiple of the system page (the system page "
     "where it is larger), at most 256K"},
    {"TMK_SHARED_BASE", TMK_DEFAULT_SHARED_BASE,
     "address of the shared region, the same in every process (hexadecimal with 0x, or decimal)"},
    {"TMK_SHARED_SIZE", "64G",
     "size of the shared region (reserved, not committed), rounded up to whole pages"},
    {"TMK_GC_THRESHOLD", "64M",
     "diffs and write notices kept by a process that start a garbage collection at the next "
     "barrier or lock operation (twins and page bookkeeping, bounded by the pages a process "
     "uses, do not count)"},
    {"TMK_MAX_LOCKS", "65536", "number of lock ids (0 .. TMK_MAX_LOCKS-1)"},
    {"TMK_MAX_BARRIERS", "65536", "number of barrier ids (0 .. TMK_MAX_BARRIERS-1)"},
    {"TMK_PREFETCH_PAGES", "16",
     "pages validated together on a fault: the faulting page and those after it in the same state"},
    {"TMK_DEADLOCK_CHECK", "1",
     "seconds a synchronisation wait of process 0 lasts before it asks every process what it "
     "waits for, and again as often, stopping the job if every process waits and none can go on "
     "(0: never)"},
    {"TMK_STATS", "", "file that receives every process's statistics as JSON at exit"},
};
}  // namespace

std::span<const setting_description> runtime_settings() { return runtime_table; }

result<runtime_config> runtime_config::from_environment() {
  runtime_config config;
  std::size_t system_page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // Protections change a system page at a time: a smaller tmk page would
  // open or close its neighbours with it.
  config.page_size = std::max(config.page_size, system_page);
  if (auto value = setting_value("TMK_PAGE_SIZE")) {
    auto parsed = parse_size("TMK_PAGE_SIZE", *value, system_page, diff_max_page);
    if (!parsed) return parsed.error();
    if (*parsed % system_page != 0 || (*parsed & (*parsed - 1)) != 0)
      return status(status_code::invalid_argument,
                    "TMK_PAGE_SIZE=" + *value + ": expected a power of two multiple of " +
                        std::to_string(system_page));
    config.page_size = *parsed;
  }
  if (auto value = setting_value("TMK_SHARED_BASE")) {
    errno = 0;
    char* end = nullptr;
    // Hexadecimal with 0x, or decimal digits: a leading 0 alone (octal to
    // strtoull) is refused, not read as another address than the one meant,
    // as are signs and spaces.
    bool hex = value->rfind("0x", 0) == 0 || value->rfind("0X", 0) == 0;
    unsigned long long base = strtoull(value->c_str(), &end, hex ? 16 : 10);
    if (errno != 0 || end == value->c_str() || *end != '\0' || base == 0 ||
        (!hex && ((*value)[0] == '0' || !isdigit(static_cast<unsigned char>((*value)[0])))) ||
        base % config.page_size != 0 || base >= (1ull << 47))
      return status(status_code::invalid_argument,
                    "TMK_SHARED_BASE=" + *value +
                        ": expected a page-aligned user-space address, in hexadecimal with 0x or in "
                        "decimal, such as " TMK_DEFAULT_SHARED_BASE);
    config.shared_base = base;
  }
  if (auto value = setting_value("TMK_SHARED_SIZE")) {
    auto parsed = parse_size("TMK_SHARED_SIZE", *value, config.page_size, std::uint64_t{1} << 44);
    if (!parsed) return parsed.error();
    // Whole pages, at least the size asked for: the region is only reserved.
    config.shared_size = (*parsed + config.page_size - 1) / config.page_size * config.page_size;
  }
  // Write notices mark a run of pages in the top bit of its first page's
  // number (interval.cc).
  if (config.shared_size / config.page_size > 0x7fffffffull)
    return status(status_code::invalid_argument,
                  "TMK_SHARED_SIZE: more than 2^31 - 1 pages; use a larger TMK_PAGE_SIZE");
  if (config.shared_base + config.shared_size > (1ull << 47))
    return status(status_code::invalid_argument,
                  "TMK_SHARED_BASE + TMK_SHARED_SIZE reach beyond the user address space");
  if (auto value = setting_value("TMK_GC_THRESHOLD")) {
    auto parsed = parse_size("TMK_GC_THRESHOLD", *value, 4096, std::uint64_t{1} << 40);
    if (!parsed) return parsed.error();
    config.gc_threshold = *parsed;
  }
  if (auto value = setting_value("TMK_MAX_LOCKS")) {
    auto parsed = parse_unsigned("TMK_MAX_LOCKS", *value, 1, 1u << 30);
    if (!parsed) return parsed.error();
    config.max_locks = static_cast<std::uint32_t>(*parsed);
  }
  if (auto value = setting_value("TMK_MAX_BARRIERS")) {
    auto parsed = parse_unsigned("TMK_MAX_BARRIERS", *value, 1, 1u << 30);
    if (!parsed) return parsed.error();
    config.max_barriers = static_cast<std::uint32_t>(*parsed);
  }
  if (auto value = setting_value("TMK_PREFETCH_PAGES")) {
    auto parsed = parse_unsigned("TMK_PREFETCH_PAGES", *value, 1, 1024);
    if (!parsed) return parsed.error();
    config.prefetch_pages = static_cast<std::uint32_t>(*parsed);
  }
  if (auto value = setting_value("TMK_DEADLOCK_CHECK")) {
    auto parsed = parse_seconds("TMK_DEADLOCK_CHECK", *value, 0, 86400);
    if (!parsed) return parsed.error();
    config.deadlock_check = *parsed;
  }
  if (auto value = setting_value("TMK_STATS")) config.statistics_file = *value;
  return config;
}

}  // namespace tmk
