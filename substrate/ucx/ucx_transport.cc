// ucx_transport.cc — the UCX backend (see ucx_transport.h).
//
// Everything a worker does happens on its owning thread: sends, progress,
// completion callbacks and the reposting of receive buffers.  Callbacks
// only record what completed; the work is done after ucp_worker_progress
// returns, so no callback ever re-enters UCX on the same worker.
#include "ucx/ucx_transport.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iterator>
#include <optional>
#include <thread>
#include <utility>

#include "log.h"

namespace tmk {

namespace {

constexpr unsigned am_id = 0;
constexpr std::size_t max_parts = 8;  // payload parts sent without gathering
constexpr std::uint8_t large_flag = 1;  // wire_header.reserved[0] on the tag path

// Tag layout: kind (4 bits) | size class (4) | sender rank (24) | transfer id (32).
// A large message's payload (tag_large) has the channel it was sent from in
// place of the size class: each of a process's two workers numbers its own
// transfers, and both send to the same channel of a peer (the service
// thread's replies and the calling thread's caller requests, say), so the
// rank and the id alone could match one's payload to the other's
// announcement.
enum tag_kind : std::uint64_t { tag_request = 1, tag_reply = 2, tag_large = 3 };
constexpr ucp_tag_t class_mask = 0xff00000000000000ull;
constexpr ucp_tag_t full_mask = ~0ull;

ucp_tag_t make_tag(std::uint64_t kind, int size_class, int sender, std::uint32_t id) {
  return (kind << 60) | (static_cast<std::uint64_t>(size_class) << 56) |
         (static_cast<std::uint64_t>(sender & 0xffffff) << 32) | id;
}

status ucx_status(const std::string& what, ucs_status_t code) {
  return status(status_code::transport_error, what + ": " + ucs_status_string(code));
}

// What UCX packs a gathered send from (gather_datatype_): the header, then
// the sender's parts while ucp_am_send_nbx runs; the copy of both in its
// send buffer once the send outlives the call.
struct gather_source {
  std::size_t length = 0;  // the header's and the parts'
  const std::byte* header = nullptr;
  const byte_span* parts = nullptr;
  std::size_t count = 0;
  const std::byte* copied = nullptr;
};

void* gather_start_pack(void*, const void* buffer, size_t) { return const_cast<void*>(buffer); }

void* gather_start_unpack(void*, void*, size_t) { return nullptr; }  // never received into

size_t gather_packed_size(void* state) { return static_cast<gather_source*>(state)->length; }

size_t gather_pack(void* state, size_t offset, void* dest, size_t max_length) {
  const auto& source = *static_cast<const gather_source*>(state);
  std::size_t length = std::min(max_length, source.length - offset);
  auto* to = static_cast<std::byte*>(dest);
  if (source.copied != nullptr) {
    memcpy(to, source.copied + offset, length);
    return length;
  }
  std::size_t left = length;
  auto take_from = [&](byte_span part) {
    if (offset >= part.size()) {
      offset -= part.size();
      return;
    }
    std::size_t take = std::min(part.size() - offset, left);
    memcpy(to, part.data() + offset, take);
    to += take;
    left -= take;
    offset = 0;
  };
  take_from({source.header, sizeof(wire_header)});
  for (std::size_t i = 0; i < source.count && left > 0; ++i) take_from(source.parts[i]);
  return length;
}

ucs_status_t gather_unpack(void*, size_t, const void*, size_t) { return UCS_ERR_UNSUPPORTED; }

void gather_finish(void*) {}

// A message's payload copied into its send buffer, after the header.
void copy_after_header(std::byte* data, std::initializer_list<byte_span> payload) {
  std::byte* at = data + sizeof(wire_header);
  for (const auto& part : payload) {
    if (!part.empty()) memcpy(at, part.data(), part.size());
    at += part.size();
  }
}

status no_send_buffer(std::size_t total) {
  return status(status_code::exhausted,
                "no memory for a send buffer of " + std::to_string(total) + " bytes");
}

struct large_announcement {
  std::uint64_t length;
  std::uint32_t id;
  std::uint32_t from;  // the sender's channel, as in the payload's tag
};

}  // namespace

int size_class_of(std::size_t length) {
  for (int size_class = 0; size_class < class_count; ++size_class)
    if (length <= (smallest_class_bytes << size_class)) return size_class;
  return class_count;
}

buffer_footprint tag_path_footprint(int nprocs, unsigned outstanding) {
  std::size_t peers = nprocs > 1 ? static_cast<std::size_t>(nprocs - 1) : 1;
  std::size_t request = outstanding * peers * smallest_class_bytes;
  std::size_t reply = 0;
  for (int size_class = 0; size_class < class_count; ++size_class) {
    std::size_t bytes = smallest_class_bytes << size_class;
    if (size_class > 0) request += peers * bytes;
    reply += bytes;
  }
  return {request, reply};
}

// A message above the largest size class is copied into a heap buffer of
// the next power of two.  Buffers given back are kept for the next large
// messages, up to this many bytes a worker: taken from the allocator each
// time, their memory may come back from the system fresh and be faulted in
// page by page at every message (pingpong, which runs without the
// runtime's malloc settings: a 77,824-byte round trip took about 200 us,
// 17 us with a buffer kept; its stream of 32 KiB messages, which keeps
// dozens in flight, ran at 1.5-4.9 GB/s with one buffer kept).
constexpr std::size_t max_kept_large_bytes = std::size_t{16} << 20;

// Sends the calling thread may have in flight on its worker: one more
// waits for one to complete.  A caller streaming one-way messages faster
// than the receiver drains them would otherwise queue every message, each
// in a send buffer of its own (2,000 messages of 40,000 bytes grew the
// heap by 80 MB; pingpong's 32 KiB stream, faulting that memory in, ran at
// 1.5-4.9 GB/s against 11 with this bound).
constexpr unsigned max_caller_in_flight = 64;

// The service thread's messages at least this long are gathered
// (post_gathered); shorter ones are copied into a send buffer, which cost
// less than UCX's calls into the gathering datatype (256 B: 0.646 against
// 0.662 us a round trip, medians of 9 alternated runs).
constexpr std::size_t gather_minimum = 1024;

// Messages at most this long (tmk's header included) are first offered to
// UCX to complete at once or not at all: its short protocol, which takes
// up to 100 B through shared memory (its own headers included) in UCX
// 1.13.  Longer ones go straight to the path that can wait or copy.
constexpr std::size_t immediate_maximum = 128;

struct ucx_transport::send_buffer {
  std::byte* data;
  std::size_t capacity;
  int size_class;  // class_count: a heap buffer for a large message
  ucp_mem_h memh;
  worker_state* owner;
  std::size_t index;  // in worker_state::all_buffers
  int ring_peer = -1;  // the peer whose request channel it goes to (doorbells)
  int peer = -1;       // the peer it goes to, while in flight
  gather_source gather;  // what a gathered send packs from (post_gathered)
};

struct ucx_transport::preposted {
  worker_state* worker;
  int size_class;
  std::byte* data;
  void* request = nullptr;  // while posted and not yet completed
  bool posted = false;
  std::size_t length = 0;
  ucp_tag_t tag = 0;
};

struct ucx_transport::large_receive {
  worker_state* worker;
  wire_header header;
  // Requests, and replies nobody waits for: UCX writes every byte, so the
  // buffer is not zeroed first (a vector's was, 8% of a 40 KB stream's
  // time over the tag path).
  std::unique_ptr<std::byte[]> data;
  std::size_t length = 0;
  std::vector<std::byte>* destination = nullptr;  // replies
  ucs_status_t ended = UCS_OK;  // how the receive of the data ended

