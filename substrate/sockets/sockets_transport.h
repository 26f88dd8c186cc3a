// sockets_transport.h — the substrate over kernel TCP sockets, the baseline
// every speed-up is measured against (TreadMarks ran over kernel sockets).
//
// The same two-channel model as UCX: every process connects to every
// process (itself included) once.  On the connection a -> b, a's calling
// thread writes requests and reads their replies (a's reply channel), and
// b's service thread reads the requests and writes replies (b's request
// channel).  Each channel is an epoll set over its sockets, so the service
// thread sleeps in the kernel until a request arrives.  Messages are framed
// as {u32 payload length, wire_header, payload}, written whole by one
// thread at a time.
//
// Both threads of a process write to the same connections (the calling
// thread its requests and the replies it defers, the owner of the request
// channel its replies and forwards), and a write waits while the reader
// at the other end does not read.  That reader may itself be writing to
// this process, so no thread may wait for one that waits for it: a thread
// blocked in a write takes in, meanwhile, what comes to the channels it
// owns (it handles it later); a frame posted from the request channel
// while another thread writes on that connection is queued for that
// thread to write after its own, never waited for; and a calling thread
// waits for another writer only while more than a bound is queued, taking
// in its own channel meanwhile.  "Owns": the calling thread owns the reply
// channel, and the request channel while it holds it (serving requests or
// not).  What is taken in so is bounded only by what the peers send while
// the write waits; the request channel's queue by the replies and
// forwards its thread makes meanwhile.
#pragma once

#include <deque>
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
  bool arm(channel which) override { return taken_in_[index(which)].empty(); }
  bool signals_unarmed() const override { return true; }
  int event_fd(channel which) const override;
  // Nothing to finish: a frame is written before post returns, or queued
  // behind another thread's write, which writes it before it returns.
  status flush_channel(channel) override { return status::ok(); }

 private:
  struct connection {
    int fd = -1;
    int peer = -1;
    // Writing, under write_mutex: whether a thread writes now, the frames
    // queued for it, and why writing failed if it did.
    std::mutex write_mutex;
    bool writing = false;
    std::deque<std::vector<std::byte>> queued;
    std::size_t queued_bytes = 0;
    status broken;  // not ok once a write failed: nothing more goes out
    // Reading, by the owner of the channel it delivers to: bytes read and
    // not yet handled; those read while its frames are being handled (by a
    // handler blocked in a write) wait in spill.
    std::vector<std::byte> input;
    std::size_t consumed = 0;
    std::vector<std::byte> spill;
    bool handling = false;
    bool listed = false;  // in taken_in_: input holds bytes not yet looked at
    bool open = true;
  };

  static int index(channel which) { return which == channel::request ? 0 : 1; }
  sockets_transport(job& owner, const substrate_config& config);
  status connect_mesh();
  // Reads what has come on a connection (up to 1 MiB), without handling it.
  void take_in(connection& from, channel which);
  // Takes in what has come on every ready connection of the channel and
  // lists the connections for the next progress to handle.
  void take_in_ready(channel which);
  // Handles the whole frames read from a connection.
  unsigned handle(connection& from, channel which);
  status write_frame(connection& on, const std::vector<std::byte>& frame);
  // Until fd has room (or, fd < 0, for a while), taking in the channels
  // this thread owns.
  status wait_taking_in(int fd, int timeout_ms);

  int listen_fd_ = -1;
  int request_epoll_ = -1;
  int reply_epoll_ = -1;
  // outbound_[p]: this process -> p (requests out, replies in);
  // inbound_[p]: p -> this process (requests in, replies out).
  std::vector<std::unique_ptr<connection>> outbound_;
  std::vector<std::unique_ptr<connection>> inbound_;
  // Per channel, by its owner: connections taken in and not yet handled.
  std::vector<connection*> taken_in_[2];
};

}  // namespace tmk
