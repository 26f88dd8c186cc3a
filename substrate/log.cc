// log.cc — one write(2) per line so that lines of concurrent processes and
// threads never interleave mid-line.
#include "log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "status.h"

namespace tmk {

namespace {

// Until the job says (log_set_rank), the rank the launcher gave this
// process: mpirun's, or TMK_RANK of a start by hand.  A message from
// Tmk_startup before the job has started (a setting refused, a start-up
// under mpirun that never ends) then names the process; -1 otherwise.
// Read as the library loads, not in a message, which a fault's handler
// may print.
int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "TMK_RANK"}) {
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end;
    errno = 0;
    long rank = strtol(value, &end, 10);
    if (errno == 0 && *end == '\0' && rank >= 0 && rank < INT_MAX) return static_cast<int>(rank);
  }
  return -1;
}

std::atomic<int> current_rank{launcher_rank()};
std::atomic<int> current_level{static_cast<int>(log_level::warn)};
const char* const level_names[] = {"error", "warn", "info", "debug", "trace"};
}  // namespace

void log_set_rank(int rank) { current_rank.store(rank); }
int log_rank() { return current_rank.load(); }
void log_set_level(log_level level) { current_level.store(static_cast<int>(level)); }
log_level log_current_level() { return static_cast<log_level>(current_level.load()); }

bool log_enabled(log_level level) {
  return level == log_level::error || static_cast<int>(level) <= current_level.load();
}

void log_vmessage(log_level level, const char* format, va_list args) {
  char line[4096];
  int rank = current_rank.load();
  int used;
  if (rank >= 0)
    used = snprintf(line, sizeof line, "tmk[%d]: ", rank);
  else
    used = snprintf(line, sizeof line, "tmk[?]: ");
  if (level != log_level::error)
    used += snprintf(line + used, sizeof line - used, "%s: ", level_names[static_cast<int>(level)]);
  int body = vsnprintf(line + used, sizeof line - used - 1, format, args);
  if (body < 0) body = 0;
  used += body;
  if (used > static_cast<int>(sizeof line) - 2) used = sizeof line - 2;
  line[used++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, used);
  (void)ignored;
}

void log_message(log_level level, const char* format, ...) {
  va_list args;
  va_start(args, format);
  log_vmessage(level, format, args);
  va_end(args);
}

status errno_status(const std::string& what) {
  return status(status_code::system_error, what + ": " + strerror(errno));
}

}  // namespace tmk
