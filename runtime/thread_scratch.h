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
#pragma once

#include <type_traits>
#include <utility>

namespace tmk {

template <class T>
class thread_scratch {
 public:
  // The arguments construct the object at the thread's first call only.
  template <class... Args>
  T& get(Args&&... args) {
    if (value_ == nullptr) value_ = new T(std::forward<Args>(args)...);
    return *value_;
  }

 private:
  T* value_ = nullptr;
};

static_assert(std::is_trivially_destructible_v<thread_scratch<int>>,
              "a thread_scratch must outlive its thread's destructors");

}  // namespace tmk
