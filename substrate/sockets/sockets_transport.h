// sockets_transport.h — the substrate over kernel TCP sockets, the baseline
// every speed-up is measured against (TreadMarks ran over kernel sockets).
//
// The same two-channel model as UCX: every process connects to every
// process (itself included) once.  On the connection a -> b, a's calling
// thread writes requests and reads their replies (a's reply channel), and
// b's service thread reads the requests and writes replies (b's request
// channel).  Each channel is an epoll set over its sockets, so the service
// thread sleeps in the kernel until a request arrives.  Messages are framed
// as {u32 payload length, wire_header, payload}; writes are whole frames
// under a per-connection lock.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport.h"

namespace tmk {

class sockets_transport final : public transport {
 public:
  static result<std::unique_ptr<transport>> create(job& owner, const substrate_config& config);
  ~sockets_transport() override;

  std::string describe() const override { return "sockets/tcp"; }
  buffer_footprint footprint(int) const override { return {0, 0}; }

 protected:
  status post(channel from, int peer, channel to, const wire_header& header, parts payload,
              std::size_t payload_length) override;
  unsigned progress(channel which) override;
  bool arm(channel) override { return true; }
  bool signals_unarmed() const override { return true; }
  int event_fd(channel which) const override;
  status flush_channel(channel) override { return status::ok(); }

 private:
  struct connection {
    int fd = -1;
    int peer = -1;
    std::mutex write_mutex;
    std::vector<std::byte> input;
    std::size_t consumed = 0;
    bool open = true;
  };

  sockets_transport(job& owner, const substrate_config& config);
  status connect_mesh();
  unsigned read_from(connection& from, channel which);

  int listen_fd_ = -1;
  int request_epoll_ = -1;
  int reply_epoll_ = -1;
  // outbound_[p]: this process -> p (requests out, replies in);
  // inbound_[p]: p -> this process (requests in, replies out).
  std::vector<std::unique_ptr<connection>> outbound_;
  std::vector<std::unique_ptr<connection>> inbound_;
};

}  // namespace tmk