  std::byte* allocate(std::size_t bytes) {
    data = std::make_unique_for_overwrite<std::byte[]>(bytes);
    length = bytes;
    return data.get();
  }
};

struct ucx_transport::worker_state {
  ucx_transport* owner;
  channel which;
  ucp_worker_h worker = nullptr;
  int efd = -1;
  std::array<std::vector<ucp_ep_h>, 2> endpoints;  // [request, reply][peer]
  std::array<std::vector<send_buffer*>, class_count> free_buffers;
  std::vector<std::unique_ptr<send_buffer>> all_buffers;
  // Large-message buffers given back, by log2 of their capacity.
  std::array<std::vector<send_buffer*>, 64> kept_large;
  std::size_t kept_large_bytes = 0;
  struct chunk {
    void* address;
    std::size_t length;
    ucp_mem_h memh;
  };
  std::vector<chunk> chunks;
  unsigned in_flight = 0;
  unsigned direct_in_flight = 0;  // sent from the caller's memory (post)
  ucs_status_t direct_ended = UCS_OK;  // how the last such send completed
  // Sends in flight to each peer's request channel, and their sum: with
  // doorbells, the receiver is rung while one is (transport::ring).
  std::vector<unsigned> in_flight_to;
  unsigned in_flight_to_requests = 0;
  // Tag path.
  std::vector<std::unique_ptr<preposted>> slots;
  std::deque<preposted*> completed_slots;
  std::deque<large_receive*> completed_large;
  std::uint32_t next_large_id = 1;
};

namespace {
// A UCX memory size as its settings take it: digits and an optional unit
// (b, k, m, g; upper or lower case, "kb" as "k").  False if it is none.
bool parse_ucx_size(const char* text, unsigned long long& bytes) {
  char* end = nullptr;
  errno = 0;
  bytes = strtoull(text, &end, 10);
  if (end == text || errno != 0) return false;
  unsigned shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0' || (shift != 0 && bytes > (~0ull >> shift))) return false;
  bytes <<= shift;
  return true;
}

// A setting of UCX's shared-memory transports from the environment: the
// largest of sysv's, posix's and both's (either transport may carry the
// messages), or fallback.
std::size_t ucx_mm_setting(const char* name, std::size_t fallback) {
  std::size_t largest = 0;
  for (const char* prefix : {"UCX_SYSV_", "UCX_POSIX_", "UCX_MM_"}) {
    const char* value = getenv((std::string(prefix) + name).c_str());
    unsigned long long parsed = 0;
    if (value != nullptr && parse_ucx_size(value, parsed) && parsed > 0)
      largest = std::max(largest, static_cast<std::size_t>(parsed));
  }
  return largest > 0 ? largest : fallback;
}
}  // namespace

ucx_transport::ucx_transport(job& owner, const substrate_config& config)
    : transport(owner, config) {
  // UCX 1.13 puts 8 bytes of its own beside the header and the payload of
  // an active message: with the default segment of 8256 B, a reply of 8232
  // B came in one segment (1.1-1.3 us a round trip) and one of 8240 in
  // fragments (3.4-3.9).
  constexpr std::size_t ucx_header = 8;
  std::size_t segment = ucx_mm_setting("SEG_SIZE", 8256);
  std::size_t overhead = ucx_header + sizeof(wire_header);
  lend_maximum_ = segment > overhead ? segment - overhead : 0;
  static const ucp_generic_dt_ops_t gathering = {gather_start_pack, gather_start_unpack,
                                                 gather_packed_size, gather_pack, gather_unpack,
                                                 gather_finish};
  if (ucp_dt_create_generic(&gathering, nullptr, &gather_datatype_) != UCS_OK)
    gather_datatype_ = 0;  // the service thread's sends are copied, as on the tag path
}

result<std::unique_ptr<transport>> ucx_transport::create(job& owner,
                                                         const substrate_config& config) {
  // UCX 1.13's shared-memory FIFO element records a message's length in 16
  // bits: with segments of 64 KiB or more a longer message arrives cut and
  // garbled (seen: a request's header read as zeros, dropped, its caller
  // waiting for ever).
  for (const char* name :
       {"UCX_MM_SEG_SIZE", "UCX_POSIX_SEG_SIZE", "UCX_SYSV_SEG_SIZE", "UCX_XPMEM_SEG_SIZE"}) {
    const char* value = getenv(name);
    unsigned long long bytes = 0;
    if (value != nullptr && parse_ucx_size(value, bytes) && bytes >= 65536)
      return status(status_code::invalid_argument,
                    std::string(name) + "=" + value +
                        ": UCX's shared-memory transports garble messages in segments of 64 KiB "
                        "or more (a message's length has 16 bits); use less than 65536");
  }
  // A network device removed between UCX's listing of the devices and the
  // opening of a worker's interfaces on them (a container's or a network
  // namespace's veth going away as the job starts) fails the opening with
  // "No such device"; a new context lists the devices again.  Opening is
  // local to this process: the exchange with the others comes after.
  std::unique_ptr<ucx_transport> created;
  status opened = status::ok();
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    created.reset(new ucx_transport(owner, config));
    ucs_status_t failed = UCS_OK;
    opened = created->open_workers(failed);
    if (opened || failed != UCS_ERR_NO_DEVICE) break;
    TMK_LOG(info, "%s; opening UCX again", opened.message().c_str());
  }
  if (!opened) return opened.context("UCX substrate");
  status made = created->exchange_addresses();
  if (!made) return made.context("UCX substrate");
  return std::unique_ptr<transport>(std::move(created));
}

// Between processes on one host UCX's shared-memory transports (sysv,
// posix) put each message of up to a segment into the next of a ring of
// FIFO elements of the receiving worker, each with a segment of its own
// that the sender writes.  A sender's first message through an element
// faults its segment's pages in, in the sender and then in the receiver:
// in SOR on 2 processes the first 64 barrier arrivals each took 35 us to
// send instead of 2.4, two faults apiece.  The ring's size and the
// segment's are UCX settings (UCX_SYSV_FIFO_SIZE, UCX_MM_SEG_SIZE...),
// read from the environment, the largest of the two transports' settings
// (either may carry the messages); a message of a segment less UCX's
// headers fills one.

