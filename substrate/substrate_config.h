// substrate_config.h — the substrate's immutable configuration, read once from
// the TMK_* environment (see settings.cc for the table and defaults).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "status.h"

namespace tmk {

// The largest job: ranks travel in 32-bit fields, buffers and tables are
// sized per process, and forking more than this on one host is a mistake.
inline constexpr int max_processes = 4096;

enum class backend_kind { ucx, sockets };
enum class notify_mode { interrupt, poll };
enum class ucx_data_path { am, tag };

const char* backend_name(backend_kind kind);
const char* notify_name(notify_mode mode);
const char* ucx_path_name(ucx_data_path path);

struct substrate_config {
  backend_kind backend = backend_kind::ucx;
  notify_mode notify = notify_mode::interrupt;
  ucx_data_path ucx_path = ucx_data_path::am;
  unsigned service_spin_us = 50;
  unsigned wait_spin_us = 500;
  unsigned ring_delay_us = 3;
  unsigned nudge_us = 50;
  std::size_t max_message = std::size_t{256} << 20;
  std::size_t warm_up_bytes = std::size_t{1} << 20;
  unsigned outstanding = 2;
  bool doorbell = true;  // TMK_DOORBELL: where the job allows (see transport.h)

  static result<substrate_config> from_environment();
};

enum class bind_mode { automatic, core, none };

struct launch_config {
  int nprocs = 0;                  // 0: not given (TMK_NPROCS, -n or the launcher decide)
  bind_mode bind = bind_mode::automatic;  // TMK_BIND
  std::optional<unsigned> cpu_latency_us;  // TMK_CPU_LATENCY_US
  bool all_stdout = false;         // show every process's standard output
  double connect_timeout = 30;     // seconds for every process to arrive
  double peer_timeout = 30;        // seconds of silence before a peer is lost
  std::optional<int> manual_rank;  // TMK_RANK (processes started by hand)
  std::optional<std::string> root; // TMK_ROOT host:port
  std::string secret;              // TMK_JOB_SECRET

  static result<launch_config> from_environment();
};

// Parses an -n value as given on the command line: a whole number from 1
// to max_processes.
result<int> parse_nprocs(const char* source, const std::string& value);

// tmk's own options, which follow "--" on a program's command line:
//   -n NPROCS   number of processes      -s   statistics at exit
struct command_line {
  int nprocs = 0;  // 0: not given
  bool statistics = false;
};
result<command_line> parse_command_line(int argc, char** argv);

}  // namespace tmk
