// run_program.h — runs a program of the job under test (which may fork
// its own processes) with a given environment, captures what it prints and
// how it ended, and kills its whole process group if it outlives a limit.
// Shared by the substrate, runtime and application tests.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tmk::testing {

struct program_result {
  int exit_code = -1;     // exit status, or -1 if killed by a signal
  int signal = 0;         // the signal that ended it
  bool timed_out = false;
  bool stragglers = false;  // processes of its group outlived it by 3 s
  double seconds = 0;
  std::string out;
  std::string err;
};

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// meanwhile, if given, runs once the program has started, with its process
// group, before the wait for its end (a test that stops and continues it).
inline program_result run_program(const std::vector<std::string>& argv,
                                  const std::vector<std::pair<std::string, std::string>>& env = {},
                                  double timeout_seconds = 120,
                                  const std::function<void(pid_t group)>& meanwhile = {}) {
  // A process of the program whose parent ended first becomes this
  // process's child, and is reaped here.  Left to the system's init, a dead
  // one stayed a zombie of the group for 1-3 s on the machine of
  // BENCHMARKS.md, whose init reaps late, and counted as a straggler.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  char out_path[] = "/tmp/tmk-test-out-XXXXXX";
  char err_path[] = "/tmp/tmk-test-err-XXXXXX";
  int out_fd = mkstemp(out_path);
  int err_fd = mkstemp(err_path);
  auto started = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    for (const auto& [name, value] : env) {
      if (value.empty())
        unsetenv(name.c_str());
      else
        setenv(name.c_str(), value.c_str(), 1);
    }
    std::vector<char*> args;
    for (const auto& word : argv) args.push_back(const_cast<char*>(word.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    perror("execv");
    _exit(127);
  }
  setpgid(pid, pid);
  if (meanwhile) meanwhile(pid);
  program_result result;
  int wait_status = 0;
  while (true) {
    pid_t done = waitpid(pid, &wait_status, WNOHANG);
    if (done == pid) break;
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (elapsed > timeout_seconds) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &wait_status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto reap_group = [pid] {
    while (waitpid(-pid, nullptr, WNOHANG) > 0) {
    }
  };
  auto grace_end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (reap_group(); kill(-pid, 0) == 0 && std::chrono::steady_clock::now() < grace_end; reap_group())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  result.stragglers = !result.timed_out && kill(-pid, 0) == 0;
  // Whatever the program left behind in its group goes too.
  kill(-pid, SIGKILL);
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
       kill(-pid, 0) == 0 && std::chrono::steady_clock::now() < end; reap_group())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (WIFEXITED(wait_status)) result.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) result.signal = WTERMSIG(wait_status);
  close(out_fd);
  close(err_fd);
  result.out = read_whole_file(out_path);
  result.err = read_whole_file(err_path);
  unlink(out_path);
  unlink(err_path);
  return result;
}

// Runs each of jobs (each a run_program call) on a thread of its own, all
// at once, for tests whose jobs mostly wait; their results, in order.
inline std::vector<program_result> run_together(
    const std::vector<std::function<program_result()>>& jobs) {
  std::vector<program_result> results(jobs.size());
  std::vector<std::thread> threads;
  for (std::size_t index = 0; index < jobs.size(); ++index)
    threads.emplace_back([&, index] { results[index] = jobs[index](); });
  for (auto& thread : threads) thread.join();
  return results;
}

// host:port on the loopback for process 0 of processes started by hand
// (TMK_ROOT) to listen at: a port the kernel has just handed out, free as
// far as it knows; "" if none could be had.  A port derived from the
// process id once fell on one that a test running beside took (the range
// overlaps the ephemeral ports), and the job waited out its start-up
// timeout.
inline std::string free_root() {
  int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  bool bound = bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
               getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  close(probe);
  return bound ? "127.0.0.1:" + std::to_string(ntohs(address.sin_port)) : "";
}

// Runs argv as the nprocs processes of one job started by hand (TMK_RANK,
// TMK_ROOT, TMK_NPROCS), all at once, each with env and then the settings
// of its own that for_rank gives; their results, by rank.
inline std::vector<program_result> run_by_hand(
    const std::vector<std::string>& argv, int nprocs, const std::string& root,
    const std::vector<std::pair<std::string, std::string>>& env,
    const std::function<std::vector<std::pair<std::string, std::string>>(int)>& for_rank,
    double timeout_seconds = 60) {
  std::vector<program_result> results(static_cast<std::size_t>(nprocs));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nprocs; ++rank)
    threads.emplace_back([&, rank] {
      auto with = env;
      with.push_back({"TMK_NPROCS", std::to_string(nprocs)});
      with.push_back({"TMK_ROOT", root});
      with.push_back({"TMK_RANK", std::to_string(rank)});
      for (auto& setting : for_rank(rank)) with.push_back(setting);
      results[static_cast<std::size_t>(rank)] = run_program(argv, with, timeout_seconds);
    });
  for (auto& thread : threads) thread.join();
  return results;
}

}  // namespace tmk::testing
