// transport_test — the substrate, multi-process: every scenario of
// substrate_worker on 1, 2, 3, 4 and 8 processes, with every backend and
// data path, in both notification modes; failures (a killed peer, a peer
// that never arrives, bad options) end every process promptly with a
// message that names the cause.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "run_program.h"

namespace {

using tmk::testing::free_root;
using tmk::testing::program_result;
using tmk::testing::run_by_hand;
using tmk::testing::run_program;

struct backend {
  const char* name;  // for test names
  const char* substrate;
  const char* ucx_path;
  const char* doorbell = "on";
};
// ucx_am_armed: UCX's own wake-up (an armed event fd) instead of the
// doorbells a job on one host uses, as across hosts.
const backend backends[] = {{"ucx_am", "ucx", "am"},
                            {"ucx_tag", "ucx", "tag"},
                            {"sockets", "sockets", "am"},
                            {"ucx_am_armed", "ucx", "am", "off"}};

program_result run_worker(const std::string& scenario, int nprocs, const backend& with,
                          const char* notify, std::vector<std::pair<std::string, std::string>> env = {},
                          std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{SUBSTRATE_WORKER, "--scenario", scenario};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", "-n", std::to_string(nprocs)});
  env.push_back({"TMK_SUBSTRATE", with.substrate});
  env.push_back({"TMK_UCX_PATH", with.ucx_path});
  env.push_back({"TMK_NOTIFY", notify});
  env.push_back({"TMK_DOORBELL", with.doorbell});
  return run_program(argv, env, 120);
}

std::string describe(const program_result& result) {
  return "exit " + std::to_string(result.exit_code) + " signal " + std::to_string(result.signal) +
         (result.timed_out ? " TIMED OUT" : "") + "\nstdout:\n" + result.out + "stderr:\n" + result.err;
}

using scenario_parameters = std::tuple<std::string, int, int, std::string>;

class transport_scenario : public ::testing::TestWithParam<scenario_parameters> {};

TEST_P(transport_scenario, passes_on_every_process) {
  auto [scenario, nprocs, backend_index, notify] = GetParam();
  const backend& with = backends[backend_index];
  program_result result = run_worker(scenario, nprocs, with, notify.c_str());
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  EXPECT_NE(result.out.find(scenario + ": passed on " + std::to_string(nprocs) + " processes"),
            std::string::npos)
      << describe(result);
  // UCX names at exit every receive buffer it lent and never got back.
  EXPECT_EQ(result.err.find("was not returned to mpool"), std::string::npos) << describe(result);
  // A sleeping service thread never misses the ring of a message sent with one.
  EXPECT_EQ(result.err.find("waited a second for its doorbell"), std::string::npos) << describe(result);
  EXPECT_FALSE(result.stragglers) << "processes outlived the job";
}

std::string scenario_name(const ::testing::TestParamInfo<scenario_parameters>& info) {
  auto [scenario, nprocs, backend_index, notify] = info.param;
  std::string name = scenario + "_" + std::to_string(nprocs) + "procs_" + backends[backend_index].name + "_" + notify;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    interrupt, transport_scenario,
    ::testing::Combine(::testing::Values("all-pairs", "sizes", "forward", "both-threads", "burst", "stream", "deferred",
                                         "interrupted", "lent"),
                       ::testing::Values(1, 2, 3, 4, 8), ::testing::Values(0, 1, 2),
                       ::testing::Values("interrupt")),
    scenario_name);

// Both threads of every process sending more than a kernel socket holds,
// each to a process whose own threads send to it at the same time.
INSTANTIATE_TEST_SUITE_P(
    crossing, transport_scenario,
    ::testing::Combine(::testing::Values("crossing"), ::testing::Values(2, 3, 8),
                       ::testing::Values(0, 1, 2), ::testing::Values("interrupt")),
    scenario_name);

// Between processes only: one process has no peer to hand the channel to
// or to send its caller a request.
INSTANTIATE_TEST_SUITE_P(
    interrupt_peers, transport_scenario,
    ::testing::Combine(::testing::Values("hand-back", "caller-requests", "caller-push", "just-left-wait",
                                         "unrung", "held-waits", "suspended"),
                       ::testing::Values(2, 3, 4, 8),
                       ::testing::Values(0, 1, 2), ::testing::Values("interrupt")),
    scenario_name);

// A service thread whose sleep times out with one-way messages waiting
// that were sent unrung (its caller computing for over a second) reports
// no missed ring: only a request waits for one.
INSTANTIATE_TEST_SUITE_P(
    doorbell_idle, transport_scenario,
    ::testing::Combine(::testing::Values("unrung-idle"), ::testing::Values(2),
                       ::testing::Values(0, 1), ::testing::Values("interrupt")),
    scenario_name);

INSTANTIATE_TEST_SUITE_P(
    armed, transport_scenario,
    ::testing::Combine(::testing::Values("all-pairs", "sizes", "forward", "burst", "stream", "deferred", "interrupted", "lent",
                                         "hand-back", "caller-requests", "just-left-wait", "unrung", "held-waits",
                                         "suspended"),
                       ::testing::Values(2, 3, 8), ::testing::Values(3), ::testing::Values("interrupt")),
    scenario_name);

// A forked job over UCX wakes service threads by doorbell unless told not
// to, and says so in its description; the sockets backend never does.
TEST(transport_doorbell, forked_ucx_job_rings_doorbells) {
  for (int index : {0, 1, 2, 3}) {
    program_result result = run_worker("all-pairs", 2, backends[index], "interrupt");
    EXPECT_EQ(result.exit_code, 0) << describe(result);
    bool rings = result.out.find(", doorbells") != std::string::npos;
    EXPECT_EQ(rings, index == 0 || index == 1) << backends[index].name << "\n" << describe(result);
  }
  program_result chosen = run_worker("all-pairs", 2, backends[0], "interrupt", {{"UCX_TLS", "posix,self"}});
  EXPECT_EQ(chosen.exit_code, 0) << describe(chosen);
  EXPECT_EQ(chosen.out.find(", doorbells"), std::string::npos)
      << "UCX_TLS chosen by the user: UCX's own wake-up\n" << describe(chosen);
  program_result polled = run_worker("all-pairs", 2, backends[0], "poll");
  EXPECT_EQ(polled.exit_code, 0) << describe(polled);
  EXPECT_EQ(polled.out.find(", doorbells"), std::string::npos) << describe(polled);
}

// UCX's shared-memory FIFO would garble messages longer than 64 KiB: the
// job refuses such a segment size, naming the setting, instead of losing
// a request and waiting for ever.
TEST(transport_bad_input, shared_memory_segment_of_64k_is_refused) {
  for (const auto& [name, value] :
       {std::pair{"UCX_MM_SEG_SIZE", "64k"}, {"UCX_POSIX_SEG_SIZE", "70000"}}) {
    program_result result = run_worker("sizes", 2, backends[0], "interrupt", {{name, value}});
    EXPECT_NE(result.exit_code, 0) << describe(result);
    std::string named = std::string(name) + "=" + value + ": UCX's shared-memory transports garble";
    EXPECT_NE(result.err.find(named), std::string::npos) << describe(result);
    EXPECT_FALSE(result.stragglers) << "processes outlived the job";
  }
  program_result below =
      run_worker("sizes", 2, backends[0], "interrupt", {{"UCX_MM_SEG_SIZE", "65000"}});
  EXPECT_EQ(below.exit_code, 0) << describe(below);
}

TEST(transport_bad_input, unknown_doorbell_choice_is_named) {
  program_result result = run_worker("all-pairs", 2, {"ucx_am", "ucx", "am", "maybe"}, "interrupt");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("TMK_DOORBELL=maybe: expected one of on, off"), std::string::npos)
      << describe(result);
}

