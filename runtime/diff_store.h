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
//
// A diff that later ones of its page made partly redundant is rewritten
// smaller in place (node::shrink_diffs), and compact() then slides every
// diff kept towards the start of the chunks, so that the room they left
// takes the next diffs: a program that rewrites its pages keeps the bytes
// each diff alone holds, not a page's worth at every barrier.  Fresh
// memory is what that saves: on the machine of BENCHMARKS.md a 2 MiB
// chunk the system had not handed out lately took 4.6-4.9 ms to populate,
// against 0.1 ms for memory just freed.
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
  // Whether room(most) would have to map a chunk.
  bool full(std::size_t most) const;
  // Keeps only the first size bytes of a diff keep_made() returned,
  // replaced by bytes (size at most the diff's); returns the diff now.
  std::span<const std::byte> rewrite(std::span<const std::byte> diff, const std::byte* bytes,
                                     std::size_t size);
  // Moves every diff kept (live: a pointer to each span keep_made() or
  // rewrite() returned, and no other) as far towards the start of the
  // chunks as the diffs before it allow, keeping their order, and points
  // the spans at their new places; the room after them takes the next
  // diffs.
  void compact(std::span<std::span<const std::byte>* const> live);
  // Maps the first chunk now, if none is yet; false if it could not be.
  bool prepare();
  // Maps one more chunk, for diffs to come; false if it could not be.
  bool grow();
  // Forgets every diff kept: the spans keep_made() returned must no longer
  // be used.  The chunks stay mapped for the next ones.
  void clear();
  // Bytes of diffs kept since the last clear(), bytes they take with
  // what rewrite() left of them until the next compact(), and bytes
  // mapped.
  std::size_t bytes_kept() const { return kept_; }
  std::size_t bytes_used() const;
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
