#include "settings.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tmk {

namespace {

const setting_description substrate_table[] = {
    {"TMK_NPROCS", "1", "number of processes when started on one host (same as -n)"},
    {"TMK_SUBSTRATE", "ucx", "communication substrate: ucx or sockets"},
    {"TMK_UCX_PATH", "am", "UCX data path: am (active messages) or tag (preposted tag receives)"},
    {"TMK_NOTIFY", "interrupt",
     "service thread: interrupt (sleep on the event fd after a short spin) or poll (busy-poll)"},
    {"TMK_SERVICE_SPIN_US", "50",
     "how long the service thread spins for the next request before sleeping, while its "
     "process waits (an eighth of it while the process computes; microseconds)"},
    {"TMK_WAIT_SPIN_US", "500",
     "time a caller spins for its reply before blocking on the event fd, and again after each "
     "wake-up that does not complete the reply (microseconds; when the host's processes "
     "outnumber its cores, the caller yields its core between looks)"},
    {"TMK_DOORBELL", "on",
     "how a request wakes a sleeping service thread over UCX when every process of the job "
     "runs on this host (forked by process 0, or all here under mpirun): "
     "on (a flag and futex in memory the processes share, rung only when nobody polls) or off "
     "(UCX's event fd, armed before each sleep)"},
    {"TMK_RING_DELAY_US", "3",
     "with doorbells, how long a waiting caller holds back the ring for its request to a "
     "process whose service thread sleeps, in case a caller there takes the request channel "
     "first (microseconds; 0: ring at once)"},
    {"TMK_NUDGE_US", "50",
     "with doorbells, how long a caller waits for a reply before it sends SIGURG to the calling "
     "thread of the process it asked, if that thread holds its core while the process's service "
     "thread is awake or rung, so that it yields the core (microseconds; 0: never)"},
    {"TMK_MAX_MESSAGE", "256M", "largest message the substrate accepts (bytes, K/M/G suffix)"},
    {"TMK_WARM_UP", "1M",
     "largest message exchanged at start-up to open connections and touch buffers before the "
     "program's first exchanges (0: none)"},
    {"TMK_OUTSTANDING", "2",
     "outstanding small requests per peer that preposted receive buffers cover"},
    {"TMK_CONNECT_TIMEOUT", "30", "seconds to wait for every process to arrive at start-up"},
    {"TMK_PEER_TIMEOUT", "30",
     "seconds of silence after which a peer is declared lost; a request handler that has "
     "not returned in twice this (10 s at least) stops the job"},
    {"TMK_STDOUT", "0", "whose standard output is shown: 0 (process 0 only) or all"},
    {"TMK_BIND", "auto",
     "pin each process to a core: auto (when the host has a core for each), core, or none"},
    {"TMK_CPU_LATENCY_US", "",
     "wake-up latency the job asks of its hosts' idle CPUs while it runs (microseconds, "
     "through /dev/cpu_dma_latency, which needs root; 0: idle CPUs poll instead of halting, "
     "so that a sleeping service thread wakes in microseconds; unset: no request)"},
    {"TMK_LOG_LEVEL", "warn", "diagnostics on standard error: error, warn, info, debug, trace"},
    {"TMK_RANK", "", "this process's rank when processes are started by hand (with TMK_ROOT)"},
    {"TMK_ROOT", "", "host:port where process 0 listens when processes are started by hand"},
    {"TMK_JOB_SECRET", "", "secret a process must present to join a job started by hand"},
};

std::string expectation(const char* name, const std::string& value, const std::string& expected) {
  return std::string(name) + "=" + value + ": " + expected;
}

}  // namespace

std::span<const setting_description> substrate_settings() { return substrate_table; }

std::optional<std::string> setting_value(const char* name) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

result<std::uint64_t> parse_unsigned(const char* name, const std::string& value,
                                     std::uint64_t min, std::uint64_t max) {
  std::string range = "expected a whole number from " + std::to_string(min) + " to " +
                      std::to_string(max);
  if (value.empty() || !isdigit(static_cast<unsigned char>(value[0])))
    return status(status_code::invalid_argument, expectation(name, value, range));
  errno = 0;
  char* end = nullptr;
  unsigned long long parsed = strtoull(value.c_str(), &end, 10);
  if (errno != 0 || end == value.c_str() || *end != '\0' || parsed < min || parsed > max)
    return status(status_code::invalid_argument, expectation(name, value, range));
  return static_cast<std::uint64_t>(parsed);
}

result<std::uint64_t> parse_size(const char* name, const std::string& value, std::uint64_t min,
                                 std::uint64_t max) {
  std::string range = "expected a size from " + std::to_string(min) + " to " +
                      std::to_string(max) + " bytes (suffix K, M or G allowed)";
  if (value.empty() || !isdigit(static_cast<unsigned char>(value[0])))
    return status(status_code::invalid_argument, expectation(name, value, range));
  errno = 0;
  char* end = nullptr;
  unsigned long long parsed = strtoull(value.c_str(), &end, 10);
  if (errno != 0 || end == value.c_str())
    return status(status_code::invalid_argument, expectation(name, value, range));
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, ++end;
  else if (*end == 'M' || *end == 'm') shift = 20, ++end;
  else if (*end == 'G' || *end == 'g') shift = 30, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || (shift && parsed > (~0ull >> shift)))
    return status(status_code::invalid_argument, expectation(name, value, range));
  parsed <<= shift;
  if (parsed < min || parsed > max)
    return status(status_code::invalid_argument, expectation(name, value, range));
  return static_cast<std::uint64_t>(parsed);
}

result<double> parse_seconds(const char* name, const std::string& value, double min, double max) {
  // As a person writes them: 0.2 and 86400, not 0.200000 and 86400.000000.
  auto seconds = [](double value) {
    char text[32];
    snprintf(text, sizeof text, "%g", value);
    return std::string(text);
  };
  std::string range = "expected seconds from " + seconds(min) + " to " + seconds(max);
  errno = 0;
  char* end = nullptr;
  double parsed = strtod(value.c_str(), &end);
  if (value.empty() || isspace(static_cast<unsigned char>(value[0])) || errno != 0 || end == value.c_str() || *end != '\0' ||
      !std::isfinite(parsed) || parsed < min || parsed > max)
    return status(status_code::invalid_argument, expectation(name, value, range));
  return parsed;
}

result<int> parse_choice(const char* name, const std::string& value,
                         std::span<const char* const> choices) {
  std::string expected = "expected one of";
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (value == choices[i]) return static_cast<int>(i);
    expected += (i ? ", " : " ") + std::string(choices[i]);
  }
  return status(status_code::invalid_argument, expectation(name, value, expected));
}

result<bool> parse_bool(const char* name, const std::string& value) {
  static const char* const words[] = {"0", "1", "no", "yes", "false", "true", "off", "on"};
  auto choice = parse_choice(name, value, words);
  if (!choice) return choice.error();
  return (*choice % 2) == 1;
}

}  // namespace tmk