// TMK_CPU_LATENCY_US asks this host's idle CPUs, through the kernel's PM
// QoS file, to wake within that many microseconds while the job runs, and
// the request ends with the job.  Where this process cannot read that
// file, the job cannot write it either (it is root's): the job runs all the
// same and process 0 says why.  A value that is not a number of
// microseconds stops the job, naming it.
TEST(transport_settings, cpu_latency_is_asked_while_the_job_runs) {
  auto current = []() -> std::optional<std::int32_t> {
    int fd = open("/dev/cpu_dma_latency", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::int32_t value = 0;
    bool got = read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value);
    close(fd);
    return got ? std::optional<std::int32_t>(value) : std::nullopt;
  };
  std::optional<std::int32_t> before = current();
  for (int index : {0, 2}) {
    program_result result =
        run_worker("cpu-latency", 2, backends[index], "interrupt", {{"TMK_CPU_LATENCY_US", "7"}});
    EXPECT_EQ(result.exit_code, 0) << describe(result);
    if (before) {
      std::string expected = "cpu latency: " + std::to_string(std::min<std::int32_t>(*before, 7)) + "\n";
      EXPECT_NE(result.out.find(expected), std::string::npos) << describe(result);
      EXPECT_EQ(current(), before) << "the request outlived the job";
    } else {
      EXPECT_NE(result.err.find("TMK_CPU_LATENCY_US=7: cannot ask for it"), std::string::npos)
          << describe(result);
    }
  }
  program_result bad =
      run_worker("all-pairs", 2, backends[0], "interrupt", {{"TMK_CPU_LATENCY_US", "soon"}});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("TMK_CPU_LATENCY_US=soon: expected a whole number from 0 to 1000000"),
            std::string::npos)
      << describe(bad);
}