transport::receive_ring ucx_transport::receive_ring_shape() const {
  constexpr std::size_t ucx_headers = 64;
  std::size_t depth = std::min<std::size_t>(ucx_mm_setting("FIFO_SIZE", 64), 1024);
  std::size_t segment = std::min<std::size_t>(ucx_mm_setting("SEG_SIZE", 8256), 1 << 20);
  return {depth, segment > ucx_headers ? segment - ucx_headers : segment};
}

std::string ucp_context_text(ucp_context_h context) {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return {};
  ucp_context_print_info(context, stream);
  fclose(stream);
  std::string info(text ? text : "");
  free(text);
  return info;
}

namespace {
// Whether ucp_context_print_info's text lists a transport among its
// resources ("... -- posix/memory").
bool lists_transport(const std::string& info, const char* transport) {
  return info.find(std::string("-- ") + transport + "/") != std::string::npos;
}

// Whether a context has one of UCX's shared-memory FIFO transports.
bool carries_messages_in_shared_memory(ucp_context_h context) {
  std::string info = ucp_context_text(context);
  return lists_transport(info, "posix") || lists_transport(info, "sysv") ||
         lists_transport(info, "xpmem");
}
}  // namespace

// With both of UCX's shared-memory FIFO transports, a context of SysV's
// alone (with cma, for rendezvous, and self): UCX sends messages over SysV
// when it has both, and each worker's POSIX interface, never used, cost
// each process at start-up 1000 page faults (512 receive segments of 8 KB
// each, their headers written when made: a short job of the substrate's
// on 8 processes took 30% less CPU time without them) and a look at its
// FIFO at every progress.
ucs_status_t ucx_transport::narrow_shared_memory(const ucp_params_t& params,
                                                 ucp_config_t* ucx_config) {
  std::string info = ucp_context_text(context_);
  if (!lists_transport(info, "sysv") || !lists_transport(info, "posix")) return UCS_OK;
  std::string transports =
      std::string("sysv") + (lists_transport(info, "cma") ? ",cma" : "") + ",self";
  if (ucp_config_modify(ucx_config, "TLS", transports.c_str()) != UCS_OK) return UCS_OK;
  ucp_cleanup(context_);
  context_ = nullptr;
  return ucp_init(&params, ucx_config, &context_);
}

// The context and both workers, this process's alone; failed is the UCX
// code of what failed.
status ucx_transport::open_workers(ucs_status_t& failed) {
  ucp_config_t* ucx_config = nullptr;
  ucs_status_t code = ucp_config_read(nullptr, nullptr, &ucx_config);
  failed = code;
  if (code != UCS_OK) return ucx_status("ucp_config_read", code);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  params.estimated_num_eps = static_cast<std::size_t>(size_) * 2;
  // Doorbells (transport.h) need every message to a request worker to be
  // in its memory when the send returns, and every interface that receives
  // to be polled by each progress call.  With every process of the job on
  // this host (job::shared_line), unless the user chose UCX's transports:
  // shared memory only, and no adaptive progress (which leaves an
  // interface without an endpoint of its own unpolled until UCX's armed
  // event fd reports it: requests waited for the sleep's timeout).  Polling
  // every interface costs nothing there, shared-memory FIFOs being read
  // without a system call.  Without a shared-memory transport for messages
  // (posix, sysv or xpmem), the context is made again as configured,
  // without doorbells.
  doorbell_ready_ = config_.doorbell && config_.notify == notify_mode::interrupt &&
                    job_.shared_line(rank_) != nullptr && getenv("UCX_TLS") == nullptr &&
                    ucp_config_modify(ucx_config, "TLS", "sm,self") == UCS_OK &&
                    ucp_config_modify(ucx_config, "ADAPTIVE_PROGRESS", "n") == UCS_OK;
  code = ucp_init(&params, ucx_config, &context_);
  if (doorbell_ready_ && code == UCS_OK) code = narrow_shared_memory(params, ucx_config);
  if (doorbell_ready_ && (code != UCS_OK || !carries_messages_in_shared_memory(context_))) {
    TMK_LOG(info, "no UCX shared-memory transport for messages: no doorbells");
    if (code == UCS_OK) ucp_cleanup(context_);
    context_ = nullptr;
    doorbell_ready_ = false;
    ucp_config_release(ucx_config);
    code = ucp_config_read(nullptr, nullptr, &ucx_config);
    if (code != UCS_OK) return ucx_status("ucp_config_read", code);
    code = ucp_init(&params, ucx_config, &context_);
  }
  ucp_config_release(ucx_config);
  failed = code;
  if (code != UCS_OK) return ucx_status("ucp_init", code);

  for (int index = 0; index < 2; ++index) {
    auto state = std::make_unique<worker_state>();
    state->owner = this;
    state->which = index == 0 ? channel::request : channel::reply;
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
    // The request worker passes between the service thread and a waiting
    // caller (never both at once, under transport::request_lock_); the
    // reply worker belongs to the caller alone.
    worker_params.thread_mode = index == 0 ? UCS_THREAD_MODE_SERIALIZED : UCS_THREAD_MODE_SINGLE;
    worker_params.events = UCP_WAKEUP_RX | UCP_WAKEUP_TAG_RECV | UCP_WAKEUP_TX;
    code = ucp_worker_create(context_, &worker_params, &state->worker);
    failed = code;
    if (code != UCS_OK) return ucx_status("ucp_worker_create", code);
    code = ucp_worker_get_efd(state->worker, &state->efd);
    if (code != UCS_OK) return ucx_status("ucp_worker_get_efd", code);

    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                         UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = am_id;
    handler.flags = UCP_AM_FLAG_WHOLE_MSG;
    handler.cb = index == 0 ? &ucx_transport::on_am_request : &ucx_transport::on_am_reply;
    handler.arg = state.get();
    code = ucp_worker_set_am_recv_handler(state->worker, &handler);
    if (code != UCS_OK) return ucx_status("ucp_worker_set_am_recv_handler", code);

    ucp_address_t* address = nullptr;
    std::size_t address_length = 0;
    code = ucp_worker_get_address(state->worker, &address, &address_length);
    if (code != UCS_OK) return ucx_status("ucp_worker_get_address", code);
    std::uint32_t length = static_cast<std::uint32_t>(address_length);
    own_addresses_.append(reinterpret_cast<const char*>(&length), sizeof length);
    own_addresses_.append(reinterpret_cast<const char*>(address), address_length);
    ucp_worker_release_address(state->worker, address);
    for (auto& list : state->endpoints) list.assign(size_, nullptr);
    workers_[index] = std::move(state);
  }
  return status::ok();
}

status ucx_transport::exchange_addresses() {
  if (config_.ucx_path == ucx_data_path::tag)
    for (auto& state : workers_) {
      status posted = prepost(*state);
      if (!posted) return posted;
    }

  // After both addresses, whether this process can ring and be rung: a
  // process whose context fell back to UCX's transports as configured
  // would neither ring its peers nor be rung, so doorbells are used only if
  // every process can.
  auto blobs = job_.allgather(own_addresses_ + (doorbell_ready_ ? '\1' : '\0'));
  if (!blobs) return blobs.error();
  return connect(*blobs);
}

