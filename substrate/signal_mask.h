// signal_mask.h — keeps the program's signals off the runtime's threads.
//
// A signal sent to a process (SIGALRM from setitimer, SIGCHLD, SIGUSR1 from
// kill) goes to any of its threads that does not block it.  Run on one of
// the runtime's (the service thread, the monitor, UCX's and MPI's own),
// the program's handler interrupts a thread that may hold the runtime's
// locks, and a handler that reads shared memory then waits for them for
// ever; an interrupted epoll_wait there is one more path to get right.
// Threads started while this scope lives inherit its mask: every signal a
// program may handle blocked, so the kernel picks one of the program's
// own threads.  Only the signals a fault raises stay open: blocked, they
// kill the process.  (The runtime's nudges, SIGURG, go to the program's
// calling thread by its id.)
#pragma once

#include <signal.h>

namespace tmk {

class program_signals_blocked {
 public:
  program_signals_blocked() {
    sigset_t blocked;
    sigfillset(&blocked);
    for (int synchronous : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS})
      sigdelset(&blocked, synchronous);
    pthread_sigmask(SIG_BLOCK, &blocked, &before_);
  }
  ~program_signals_blocked() { pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  program_signals_blocked(const program_signals_blocked&) = delete;
  program_signals_blocked& operator=(const program_signals_blocked&) = delete;

 private:
  sigset_t before_;
};

}  // namespace tmk
