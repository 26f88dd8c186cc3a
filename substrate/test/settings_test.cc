// settings_test — TMK_* values and tmk's command-line options: good values
// parse, bad ones are refused with a message naming the variable.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "substrate_config.h"
#include "settings.h"

namespace {

using namespace tmk;

TEST(settings, unsigned_values_parse_within_range) {
  EXPECT_EQ(*parse_unsigned("X", "0", 0, 10), 0u);
  EXPECT_EQ(*parse_unsigned("X", "10", 0, 10), 10u);
  for (const char* bad : {"11", "-1", "+3", "", "3x", "x", " 3", "99999999999999999999999"}) {
    auto parsed = parse_unsigned("TMK_X", bad, 0, 10);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code(), status_code::invalid_argument);
    EXPECT_NE(parsed.error().message().find(std::string("TMK_X=") + bad + ":"), std::string::npos);
  }
}

TEST(settings, sizes_take_suffixes) {
  EXPECT_EQ(*parse_size("X", "64K", 0, ~0ull), 65536u);
  EXPECT_EQ(*parse_size("X", "2M", 0, ~0ull), 2u << 20);
  EXPECT_EQ(*parse_size("X", "1G", 0, ~0ull), 1u << 30);
  EXPECT_EQ(*parse_size("X", "4096", 0, ~0ull), 4096u);
  EXPECT_FALSE(parse_size("X", "4Q", 0, ~0ull));
  EXPECT_FALSE(parse_size("X", "1K", 2048, ~0ull));
  EXPECT_FALSE(parse_size("X", "99999999999999G", 0, ~0ull));
}

TEST(settings, seconds_and_choices) {
  EXPECT_DOUBLE_EQ(*parse_seconds("X", "0.5", 0.1, 10), 0.5);
  EXPECT_FALSE(parse_seconds("X", "0.01", 0.1, 10));
  EXPECT_FALSE(parse_seconds("X", "nan", 0.1, 10));
  EXPECT_FALSE(parse_seconds("X", "5s", 0.1, 10));
  auto out_of_range = parse_seconds("TMK_Z", "0", 0.2, 86400);
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().message(), "TMK_Z=0: expected seconds from 0.2 to 86400");
  static const char* const words[] = {"a", "b"};
  EXPECT_EQ(*parse_choice("X", "b", words), 1);
  auto bad = parse_choice("TMK_Y", "c", words);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "TMK_Y=c: expected one of a, b");
  EXPECT_TRUE(*parse_bool("X", "yes"));
  EXPECT_FALSE(*parse_bool("X", "0"));
}

TEST(settings, substrate_configuration_from_environment) {
  setenv("TMK_NOTIFY", "poll", 1);
  setenv("TMK_SUBSTRATE", "sockets", 1);
  setenv("TMK_MAX_MESSAGE", "1M", 1);
  setenv("TMK_WARM_UP", "64K", 1);
  auto config = substrate_config::from_environment();
  ASSERT_TRUE(config);
  EXPECT_EQ(config->warm_up_bytes, 64u << 10);
  EXPECT_EQ(config->notify, notify_mode::poll);
  EXPECT_EQ(config->backend, backend_kind::sockets);
  EXPECT_EQ(config->max_message, 1u << 20);
  setenv("TMK_NOTIFY", "never", 1);
  auto bad = substrate_config::from_environment();
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("TMK_NOTIFY=never"), std::string::npos);
  unsetenv("TMK_NOTIFY");
  setenv("TMK_WARM_UP", "lots", 1);
  auto bad_warm_up = substrate_config::from_environment();
  ASSERT_FALSE(bad_warm_up);
  EXPECT_NE(bad_warm_up.error().message().find("TMK_WARM_UP=lots"), std::string::npos);
  unsetenv("TMK_WARM_UP");
  unsetenv("TMK_SUBSTRATE");
  unsetenv("TMK_MAX_MESSAGE");
  EXPECT_EQ(substrate_config::from_environment()->ring_delay_us, 3u);
  setenv("TMK_RING_DELAY_US", "0", 1);
  EXPECT_EQ(substrate_config::from_environment()->ring_delay_us, 0u);
  setenv("TMK_RING_DELAY_US", "-1", 1);
  auto bad_delay = substrate_config::from_environment();
  ASSERT_FALSE(bad_delay);
  EXPECT_NE(bad_delay.error().message().find("TMK_RING_DELAY_US=-1"), std::string::npos);
  unsetenv("TMK_RING_DELAY_US");
  EXPECT_EQ(substrate_config::from_environment()->nudge_us, 50u);
  setenv("TMK_NUDGE_US", "0", 1);
  EXPECT_EQ(substrate_config::from_environment()->nudge_us, 0u);
  setenv("TMK_NUDGE_US", "soon", 1);
  auto bad_nudge = substrate_config::from_environment();
  ASSERT_FALSE(bad_nudge);
  EXPECT_NE(bad_nudge.error().message().find("TMK_NUDGE_US=soon"), std::string::npos);
  unsetenv("TMK_NUDGE_US");
}

TEST(settings, every_setting_is_described) {
  for (const auto& setting : substrate_settings()) {
    EXPECT_EQ(std::string(setting.name).rfind("TMK_", 0), 0u);
    EXPECT_GT(std::string(setting.description).size(), 10u) << setting.name;
  }
}

TEST(command_line, options_after_the_double_dash) {
  char program[] = "prog", own[] = "-x", dash[] = "--", n[] = "-n", four[] = "4", s[] = "-s";
  char* argv[] = {program, own, dash, n, four, s};
  auto parsed = parse_command_line(6, argv);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->nprocs, 4);
  EXPECT_TRUE(parsed->statistics);

  char joined[] = "-n8";
  char* argv2[] = {program, dash, joined};
  EXPECT_EQ(parse_command_line(3, argv2)->nprocs, 8);

  char* argv3[] = {program, own};
  EXPECT_EQ(parse_command_line(2, argv3)->nprocs, 0);

  char bogus[] = "-q";
  char* argv4[] = {program, dash, bogus};
  auto bad = parse_command_line(3, argv4);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("unknown option '-q'"), std::string::npos);
}

TEST(launch, manual_rank_needs_its_companions) {
  setenv("TMK_RANK", "1", 1);
  auto lonely = launch_config::from_environment();
  ASSERT_FALSE(lonely);
  EXPECT_NE(lonely.error().message().find("TMK_RANK and TMK_ROOT go together"), std::string::npos);
  setenv("TMK_ROOT", "127.0.0.1:5000", 1);
  setenv("TMK_NPROCS", "1", 1);
  auto beyond = launch_config::from_environment();
  ASSERT_FALSE(beyond);
  EXPECT_NE(beyond.error().message().find("must be below TMK_NPROCS=1"), std::string::npos);
  setenv("TMK_NPROCS", "2", 1);
  auto good = launch_config::from_environment();
  ASSERT_TRUE(good);
  EXPECT_EQ(*good->manual_rank, 1);
  unsetenv("TMK_RANK");
  unsetenv("TMK_ROOT");
  unsetenv("TMK_NPROCS");
}

}  // namespace