status ucx_transport::connect(const std::vector<std::string>& blobs) {
  addresses_.resize(size_);
  for (int rank = 0; rank < size_; ++rank) {
    const std::string& blob = blobs[rank];
    std::size_t at = 0;
    for (int index = 0; index < 2; ++index) {
      std::uint32_t length;
      if (at + sizeof length > blob.size())
        return status(status_code::protocol_error,
                      "bad worker address from process " + std::to_string(rank));
      memcpy(&length, blob.data() + at, sizeof length);
      at += sizeof length;
      if (at + length > blob.size())
        return status(status_code::protocol_error,
                      "bad worker address from process " + std::to_string(rank));
      addresses_[rank][index] = blob.substr(at, length);
      at += length;
    }
    if (at + 1 != blob.size())
      return status(status_code::protocol_error,
                    "bad worker address from process " + std::to_string(rank));
    if (blob[at] != '\1' && doorbell_ready_) {
      TMK_LOG(info, "process %d has no doorbell: none rung", rank);
      doorbell_ready_ = false;
    }
  }
  return status::ok();
}

ucx_transport::~ucx_transport() {
  stop();
  closing_ = true;
  release_all_lent();
  for (auto& state : workers_) {
    if (!state || !state->worker) continue;
    for (auto& slot : state->slots)
      if (slot->request != nullptr) ucp_request_cancel(state->worker, slot->request);
    while (ucp_worker_progress(state->worker) != 0) {
    }
    for (auto& list : state->endpoints)
      for (ucp_ep_h& ep : list) {
        if (ep == nullptr) continue;
        ucp_request_param_t close_params{};
        close_params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        close_params.flags = UCP_EP_CLOSE_FLAG_FORCE;
        void* closing = ucp_ep_close_nbx(ep, &close_params);
        if (UCS_PTR_IS_PTR(closing)) {
          while (ucp_request_check_status(closing) == UCS_INPROGRESS)
            ucp_worker_progress(state->worker);
          ucp_request_free(closing);
        }
        ep = nullptr;
      }
    for (auto& chunk : state->chunks)
      if (chunk.memh != nullptr) ucp_mem_unmap(context_, chunk.memh);
    for (auto& buffer : state->all_buffers)
      if (buffer->size_class == class_count) delete[] buffer->data;
    ucp_worker_destroy(state->worker);
    for (auto& chunk : state->chunks) munmap(chunk.address, chunk.length);
  }
  if (context_) ucp_cleanup(context_);
  if (gather_datatype_ != 0) ucp_dt_destroy(gather_datatype_);
}

std::string ucx_transport::describe() const {
  std::string text = std::string("ucx/") + ucx_path_name(config_.ucx_path);
  if (const char* tls = getenv("UCX_TLS")) text += " (UCX_TLS=" + std::string(tls) + ")";
  if (doorbell_ready_) text += ", doorbells";
  return text;
}

buffer_footprint ucx_transport::footprint(int nprocs) const {
  // The am path preposts nothing of its own: UCX's receive pools are per
  // worker and transport, not per peer.
  if (config_.ucx_path == ucx_data_path::am) return {0, 0};
  return tag_path_footprint(nprocs, config_.outstanding);
}

result<ucp_ep_h> ucx_transport::endpoint(worker_state& worker, int peer, channel to) {
  int index = to == channel::request ? 0 : 1;
  ucp_ep_h& ep = worker.endpoints[index][peer];
  if (ep != nullptr) return ep;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(addresses_[peer][index].data());
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucs_status_t code = ucp_ep_create(worker.worker, &params, &ep);
  if (code != UCS_OK) {
    ep = nullptr;
    return ucx_status("connecting to process " + std::to_string(peer), code);
  }
  return ep;
}

// Registered send buffers: carved per size class from mapped chunks, 16 at
// a time; a message above the largest class gets a heap buffer of the next
// power of two (UCX registers it on the fly for rendezvous).
ucx_transport::send_buffer* ucx_transport::take_send_buffer(worker_state& worker,
                                                            std::size_t length) {
  int size_class = size_class_of(length);
  if (size_class == class_count) {
    std::size_t capacity = std::bit_ceil(length);
    auto& kept = worker.kept_large[std::countr_zero(capacity)];
    if (!kept.empty()) {
      send_buffer* buffer = kept.back();
      kept.pop_back();
      worker.kept_large_bytes -= capacity;
      return buffer;
    }
    auto buffer = std::make_unique<send_buffer>();
    buffer->data = new (std::nothrow) std::byte[capacity];
    if (buffer->data == nullptr) return nullptr;
    buffer->capacity = capacity;
    buffer->size_class = class_count;
    buffer->memh = nullptr;
    buffer->owner = &worker;
    buffer->index = worker.all_buffers.size();
    send_buffer* raw = buffer.get();
    worker.all_buffers.push_back(std::move(buffer));
    return raw;
  }
  auto& free_list = worker.free_buffers[size_class];
  if (free_list.empty()) {
    std::size_t bytes = smallest_class_bytes << size_class;
    std::size_t count = 16;
    std::size_t chunk_length = bytes * count;
    void* address = mmap(nullptr, chunk_length, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) return nullptr;
    ucp_mem_map_params_t params{};
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.address = address;
    params.length = chunk_length;
    ucp_mem_h memh = nullptr;
    if (ucp_mem_map(context_, &params, &memh) != UCS_OK) memh = nullptr;
    worker.chunks.push_back({address, chunk_length, memh});
    for (std::size_t i = 0; i < count; ++i) {
      auto buffer = std::make_unique<send_buffer>();
      buffer->data = static_cast<std::byte*>(address) + i * bytes;
      buffer->capacity = bytes;
      buffer->size_class = size_class;
      buffer->memh = memh;
      buffer->owner = &worker;
      buffer->index = worker.all_buffers.size();
      free_list.push_back(buffer.get());
      worker.all_buffers.push_back(std::move(buffer));
    }
  }
  send_buffer* buffer = free_list.back();
  free_list.pop_back();
  return buffer;
}

void ucx_transport::return_send_buffer(worker_state& worker, send_buffer* buffer) {
  if (buffer->size_class < class_count) {
    worker.free_buffers[buffer->size_class].push_back(buffer);
    return;
  }
  if (worker.kept_large_bytes + buffer->capacity <= max_kept_large_bytes) {
    worker.kept_large[std::countr_zero(buffer->capacity)].push_back(buffer);
    worker.kept_large_bytes += buffer->capacity;
    return;
  }
  delete[] buffer->data;
  auto& all = worker.all_buffers;
  std::size_t at = buffer->index;
  if (at + 1 != all.size()) {
    all[at] = std::move(all.back());
    all[at]->index = at;
  }
  all.pop_back();
}