// TMK_BIND: by default (auto) each process of a forked job is held, with
// every thread it runs, to one of the CPUs it could use, process k to the
// k-th modulo their number, when the processes fill the CPUs evenly (one
// each, or 4 on 2); otherwise (3 on 2) auto leaves them where they were,
// as TMK_BIND=none always does, and TMK_BIND=core pins them all the same.
// The test holds itself to two CPUs first (its jobs inherit that), so
// what is expected does not depend on the machine's size.
TEST(transport_settings, processes_are_pinned_when_they_fill_the_cpus_evenly) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu)
    if (CPU_ISSET(cpu, &before)) cpus.push_back(cpu);
  cpu_set_t two;
  CPU_ZERO(&two);
  for (int cpu : cpus) CPU_SET(cpu, &two);
  ASSERT_EQ(sched_setaffinity(0, sizeof two, &two), 0);
  std::string both = std::to_string(cpus.front());
  if (cpus.size() == 2)
    both += (cpus[1] == cpus[0] + 1 ? "-" : ",") + std::to_string(cpus[1]);
  auto pinned = [&](int process) {
    return cpus.size() < 2 ? both : std::to_string(cpus[process % 2]);
  };
  auto expect_placement = [&](int nprocs, const char* bind, auto expected) {
    // Unset for the default, whatever the environment running the test says.
    std::vector<std::pair<std::string, std::string>> env{{"TMK_BIND", bind ? bind : ""}};
    program_result result = run_worker("placement", nprocs, backends[0], "interrupt", env);
    EXPECT_EQ(result.exit_code, 0) << describe(result);
    for (int process = 0; process < nprocs; ++process) {
      std::string line = "placement: process " + std::to_string(process) + " on " + expected(process) + "\n";
      EXPECT_NE(result.err.find(line), std::string::npos)
          << "TMK_BIND=" << (bind ? bind : "(default)") << ", " << nprocs
          << " processes: expected " << line << describe(result);
    }
  };
  expect_placement(2, nullptr, pinned);
  expect_placement(2, "auto", pinned);
  expect_placement(2, "none", [&](int) { return both; });
  expect_placement(3, nullptr, [&](int) { return both; });
  expect_placement(3, "core", pinned);
  expect_placement(4, nullptr, pinned);
  expect_placement(4, "none", [&](int) { return both; });
  sched_setaffinity(0, sizeof before, &before);
}

