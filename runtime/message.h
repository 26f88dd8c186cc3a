// message.h — the runtime's message formats and their encoding.
//
// Every message starts with a one-byte type.  A writer appends fixed-size
// little-endian fields; a reader takes them back and checks every length
// against what is left, so that a malformed message is detected (ok()
// turns false) and dropped instead of trusted.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace tmk {

enum class message_type : std::uint8_t {
  lock_acquire = 1,    // to the lock's manager, forwarded to the last requester
  lock_grant,          // reply: the lock and the intervals the acquirer lacks
  barrier_arrive,      // to process 0: the arriver's vector time and new intervals
  barrier_depart,      // reply: the intervals the arriver lacks, garbage collection flag
  diff_request,        // to a writer: its diffs of one page for some intervals
  diff_reply,          //
  page_request,        // to process 0: a whole page
  page_reply,          //
  allocate,            // to process 0: Tmk_malloc / Tmk_sbrk
  allocate_reply,      //
  release_block,       // to process 0: Tmk_free
  release_reply,       //
  distribute,          // to every other process: bytes of a global variable
  distribute_reply,    //
  cond_enqueue,        // to the lock's manager: join a condition's waiters
  cond_wait,           // to the lock's manager: reply when signalled
  cond_signal,         // to the lock's manager: wake one or every waiter
  cond_reply,          //
  statistics,          // to process 0 at exit: one process's counters
  statistics_reply,    //
  collection_request,  // to process 0: diffs and intervals here passed TMK_GC_THRESHOLD
  collection_reply,    // reply: the garbage collection to take part in now, if any
  collection_call,     // one way, from process 0: take part in garbage collection number N
  rejected,            // reply: the request was malformed or not allowed (reason)
  push_stop,           // to a writer: stop pushing these pages' diffs to me
  push_stop_reply,     // reply: taken in; the writer's arrivals from now on push none of them
  barrier_push,        // one way, to a reader at a barrier: the writer's diffs of its pages
  wait_query,          // from process 0: your wait, and which of these waits are parked with you
  wait_answer,         //
  intervals_request,   // to a grant's or a departure's sender: the intervals that did not fit
  intervals_reply,     //
  intervals_ahead,     // to process 0: an arriver's intervals that its arrival cannot carry
};

// A diff request's flag for one page: the asker lacks no other writer's
// diffs of it, so the writer may send its diffs merged into one.
inline constexpr std::uint32_t diff_ask_merge = 1;