void ucx_transport::on_send_done(void* request, ucs_status_t code, void* user_data) {
  auto* buffer = static_cast<send_buffer*>(user_data);
  worker_state& worker = *buffer->owner;
  if (code != UCS_OK && code != UCS_ERR_CANCELED) worker.owner->send_lost(code, buffer->peer);
  --worker.in_flight;
  int peer = buffer->ring_peer;
  if (peer >= 0) {
    --worker.in_flight_to[peer];
    --worker.in_flight_to_requests;
  }
  worker.owner->return_send_buffer(worker, buffer);
  ucp_request_free(request);
  if (peer >= 0) worker.owner->ring(peer);
}

// The message is lost, and nothing is ever sent twice: whoever waits for it
// (or for its answer) would wait for ever, so the job stops here, naming
// the process it was for and UCX's cause, as the lost process where the
// connection failed (send_failure).  Not while the job ends (a process
// that said goodbye may be gone) or has failed already (its failure is
// being reported), nor for what the destructor cancels.
void ucx_transport::send_lost(ucs_status_t code, int peer) {
  if (closing_ || job_.failed() || job_.finishing()) {
    TMK_LOG(debug, "a send to process %d completed with %s", peer, ucs_status_string(code));
    return;
  }
  status failure = send_failure("a send's completion", code, peer);
  std::string what = "a message in flight to process " + std::to_string(peer);
  if (failure.code() == status_code::peer_lost) job_.fatal_lost(failure, what);
  job_.fatal(what + " was lost: " + failure.message());
}