// A process whose caller computes outside any wait, entering the
// substrate now and then (as the runtime does at each fault), serves there
// the requests its sleeping service thread was rung for while that thread
// does not get a core: with doorbells, all 20 echoes on the calling
// thread; without them, none, as serve_pending leaves the channel to the
// service thread.  With doorbells the service thread is held in a signal
// handler (--park-service): left to the scheduler, or starved with
// SCHED_IDLE on the caller's core, it took the core at times and served
// the echoes itself (0 of 20 on the caller in about one ctest run in ten,
// 2026-11-29).  Nudges off: a nudge makes the computing caller yield its
// core to its service thread; the nudge tests below cover them.
TEST(transport_serve_pending, a_computing_caller_serves_what_its_service_thread_was_rung_for) {
  constexpr int echoes = 20;
  for (int index : {0, 1, 2, 3}) {
    bool doorbells = index == 0 || index == 1;
    std::vector<std::string> extra;
    if (doorbells) extra.push_back("--park-service");
    program_result result = run_worker("serve-pending", 2, backends[index], "interrupt",
                                       {{"TMK_NUDGE_US", "0"}}, extra);
    EXPECT_EQ(result.exit_code, 0) << describe(result);
    const std::string marker = "serve-pending: ";
    auto at = result.err.find(marker);
    ASSERT_NE(at, std::string::npos) << describe(result);
    int on_caller = std::stoi(result.err.substr(at + marker.size()));
    if (doorbells)
      EXPECT_EQ(on_caller, echoes) << backends[index].name << "\n" << describe(result);
    else
      EXPECT_EQ(on_caller, 0) << backends[index].name << "\n" << describe(result);
    EXPECT_FALSE(result.stragglers) << "processes outlived the job";
  }
}

// A caller spinning in a wait serves the requests that come to its
// process while its service thread lets go of the request channel: asleep
// (interrupt), or between polls, as it yields (poll).  A polling thread
// that kept the channel left each request to wait for the scheduler to
// switch from the caller, spinning on the same core (each process pinned
// to its own): 0.5 ms a lock acquire (BENCHMARKS.md).  The caller's spin
// outlasts the scenario, so that it never sleeps and hands the channel
// back.
TEST(transport_wait_serves, a_spinning_caller_serves_while_its_service_thread_lets_go) {
  constexpr int echoes = 20;
  for (const char* notify : {"poll", "interrupt"})
    for (int index : {0, 1, 2, 3}) {
      program_result result = run_worker("wait-serves", 2, backends[index], notify,
                                         {{"TMK_WAIT_SPIN_US", "1000000"}});
      std::string what = std::string(backends[index].name) + ", " + notify + "\n" + describe(result);
      EXPECT_EQ(result.exit_code, 0) << what;
      const std::string marker = "wait-serves: ";
      auto at = result.err.find(marker);
      ASSERT_NE(at, std::string::npos) << what;
      int on_caller = std::stoi(result.err.substr(at + marker.size()));
      EXPECT_GE(on_caller, echoes / 2) << what;
      EXPECT_FALSE(result.stragglers) << "processes outlived the job";
    }
}

// Two callers holding their request channels, each running a handler that
// pushes 16 MiB to the other's request channel (substrate_worker.cc,
// holding_push): through UCX both waited for room until the watchdog
// stopped them.  A spin window longer than the scenario keeps each caller
// holding its channel instead of handing it back to sleep; the peer
// timeout of 5 s lets the watchdog stop a wait for ever within 10 s.
class transport_holding_push : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(transport_holding_push, callers_holding_their_channels_push_to_each_other) {
  auto [nprocs, backend_index] = GetParam();
  program_result result =
      run_worker("holding-push", nprocs, backends[backend_index], "interrupt",
                 {{"TMK_WAIT_SPIN_US", "1000000"}, {"TMK_PEER_TIMEOUT", "5"}});
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  EXPECT_NE(result.out.find("holding-push: passed on " + std::to_string(nprocs) + " processes"),
            std::string::npos)
      << describe(result);
  EXPECT_FALSE(result.stragglers) << "processes outlived the job";
}

INSTANTIATE_TEST_SUITE_P(all, transport_holding_push,
                         ::testing::Combine(::testing::Values(3, 4), ::testing::Values(0, 1, 2)));

// Nudges: the counts process 0 of the nudge scenarios prints.
struct nudge_counts {
  long computing = -1;
  long asleep = -1;
};
nudge_counts nudges_of(const program_result& result) {
  nudge_counts counts;
  auto at = result.err.find("nudge: ");
  if (at != std::string::npos)
    sscanf(result.err.c_str() + at, "nudge: %ld while computing, %ld while asleep", &counts.computing,
           &counts.asleep);
  return counts;
}

