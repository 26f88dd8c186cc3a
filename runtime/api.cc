// api.cc — the public C API: TreadMarks's calls, each a thin shell around
// the node that checks Tmk_startup came first.
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "Tmk.h"
#include "job.h"
#include "log.h"
#include "node.h"

unsigned Tmk_proc_id = 0;
unsigned Tmk_nprocs = 1;
unsigned Tmk_page_size = 4096;
unsigned Tmk_npages = 0;
struct Tmk_stat Tmk_stat = {};

namespace {
tmk::node& started(const char* call) {
  tmk::node* self = tmk::node::instance();
  if (self == nullptr) {
    tmk::log_message(tmk::log_level::error, "%s: called before Tmk_startup", call);
    _exit(1);
  }
  if (self->finished()) {  // from an exit handler the program registered
    tmk::log_message(tmk::log_level::error, "%s: called after Tmk_exit", call);
    _exit(1);
  }
  if (tmk::node::in_forked_child()) {
    tmk::log_message(tmk::log_level::error,
                     "%s: called in process %d, a child the program forked after Tmk_startup: only "
                     "the job's own processes may call Tmk_*",
                     call, static_cast<int>(getpid()));
    _exit(1);
  }
  return *self;
}

// The node, once the calling thread has its turn (node::caller_turn).
struct in_turn {
  tmk::node& self;
  tmk::node::inside in;
  std::unique_lock<std::recursive_mutex> turn;
  explicit in_turn(const char* call)
      : self(started(call)), in(self, call), turn(self.caller_turn()) {}
};
}  // namespace

extern "C" {

void Tmk_startup(int argc, char** argv) { tmk::node::startup(argc, argv); }

void Tmk_exit(int status) {
  in_turn("Tmk_exit").self.exit(status);
  _exit(status);  // not reached: exit ends the process
}

void Tmk_errexit(const char* format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  std::string message(text);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (tmk::job* owner = tmk::job::current()) owner->fatal(message);
  tmk::log_message(tmk::log_level::error, "%s", message.c_str());
  _exit(1);
}

void* Tmk_malloc(unsigned size) { return in_turn("Tmk_malloc").self.allocate(size); }

void Tmk_free(void* ptr) { in_turn("Tmk_free").self.release_block(ptr); }

void* Tmk_sbrk(unsigned increment) { return in_turn("Tmk_sbrk").self.extend(increment); }

void Tmk_distribute(const void* ptr, int size) {
  in_turn("Tmk_distribute").self.distribute(ptr, size);
}

void Tmk_barrier(unsigned id) {
  in_turn call("Tmk_barrier");
  call.self.barrier(id);
  call.self.refresh_statistics();
}

void Tmk_lock_acquire(unsigned id) {
  in_turn call("Tmk_lock_acquire");
  call.self.lock_acquire(id);
  call.self.refresh_statistics();
}

void Tmk_lock_release(unsigned id) {
  in_turn call("Tmk_lock_release");
  call.self.lock_release(id);
  call.self.refresh_statistics();
}

void Tmk_lock_cond_wait(unsigned lock_id, unsigned cond_id) {
  in_turn("Tmk_lock_cond_wait").self.cond_wait(lock_id, cond_id);
}

void Tmk_lock_cond_signal(unsigned lock_id, unsigned cond_id) {
  in_turn("Tmk_lock_cond_signal").self.cond_signal(lock_id, cond_id, false);
}

void Tmk_lock_cond_broadcast(unsigned lock_id, unsigned cond_id) {
  in_turn("Tmk_lock_cond_broadcast").self.cond_signal(lock_id, cond_id, true);
}

}  // extern "C"