namespace {
// Every active message carries tmk's header at the start of its data, UCX's
// own user header left empty.  UCX 1.13 puts a user header after the
// payload, so that a receiver of a message longer than its short protocol
// read one more cache line, the last the other process's core had just
// written (a page of the service thread's reply and the request before it:
// 0.15-0.3 us of a 1 KiB or 4 KiB round trip of about 2, alternated runs of
// `pingpong`), and UCX's short path (uct_ep_am_short_iov) gathered a
// short message from three pieces instead of two: 51 more instructions a
// send (callgrind of an 8-byte ping-pong).

// A short message, sent at once or not at all: the header and the parts
// copied into one contiguous buffer (11-16 instructions for an 8-byte
// ping-pong's).
void* send_packed(ucp_ep_h ep, const wire_header& header, std::initializer_list<byte_span> payload,
                  std::size_t payload_length, ucp_request_param_t& params) {
  alignas(wire_header) std::byte packed[immediate_maximum];
  memcpy(packed, &header, sizeof header);
  std::byte* at = packed + sizeof header;
  for (const auto& part : payload) {
    if (!part.empty()) memcpy(at, part.data(), part.size());
    at += part.size();
  }
  return ucp_am_send_nbx(ep, am_id, nullptr, 0, packed, sizeof header + payload_length, &params);
}

// The header at the start of a message's data, which then starts after
// it; false for a message that cannot hold one, or has a UCX header or
// came by rendezvous, which tmk never sends (every send is eager).
bool take_header(std::size_t header_length, void*& data, std::size_t& length,
                 const ucp_am_recv_param_t* param, wire_header& parsed) {
  if (header_length != 0 || length < sizeof parsed ||
      (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0)
    return false;
  memcpy(&parsed, data, sizeof parsed);
  data = static_cast<std::byte*>(data) + sizeof parsed;
  length -= sizeof parsed;
  return true;
}
}  // namespace

// Sends from the caller's memory and returns once UCX has read all of it:
// the caller may reuse or free it then.  The receiver is rung while it is
// behind, as for any send in flight to a request channel (progress).
status ucx_transport::post_direct(worker_state& worker, ucp_ep_h ep, int peer, channel to,
                                  std::span<ucp_dt_iov_t> iov, std::size_t total) {
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  params.flags = UCP_AM_SEND_FLAG_EAGER;
  params.cb.send = &ucx_transport::on_direct_send_done;
  params.user_data = &worker;
  params.datatype = ucp_dt_make_iov();
  void* request = ucp_am_send_nbx(ep, am_id, nullptr, 0, iov.data(), iov.size(), &params);
  if (request == nullptr) return status::ok();
  if (UCS_PTR_IS_ERR(request))
    return send_failure("ucp_am_send_nbx", UCS_PTR_STATUS(request), peer);
  ++worker.in_flight;
  ++worker.direct_in_flight;
  worker.direct_ended = UCS_OK;
  unsigned spins = 0;
  while (worker.direct_in_flight > 0) {
    if (to == channel::request) ring(peer);
    progress(worker.which);
    if (job_.failed()) {
      // UCX reads the caller's memory until the send completes, and a
      // receiver that died never makes room: the caller cannot have its
      // memory back.  A failed job ends every process; this one ends here,
      // naming the cause and this send.
      job_.fatal_lost(job_.failure(), "a send of " + std::to_string(total - sizeof(wire_header)) +
                                          " bytes to process " + std::to_string(peer));
    }
    // With more processes than cores the receiver may be waiting for this
    // core: given up at every look, as a wait does.
    if (!core_per_process() || ++spins % 4096 == 0) std::this_thread::yield();
  }
  if (worker.direct_ended != UCS_OK)
    return send_failure("ucp_am_send_nbx (completed)", worker.direct_ended, peer);
  return status::ok();
}

void ucx_transport::on_direct_send_done(void* request, ucs_status_t code, void* user_data) {
  auto& worker = *static_cast<worker_state*>(user_data);
  worker.direct_ended = code;
  --worker.in_flight;
  --worker.direct_in_flight;
  ucp_request_free(request);
}

status ucx_transport::post(channel from, int peer, channel to, const wire_header& header,
                           parts payload, std::size_t payload_length) {
  worker_state& worker = state(from);
  const std::size_t total = sizeof header + payload_length;
  const bool am = config_.ucx_path == ucx_data_path::am;
  // UCX is first asked to complete at once or not at all (FORCE_IMM_CMPL)
  // where its short protocol may take the message (immediate_maximum);
  // above, that call was refused every time, 20 ns by the clock.  Refused
  // for want of room, the message takes the rest of this function.
  auto at_once = [&](ucp_ep_h ep) -> std::optional<status> {
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL | UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_AM_SEND_FLAG_EAGER;
    void* request = send_packed(ep, header, payload, payload_length, params);
    if (request == nullptr) return status::ok();
    if (UCS_PTR_STATUS(request) == UCS_ERR_NO_RESOURCE) return std::nullopt;
    return send_failure("ucp_am_send_nbx", UCS_PTR_STATUS(request), peer);
  };
  // Most messages are sent here, before the rest: short, on an endpoint
  // made before, from a thread that need not wait for its sends in flight
  // (see below).  Taken alone, the common path cost 150 instructions a
  // message, 40 of them in endpoint()'s result (callgrind, an 8-byte
  // ping-pong).
  const bool immediate = am && total <= immediate_maximum;
  if (immediate) {
    ucp_ep_h ep = worker.endpoints[to == channel::request ? 0 : 1][static_cast<std::size_t>(peer)];
    if (ep != nullptr && (from == channel::request || worker.in_flight < max_caller_in_flight ||
                          holds_request_channel()))
      if (auto sent = at_once(ep)) return *sent;
  }
  auto ep = endpoint(worker, peer, to);
  if (!ep) return ep.error();
  // A thread that holds the request channel never waits for a receiver:
  // the service thread, and a caller holding it in a wait, where it runs
  // the handlers of requests to the caller.  Such a caller waiting for
  // room in a process whose caller did the same, each pushing more than a
  // FIFO holds to the other's request channel, waited for ever: nobody
  // drained either request worker (the service threads wait for the
  // channel, and a waiting sender progresses only its own worker; seen
  // with caller-push on 2 processes, every handler run holding the
  // channel: the watchdog stopped it after 60 s).
  const bool never_wait = from == channel::request || holds_request_channel();
  // Only the caller's worker: progress on the request worker would run
  // request handlers inside the handler that is sending.
  if (!never_wait) {
    status drained = drain(channel::reply, max_caller_in_flight - 1);
    if (!drained) return drained;
  }
  if (am) {
    if (immediate)
      if (auto sent = at_once(*ep)) return *sent;
    // Otherwise the calling thread sends from its memory all the same and
    // waits for UCX to have read it, which UCX has done before it returns
    // wherever the receiver's FIFO has room for every fragment: no pool
    // buffer and no extra copy.  The eager protocol is forced at every
    // size: through shared memory its copies pipeline on both sides and
    // beat the rendezvous round trips (64 KiB: 11 us against 72; 2 MiB:
    // 260 against 630), and a sent message no longer needs its sender
    // alive.  A copy into a send buffer first was, for more than a
    // segment, a third of the sender's copying in a stream of 32 KiB
    // messages (`perf record`), and the sender set the stream's pace:
    // 7.0-7.7 GB/s with the copy, 8.1-8.2 without (ucp_am_bw 7.9).  Within
    // a segment, the 4 KiB round trip took 0.536 us against 0.587 with the
    // copy, 1 KiB 0.431 against 0.460, and a stream of 4 KiB messages ran
    // at 29 GB/s against 23 (`pingpong`, 5 alternated runs, medians).
    // Messages from a thread that holds the request channel (never_wait)
    // are gathered instead (post_gathered) or, below gather_minimum,
    // copied into a send buffer.  Waiting for room, a handler would serve
    // nothing meanwhile (progress would run handlers inside the one
    // sending, or, inside UCX's callback, read the same message again),
    // and a handler waiting so while it holds the runtime's lock, with its
    // own caller, who empties this process's FIFO, waiting for that lock,
    // could wait for ever on another process doing the same.
    if (!never_wait) {
      ucp_dt_iov_t iov[1 + max_parts];
      iov[0] = {const_cast<wire_header*>(&header), sizeof header};
      std::size_t count = 1;
      bool all = true;
      for (const auto& part : payload) {
        if (part.empty()) continue;
        if (count == std::size(iov)) {
          all = false;
          break;
        }
        iov[count++] = {const_cast<std::byte*>(part.data()), part.size()};
      }
      if (all) return post_direct(worker, *ep, peer, to, {iov, count}, total);
    }
    if (never_wait && gather_datatype_ != 0 && payload_length >= gather_minimum)
      return post_gathered(worker, *ep, peer, to, header, payload, payload_length);
  }
  send_buffer* buffer = take_send_buffer(worker, total);
  if (buffer == nullptr) return no_send_buffer(total);
  buffer->ring_peer = to == channel::request ? peer : -1;
  memcpy(buffer->data, &header, sizeof header);
  copy_after_header(buffer->data, payload);
  if (am) return post_am(worker, *ep, peer, buffer, total);
  return post_tag(worker, *ep, peer, to, buffer, total);
}

// Sends without waiting and, where UCX finds room at once, without a copy:
// UCX packs the header, from the send buffer, and the payload, straight
// from the sender's parts (gather_pack), into the receiver's FIFO.  A send
// that outlives the call has its parts copied into its send buffer, after
// the header, before this returns, and UCX packs what is left from there:
// the worker is progressed only by the thread holding the request channel,
// the one sending, so nothing is packed between the call's return and the
// copy.  pingpong, whose server
// replies from the service thread, 9 runs alternated with the copying
// build: 4 KiB round trips 0.781 us against 0.819, 8 KiB 0.992 against
// 1.068, 16 KiB (in fragments) 4.99 against 5.24 (medians).
status ucx_transport::post_gathered(worker_state& worker, ucp_ep_h ep, int peer, channel to,
                                    const wire_header& header, parts payload,
                                    std::size_t payload_length) {
  std::size_t total = sizeof header + payload_length;
  send_buffer* buffer = take_send_buffer(worker, total);
  if (buffer == nullptr) return no_send_buffer(total);
  buffer->ring_peer = to == channel::request ? peer : -1;
  memcpy(buffer->data, &header, sizeof header);
  buffer->gather = {total, buffer->data, payload.begin(), payload.size(), nullptr};
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
  params.cb.send = &ucx_transport::on_send_done;
  params.user_data = buffer;
  params.datatype = gather_datatype_;
  params.flags = UCP_AM_SEND_FLAG_EAGER;
  void* request = ucp_am_send_nbx(ep, am_id, nullptr, 0, &buffer->gather, 1, &params);
  if (UCS_PTR_IS_PTR(request)) {
    copy_after_header(buffer->data, payload);
    buffer->gather.copied = buffer->data;
    buffer->gather.parts = nullptr;
  }
  return sent_from(worker, buffer, request, "ucp_am_send_nbx", peer);
}

// What a send from buffer became: done (the buffer back to the pool),
// failed, or in flight until on_send_done.
status ucx_transport::send_failure(const char* call, ucs_status_t code, int peer) {
  switch (code) {
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_NOT_CONNECTED:
      return status(status_code::peer_lost,
                    "lost process " + std::to_string(peer) + ": its connection failed (" + call +
                        ": " + ucs_status_string(code) + ")",
                    peer);
    default:
      return ucx_status(call, code);
  }
}

status ucx_transport::sent_from(worker_state& worker, send_buffer* buffer, void* request,
                                const char* call, int peer) {
  if (request == nullptr) {
    return_send_buffer(worker, buffer);
    return status::ok();
  }
  if (UCS_PTR_IS_ERR(request)) {
    return_send_buffer(worker, buffer);
    return send_failure(call, UCS_PTR_STATUS(request), peer);
  }
  buffer->peer = peer;
  went_in_flight(worker, buffer);
  return status::ok();
}

status ucx_transport::post_am(worker_state& worker, ucp_ep_h ep, int peer, send_buffer* buffer,
                              std::size_t length) {
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  if (buffer->memh) {
    params.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    params.memh = buffer->memh;
  }
  params.cb.send = &ucx_transport::on_send_done;
  params.user_data = buffer;
  params.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
  params.flags = UCP_AM_SEND_FLAG_EAGER;
  void* request = ucp_am_send_nbx(ep, am_id, nullptr, 0, buffer->data, length, &params);
  return sent_from(worker, buffer, request, "ucp_am_send_nbx", peer);
}

status ucx_transport::post_tag(worker_state& worker, ucp_ep_h ep, int peer, channel to,
                               send_buffer* buffer, std::size_t length) {
  std::uint64_t kind = to == channel::request ? tag_request : tag_reply;
  auto send_one = [&](void* data, std::size_t bytes, ucp_tag_t tag,
                      send_buffer* release) -> status {
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    if (release->memh) {
      params.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      params.memh = release->memh;
    }
    params.cb.send = &ucx_transport::on_send_done;
    params.user_data = release;
    return sent_from(worker, release, ucp_tag_send_nbx(ep, data, bytes, tag, &params),
                     "ucp_tag_send_nbx", peer);
  };

  int size_class = size_class_of(length);
  if (size_class < class_count)
    return send_one(buffer->data, length, make_tag(kind, size_class, rank_, 0), buffer);

  // Above the largest class: announce in a small class, then the payload by
  // rendezvous under a tag of its own.
  std::uint32_t id = worker.next_large_id++;
  std::size_t announce_length = sizeof(wire_header) + sizeof(large_announcement);
  send_buffer* announce = take_send_buffer(worker, announce_length);
  if (announce == nullptr) {
    return_send_buffer(worker, buffer);
    return no_send_buffer(announce_length);
  }
  wire_header header;
  memcpy(&header, buffer->data, sizeof header);
  header.reserved[0] = large_flag;
  auto from = static_cast<std::uint32_t>(worker.which);
  large_announcement what{length - sizeof(wire_header), id, from};
  announce->ring_peer = buffer->ring_peer;
  memcpy(announce->data, &header, sizeof header);
  memcpy(announce->data + sizeof header, &what, sizeof what);
  status sent = send_one(announce->data, announce_length,
                         make_tag(kind, size_class_of(announce_length), rank_, 0), announce);
  if (!sent) {
    return_send_buffer(worker, buffer);
    return sent;
  }
  return send_one(buffer->data + sizeof(wire_header), length - sizeof(wire_header),
                  make_tag(tag_large, static_cast<int>(from), rank_, id), buffer);
}

status ucx_transport::prepost(worker_state& worker) {
  // Counts from FAST/GM §2.2.2: o*(n-1) small request buffers, n-1 of each
  // larger request class, one of each class for replies.
  int peers = size_ > 1 ? size_ - 1 : 1;
  std::vector<int> counts(class_count);
  for (int size_class = 0; size_class < class_count; ++size_class)
    counts[size_class] = worker.which == channel::reply ? 1
                         : size_class == 0 ? static_cast<int>(config_.outstanding) * peers
                                           : peers;
  std::size_t total = 0;
  for (int size_class = 0; size_class < class_count; ++size_class)
    total += counts[size_class] * (smallest_class_bytes << size_class);
  void* address =
      mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) return errno_status("receive buffers");
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = address;
  params.length = total;
  ucp_mem_h memh = nullptr;
  ucs_status_t code = ucp_mem_map(context_, &params, &memh);
  if (code != UCS_OK) {
    munmap(address, total);
    return ucx_status("registering receive buffers", code);
  }
  worker.chunks.push_back({address, total, memh});
  auto* at = static_cast<std::byte*>(address);
  for (int size_class = 0; size_class < class_count; ++size_class)
    for (int i = 0; i < counts[size_class]; ++i) {
      auto slot = std::make_unique<preposted>();
      slot->worker = &worker;
      slot->size_class = size_class;
      slot->data = at;
      at += smallest_class_bytes << size_class;
      worker.slots.push_back(std::move(slot));
    }
  for (auto& slot : worker.slots) repost(slot.get());
  return status::ok();
}