// A process that computes without entering the substrate is signalled to
// yield its core to its service thread once a request to it has waited
// TMK_NUDGE_US (1 us here, so that every wake-up of that thread outlasts
// it): its computation comes out right, and a caller asleep in poll() is
// never signalled, its sleep lasting as long as it asked.  Every process
// pinned to its own core, its service thread with it.  Without doorbells
// (sockets, UCX's own wake-up) there is nothing to tell where the caller
// is, and no nudges; TMK_NUDGE_US=0 turns them off.
TEST(transport_nudge, a_computing_caller_is_nudged_and_a_sleeping_one_is_not) {
  for (int index : {0, 1, 2, 3}) {
    for (const char* after : {"1", "0"}) {
      program_result result = run_worker("nudge", 2, backends[index], "interrupt",
                                         {{"TMK_BIND", "core"}, {"TMK_NUDGE_US", after}});
      std::string what = std::string(backends[index].name) + ", TMK_NUDGE_US=" + after + "\n" +
                         describe(result);
      EXPECT_EQ(result.exit_code, 0) << what;
      nudge_counts counts = nudges_of(result);
      if ((index == 0 || index == 1) && std::string(after) == "1")
        EXPECT_GT(counts.computing, 0) << what;
      else
        EXPECT_EQ(counts.computing, 0) << what;
      EXPECT_EQ(counts.asleep, 0) << what;
      EXPECT_FALSE(result.stragglers) << "processes outlived the job";
    }
  }
}

// A program that handles SIGURG itself keeps its handler, and the runtime
// never sends it a nudge.
TEST(transport_nudge, a_program_handling_sigurg_itself_is_never_nudged) {
  program_result result = run_worker("nudge-own-handler", 2, backends[0], "interrupt",
                                     {{"TMK_BIND", "core"}, {"TMK_NUDGE_US", "1"}});
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  nudge_counts counts = nudges_of(result);
  EXPECT_EQ(counts.computing, 0) << describe(result);
  EXPECT_EQ(counts.asleep, 0) << describe(result);
}

INSTANTIATE_TEST_SUITE_P(
    poll, transport_scenario,
    ::testing::Combine(::testing::Values("all-pairs", "sizes", "forward", "burst", "stream", "deferred", "interrupted", "lent",
                                         "hand-back", "caller-requests", "just-left-wait"),
                       ::testing::Values(2, 3), ::testing::Values(0, 1, 2),
                       ::testing::Values("poll")),
    scenario_name);

class transport_failure : public ::testing::TestWithParam<std::tuple<int, int>> {};

// A job that lost a process: it stopped with a failure within 10 s, and
// none of its processes is left behind.
void expect_stopped_promptly(const program_result& result) {
  EXPECT_NE(result.exit_code, 0) << describe(result);
  EXPECT_FALSE(result.timed_out);
  EXPECT_LT(result.seconds, 10.0) << describe(result);
  EXPECT_FALSE(result.stragglers) << "processes outlived the job";
}

// A peer killed mid-run: every other process names it and exits non-zero
// within 10 s, and none is left behind.
TEST_P(transport_failure, killed_peer_is_reported_by_everyone) {
  auto [nprocs, backend_index] = GetParam();
  program_result result = run_worker("killed", nprocs, backends[backend_index], "interrupt");
  expect_stopped_promptly(result);
  std::string victim = std::to_string(nprocs - 1);
  for (int rank = 0; rank < nprocs - 1; ++rank)
    EXPECT_NE(result.err.find("tmk[" + std::to_string(rank) + "]: lost process " + victim),
              std::string::npos)
        << "process " << rank << " did not report the loss\n" << describe(result);
  if (nprocs > 1) {
    EXPECT_NE(result.err.find("killed by signal 9"), std::string::npos) << describe(result);
  }
}

