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

}  // namespace
