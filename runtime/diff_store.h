// diff_store.h — the memory that holds the diffs this process made, from
// the moment each is made until a garbage collection drops them all.
//
// Diffs are kept as long as another process may still ask for them, so
// this memory only grows between collections: every barrier that pushes
// diffs adds to it.  Taken from the allocator, each new page of it would
// be faulted in at its first write, one trap per page (see populated.h for
// what that costs).  The store maps chunks of 2 MiB (or one diff's worth
// of whole 2 MiB, if larger) populated at once in huge pages and packs
// diffs into them one after another; clear() keeps the chunks, already
// populated, for the diffs made after the collection.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tmk {

class diff_store {
 public:
  static constexpr std::size_t chunk_bytes = std::size_t{2} << 20;  // huge_page_bytes

  diff_store() = default;
  diff_store(const diff_store&) = delete;
  diff_store& operator=(const diff_store&) = delete;
  ~diff_store();

  // Room for a diff of up to most bytes, made there in place (nullptr if
  // no memory could be mapped for it).  keep_made(size) then keeps its
  // first size bytes, which stay put until clear(), and leaves the rest of
  // the room to the next diff.
  std::byte* room(std::size_t most);
  std::span<const std::byte> keep_made(std::size_t size);
  // Maps the first chunk now, if none is yet; false if it could not be.
  bool prepare();
  // Forgets every diff kept: the spans keep_made() returned must no longer
  // be used.  The chunks stay mapped for the next ones.
  void clear();
  // Bytes of diffs kept since the last clear(), and bytes mapped.
  std::size_t bytes_kept() const { return kept_; }
  std::size_t bytes_mapped() const;

 private:
  bool add_chunk(std::size_t size);  // maps and appends one; false if no memory
  struct chunk {
    std::byte* base;
    std::size_t size;
  };
  std::vector<chunk> chunks_;
  std::size_t current_ = 0;  // the chunk being filled (chunks_.size(): none yet)
  std::size_t used_ = 0;     // bytes of it used
  std::size_t kept_ = 0;
};

}  // namespace tmk