class message_writer {
 public:
  // Room for a lock request, grant or barrier message with a few intervals
  // is made at once: grown from empty, a message of 100 bytes took five
  // allocations, each copying what it held (a quarter of the allocations
  // of the lock benchmark's iteration, whose acquire took 2.2 times the
  // substrate's round trip).
  explicit message_writer(message_type type) { restart(type); }
  // A new message of type in the memory of the one written before (a
  // barrier's arrival and departures, a lock's request and grant): no
  // allocation.  A buffer grown past kept_capacity is given back first.
  void restart(message_type type) {
    if (bytes_.capacity() > kept_capacity) std::vector<std::byte>().swap(bytes_);
    if (bytes_.capacity() < initial_capacity) bytes_.reserve(initial_capacity);
    size_ = 0;
    put<std::uint8_t>(static_cast<std::uint8_t>(type));
  }
  template <typename T>
  void put(T value) {
    append(&value, sizeof value);
  }
  void put_bytes(std::span<const std::byte> data) {
    put<std::uint32_t>(static_cast<std::uint32_t>(data.size()));
    append(data.data(), data.size());
  }
  void put_words(std::span<const std::uint32_t> words) {
    put<std::uint32_t>(static_cast<std::uint32_t>(words.size()));
    append(words.data(), words.size_bytes());
  }
  // Words without their count, which the reader knows.
  void put_array(std::span<const std::uint32_t> words) { append(words.data(), words.size_bytes()); }
  void put_string(const std::string& text) {
    put_bytes({reinterpret_cast<const std::byte*>(text.data()), text.size()});
  }
  // Room for n bytes, zeroed, written in place later.
  std::byte* reserve(std::size_t n) {
    if (bytes_.size() - size_ < n) make_room(n);
    std::byte* at = bytes_.data() + size_;
    memset(at, 0, n);
    size_ += n;
    return at;
  }
  // Capacity for more bytes at once.  A message of diffs grown by
  // doubling copies what it holds at each step: a departure of 148 kB
  // (FFT's barrier on 2 processes) copied 256 kB more that way.
  void room_for(std::size_t more) { bytes_.reserve(size_ + more); }
  // The message ends after its first n bytes.
  void truncate(std::size_t n) {
    if (n < size_) size_ = n;
  }
  std::size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {bytes_.data(), size_}; }
  // Where the message's bytes are, to write a field reserved before.
  std::byte* data() { return bytes_.data(); }
  // The message, handed over whole; the writer is empty until restarted.
  std::vector<std::byte> take() {
    bytes_.resize(size_);
    std::vector<std::byte> message = std::move(bytes_);
    bytes_.clear();
    size_ = 0;
    return message;
  }

 private:
  // Bytes past size_ up to bytes_.size() were zeroed once and are written
  // over: a field of a few bytes is a copy, not a call into the vector to
  // grow it and zero them (a lock request of 4 fields took 30 ns that way
  // and takes 7 this way: diff_bench's message_lock_request).
  void append(const void* from, std::size_t n) {
    if (bytes_.size() - size_ < n) make_room(n);
    if (n != 0) memcpy(bytes_.data() + size_, from, n);
    size_ += n;
  }
  // Spare bytes for n more: at most slack_bytes past them, so that a
  // capacity made for a large message (room_for) is not zeroed ahead of
  // the copies that fill it.
  void make_room(std::size_t n) {
    std::size_t want = size_ + n;
    if (want > bytes_.capacity()) bytes_.reserve(std::max(want, 2 * bytes_.capacity()));
    bytes_.resize(std::max(want, std::min(bytes_.capacity(), want + slack_bytes)));
  }
  static constexpr std::size_t initial_capacity = 256;
  static constexpr std::size_t slack_bytes = 256;
  static constexpr std::size_t kept_capacity = 64 * 1024;
  std::vector<std::byte> bytes_;
  std::size_t size_ = 0;  // bytes of the message, at the start of bytes_
};

class message_reader {
 public:
  explicit message_reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  // The type byte; ok() is false if the message is empty.
  message_type type() {
    std::uint8_t value = 0;
    get(value);
    return static_cast<message_type>(value);
  }
  template <typename T>
  bool get(T& value) {
    if (!ok_ || bytes_.size() - at_ < sizeof value) return fail();
    memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return true;
  }
  template <typename T>
  T take() {
    T value{};
    get(value);
    return value;
  }
  // A length-prefixed byte string, as a view into the message.
  std::span<const std::byte> get_bytes() {
    std::uint32_t length = 0;
    if (!get(length) || bytes_.size() - at_ < length) {
      fail();
      return {};
    }
    auto view = bytes_.subspan(at_, length);
    at_ += length;
    return view;
  }
  // A length-prefixed array of words, at most max_count long.
  bool get_words(std::vector<std::uint32_t>& words, std::size_t max_count) {
    std::uint32_t count = 0;
    if (!get(count) || count > max_count || (bytes_.size() - at_) / 4 < count) return fail();
    words.resize(count);
    if (count) memcpy(words.data(), bytes_.data() + at_, count * 4u);
    at_ += count * 4u;
    return true;
  }
  std::string get_string() {
    auto view = get_bytes();
    return std::string(reinterpret_cast<const char*>(view.data()), view.size());
  }
  std::size_t remaining() const { return bytes_.size() - at_; }
  // What is left to read.
  std::span<const std::byte> rest() const { return bytes_.subspan(at_); }
  bool ok() const { return ok_; }
  bool fail() {
    ok_ = false;
    return false;
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace tmk
