// heap.cc — Tmk_malloc, Tmk_sbrk, Tmk_free and Tmk_distribute.
//
// One allocator, at process 0, hands out shared addresses; the others ask
// it with a request, holding the heap lock (see allocate).  Tmk_distribute
// sends the bytes of a private global variable to every other process as
// (module, offset): processes started separately load the program at
// different addresses, so the address is translated relative to the loaded
// module (executable or library) that contains it.
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "log.h"
#include "node.h"

namespace tmk {

namespace {

struct module_location {
  std::string name;
  std::uint64_t offset = 0;
  bool found = false;
};

// The loaded module whose writable segment holds [address, address+size).
module_location locate(const void* address, std::size_t size) {
  struct search {
    std::uintptr_t address;
    std::size_t size;
    module_location result;
  } state{reinterpret_cast<std::uintptr_t>(address), size, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) -> int {
        auto* wanted = static_cast<search*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_LOAD || !(segment.p_flags & PF_W)) continue;
          std::uintptr_t start = info->dlpi_addr + segment.p_vaddr;
          if (wanted->address >= start && wanted->address + wanted->size <= start + segment.p_memsz) {
            wanted->result = {info->dlpi_name ? info->dlpi_name : "",
                              wanted->address - info->dlpi_addr, true};
            return 1;
          }
        }
        return 0;
      },
      &state);
  return state.result;
}

// The address of offset in the module called name, if it falls in one of
// its writable segments.
void* resolve(const std::string& name, std::uint64_t offset, std::size_t size) {
  struct search {
    const std::string* name;
    std::uint64_t offset;
    std::size_t size;
    void* result = nullptr;
  } state{&name, offset, size};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) -> int {
        auto* wanted = static_cast<search*>(data);
        if (*wanted->name != (info->dlpi_name ? info->dlpi_name : "")) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_LOAD || !(segment.p_flags & PF_W)) continue;
          if (wanted->offset >= segment.p_vaddr &&
              wanted->offset + wanted->size <= segment.p_vaddr + segment.p_memsz) {
            wanted->result = reinterpret_cast<void*>(info->dlpi_addr + wanted->offset);
            return 1;
          }
        }
        return 1;
      },
      &state);
  return state.result;
}

struct memory_range {
  std::uintptr_t start;
  std::uintptr_t stop;
  bool stack;  // the main thread's stack
};

// This process's readable and writable mappings, in address order, from
// /proc/self/maps: where a distribution may be read at its sender and
// written at the others.  Rare enough (a few calls a program) to read the
// file each time.  Empty if it cannot be read.
std::vector<memory_range> writable_mappings() {
  std::vector<memory_range> ranges;
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == nullptr) return ranges;
  char line[512];
  while (fgets(line, sizeof line, maps) != nullptr) {
    unsigned long long start = 0, stop = 0;
    char permissions[8] = {};
    if (sscanf(line, "%llx-%llx %7s", &start, &stop, permissions) == 3 &&
        permissions[0] == 'r' && permissions[1] == 'w')
      ranges.push_back({static_cast<std::uintptr_t>(start), static_cast<std::uintptr_t>(stop),
                        strstr(line, "[stack]") != nullptr});
    // A line longer than the buffer (a long path) ends in the next read.
    while (strchr(line, '\n') == nullptr && fgets(line, sizeof line, maps) != nullptr) {}
  }
  fclose(maps);
  return ranges;
}

// True if ranges (in address order) cover [address, address+size).
bool covers(const std::vector<memory_range>& ranges, const void* address, std::size_t size) {
  auto covered = reinterpret_cast<std::uintptr_t>(address);
  std::uintptr_t end = covered + size;
  for (const auto& range : ranges) {
    if (range.stop <= covered) continue;
    if (range.start > covered) return false;
    covered = range.stop;
    if (covered >= end) return true;
  }
  return false;
}

// The mappings this process had as Tmk_startup began, before it forked
// the others: what an address means in every process of a forked job.
std::vector<memory_range>& startup_memory() {
  static std::vector<memory_range> ranges;
  return ranges;
}

