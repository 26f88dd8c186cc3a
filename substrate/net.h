// net.h — small kernel-socket helpers shared by the launcher's control
// channel and the sockets backend: whole-buffer I/O that never raises
// SIGPIPE, connects and accepts with deadlines, and this host's addresses;
// and the eventfd doorbells that wake the substrate's threads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "status.h"

namespace tmk {

using steady_time = std::chrono::steady_clock::time_point;

double seconds_until(steady_time deadline);
// The time that many seconds from now.
steady_time seconds_from_now(double seconds);

// Writes all of buffer, without SIGPIPE on a closed peer, giving up at
// deadline (timeout status) if the peer has not taken it by then.
status send_all(int fd, const void* buffer, std::size_t length,
                steady_time deadline = steady_time::max());
// Reads exactly length bytes, giving up at deadline; peer_lost on EOF.
status recv_all(int fd, void* buffer, std::size_t length, steady_time deadline);

// A TCP socket listening on port (0: any free port) of every interface.
result<int> tcp_listen(std::uint16_t port, int backlog);
result<std::uint16_t> local_port(int fd);
// Connects to host:port, retrying refused connections until deadline.
result<int> tcp_connect(const std::string& host, std::uint16_t port, steady_time deadline);
// Accepts one connection, giving up at deadline (timeout status).
result<int> accept_until(int listen_fd, steady_time deadline);
// This host's IPv4 addresses, loopback last.
std::vector<std::string> local_addresses();
// The IPv4 address host names, dotted.
result<std::string> resolve_ipv4(const std::string& host);
// Splits "host:port".
result<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text);

void set_nodelay(int fd);
void set_nonblocking(int fd, bool on);

// An eventfd used as a doorbell (made EFD_NONBLOCK): ring it, waking its
// pollers, or empty it (nothing happens when it is empty already).
void ring_event_fd(int fd);
void empty_event_fd(int fd);

}  // namespace tmk