void ucx_transport::repost(preposted* slot) {
  worker_state& worker = *slot->worker;
  std::uint64_t kind = worker.which == channel::request ? tag_request : tag_reply;
  // NO_IMM_CMPL: a message already waiting completes through the callback
  // too (UCX 1.13 does not fill recv_info on immediate completion), maybe
  // before ucp_tag_recv_nbx returns.
  ucp_request_param_t params{};
  params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  params.cb.recv = &ucx_transport::on_tag_received;
  params.user_data = slot;
  slot->posted = true;
  slot->request = nullptr;
  void* request = ucp_tag_recv_nbx(worker.worker, slot->data, smallest_class_bytes << slot->size_class,
                                   make_tag(kind, slot->size_class, 0, 0), class_mask, &params);
  if (UCS_PTR_IS_ERR(request)) {
    slot->posted = false;
    TMK_LOG(error, "reposting a receive buffer: %s", ucs_status_string(UCS_PTR_STATUS(request)));
    return;
  }
  if (!slot->posted) return;  // the callback already ran
  ucp_tag_recv_info_t info{};
  ucs_status_t code = ucp_tag_recv_request_test(request, &info);
  if (code == UCS_INPROGRESS) {
    slot->request = request;
    return;
  }
  // Completed inside the call without the callback: take it from here.
  slot->posted = false;
  slot->length = code == UCS_OK ? info.length : 0;
  slot->tag = info.sender_tag;
  ucp_request_free(request);
  worker.completed_slots.push_back(slot);
}

void ucx_transport::on_tag_received(void* request, ucs_status_t code,
                                    const ucp_tag_recv_info_t* info, void* user_data) {
  // info lives in the request: read it before the request is freed.
  auto* slot = static_cast<preposted*>(user_data);
  slot->request = nullptr;
  slot->posted = false;
  if (code == UCS_OK) {
    slot->length = info->length;
    slot->tag = info->sender_tag;
  } else {
    if (code != UCS_ERR_CANCELED) TMK_LOG(warn, "a receive failed: %s", ucs_status_string(code));
    slot->length = 0;
  }
  ucp_request_free(request);
  if (code == UCS_ERR_CANCELED) return;
  slot->worker->completed_slots.push_back(slot);
}

// The data of a large message is in (or UCX gave up on it): handled at the
// next progress, outside UCX's callback.
void ucx_transport::large_received(void* request, ucs_status_t code, large_receive* receive) {
  ucp_request_free(request);
  receive->ended = code;
  receive->worker->completed_large.push_back(receive);
}

void ucx_transport::on_large_received(void* request, ucs_status_t code, const ucp_tag_recv_info_t*,
                                      void* user_data) {
  large_received(request, code, static_cast<large_receive*>(user_data));
}

