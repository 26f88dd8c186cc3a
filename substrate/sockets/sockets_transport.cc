// sockets_transport.cc — the kernel-sockets backend (see the header).
//
// The mesh is built at start-up: every process publishes its listening
// port and addresses through the job's exchange, connects to everyone
// (including itself) and accepts as many connections, each opened by a
// hello that names the connecting rank.  A closed connection outside the
// end of the job is left to the job's monitor, which reports the loss.
#include "sockets/sockets_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "log.h"
#include "net.h"

namespace tmk {

namespace {

struct hello_message {
  std::uint32_t magic;
  std::int32_t rank;
  std::uint32_t secret_length;  // followed by the job's secret
};
constexpr std::uint32_t hello_magic = 0x544d4b53;  // "TMKS"

}  // namespace

sockets_transport::sockets_transport(job& owner, const substrate_config& config)
    : transport(owner, config) {}

result<std::unique_ptr<transport>> sockets_transport::create(job& owner,
                                                             const substrate_config& config) {
  std::unique_ptr<sockets_transport> created(new sockets_transport(owner, config));
  status made = created->connect_mesh();
  if (!made) return made.context("sockets substrate");
  return std::unique_ptr<transport>(std::move(created));
}

sockets_transport::~sockets_transport() {
  stop();
  for (auto* list : {&outbound_, &inbound_})
    for (auto& to : *list)
      if (to && to->fd >= 0) close(to->fd);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (request_epoll_ >= 0) close(request_epoll_);
  if (reply_epoll_ >= 0) close(reply_epoll_);
}

status sockets_transport::connect_mesh() {
  auto listening = tcp_listen(0, std::max(size_, 16));
  if (!listening) return listening.error();
  listen_fd_ = *listening;
  auto port = local_port(listen_fd_);
  if (!port) return port.error();
  std::string mine = std::to_string(*port);
  for (const auto& address : local_addresses()) mine += " " + address;
  auto blobs = job_.allgather(mine);
  if (!blobs) return blobs.error();

  request_epoll_ = epoll_create1(EPOLL_CLOEXEC);
  reply_epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (request_epoll_ < 0 || reply_epoll_ < 0) return errno_status("epoll_create1");
  outbound_.resize(size_);
  inbound_.resize(size_);

  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(job_.config().connect_timeout));
  // Connect to everyone (the kernel completes the handshakes from the
  // listen backlog), then accept everyone.
  for (int peer = 0; peer < size_; ++peer) {
    const std::string& blob = (*blobs)[peer];
    std::vector<std::string> words;
    for (std::size_t at = 0; at < blob.size();) {
      std::size_t end = blob.find(' ', at);
      if (end == std::string::npos) end = blob.size();
      words.push_back(blob.substr(at, end - at));
      at = end + 1;
    }
    if (words.size() < 2)
      return status(status_code::protocol_error, "bad address from process " + std::to_string(peer));
    auto peer_port = static_cast<std::uint16_t>(std::stoi(words[0]));
    int fd = -1;
    std::string failures;
    for (std::size_t i = 1; i < words.size() && fd < 0; ++i) {
      auto connected = tcp_connect(words[i], peer_port,
                                   std::min(deadline, std::chrono::steady_clock::now() +
                                                          std::chrono::seconds(2)));
      if (connected)
        fd = *connected;
      else
        failures += "; " + connected.error().message();
    }
    if (fd < 0)
      return status(status_code::peer_lost,
                    "cannot connect to process " + std::to_string(peer) + failures, peer);
    hello_message hello{hello_magic, rank_, static_cast<std::uint32_t>(job_.secret().size())};
    status sent = send_all(fd, &hello, sizeof hello);
    if (sent) sent = send_all(fd, job_.secret().data(), job_.secret().size());
    if (!sent) return sent.context("hello to process " + std::to_string(peer));
    outbound_[peer] = std::make_unique<connection>();
    outbound_[peer]->fd = fd;
    outbound_[peer]->peer = peer;
  }
  for (int accepted_count = 0; accepted_count < size_;) {
    auto accepted = accept_until(listen_fd_, deadline);
    if (!accepted) return status(accepted.error()).context("accepting connections");
    // A connection must name a rank not yet connected and present the
    // job's secret; anything else is turned away.
    hello_message hello{};
    std::string secret;
    auto hello_deadline = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    status got = recv_all(*accepted, &hello, sizeof hello, hello_deadline);
    if (got && hello.magic == hello_magic && hello.secret_length == job_.secret().size()) {
      secret.resize(hello.secret_length);
      got = recv_all(*accepted, secret.data(), secret.size(), hello_deadline);
    }
    if (!got || hello.magic != hello_magic || hello.rank < 0 || hello.rank >= size_ ||
        inbound_[hello.rank] || secret != job_.secret()) {
      TMK_LOG(warn, "rejected a connection that is not from a process of this job");
      close(*accepted);
      continue;
    }
    inbound_[hello.rank] = std::make_unique<connection>();
    inbound_[hello.rank]->fd = *accepted;
    inbound_[hello.rank]->peer = hello.rank;
    ++accepted_count;
  }
  for (int peer = 0; peer < size_; ++peer) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = inbound_[peer].get();
    if (epoll_ctl(request_epoll_, EPOLL_CTL_ADD, inbound_[peer]->fd, &event) != 0)
      return errno_status("epoll_ctl");
    event.data.ptr = outbound_[peer].get();
    if (epoll_ctl(reply_epoll_, EPOLL_CTL_ADD, outbound_[peer]->fd, &event) != 0)
      return errno_status("epoll_ctl");
  }
  return status::ok();
}

