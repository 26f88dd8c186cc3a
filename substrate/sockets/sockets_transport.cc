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

namespace {
// A calling thread queues frames behind another writer up to this many
// bytes, then waits for it (a stream of one-way messages is held back by
// the reader as when the calling thread writes them itself).
constexpr std::size_t queue_bound = std::size_t{4} << 20;
}  // namespace

status sockets_transport::post(channel from, int peer, channel to, const wire_header& header,
                               parts payload, std::size_t payload_length) {
  // Requests (and forwards) travel on this process's connection to peer;
  // replies on peer's connection to this process.
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
  {
    std::unique_lock lock(on.write_mutex);
    while (on.writing) {
      if (!on.broken) return on.broken;
      if (from == channel::request || on.queued_bytes < queue_bound) {
        on.queued_bytes += frame.size();
        on.queued.push_back(std::move(frame));
        return status::ok();
      }
      lock.unlock();
      status waited = wait_taking_in(-1, 1);
      if (!waited) return waited;
      lock.lock();
    }
    if (!on.broken) return on.broken;
    on.writing = true;
  }
  while (true) {
    status written = write_frame(on, frame);
    // A frame cut short leaves nothing to read after it on the connection:
    // unless the peer is gone or the job fails already (its monitor reports
    // that), the job cannot go on.
    if (!written && written.code() != status_code::peer_lost && !job_.failed())
      job_.fatal("sockets substrate: writing to process " + std::to_string(peer) + ": " +
                 written.message());
    std::lock_guard lock(on.write_mutex);
    if (!written) {
      on.broken = written;
      on.queued.clear();
      on.queued_bytes = 0;
      on.writing = false;
      return written;
    }
    if (on.queued.empty()) {
      on.writing = false;
      return status::ok();
    }
    frame = std::move(on.queued.front());
    on.queued.pop_front();
    on.queued_bytes -= frame.size();
  }
}

status sockets_transport::write_frame(connection& on, const std::vector<std::byte>& frame) {
  const std::byte* next = frame.data();
  std::size_t left = frame.size();
  while (left > 0) {
    ssize_t sent = ::send(on.fd, next, left, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) {
      next += sent;
      left -= static_cast<std::size_t>(sent);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET)
      return status(status_code::peer_lost,
                    "process " + std::to_string(on.peer) + ": connection closed by peer", on.peer);
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno_status("send");
    // The reader at the other end has not read what came before.
    status waited = wait_taking_in(on.fd, 1000);
    if (!waited) return waited;
  }
  return status::ok();
}

status sockets_transport::wait_taking_in(int fd, int timeout_ms) {
  pollfd fds[4];
  nfds_t count = 0;
  fds[count++] = {job_.failure_fd(), POLLIN, 0};
  if (fd >= 0) fds[count++] = {fd, POLLOUT, 0};
  nfds_t request = holds_request_channel() ? count++ : 0;
  if (request != 0) fds[request] = {request_epoll_, POLLIN, 0};
  nfds_t reply = !on_service_thread() ? count++ : 0;
  if (reply != 0) fds[reply] = {reply_epoll_, POLLIN, 0};
  int ready = poll(fds, count, timeout_ms);
  if (ready < 0 && errno != EINTR) return errno_status("poll");
  if (job_.failed()) return job_.failure();
  if (request != 0 && (fds[request].revents & POLLIN) != 0) {
    take_in_ready(channel::request);
    took_in_requests();
  }
  if (reply != 0 && (fds[reply].revents & POLLIN) != 0) take_in_ready(channel::reply);
  return status::ok();
}

void sockets_transport::take_in(connection& from, channel which) {
  // Up to 1 MiB a call: the rest waits in the kernel (the epoll sets are
  // level-triggered), so that a sender streaming faster than this process
  // handles its messages is held back by the socket, not queued here.
  std::vector<std::byte>& into = from.handling ? from.spill : from.input;
  for (std::size_t read_now = 0; read_now < (std::size_t{1} << 20);) {
    std::size_t old_size = into.size();
    into.resize(old_size + 65536);
    ssize_t got = recv(from.fd, into.data() + old_size, 65536, MSG_DONTWAIT);
    into.resize(old_size + (got > 0 ? got : 0));
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      // Closed or reset (an error epoll would report for ever): the job's
      // monitor tells whether that is a loss.
      from.open = false;
      epoll_ctl(event_fd(which), EPOLL_CTL_DEL, from.fd, nullptr);
      break;
    }
    if (got < 0) break;
    if (got < 65536) break;
    read_now += static_cast<std::size_t>(got);
  }
}

void sockets_transport::take_in_ready(channel which) {
  epoll_event events[64];
  int ready = epoll_wait(event_fd(which), events, 64, 0);
  for (int i = 0; i < ready; ++i) {
    auto& from = *static_cast<connection*>(events[i].data.ptr);
    take_in(from, which);
    if (!from.listed) {
      from.listed = true;
      taken_in_[index(which)].push_back(&from);
    }
  }
}

unsigned sockets_transport::handle(connection& from, channel which) {
  unsigned frames = 0;
  constexpr std::size_t prefix = sizeof(std::uint32_t) + sizeof(wire_header);
  from.handling = true;
  while (true) {
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
        from.spill.clear();
        from.consumed = 0;
        break;
      }
      if (from.input.size() - from.consumed < prefix + length) break;
      const std::byte* payload = from.input.data() + from.consumed + prefix;
      if (header.sender != from.peer) header.sender = from.peer;
      // A handler may block in a write and take in meanwhile: into spill,
      // so that payload stays where it is.
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
    if (from.spill.empty()) break;
    from.input.insert(from.input.end(), from.spill.begin(), from.spill.end());
    from.spill.clear();
  }
  from.handling = false;
  return frames;
}

unsigned sockets_transport::progress(channel which) {
  unsigned frames = 0;
  // What a thread blocked in a write took in, first, in the order it came.
  auto& listed = taken_in_[index(which)];
  if (!listed.empty()) {
    std::vector<connection*> taken;
    taken.swap(listed);
    for (connection* from : taken) {
      from->listed = false;
      frames += handle(*from, which);
    }
  }
  epoll_event events[64];
  int ready = epoll_wait(event_fd(which), events, 64, 0);
  for (int i = 0; i < ready; ++i) {
    auto& from = *static_cast<connection*>(events[i].data.ptr);
    take_in(from, which);
    frames += handle(from, which);
  }
  return frames;
}

}  // namespace tmk
