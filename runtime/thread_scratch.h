// thread_scratch.h — memory a thread keeps from one call to the next.
//
// A handler that rewrites the same message or vector time at every call
// keeps it per thread, since the service thread and a waiting caller both
// handle requests.  A thread_local object of a class with a destructor
// will not do: the main thread's are destroyed at exit() before the
// handlers on_exit registered run, and a program that returns from main
// without Tmk_exit ends collectively in such a handler (node::exit),
// passing a barrier and serving the others' requests on the main thread.
// A thread_scratch is a bare pointer, which nothing destroys: what it
// points to is made at the thread's first use and never freed, and a tmk
// process ends with _exit, its service thread just before.
//
// Each object made is also listed in a list that nothing frees either, so
// that it stays reachable after its thread has ended: a program built
// with -fsanitize=address checks for leaks when exit() has run the
// runtime's exit handler, and reported the service thread's scratch as
// leaked (41 kB after SOR on 2 processes), ending the job with status 1.
#pragma once

#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace tmk {

inline void keep_reachable(const void* object) {
  static std::mutex* const guard = new std::mutex;
  static std::vector<const void*>* const kept = new std::vector<const void*>;
  std::lock_guard lock(*guard);
  kept->push_back(object);
}

template <class T>
class thread_scratch {
 public:
  // The arguments construct the object at the thread's first call only.
  template <class... Args>
  T& get(Args&&... args) {
    if (value_ == nullptr) {
      value_ = new T(std::forward<Args>(args)...);
      keep_reachable(value_);
    }
    return *value_;
  }

 private:
  T* value_ = nullptr;
};

static_assert(std::is_trivially_destructible_v<thread_scratch<int>>,
              "a thread_scratch must outlive its thread's destructors");

}  // namespace tmk
