// net_test — whole-buffer socket I/O: what a peer that reads, one that
// stops reading and one that is gone each make of a send.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "net.h"

namespace {

using namespace tmk;
using namespace std::chrono_literals;

struct socket_pair {
  int ends[2] = {-1, -1};
  socket_pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0); }
  ~socket_pair() {
    for (int fd : ends)
      if (fd >= 0) close(fd);
  }
};

std::vector<char> pattern(std::size_t length) {
  std::vector<char> bytes(length);
  for (std::size_t i = 0; i < length; ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  return bytes;
}

// More than the socket holds, to a reader that takes it all: every byte
// arrives, in order.
TEST(net, send_all_delivers_more_than_the_socket_holds) {
  socket_pair pair;
  std::vector<char> sent = pattern(8 << 20), received(sent.size());
  std::thread reader([&] {
    EXPECT_TRUE(recv_all(pair.ends[1], received.data(), received.size(),
                         std::chrono::steady_clock::now() + 60s));
  });
  status result = send_all(pair.ends[0], sent.data(), sent.size(),
                           std::chrono::steady_clock::now() + 60s);
  reader.join();
  EXPECT_TRUE(result) << result.message();
  EXPECT_TRUE(sent == received);
}

// A peer that reads nothing (stopped, say): the send gives up at its
// deadline, naming why, instead of blocking for ever.
TEST(net, send_all_to_a_peer_that_reads_nothing_gives_up_at_its_deadline) {
  socket_pair pair;
  std::vector<char> sent = pattern(8 << 20);
  auto start = std::chrono::steady_clock::now();
  status result = send_all(pair.ends[0], sent.data(), sent.size(), start + 300ms);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.code(), status_code::timeout);
  EXPECT_NE(result.message().find("has not read"), std::string::npos) << result.message();
  EXPECT_GE(seconds, 0.29);
  EXPECT_LT(seconds, 5.0);
}

// A peer that is gone: peer_lost, without SIGPIPE.
TEST(net, send_all_to_a_closed_peer_is_peer_lost) {
  socket_pair pair;
  close(pair.ends[1]);
  pair.ends[1] = -1;
  char byte = 1;
  status result = send_all(pair.ends[0], &byte, 1);
  EXPECT_EQ(result.code(), status_code::peer_lost) << result.message();
}

}  // namespace