// Those, with the main thread's stack as far as it has grown since: the
// others' stacks grow alike as they make the same calls.
std::vector<memory_range> forked_memory(const std::vector<memory_range>& now) {
  std::vector<memory_range> ranges = startup_memory();
  for (const auto& range : now)
    if (range.stack) ranges.push_back(range);
  std::sort(ranges.begin(), ranges.end(),
            [](const memory_range& a, const memory_range& b) { return a.start < b.start; });
  return ranges;
}

std::string hex_address(const void* address) {
  char text[32];
  snprintf(text, sizeof text, "%p", address);
  return text;
}

}  // namespace

void node::remember_startup_memory() { startup_memory() = writable_mappings(); }

// Tmk_malloc and Tmk_free hold a lock of their own, managed by process 0,
// around the allocator's request: a free is a release and an allocation an
// acquire, so that a block freed by one process and allocated by another
// comes with the first owner's writes ordered before the second's (as
// free and malloc order memory in C).
void* node::allocate(unsigned size) {
  if (nprocs_ > 1) acquire(heap_lock());
  void* block = allocate_unlocked(size);
  if (nprocs_ > 1) release(heap_lock());
  return block;
}

void* node::allocate_unlocked(unsigned size) {
  std::uint64_t address = 0;
  if (rank_ == 0) {
    std::lock_guard lock(mutex_);
    address = heap_->allocate(size);
  } else {
    message_writer request(message_type::allocate);
    request.put<std::uint8_t>(0);
    request.put<std::uint64_t>(size);
    auto answer = await(send_request(0, request, "Tmk_malloc"), "Tmk_malloc");
    message_reader reader(answer.bytes());
    if (reader.type() != message_type::allocate_reply || !reader.get(address))
      protocol_failure("Tmk_malloc: malformed reply");
    std::lock_guard lock(mutex_);
    if (address != 0) learn_heap_break(address + size);
  }
  return reinterpret_cast<void*>(address);
}

void* node::extend(unsigned increment) {
  std::uint64_t address = 0;
  if (rank_ == 0) {
    std::lock_guard lock(mutex_);
    address = heap_->extend(increment);
  } else {
    message_writer request(message_type::allocate);
    request.put<std::uint8_t>(1);
    request.put<std::uint64_t>(increment);
    auto answer = await(send_request(0, request, "Tmk_sbrk"), "Tmk_sbrk");
    message_reader reader(answer.bytes());
    if (reader.type() != message_type::allocate_reply || !reader.get(address))
      protocol_failure("Tmk_sbrk: malformed reply");
    std::lock_guard lock(mutex_);
    if (address != 0) learn_heap_break(address + increment);
  }
  return reinterpret_cast<void*>(address);
}

void node::release_block(void* pointer) {
  if (pointer == nullptr) return;
  auto address = reinterpret_cast<std::uint64_t>(pointer);
  bool released = false;
  if (nprocs_ > 1) acquire(heap_lock());
  if (rank_ == 0) {
    std::lock_guard lock(mutex_);
    released = heap_->release(address);
  } else {
    message_writer request(message_type::release_block);
    request.put<std::uint64_t>(address);
    auto answer = await(send_request(0, request, "Tmk_free"), "Tmk_free");
    message_reader reader(answer.bytes());
    std::uint8_t ok = 0;
    if (reader.type() != message_type::release_reply || !reader.get(ok))
      protocol_failure("Tmk_free: malformed reply");
    released = ok != 0;
  }
  if (nprocs_ > 1) release(heap_lock());
  if (!released) {
    char text[96];
    snprintf(text, sizeof text, "%p was not returned by Tmk_malloc (or was freed already)", pointer);
    fail("Tmk_free", text);
  }
}

void node::handle_allocate(const incoming_request& request, message_reader& reader) {
  std::uint8_t kind = reader.take<std::uint8_t>();
  std::uint64_t size = reader.take<std::uint64_t>();
  if (!reader.ok() || rank_ != 0 || kind > 1) return reject(request, "malformed allocation request");
  message_writer answer(message_type::allocate_reply);
  {
    std::lock_guard lock(mutex_);
    answer.put<std::uint64_t>(kind == 0 ? heap_->allocate(size) : heap_->extend(size));
  }
  reply(request.token(), answer);
}