int sockets_transport::event_fd(channel which) const {
  return which == channel::request ? request_epoll_ : reply_epoll_;
}

status sockets_transport::post(channel from, int peer, channel to, const wire_header& header,
                               parts payload, std::size_t payload_length) {
  // Requests (and forwards) travel on this process's connection to peer;
  // replies on peer's connection to this process.
  (void)from;
  connection& on = to == channel::request ? *outbound_[peer] : *inbound_[peer];
  std::uint32_t length = static_cast<std::uint32_t>(payload_length);
  std::vector<std::byte> frame(sizeof length + sizeof header + payload_length);
  memcpy(frame.data(), &length, sizeof length);
  memcpy(frame.data() + sizeof length, &header, sizeof header);
  std::byte* at = frame.data() + sizeof length + sizeof header;
  for (const auto& part : payload) {
    if (!part.empty()) memcpy(at, part.data(), part.size());
    at += part.size();
  }
  std::lock_guard lock(on.write_mutex);
  status sent = send_all(on.fd, frame.data(), frame.size());
  if (!sent) return status(status_code::peer_lost, "process " + std::to_string(peer) + ": " +
                                                       sent.message(), peer);
  return sent;
}

unsigned sockets_transport::read_from(connection& from, channel which) {
  unsigned frames = 0;
  // Up to 1 MiB a call: the rest waits in the kernel (the epoll sets are
  // level-triggered), so that a sender streaming faster than this process
  // handles its messages is held back by the socket, not queued here.
  for (std::size_t read_now = 0; read_now < (std::size_t{1} << 20);) {
    std::size_t old_size = from.input.size();
    from.input.resize(old_size + 65536);
    ssize_t got = recv(from.fd, from.input.data() + old_size, 65536, MSG_DONTWAIT);
    from.input.resize(old_size + (got > 0 ? got : 0));
    if (got == 0) {
      // Closed: the job's monitor tells whether that is a loss.
      from.open = false;
      epoll_ctl(event_fd(which), EPOLL_CTL_DEL, from.fd, nullptr);
      break;
    }
    if (got < 0) break;
    if (got < 65536) break;
    read_now += static_cast<std::size_t>(got);
  }
  constexpr std::size_t prefix = sizeof(std::uint32_t) + sizeof(wire_header);
  while (from.input.size() - from.consumed >= prefix) {
    std::uint32_t length;
    wire_header header;
    memcpy(&length, from.input.data() + from.consumed, sizeof length);
    memcpy(&header, from.input.data() + from.consumed + sizeof length, sizeof header);
    if (length > config_.max_message) {
      TMK_LOG(error, "process %d sent a frame of %u bytes, above TMK_MAX_MESSAGE; closing",
              from.peer, length);
      from.open = false;
      epoll_ctl(event_fd(which), EPOLL_CTL_DEL, from.fd, nullptr);
      from.input.clear();
      from.consumed = 0;
      break;
    }
    if (from.input.size() - from.consumed < prefix + length) break;
    const std::byte* payload = from.input.data() + from.consumed + prefix;
    if (header.sender != from.peer) header.sender = from.peer;
    if (which == channel::request) {
      deliver_request(header, {payload, length});
    } else if (auto* destination = reply_destination(header, length)) {
      if (length) memcpy(destination->data(), payload, length);
      reply_complete(header);
    }
    from.consumed += prefix + length;
    ++frames;
  }
  if (from.consumed == from.input.size()) {
    from.input.clear();
    from.consumed = 0;
  } else if (from.consumed > (1u << 20)) {
    from.input.erase(from.input.begin(), from.input.begin() + static_cast<long>(from.consumed));
    from.consumed = 0;
  }
  return frames;
}

unsigned sockets_transport::progress(channel which) {
  epoll_event events[64];
  int ready = epoll_wait(event_fd(which), events, 64, 0);
  unsigned frames = 0;
  for (int i = 0; i < ready; ++i)
    frames += read_from(*static_cast<connection*>(events[i].data.ptr), which);
  return frames;
}

}  // namespace tmk
