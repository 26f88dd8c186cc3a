// api.cc — the public C API: TreadMarks's calls, each a thin shell around
// the node that checks Tmk_startup came first.
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
  return *self;
}
}  // namespace

extern "C" {

void Tmk_startup(int argc, char** argv) { tmk::node::startup(argc, argv); }

void Tmk_exit(int status) { started("Tmk_exit").exit(status); }

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

void* Tmk_malloc(unsigned size) { return started("Tmk_malloc").allocate(size); }

void Tmk_free(void* ptr) { started("Tmk_free").release_block(ptr); }

void* Tmk_sbrk(unsigned increment) { return started("Tmk_sbrk").extend(increment); }

void Tmk_distribute(const void* ptr, int size) { started("Tmk_distribute").distribute(ptr, size); }

void Tmk_barrier(unsigned id) {
  tmk::node& self = started("Tmk_barrier");
  self.barrier(id);
  self.refresh_statistics();
}

void Tmk_lock_acquire(unsigned id) {
  tmk::node& self = started("Tmk_lock_acquire");
  self.lock_acquire(id);
  self.refresh_statistics();
}

void Tmk_lock_release(unsigned id) {
  tmk::node& self = started("Tmk_lock_release");
  self.lock_release(id);
  self.refresh_statistics();
}

void Tmk_lock_cond_wait(unsigned lock_id, unsigned cond_id) {
  started("Tmk_lock_cond_wait").cond_wait(lock_id, cond_id);
}

void Tmk_lock_cond_signal(unsigned lock_id, unsigned cond_id) {
  started("Tmk_lock_cond_signal").cond_signal(lock_id, cond_id, false);
}

void Tmk_lock_cond_broadcast(unsigned lock_id, unsigned cond_id) {
  started("Tmk_lock_cond_broadcast").cond_signal(lock_id, cond_id, true);
}

}  // extern "C"
