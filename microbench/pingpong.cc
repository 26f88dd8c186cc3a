// pingpong — the substrate's round trip and bandwidth between two processes.
//
//   pingpong [--sizes 8,64,4096] [--iterations N] [--repeat R] [--gap-us G]
//            [--stream-count M] [--csv] -- -n 2
//
// Process 0 sends a request of each size to process 1, whose service thread
// replies with as many bytes; the round trip is the median over R batches
// of each batch's mean.  The caller takes each reply as the substrate
// hands it over (lent in UCX's receive buffer from 256 B up) and checks its
// length, not its bytes, as ucx_perftest's ucp_am_lat reads none of the
// data it receives.  With --gap-us, consecutive requests are spaced by
// G microseconds (the caller busy-waits) so that the service thread has
// gone to sleep when the next one arrives.  The bandwidth is that of a
// stream of M one-way messages of each size, closed by one round trip.
// This is the one microbenchmark below the public API: it measures the
// substrate itself.  TMK_SUBSTRATE, TMK_UCX_PATH and TMK_NOTIFY select what
// is measured.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "substrate_config.h"
#include "job.h"
#include "log.h"
#include "transport.h"

namespace {

using namespace tmk;
using clock_type = std::chrono::steady_clock;

struct options {
  std::vector<std::size_t> sizes{8, 64, 256, 1024, 4096, 8192, 16384, 32768};
  int iterations = 2000;
  int repeat = 7;
  double gap_us = 0;
  int stream_count = 2000;
  bool csv = false;
};

int usage(const std::string& why) {
  fprintf(stderr,
          "pingpong: %s\n"
          "usage: pingpong [--sizes LIST] [--iterations N] [--repeat R] [--gap-us G]\n"
          "                [--stream-count M] [--csv] -- -n 2\n",
          why.c_str());
  return 2;
}

// A number from low to high, whole if whole: false for anything else
// (garbage, trailing text, out of range, inf, nan).
bool parse_number(const char* text, double low, double high, bool whole, double& out) {
  char* end = nullptr;
  out = strtod(text, &end);
  return end != text && *end == '\0' && out >= low && out <= high &&
         (!whole || out == static_cast<double>(static_cast<long long>(out)));
}

// The numeric options, each with its range and where it goes.
struct numeric_option {
  const char* name;
  double low, high;
  bool whole;
  void (*set)(options& chosen, double value);
};
const numeric_option numeric_options[] = {
    {"--iterations", 1, 1e9, true,
     [](options& chosen, double value) { chosen.iterations = static_cast<int>(value); }},
    {"--repeat", 1, 1000, true,
     [](options& chosen, double value) { chosen.repeat = static_cast<int>(value); }},
    {"--gap-us", 0, 1e6, false, [](options& chosen, double value) { chosen.gap_us = value; }},
    {"--stream-count", 0, 1e9, true,
     [](options& chosen, double value) { chosen.stream_count = static_cast<int>(value); }},
};

const numeric_option* find_numeric(const std::string& word) {
  for (const numeric_option& option : numeric_options)
    if (word == option.name) return &option;
  return nullptr;
}

void busy_wait_us(double us) {
  auto until = clock_type::now() + std::chrono::nanoseconds(static_cast<long>(us * 1000));
  while (clock_type::now() < until) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  options chosen;
  for (int at = 1; at < argc && std::string(argv[at]) != "--"; ++at) {
    std::string word = argv[at];
    double value = 0;
    auto next = [&]() -> const char* { return at + 1 < argc ? argv[++at] : ""; };
    if (word == "--csv") {
      chosen.csv = true;
    } else if (word == "--sizes") {
      chosen.sizes.clear();
      std::string list = next();
      for (std::size_t from = 0; from < list.size();) {
        std::size_t comma = list.find(',', from);
        if (comma == std::string::npos) comma = list.size();
        double size = 0;
        if (!parse_number(list.substr(from, comma - from).c_str(), 0, 1 << 26, true, size))
          return usage("--sizes " + list + ": expected byte counts from 0 to 67108864, "
                       "separated by commas");
        chosen.sizes.push_back(static_cast<std::size_t>(size));
        from = comma + 1;
      }
      if (chosen.sizes.empty()) return usage("empty size list");
    } else if (const numeric_option* option = find_numeric(word)) {
      const char* text = next();
      if (!parse_number(text, option->low, option->high, option->whole, value)) {
        char limits[96];
        snprintf(limits, sizeof limits, "expected a %s from %.0f to %.0f",
                 option->whole ? "whole number" : "number", option->low, option->high);
        return usage(word + " '" + text + "': " + limits);
      }
      option->set(chosen, value);
    } else {
      return usage("bad option '" + word + "'");
    }
  }
  auto command = parse_command_line(argc, argv);
  if (!command) return usage(command.error().message());
  auto launch = launch_config::from_environment();
  if (!launch) return usage(launch.error().message());
  auto config = substrate_config::from_environment();
  if (!config) return usage(config.error().message());
  if (command->nprocs == 0 && launch->nprocs == 0) command->nprocs = 2;

  auto started = job::start(*launch, command->nprocs);
  if (!started) {
    log_message(log_level::error, "start-up: %s", started.error().message().c_str());
    return 1;
  }
  std::unique_ptr<job> the_job = std::move(*started);
  if (the_job->size() != 2) {
    if (the_job->rank() == 0) log_message(log_level::error, "pingpong runs on exactly 2 processes");
    return 2;
  }
  auto created = transport::create(*the_job, *config);
  if (!created) the_job->fatal(created.error().message());
  std::unique_ptr<transport> link = std::move(*created);
  the_job->start_monitor();

  // Process 1 answers: a request carries the reply length.
  std::vector<std::byte> reply_body(std::max<std::size_t>(
      *std::max_element(chosen.sizes.begin(), chosen.sizes.end()), 8));
  link->start([&](const incoming_request& incoming) {
    if (incoming.one_way) return;
    std::uint64_t length = 0;
    if (incoming.payload.size() >= sizeof length) memcpy(&length, incoming.payload.data(), sizeof length);
    link->reply(incoming.token(), {{reply_body.data(), std::min<std::size_t>(length, reply_body.size())}});
  });

  int exit_status = 0;
  if (the_job->rank() == 0) {
    auto fail = [&](const status& why, const char* what) {
      if (why.code() == status_code::peer_lost) the_job->fatal_lost(why, what);
      the_job->fatal(std::string(what) + ": " + why.message());
    };
    if (chosen.csv)
      printf("size_bytes,rtt_us_median,bandwidth_MBps\n");
    else
      printf("# pingpong: %s, TMK_NOTIFY=%s, gap %.0f us, %d x %d round trips per size\n"
             "# receive buffers preposted: %zu B at n=2, %zu B at n=256, %zu B at n=1024\n"
             "%10s %14s %16s\n",
             link->describe().c_str(), notify_name(config->notify), chosen.gap_us,
             chosen.repeat, chosen.iterations, link->footprint(2).total(),
             link->footprint(256).total(), link->footprint(1024).total(), "size_B",
             "rtt_us_median", "bandwidth_MBps");
    std::vector<std::byte> body(reply_body.size() + sizeof(std::uint64_t));
    reply_payload reply;
    for (std::size_t size : chosen.sizes) {
      // The request is one contiguous part whose first word says how many
      // bytes to reply with.
      std::uint64_t length = size;
      std::size_t request_bytes = std::max(size, sizeof length);
      memcpy(body.data(), &length, sizeof length);
      auto round_trip = [&] {
        auto id = link->send_request(1, {{body.data(), request_bytes}});
        if (!id) fail(id.error(), "request");
        status waited = link->wait_reply(*id, reply);
        if (!waited) fail(waited, "waiting for a reply");
        if (reply.size() != size)
          the_job->fatal("a reply of " + std::to_string(reply.size()) + " bytes, not " +
                         std::to_string(size));
      };
      for (int i = 0; i < std::min(chosen.iterations, 200); ++i) round_trip();  // warm-up
      std::vector<double> batches;
      for (int batch = 0; batch < chosen.repeat; ++batch) {
        double total_us = 0;
        if (chosen.gap_us > 0) {
          // Spaced requests: time each round trip alone, not the gap.
          for (int i = 0; i < chosen.iterations; ++i) {
            busy_wait_us(chosen.gap_us);
            auto start = clock_type::now();
            round_trip();
            total_us += std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
          }
        } else {
          // Back to back: time the batch, as ucx_perftest does.
          auto start = clock_type::now();
          for (int i = 0; i < chosen.iterations; ++i) round_trip();
          total_us = std::chrono::duration<double, std::micro>(clock_type::now() - start).count();
        }
        batches.push_back(total_us / chosen.iterations);
      }
      std::sort(batches.begin(), batches.end());
      double rtt = batches[batches.size() / 2];

      std::vector<double> rates;
      for (int batch = 0; batch < std::min(chosen.repeat, 5) && chosen.stream_count > 0; ++batch) {
        auto start = clock_type::now();
        for (int i = 0; i < chosen.stream_count; ++i) {
          status sent = link->send_one_way(1, {{body.data(), request_bytes}});
          if (!sent) fail(sent, "streaming");
        }
        round_trip();
        double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
        rates.push_back(static_cast<double>(std::max(size, sizeof length)) * chosen.stream_count /
                        seconds / 1e6);
      }
      std::sort(rates.begin(), rates.end());
      double rate = rates.empty() ? 0 : rates[rates.size() / 2];
      if (chosen.csv)
        printf("%zu,%.3f,%.1f\n", size, rtt, rate);
      else
        printf("%10zu %14.3f %16.1f\n", size, rtt, rate);
      fflush(stdout);
    }
  }
  link->set_caller_idle(true);
  exit_status = the_job->finish(exit_status);
  link->stop();
  link.reset();
  the_job.reset();
  return exit_status;
}