// A peer stopped (SIGSTOP) as the others end the job, before it says bye:
// process 0 finds it silent, and every process names it and exits
// non-zero within 10 s.  Without the check in finish, they waited for it
// for ever.
TEST_P(transport_failure, peer_stopped_at_finish_is_reported_by_everyone) {
  auto [nprocs, backend_index] = GetParam();
  program_result result = run_worker("stopped-at-finish", nprocs, backends[backend_index],
                                     "interrupt", {{"TMK_PEER_TIMEOUT", "2"}});
  expect_stopped_promptly(result);
  std::string victim = std::to_string(nprocs - 1);
  EXPECT_NE(result.err.find("sent no sign of life for 2 s (stopped or hung; TMK_PEER_TIMEOUT)"),
            std::string::npos)
      << describe(result);
  for (int rank = 0; rank < nprocs - 1; ++rank)
    EXPECT_NE(result.err.find("tmk[" + std::to_string(rank) + "]: lost process " + victim),
              std::string::npos)
        << "process " << rank << " did not report the loss\n" << describe(result);
}

// The same while the others stream messages of several segments to it,
// which through UCX go out from the sender's own memory: a sender waiting
// for room in the dead process's FIFO hears of the loss and names it.
class transport_failure_streaming : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(transport_failure_streaming, peer_killed_while_others_stream_to_it_is_reported) {
  auto [nprocs, backend_index] = GetParam();
  program_result result = run_worker("killed-streaming", nprocs, backends[backend_index], "interrupt");
  expect_stopped_promptly(result);
  // Each names the dead process: lost, or (sockets) its connection closed.
  std::string victim = "process " + std::to_string(nprocs - 1);
  for (int rank = 0; rank < nprocs - 1; ++rank) {
    std::string prefix = "tmk[" + std::to_string(rank) + "]: ";
    bool named = false;
    for (std::size_t at = result.err.find(prefix); at != std::string::npos && !named;
         at = result.err.find(prefix, at + 1)) {
      std::string line = result.err.substr(at, result.err.find('\n', at) - at);
      named = line.find("lost " + victim) != std::string::npos ||
              line.find(victim + ": connection closed") != std::string::npos;
    }
    EXPECT_TRUE(named) << "process " << rank << " did not report the loss\n" << describe(result);
  }
}

INSTANTIATE_TEST_SUITE_P(all, transport_failure_streaming,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(0, 1, 2)));

INSTANTIATE_TEST_SUITE_P(all, transport_failure,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8), ::testing::Values(0, 1, 2)));

// A process whose handler of a request never returns, while its monitor
// sends heartbeats: it stops the job once the handler has run for twice
// TMK_PEER_TIMEOUT, 10 s at least, naming the process whose request it
// was, and every process says why it stops.  Without the watchdog, every
// process waited for ever.
//
// Each backend once (the watchdog is the same above them): 2 processes
// over UCX active messages, 8 over the tag path, 4 over sockets.  Each job
// waits at least 10 s for the watchdog, so the three run at once.
TEST(transport_watchdog, stuck_handler_stops_the_job) {
  const std::tuple<int, int> cases[] = {{2, 0}, {8, 1}, {4, 2}};
  std::vector<std::function<program_result()>> jobs;
  for (auto [nprocs, backend_index] : cases)
    jobs.push_back([nprocs, backend_index] {
      return run_worker("stuck-handler", nprocs, backends[backend_index], "interrupt",
                        {{"TMK_PEER_TIMEOUT", "2"}});
    });
  std::vector<program_result> results = tmk::testing::run_together(jobs);
  for (std::size_t index = 0; index < std::size(cases); ++index) {
    auto [nprocs, backend_index] = cases[index];
    const program_result& result = results[index];
    SCOPED_TRACE(std::to_string(nprocs) + " processes over " + backends[backend_index].name);
    EXPECT_NE(result.exit_code, 0) << describe(result);
    EXPECT_FALSE(result.timed_out);
    EXPECT_LT(result.seconds, 25.0) << describe(result);
    EXPECT_FALSE(result.stragglers) << "processes outlived the job";
    std::string victim = std::to_string(nprocs - 1);
    std::string said = "tmk[" + victim + "]: stuck: the handler of a request from process ";
    std::size_t at = result.err.find(said);
    std::size_t in = at == std::string::npos ? at : result.err.find("has not returned in ", at);
    if (in == std::string::npos) {
      ADD_FAILURE() << "no stuck handler reported\n" << describe(result);
      continue;
    }
    EXPECT_GE(atof(result.err.c_str() + in + strlen("has not returned in ")), 10.0)
        << describe(result);
    for (int rank = 0; rank < nprocs - 1; ++rank)
      EXPECT_NE(result.err.find("tmk[" + std::to_string(rank) + "]: stopping: process " + victim +
                                " stopped the job: stuck:"),
                std::string::npos)
          << "process " << rank << " did not say why it stops\n" << describe(result);
  }
}