void ucx_transport::handle_tag_message(worker_state& worker, preposted* slot, std::size_t length,
                                       ucp_tag_t tag) {
  if (length < sizeof(wire_header)) {
    TMK_LOG(warn, "dropped a message of %zu bytes: too short", length);
    repost(slot);
    return;
  }
  wire_header header;
  memcpy(&header, slot->data, sizeof header);
  int sender = static_cast<int>((tag >> 32) & 0xffffff);
  if (header.reserved[0] & large_flag) {
    large_announcement what{};
    if (length >= sizeof header + sizeof what) memcpy(&what, slot->data + sizeof header, sizeof what);
    repost(slot);
    if (what.length > config_.max_message || sender >= size_ || what.from > 1) {
      TMK_LOG(warn, "dropped an announced message of %llu bytes from process %d (tag %llx)",
              static_cast<unsigned long long>(what.length), sender, (unsigned long long)tag);
      return;
    }
    header.reserved[0] = 0;
    auto* receive = new large_receive{&worker, header};
    std::byte* into;
    if (worker.which == channel::reply &&
        (receive->destination = reply_destination(header, what.length)) != nullptr)
      into = receive->destination->data();
    else
      into = receive->allocate(what.length);
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    params.cb.recv = &ucx_transport::on_large_received;
    params.user_data = receive;
    void* request = ucp_tag_recv_nbx(worker.worker, into, what.length,
                                     make_tag(tag_large, static_cast<int>(what.from), sender, what.id),
                                     full_mask, &params);
    if (UCS_PTR_IS_ERR(request)) {
      TMK_LOG(error, "receiving a large message: %s", ucs_status_string(UCS_PTR_STATUS(request)));
      delete receive;
    } else if (request == nullptr) {
      worker.completed_large.push_back(receive);
    }
    return;
  }
  byte_span payload{slot->data + sizeof header, length - sizeof header};
  if (worker.which == channel::request) {
    deliver_request(header, payload);
    repost(slot);
    return;
  }
  if (auto* destination = reply_destination(header, payload.size())) {
    if (!payload.empty()) memcpy(destination->data(), payload.data(), payload.size());
    reply_complete(header);
  }
  repost(slot);
}

// A message whose data UCX failed to deliver leaves whoever waits for it
// (its requester, or the caller its request would have answered) waiting
// for ever: the job stops, naming it.  Canceled at the close, it is dropped.
void ucx_transport::handle_large(worker_state& worker, large_receive* receive) {
  if (receive->ended != UCS_OK) {
    ucs_status_t ended = receive->ended;
    int sender = receive->header.sender;
    delete receive;
    if (ended != UCS_ERR_CANCELED && !closing_)
      job_.fatal("receiving a message from process " + std::to_string(sender) + ": " +
                 ucs_status_string(ended));
    return;
  }
  if (worker.which == channel::request)
    deliver_request(receive->header, {receive->data.get(), receive->length});
  else if (receive->destination != nullptr)
    reply_complete(receive->header);
  delete receive;
}

ucs_status_t ucx_transport::on_am_request(void* arg, const void*, size_t header_length,
                                          void* data, size_t length,
                                          const ucp_am_recv_param_t* param) {
  auto* worker = static_cast<worker_state*>(arg);
  wire_header parsed;
  if (!take_header(header_length, data, length, param, parsed)) {
    TMK_LOG(warn, "dropped a malformed request (%zu bytes, a %zu-byte UCX header)", length,
            header_length);
    return UCS_OK;
  }
  // Eager data is valid during the callback: the handler runs right here.
  worker->owner->deliver_request(parsed, {static_cast<const std::byte*>(data), length});
  return UCS_OK;
}

ucs_status_t ucx_transport::on_am_reply(void* arg, const void*, size_t header_length,
                                        void* data, size_t length,
                                        const ucp_am_recv_param_t* param) {
  ucx_transport* self = static_cast<worker_state*>(arg)->owner;
  wire_header parsed;
  void* handle = data;  // UCX's, for a lent reply
  if (!take_header(header_length, data, length, param, parsed)) {
    TMK_LOG(warn, "dropped a malformed reply (%zu bytes, a %zu-byte UCX header)", length,
            header_length);
    return UCS_OK;
  }
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0 && length >= lend_minimum &&
      length <= self->lend_maximum_ &&
      !self->closing_ &&
      self->lend_reply(parsed, {static_cast<std::byte*>(data), length}, handle))
    return UCS_INPROGRESS;
  if (self->take_reply(parsed, {static_cast<const std::byte*>(data), length})) return UCS_OK;
  // A request to the caller, a warm-up's answer, or dropped.
  if (std::vector<std::byte>* destination = self->reply_destination(parsed, length)) {
    if (length) memcpy(destination->data(), data, length);
    self->reply_complete(parsed);
  }
  return UCS_OK;
}

void ucx_transport::release_lent(void* handle) {
  ucp_am_data_release(state(channel::reply).worker, handle);
}

void ucx_transport::went_in_flight(worker_state& worker, send_buffer* buffer) {
  ++worker.in_flight;
  if (buffer->ring_peer < 0 || !doorbells()) {
    buffer->ring_peer = -1;
    return;
  }
  if (worker.in_flight_to.empty()) worker.in_flight_to.assign(size_, 0);
  ++worker.in_flight_to[buffer->ring_peer];
  ++worker.in_flight_to_requests;
}

unsigned ucx_transport::progress(channel which) {
  worker_state& worker = state(which);
  unsigned events = ucp_worker_progress(worker.worker);
  // A message still going out may be waiting for room that a receiver
  // asleep since its first part never makes: its sender rings on.
  if (worker.in_flight_to_requests > 0)
    for (int peer = 0; peer < size_; ++peer)
      if (worker.in_flight_to[peer] > 0) ring(peer);
  while (!worker.completed_slots.empty() || !worker.completed_large.empty()) {
    while (!worker.completed_slots.empty()) {
      preposted* slot = worker.completed_slots.front();
      worker.completed_slots.pop_front();
      handle_tag_message(worker, slot, slot->length, slot->tag);
      ++events;
    }
    while (!worker.completed_large.empty()) {
      large_receive* receive = worker.completed_large.front();
      worker.completed_large.pop_front();
      handle_large(worker, receive);
      ++events;
    }
  }
  return events;
}

bool ucx_transport::arm(channel which) {
  worker_state& worker = state(which);
  if (!worker.completed_slots.empty() || !worker.completed_large.empty()) return false;
  // A send still in flight (an eager message larger than the shared-memory
  // FIFO goes out as the receiver drains it) moves only with this worker's
  // progress, and nothing wakes a sleeper when the FIFO has room again: no
  // sleeping until it is out.
  if (worker.in_flight > 0) return false;
  ucs_status_t code = ucp_worker_arm(worker.worker);
  return code == UCS_OK;
}

bool ucx_transport::settled(channel which) const {
  const worker_state& worker = state(which);
  return worker.completed_slots.empty() && worker.completed_large.empty() && worker.in_flight == 0;
}

int ucx_transport::event_fd(channel which) const { return state(which).efd; }

status ucx_transport::flush_channel(channel which) { return drain(which, 0); }

// Progresses a worker until at most `left` of its sends are in flight.
status ucx_transport::drain(channel which, unsigned left) {
  worker_state& worker = state(which);
  unsigned spins = 0;
  while (worker.in_flight > left) {
    progress(which);
    if (job_.failed()) return job_.failure();
    if (++spins % 4096 == 0) std::this_thread::yield();
  }
  return status::ok();
}

}  // namespace tmk
