// ucx_transport.h — the substrate over UCX (UCP).
//
// One UCP context, two workers: the request worker (owned by the service
// thread, lent to a waiting caller while the service thread sleeps; mode
// SERIALIZED) and the reply worker (the calling thread's alone; mode
// SINGLE).  Every process publishes both worker addresses at
// start-up; endpoints to a peer's workers are created on first use.
//
// Two data paths (TMK_UCX_PATH):
//   am   active messages: UCX owns the receive pools; a request's data is
//        held (UCS_INPROGRESS) until its handler returns; sends are eager
//        at every size (rendezvous data, should a peer send it, is
//        received with ucp_am_recv_data_nbx).
//   tag  FAST/GM's design literally: receive buffers in size classes
//        (64 B .. 32 KiB) preposted with ucp_tag_recv_nbx in registered
//        memory — o*(n-1) small and n-1 of every larger class for requests,
//        one per class for replies; the tag carries kind | class | source.
//        A message above the largest class is announced in a small one and
//        follows by rendezvous under its own tag.
// Both send from a pool of registered send buffers (the header and the
// payload must outlive the send: UCX 1.13 cannot copy the header), except
// on the am path: a send that completes at once goes from the sender's
// memory; the calling thread waits for a longer send to complete instead
// (post_direct); the service thread's longer sends are packed by UCX from
// the sender's memory as far as they go at once, the rest copied
// (post_gathered).
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport.h"

namespace tmk {

// Size classes shared by the send pool and the preposted receives.
inline constexpr std::size_t smallest_class_bytes = 64;
inline constexpr int class_count = 10;  // 64 B .. 32 KiB
inline constexpr std::size_t largest_class_bytes = smallest_class_bytes << (class_count - 1);
// The class whose buffers hold length bytes, or class_count if none does.
int size_class_of(std::size_t length);
// Preposted receive memory of the tag path for n processes.
buffer_footprint tag_path_footprint(int nprocs, unsigned outstanding);
// What ucp_context_print_info prints for a context (its resources among
// it, one a line: "... -- posix/memory"); empty if it cannot be captured.
std::string ucp_context_text(ucp_context_h context);

class ucx_transport final : public transport {
 public:
  static result<std::unique_ptr<transport>> create(job& owner, const substrate_config& config);
  ~ucx_transport() override;

  std::string describe() const override;
  receive_ring receive_ring_shape() const override;
  buffer_footprint footprint(int nprocs) const override;

 protected:
  status post(channel from, int peer, channel to, const wire_header& header, parts payload,
              std::size_t payload_length) override;
  unsigned progress(channel which) override;
  bool arm(channel which) override;
  int event_fd(channel which) const override;
  status flush_channel(channel which) override;
  bool supports_doorbell() const override { return doorbell_ready_; }
  bool settled(channel which) const override;
  void release_lent(void* handle) override;

 private:
  struct send_buffer;
  struct preposted;
  struct worker_state;
  struct large_receive;

  ucx_transport(job& owner, const substrate_config& config);
  status open_workers(ucs_status_t& failed);
  ucs_status_t narrow_shared_memory(const ucp_params_t& params, ucp_config_t* ucx_config);
  status exchange_addresses();
  status connect(const std::vector<std::string>& blobs);
  result<ucp_ep_h> endpoint(worker_state& worker, int peer, channel to);
  status drain(channel which, unsigned left);
  send_buffer* take_send_buffer(worker_state& worker, std::size_t length);
  void return_send_buffer(worker_state& worker, send_buffer* buffer);
  void went_in_flight(worker_state& worker, send_buffer* buffer);
  // A send refused: to a peer whose connection has failed (gone, or cut
  // off: UCX's endpoint timed out or was reset), the peer lost, named.
  static status send_failure(const char* call, ucs_status_t code, int peer);
  // A send that failed after it went out (its completion said so).
  void send_lost(ucs_status_t code, int peer);
  status sent_from(worker_state& worker, send_buffer* buffer, void* request, const char* call,
                   int peer);
  status post_direct(worker_state& worker, ucp_ep_h ep, int peer, channel to,
                     std::span<ucp_dt_iov_t> iov, std::size_t total);
  status post_gathered(worker_state& worker, ucp_ep_h ep, int peer, channel to,
                       const wire_header& header, parts payload, std::size_t payload_length);
  status post_am(worker_state& worker, ucp_ep_h ep, int peer, send_buffer* buffer,
                 std::size_t length);
  status post_tag(worker_state& worker, ucp_ep_h ep, int peer, channel to, send_buffer* buffer,
                  std::size_t length);
  status prepost(worker_state& worker);
  void repost(preposted* slot);
  void handle_tag_message(worker_state& worker, preposted* slot, std::size_t length,
                          ucp_tag_t tag);
  void handle_large(worker_state& worker, large_receive* receive);

  static ucs_status_t on_am_request(void* arg, const void* header, size_t header_length,
                                    void* data, size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_am_reply(void* arg, const void* header, size_t header_length,
                                  void* data, size_t length, const ucp_am_recv_param_t* param);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_direct_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_tag_received(void* request, ucs_status_t status,
                              const ucp_tag_recv_info_t* info, void* user_data);
  static void large_received(void* request, ucs_status_t code, large_receive* receive);
  static void on_large_received(void* request, ucs_status_t status,
                                const ucp_tag_recv_info_t* info, void* user_data);
  worker_state& state(channel which) { return *workers_[which == channel::request ? 0 : 1]; }
  const worker_state& state(channel which) const {
    return *workers_[which == channel::request ? 0 : 1];
  }

  // Replies at least this long, received whole in a buffer of UCX's, are
  // lent to their waiter there (transport::lend_reply) instead of copied
  // out: the copy reads every line of a buffer another process's core has
  // just written, 0.44 us of a 4 KiB round trip of 1.3 on the machine of
  // BENCHMARKS.md (0.87 lent).  Lending costs UCX a descriptor taken for
  // the FIFO element and given back: no more than the copy at 64 B (0.44
  // us either way), 0.01-0.02 us less at 256 B, 0.15 us less at 2 KiB.
  static constexpr std::size_t lend_minimum = 256;
  // And no longer than one shared-memory segment holds with the headers
  // (8232 B with UCX's default segment, see the constructor): a reply in
  // fragments comes whole in a buffer UCX allocates for it, and
  // lending those made FFT slower in one measurement (32^3 on 2 processes
  // 6.9 ms against 6.0 copied, on 8 19.2 against 17.8; medians of 15) and
  // changed nothing in another (BENCHMARKS.md, substrate notes).
  std::size_t lend_maximum_ = 0;
  ucp_datatype_t gather_datatype_ = 0;  // packs from a send's parts (post_gathered)
  bool closing_ = false;  // the destructor runs: nothing more is lent
  ucp_context_h context_ = nullptr;
  bool doorbell_ready_ = false;  // the context suits doorbells (open_workers)
  std::array<std::unique_ptr<worker_state>, 2> workers_;
  std::string own_addresses_;  // both workers' addresses, as exchange_addresses() sends them
  // Worker addresses of every process: [rank][0] request, [rank][1] reply.
  std::vector<std::array<std::string, 2>> addresses_;
};

}  // namespace tmk