TEST(transport_limits, message_above_the_maximum_is_refused_with_its_cause) {
  program_result result = run_worker("too-large", 2, backends[0], "interrupt",
                                     {{"TMK_MAX_MESSAGE", "64K"}});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("exceeds the largest allowed, 65536 bytes (TMK_MAX_MESSAGE)"),
            std::string::npos)
      << describe(result);
  EXPECT_LT(result.seconds, 10.0);
}

TEST(transport_bad_input, unknown_substrate_is_named) {
  program_result result = run_worker("all-pairs", 2, {"x", "infiniband", "am"}, "interrupt");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("TMK_SUBSTRATE=infiniband: expected one of ucx, sockets"),
            std::string::npos)
      << describe(result);
}

TEST(transport_bad_input, unknown_notify_mode_is_named) {
  program_result result = run_worker("all-pairs", 2, backends[0], "sometimes");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("TMK_NOTIFY=sometimes: expected one of interrupt, poll"),
            std::string::npos)
      << describe(result);
}

TEST(transport_bad_input, bad_process_counts_are_refused) {
  for (std::string count : {"0", "5000", "abc", "-3", "2x"}) {
    program_result result = run_program({SUBSTRATE_WORKER, "--scenario", "all-pairs", "--", "-n", count});
    EXPECT_EQ(result.exit_code, 2) << count << "\n" << describe(result);
    EXPECT_NE(result.err.find("-n " + count + ": the number of processes must be from 1 to 4096"),
              std::string::npos)
        << describe(result);
  }
  program_result missing = run_program({SUBSTRATE_WORKER, "--scenario", "all-pairs", "--", "-n"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("option -n needs a number of processes"), std::string::npos);
  program_result env = run_program({SUBSTRATE_WORKER, "--scenario", "all-pairs"}, {{"TMK_NPROCS", "0"}});
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_NE(env.err.find("TMK_NPROCS=0"), std::string::npos) << describe(env);
}

// Processes started by hand (TMK_RANK/TMK_ROOT): with one of three missing,
// the two that came exit non-zero and say which one never arrived.
TEST(transport_bootstrap, missing_peer_times_out_with_its_rank) {
  std::string root = free_root();
  std::vector<std::pair<std::string, std::string>> env{
      {"TMK_NPROCS", "3"}, {"TMK_ROOT", root}, {"TMK_CONNECT_TIMEOUT", "2"}};
  auto rank_env = [&](int rank) {
    auto with = env;
    with.push_back({"TMK_RANK", std::to_string(rank)});
    return with;
  };
  program_result one;
  std::thread second([&] {
    one = run_program({SUBSTRATE_WORKER, "--scenario", "all-pairs"}, rank_env(1), 30);
  });
  program_result zero = run_program({SUBSTRATE_WORKER, "--scenario", "all-pairs"}, rank_env(0), 30);
  second.join();
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(one.exit_code, 0);
  EXPECT_LT(zero.seconds, 10.0);
  EXPECT_LT(one.seconds, 10.0);
  EXPECT_NE(zero.err.find("process 2 did not arrive"), std::string::npos) << describe(zero);
  EXPECT_NE(one.err.find("process 2 did not arrive"), std::string::npos) << describe(one);
  EXPECT_NE(zero.err.find(" within 2 s (TMK_CONNECT_TIMEOUT)"), std::string::npos)
      << describe(zero);
}

// Processes started by hand read their own environments: two that differ
// on a setting every process needs the same (here the data path, and the
// largest message, which a receiver would drop above its own limit while
// its sender waited for ever) both stop at start-up, naming it.
TEST(transport_bootstrap, processes_that_disagree_on_a_setting_stop_naming_it) {
  struct disagreement {
    const char* name;
    const char* at_0;
    const char* at_1;
    std::string named;
  };
  for (const auto& [name, at_0, at_1, named] :
       {disagreement{"TMK_UCX_PATH", "am", "tag",
                     "TMK_UCX_PATH is tag at process 1 but am at process 0"},
        disagreement{"TMK_MAX_MESSAGE", "256M", "64K",
                     "TMK_MAX_MESSAGE is 65536 at process 1 but 268435456 at process 0"}}) {
    std::string root = free_root();
    ASSERT_FALSE(root.empty());
    auto results = run_by_hand(
        {SUBSTRATE_WORKER, "--scenario", "sizes"}, 2, root, {{"TMK_JOB_SECRET", "agree"}},
        [&](int rank) { return std::vector<std::pair<std::string, std::string>>{{name, rank ? at_1 : at_0}}; },
        30);
    for (const auto& result : results) {
      EXPECT_NE(result.exit_code, 0) << describe(result);
      EXPECT_LT(result.seconds, 10.0) << describe(result);
      EXPECT_NE(result.err.find(named + ": every process of a job needs the same " + name),
                std::string::npos)
          << describe(result);
    }
  }
}

// A process started by hand with another job's secret is turned away and
// says why, where it found its connection reset; process 0, whose job
// never forms, names what it turned away.
TEST(transport_bootstrap, process_with_another_secret_is_told_why_it_was_turned_away) {
  std::string root = free_root();
  ASSERT_FALSE(root.empty());
  auto results = run_by_hand(
      {SUBSTRATE_WORKER, "--scenario", "sizes"}, 2, root, {{"TMK_CONNECT_TIMEOUT", "2"}},
      [&](int rank) {
        return std::vector<std::pair<std::string, std::string>>{
            {"TMK_JOB_SECRET", rank == 0 ? "ours" : "theirs"}};
      },
      30);
  for (const auto& result : results) {
    EXPECT_NE(result.exit_code, 0) << describe(result);
    EXPECT_LT(result.seconds, 10.0) << describe(result);
  }
  EXPECT_NE(results[1].err.find("process 0 turned this process away: TMK_JOB_SECRET differs "
                                "from process 0's"),
            std::string::npos)
      << describe(results[1]);
  EXPECT_NE(results[0].err.find("process 1 did not arrive"), std::string::npos)
      << describe(results[0]);
  EXPECT_NE(results[0].err.find("turned away: a process claiming rank 1 (TMK_JOB_SECRET differs "
                                "from process 0's)"),
            std::string::npos)
      << describe(results[0]);
}

// Process 0 listens on every address, so a TMK_ROOT naming another host's
// address went unnoticed there: the others, who look for it at that
// address, only showed up as processes that never arrived.  It now says
// so at start-up (192.0.2.1 is a documentation address, never this host's).
TEST(transport_bootstrap, process_0_says_when_its_root_is_not_this_host) {
  std::string root = free_root();
  ASSERT_FALSE(root.empty());
  std::string elsewhere = "192.0.2.1" + root.substr(root.find(':'));
  program_result zero = run_program({SUBSTRATE_WORKER, "--scenario", "all-pairs"},
                                    {{"TMK_NPROCS", "2"}, {"TMK_RANK", "0"}, {"TMK_ROOT", elsewhere},
                                     {"TMK_CONNECT_TIMEOUT", "1"}},
                                    30);
  EXPECT_NE(zero.exit_code, 0) << describe(zero);
  EXPECT_NE(zero.err.find("TMK_ROOT=" + elsewhere + ": 192.0.2.1 is not an address of this "
                          "host, process 0's"),
            std::string::npos)
      << describe(zero);
  EXPECT_NE(zero.err.find("process 1 did not arrive"), std::string::npos) << describe(zero);
}

TEST(transport_bootstrap, processes_started_by_hand_form_a_job) {
  std::string root = free_root();
  std::vector<program_result> results(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank)
    threads.emplace_back([&, rank] {
      results[rank] = run_program({SUBSTRATE_WORKER, "--scenario", "forward"},
                                  {{"TMK_NPROCS", "3"}, {"TMK_ROOT", root},
                                   {"TMK_RANK", std::to_string(rank)}, {"TMK_JOB_SECRET", "s3"}},
                                  60);
    });
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(results[rank].exit_code, 0) << describe(results[rank]);
  EXPECT_NE(results[0].out.find("forward: passed on 3 processes"), std::string::npos);
}

}  // namespace
