// run_program.h — runs a program of the job under test (which may fork
// its own processes) with a given environment, captures what it prints and
// how it ended, and kills its whole process group if it outlives a limit.
// Shared by the substrate, runtime and application tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

inline program_result run_program(const std::vector<std::string>& argv,
                                  const std::vector<std::pair<std::string, std::string>>& env = {},
                                  double timeout_seconds = 120) {
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

}  // namespace tmk::testing
