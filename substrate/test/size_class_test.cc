// size_class_test — the size classes and the preposted receive memory of
// the tag path, against FAST/GM's bound of 64 KiB*(n-1)+64 KiB.
#include <gtest/gtest.h>

#include "ucx/ucx_transport.h"

namespace {

using namespace tmk;

TEST(size_classes, smallest_class_that_holds_the_message) {
  EXPECT_EQ(size_class_of(0), 0);
  EXPECT_EQ(size_class_of(64), 0);
  EXPECT_EQ(size_class_of(65), 1);
  EXPECT_EQ(size_class_of(128), 1);
  EXPECT_EQ(size_class_of(4096), 6);
  EXPECT_EQ(size_class_of(4097), 7);
  EXPECT_EQ(size_class_of(32768), 9);
  EXPECT_EQ(size_class_of(32769), class_count);
  EXPECT_EQ(largest_class_bytes, 32768u);
}

TEST(size_classes, tag_path_footprint_stays_within_the_fast_gm_bound) {
  for (int n : {2, 8, 64, 256}) {
    buffer_footprint footprint = tag_path_footprint(n, 2);
    std::size_t bound = (std::size_t{64} << 10) * (n - 1) + (64 << 10);
    EXPECT_LE(footprint.total(), bound) << n;
    // Every class is covered once for replies: 64 + 128 + ... + 32768.
    EXPECT_EQ(footprint.reply_bytes, 65472u);
  }
  EXPECT_EQ(tag_path_footprint(256, 2).request_bytes, std::size_t{65536} * 255);
  // More outstanding small requests cost 64 bytes per peer each.
  EXPECT_EQ(tag_path_footprint(3, 4).request_bytes - tag_path_footprint(3, 2).request_bytes,
            2u * 2 * 64);
}

}  // namespace
