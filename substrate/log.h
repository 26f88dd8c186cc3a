// log.h — diagnostics on standard error, every line prefixed "tmk[rank]".
//
// TMK_LOG_LEVEL picks how much is said (error, warn, info, debug, trace);
// errors are always printed.  The rank prefix is "tmk[?]" until the job
// knows this process's rank.
#pragma once

#include <cstdarg>

namespace tmk {

enum class log_level { error = 0, warn, info, debug, trace };

void log_set_rank(int rank);
int log_rank();
void log_set_level(log_level level);
log_level log_current_level();
bool log_enabled(log_level level);

void log_message(log_level level, const char* format, ...) __attribute__((format(printf, 2, 3)));
void log_vmessage(log_level level, const char* format, va_list args);

}  // namespace tmk

#define TMK_LOG(level, ...)                                   \
  do {                                                        \
    if (::tmk::log_enabled(::tmk::log_level::level))          \
      ::tmk::log_message(::tmk::log_level::level, __VA_ARGS__); \
  } while (0)
