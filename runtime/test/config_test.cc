// config_test — the runtime's TMK_* settings parse and refuse bad values
// with the variable's name.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "config.h"

namespace {

using namespace tmk;

struct scoped_env {
  const char* name;
  scoped_env(const char* name, const char* value) : name(name) { setenv(name, value, 1); }
  ~scoped_env() { unsetenv(name); }
};

TEST(runtime_config, defaults) {
  auto config = runtime_config::from_environment();
  ASSERT_TRUE(config);
  EXPECT_EQ(config->page_size, 4096u);
  EXPECT_EQ(config->shared_size, std::uint64_t{64} << 30);
  EXPECT_GE(config->max_locks, 65536u);
  EXPECT_GE(config->max_barriers, 65536u);
  EXPECT_EQ(config->deadlock_check, 1.0);
}

TEST(runtime_config, bad_values_name_the_variable) {
  for (auto [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"TMK_PAGE_SIZE", "5000"},
           {"TMK_PAGE_SIZE", "1K"},
           {"TMK_SHARED_BASE", "0x123"},
           {"TMK_SHARED_BASE", "zero"},
           // 0x500000000000 in octal: a leading 0 alone is refused.
           {"TMK_SHARED_BASE", "02400000000000000"},
           // Wraps to 0x500000000000 through strtoull's negation.
           {"TMK_SHARED_BASE", "-18446656112779329536"},
           {"TMK_SHARED_BASE", " 87960930222080"},
           {"TMK_SHARED_SIZE", "-4"},
           {"TMK_GC_THRESHOLD", "lots"},
           {"TMK_MAX_LOCKS", "0"},
           {"TMK_DEADLOCK_CHECK", "-1"},
           {"TMK_DEADLOCK_CHECK", "soon"}}) {
    scoped_env env(name, value);
    auto config = runtime_config::from_environment();
    ASSERT_FALSE(config) << name << "=" << value;
    EXPECT_NE(config.error().message().find(std::string(name) + "=" + value), std::string::npos)
        << config.error().message();
  }
}

TEST(runtime_config, good_values) {
  scoped_env page("TMK_PAGE_SIZE", "16K");
  scoped_env size("TMK_SHARED_SIZE", "1G");
  scoped_env locks("TMK_MAX_LOCKS", "1000000");
  scoped_env check("TMK_DEADLOCK_CHECK", "0.25");
  auto config = runtime_config::from_environment();
  ASSERT_TRUE(config);
  EXPECT_EQ(config->deadlock_check, 0.25);
  EXPECT_EQ(config->page_size, 16384u);
  EXPECT_EQ(config->shared_size, std::uint64_t{1} << 30);
  EXPECT_EQ(config->max_locks, 1000000u);
}

// A size of part of a page gets the whole page (the region is only
// reserved), never less than was asked for.
TEST(runtime_config, shared_size_is_rounded_up_to_whole_pages) {
  scoped_env size("TMK_SHARED_SIZE", "10000");
  auto config = runtime_config::from_environment();
  ASSERT_TRUE(config);
  EXPECT_EQ(config->shared_size, 12288u);
}

// The shared base in hexadecimal or decimal: the same address.
TEST(runtime_config, shared_base_in_hexadecimal_or_decimal) {
  for (const char* value : {"0x500000000000", "0X500000000000", "87960930222080"}) {
    scoped_env base("TMK_SHARED_BASE", value);
    auto config = runtime_config::from_environment();
    ASSERT_TRUE(config) << value;
    EXPECT_EQ(config->shared_base, 0x500000000000u) << value;
  }
}

}  // namespace
