#include "net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace tmk {

double seconds_until(steady_time deadline) {
  return std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
}

steady_time seconds_from_now(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

namespace {
int poll_timeout_ms(steady_time deadline) {
  double left = seconds_until(deadline);
  if (left <= 0) return 0;
  return left > 1e6 ? 1000000000 : static_cast<int>(left * 1000) + 1;
}
}  // namespace

status send_all(int fd, const void* buffer, std::size_t length, steady_time deadline) {
  const char* next = static_cast<const char*>(buffer);
  while (length > 0) {
    ssize_t sent = send(fd, next, length, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // The peer has not drained its socket: wait for room, up to deadline.
        pollfd wait{fd, POLLOUT, 0};
        int ready = poll(&wait, 1, poll_timeout_ms(deadline));
        if (ready < 0 && errno != EINTR) return errno_status("poll");
        if (ready == 0 && seconds_until(deadline) <= 0)
          return status(status_code::timeout, "the other end has not read what was sent");
        continue;
      }
      if (errno == EPIPE || errno == ECONNRESET)
        return status(status_code::peer_lost, "connection closed by peer");
      return errno_status("send");
    }
    next += sent;
    length -= static_cast<std::size_t>(sent);
  }
  return status::ok();
}

status recv_all(int fd, void* buffer, std::size_t length, steady_time deadline) {
  char* next = static_cast<char*>(buffer);
  while (length > 0) {
    pollfd wait{fd, POLLIN, 0};
    int ready = poll(&wait, 1, poll_timeout_ms(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return errno_status("poll");
    }
    if (ready == 0) return status(status_code::timeout, "timed out");
    ssize_t got = recv(fd, next, length, 0);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return status(status_code::peer_lost, "connection reset by peer");
      return errno_status("recv");
    }
    if (got == 0) return status(status_code::peer_lost, "connection closed by peer");
    next += got;
    length -= static_cast<std::size_t>(got);
  }
  return status::ok();
}

result<int> tcp_listen(std::uint16_t port, int backlog) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_status("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    status error = errno_status("bind to port " + std::to_string(port));
    close(fd);
    return error;
  }
  if (listen(fd, backlog) != 0) {
    status error = errno_status("listen");
    close(fd);
    return error;
  }
  return fd;
}

result<std::uint16_t> local_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return errno_status("getsockname");
  return ntohs(address.sin_port);
}

namespace {
result<sockaddr_in> resolve(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0)
    return status(status_code::invalid_argument,
                  "cannot resolve host '" + host + "': " + gai_strerror(rc));
  sockaddr_in address{};
  memcpy(&address, found->ai_addr, sizeof address);
  freeaddrinfo(found);
  return address;
}
}  // namespace

result<std::string> resolve_ipv4(const std::string& host) {
  auto address = resolve(host, 0);
  if (!address) return address.error();
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &address->sin_addr, text, sizeof text);
  return std::string(text);
}

result<int> tcp_connect(const std::string& host, std::uint16_t port, steady_time deadline) {
  auto resolved = resolve(host, port);
  if (!resolved) return resolved.error();
  sockaddr_in address = *resolved;
  int rc = 0;

  std::string last_error = "timed out";
  while (true) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return errno_status("socket");
    rc = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd wait{fd, POLLOUT, 0};
      int ready = poll(&wait, 1, std::min(poll_timeout_ms(deadline), 1000));
      int error = ETIMEDOUT;
      socklen_t length = sizeof error;
      if (ready > 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      rc = error == 0 ? 0 : -1;
      errno = error;
    }
    if (rc == 0) {
      set_nonblocking(fd, false);
      set_nodelay(fd);
      return fd;
    }
    last_error = strerror(errno);
    close(fd);
    if (seconds_until(deadline) <= 0)
      return status(status_code::timeout,
                    "cannot connect to " + host + ":" + std::to_string(port) + ": " + last_error);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

result<int> accept_until(int listen_fd, steady_time deadline) {
  while (true) {
    pollfd wait{listen_fd, POLLIN, 0};
    int ready = poll(&wait, 1, poll_timeout_ms(deadline));
    if (ready < 0 && errno != EINTR) return errno_status("poll");
    if (ready == 0) return status(status_code::timeout, "timed out");
    if (ready < 0) continue;
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return fd;
    }
    if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) return errno_status("accept");
  }
}

std::vector<std::string> local_addresses() {
  std::vector<std::string> addresses;
  std::vector<std::string> loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
      if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
      if (!(entry->ifa_flags & IFF_UP)) continue;
      char text[INET_ADDRSTRLEN];
      auto* address = reinterpret_cast<sockaddr_in*>(entry->ifa_addr);
      inet_ntop(AF_INET, &address->sin_addr, text, sizeof text);
      (entry->ifa_flags & IFF_LOOPBACK ? loopback : addresses).push_back(text);
    }
    freeifaddrs(list);
  }
  addresses.insert(addresses.end(), loopback.begin(), loopback.end());
  if (addresses.empty()) addresses.push_back("127.0.0.1");
  return addresses;
}

result<std::pair<std::string, std::uint16_t>> parse_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return status(status_code::invalid_argument, "'" + text + "': expected host:port");
  std::string port_text = text.substr(colon + 1);
  char* end = nullptr;
  long port = strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 1 || port > 65535)
    return status(status_code::invalid_argument,
                  "'" + text + "': the port must be a number from 1 to 65535");
  return std::make_pair(text.substr(0, colon), static_cast<std::uint16_t>(port));
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void ring_event_fd(int fd) {
  std::uint64_t one = 1;
  ssize_t ignored = write(fd, &one, sizeof one);
  (void)ignored;
}

void empty_event_fd(int fd) {
  std::uint64_t count;
  ssize_t ignored = read(fd, &count, sizeof count);
  (void)ignored;
}

}  // namespace tmk
