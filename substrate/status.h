// status.h — how internal calls report failure.
//
// Internal calls return a status (or a result<T>, a value or a status); the
// first place that detects an error fills in the cause, callers add context
// or pass it up.  Only the public Tmk_* calls turn a status into a job-wide
// stop.  A peer_lost status names the lost rank so that every wait that
// depends on another process can say which one it was waiting for.
#pragma once

#include <cassert>
#include <memory>
#include <string>
#include <utility>
#include <variant>

namespace tmk {

enum class status_code {
  ok,
  invalid_argument,   // bad option, bad id, bad size: the user's input
  message_too_large,  // above the configured maximum message size
  peer_lost,          // a peer died, disconnected or stopped answering
  timeout,            // a peer never arrived within the configured time; a wait's patience ran out
  protocol_error,     // a malformed or unexpected message
  system_error,       // a failed system call (errno text in the message)
  transport_error,    // the communication library failed
  exhausted,          // out of memory, buffers, ids
  interrupted,        // an interruptible wait was interrupted (the request still pending)
};

// Every message passes several of these up the substrate's layers: the
// message of a failure is kept apart, so that an ok status is two words
// to make, move and destroy (a std::string member cost an 8-byte ping-pong
// about 90 instructions a round trip, callgrind).
class status {
 public:
  status() = default;
  status(status_code code, std::string message, int peer = -1)
      : code_(code), peer_(peer), message_(std::make_unique<std::string>(std::move(message))) {}
  status(const status& other)
      : code_(other.code_), peer_(other.peer_), message_(copy_of(other.message_)) {}
  status& operator=(const status& other) {
    if (this != &other) {
      code_ = other.code_;
      peer_ = other.peer_;
      message_ = copy_of(other.message_);
    }
    return *this;
  }
  status(status&&) noexcept = default;
  status& operator=(status&&) noexcept = default;

  static status ok() { return {}; }

  bool is_ok() const { return code_ == status_code::ok; }
  explicit operator bool() const { return is_ok(); }
  status_code code() const { return code_; }
  // The rank this status is about (the lost or missing peer), or -1.
  int peer() const { return peer_; }
  const std::string& message() const { return message_ ? *message_ : no_message; }

  // Prefixes the message with where it happened: "while X: <message>".
  status& context(const std::string& what) {
    if (!is_ok()) message_ = std::make_unique<std::string>(what + ": " + message());
    return *this;
  }

 private:
  static std::unique_ptr<std::string> copy_of(const std::unique_ptr<std::string>& message) {
    return message ? std::make_unique<std::string>(*message) : nullptr;
  }
  static inline const std::string no_message;

  status_code code_ = status_code::ok;
  int peer_ = -1;
  std::unique_ptr<std::string> message_;
};

// A value or the status that explains why there is none.
template <typename T>
class result {
 public:
  result(T value) : value_(std::move(value)) {}
  result(status error) : value_(std::move(error)) { assert(!std::get<status>(value_).is_ok()); }

  bool is_ok() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return is_ok(); }
  T& value() { return std::get<T>(value_); }
  const T& value() const { return std::get<T>(value_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const status& error() const { return std::get<status>(value_); }

 private:
  std::variant<T, status> value_;
};

// Builds a system_error status from errno: "<what>: <strerror>".
status errno_status(const std::string& what);

}  // namespace tmk