void node::handle_release(const incoming_request& request, message_reader& reader) {
  std::uint64_t address = reader.take<std::uint64_t>();
  if (!reader.ok() || rank_ != 0) return reject(request, "malformed free request");
  message_writer answer(message_type::release_reply);
  {
    std::lock_guard lock(mutex_);
    answer.put<std::uint8_t>(heap_->release(address) ? 1 : 0);
  }
  reply(request.token(), answer);
}

void node::distribute(const void* pointer, int size) {
  if (size <= 0) fail("Tmk_distribute", "size must be positive, got " + std::to_string(size));
  auto* at = static_cast<const std::byte*>(pointer);
  if (pointer == nullptr) fail("Tmk_distribute", "null pointer");
  if (at + size > shared_base_ && at < shared_base_ + config_.shared_size)
    fail("Tmk_distribute", "the pointer is in the shared region; distribute private variables "
                           "(shared memory needs no distribution)");
  module_location where = locate(pointer, static_cast<std::size_t>(size));
  bool absolute = !where.found;
  bool one_image = job_.mode() == launch_mode::fork || job_.mode() == launch_mode::single;
  if (absolute && !one_image)
    fail("Tmk_distribute", "the pointer is not in a global variable of the program or of a "
                           "library; processes not forked from one another can only exchange "
                           "global variables");
  // A global variable of a module may be read-only all the same: a table
  // of pointers, written by the loader's relocations and then protected.
  auto length = static_cast<std::size_t>(size);
  std::string bytes = "the " + std::to_string(size) + " bytes from " + hex_address(pointer);
  std::vector<memory_range> now = writable_mappings();
  if (!covers(now, pointer, length))
    fail("Tmk_distribute", bytes + " are not all writable memory of this process: pass a "
                                   "variable and its size");
  if (absolute && !covers(forked_memory(now), pointer, length))
    fail("Tmk_distribute", bytes + " are in memory made after Tmk_startup, which the other "
                                   "processes do not have: distribute a variable made before");
  if (nprocs_ == 1) return;
  message_writer message(message_type::distribute);
  message.put<std::uint8_t>(absolute ? 1 : 0);
  message.put_string(where.name);
  message.put<std::uint64_t>(absolute ? reinterpret_cast<std::uint64_t>(pointer) : where.offset);
  message.put_bytes({at, static_cast<std::size_t>(size)});
  {
    std::lock_guard lock(mutex_);
    message.put<std::uint64_t>(known_heap_break());
  }
  std::vector<request_id> ids;
  for (int process = 0; process < nprocs_; ++process)
    if (process != rank_) ids.push_back(send_request(process, message, "Tmk_distribute"));
  std::vector<reply_payload> replies(ids.size());
  await_all(ids, replies, "Tmk_distribute");
}

void node::handle_distribute(const incoming_request& request, message_reader& reader) {
  std::uint8_t absolute = reader.take<std::uint8_t>();
  std::string name = reader.get_string();
  std::uint64_t offset = reader.take<std::uint64_t>();
  auto bytes = reader.get_bytes();
  std::uint64_t heap_break = reader.take<std::uint64_t>();
  if (!reader.ok() || bytes.empty() || reader.remaining() != 0)
    return reject(request, "malformed distribution");
  {
    std::lock_guard lock(mutex_);
    learn_heap_break(heap_break);
  }
  void* target = nullptr;
  if (absolute) {
    // Forked processes share the layout of the process that forked them.
    if (job_.mode() == launch_mode::fork) target = reinterpret_cast<void*>(offset);
  } else {
    target = resolve(name, offset, bytes.size());
  }
  if (target == nullptr)
    return reject(request, "no variable at offset " + std::to_string(offset) + " of module '" +
                               name + "' here");
  // The sender checked its own memory; a second look here costs little.
  if (!covers(writable_mappings(), target, bytes.size()))
    return reject(request, "process " + std::to_string(rank_) + " has no writable memory at the " +
                               std::to_string(bytes.size()) + " bytes from " +
                               hex_address(target));
  memcpy(target, bytes.data(), bytes.size());
  reply(request.token(), message_writer(message_type::distribute_reply));
}

}  // namespace tmk
