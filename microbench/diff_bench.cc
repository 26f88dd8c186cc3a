// diff_bench — the cost of making and applying the diff of one 4 KiB page
// (tmk::diff_create against its twin, tmk::diff_apply onto a copy) with 0,
// 1, 64 and all 1024 words changed, beside memcpy of the page, the memory
// speed floor that a whole-page transfer pays.  The changed words are
// spread evenly over the page, so that each is a run of its own until
// they touch.  Then what making a kept diff smaller under a later one
// costs (tmk::diff_subtract).  Beside them, what a page of fresh memory costs, faulted in
// at its first write, populated with the rest of a 1 MiB mapping, or
// populated in huge pages with the rest of a 2 MiB one.  Last, what
// writing a lock request costs (tmk::message_writer), on every acquire.
//
//   diff_bench [--benchmark_format=csv] [other Google Benchmark options]
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "diff.h"
#include "message.h"

namespace {

constexpr std::size_t page_size = 4096;
constexpr std::size_t words = page_size / tmk::diff_word;

// A twin and a page that differs from it in `changed` words, evenly spaced:
// in every byte, or (low_byte_only) in the lowest, as a small integer's
// increment does; such a diff carries byte masks.
struct page_pair {
  alignas(64) std::byte twin[page_size];
  alignas(64) std::byte page[page_size];

  explicit page_pair(std::size_t changed, bool low_byte_only = false) {
    for (std::size_t i = 0; i < words; ++i) {
      std::uint32_t value = static_cast<std::uint32_t>(i * 2654435761u);
      std::memcpy(twin + i * tmk::diff_word, &value, sizeof value);
    }
    std::memcpy(page, twin, page_size);
    if (changed == 0) return;
    std::size_t step = words / changed;
    for (std::size_t k = 0; k < changed; ++k) {
      std::uint32_t value;
      std::memcpy(&value, page + k * step * tmk::diff_word, sizeof value);
      value = low_byte_only ? value ^ 0x5a : ~value;
      std::memcpy(page + k * step * tmk::diff_word, &value, sizeof value);
    }
  }
};

void diff_create(benchmark::State& state, bool low_byte_only) {
  page_pair pair(static_cast<std::size_t>(state.range(0)), low_byte_only);
  // Made in place, as the runtime makes a diff in the memory that keeps it.
  alignas(64) static std::byte out[tmk::diff_max_bytes(page_size)];
  std::size_t size = 0;
  for (auto _ : state) {
    size = tmk::diff_create(pair.twin, pair.page, page_size, out);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * page_size));
  state.counters["diff_bytes"] = static_cast<double>(size);
}

void diff_apply(benchmark::State& state, bool low_byte_only) {
  page_pair pair(static_cast<std::size_t>(state.range(0)), low_byte_only);
  std::vector<std::byte> diff;
  tmk::diff_create(pair.twin, pair.page, page_size, diff);
  alignas(64) static std::byte target[page_size];
  std::memcpy(target, pair.twin, page_size);
  for (auto _ : state) {
    bool applied = tmk::diff_apply(target, page_size, diff);
    benchmark::DoNotOptimize(applied);
    benchmark::ClobberMemory();
  }
  if (std::memcmp(target, pair.page, page_size) != 0) state.SkipWithError("diff_apply is wrong");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * page_size));
  state.counters["diff_bytes"] = static_cast<double>(diff.size());
}

void diff_create_page(benchmark::State& state) { diff_create(state, false); }
void diff_apply_page(benchmark::State& state) { diff_apply(state, false); }
void diff_create_low_bytes(benchmark::State& state) { diff_create(state, true); }
void diff_apply_low_bytes(benchmark::State& state) { diff_apply(state, true); }

// Times the diff of pages[0] to pages[1] less that of pages[1] to
// pages[2], where pages[k] is pages[k - 1] with word i xor-ed with
// change(k, i).
template <typename Change>
void time_subtract(benchmark::State& state, Change change) {
  std::vector<std::byte> pages[3];
  pages[0].resize(page_size);
  for (std::size_t i = 0; i < words; ++i) {
    std::uint32_t value = static_cast<std::uint32_t>(i * 2654435761u);
    std::memcpy(pages[0].data() + i * tmk::diff_word, &value, sizeof value);
  }
  for (int k = 1; k < 3; ++k) {
    pages[k] = pages[k - 1];
    for (std::size_t i = 0; i < words; ++i) {
      std::uint32_t value;
      std::memcpy(&value, pages[k].data() + i * tmk::diff_word, sizeof value);
      value ^= change(k, i);
      std::memcpy(pages[k].data() + i * tmk::diff_word, &value, sizeof value);
    }
  }
  std::vector<std::byte> earlier, later;
  tmk::diff_create(pages[0].data(), pages[1].data(), page_size, earlier);
  tmk::diff_create(pages[1].data(), pages[2].data(), page_size, later);
  alignas(64) static std::byte out[tmk::diff_max_bytes(page_size)];
  std::size_t size = 0;
  for (auto _ : state) {
    size = tmk::diff_subtract(earlier, later, page_size, out);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.counters["diff_bytes"] = static_cast<double>(earlier.size());
  state.counters["left_bytes"] = static_cast<double>(size);
}

// What the runtime pays to make a kept diff smaller when a later one
// rewrites its bytes (node::shrink_diffs): the diff of a page of floats
// rewritten (the low three bytes of every word, the high byte of one word
// in 64) less the bytes of the next such rewrite.
void diff_subtract_rewritten_floats(benchmark::State& state) {
  time_subtract(state, [](int k, std::size_t i) {
    return 0x5a5a5au | (i % 64 == static_cast<std::size_t>(k) ? 0x11000000u : 0u);
  });
}

// The same for a page of doubles rewritten as FFT's time steps rewrite
// theirs, the values settling: each interval changes every double's low
// word and the low two bytes of its high word, the top one (sign and
// exponent) one time in eight, and the one below it seven times in eight
// in the earlier interval, one time in four in the later.  What is left of
// the earlier diff is single high words one apart, now and then three
// (FFT 32^3 on 2 processes: 200-480 such words a page, 35-67% of the
// bytes).
void diff_subtract_evolved_doubles(benchmark::State& state) {
  std::uint64_t seed = 12345;
  auto draw = [&](unsigned odds) {  // true one time in odds
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % odds == 0;
  };
  time_subtract(state, [&](int k, std::size_t i) {
    std::uint32_t bytes = i % 2 == 0 ? 0xffffffffu : 0x0000ffffu;  // the bytes that change
    if (i % 2 == 1 && (k == 1 ? !draw(8) : draw(4))) bytes |= 0x00ff0000u;
    if (i % 2 == 1 && draw(8)) bytes |= 0xff000000u;
    return bytes & 0x5b5b5b5bu;  // nonzero in each of them
  });
}

// A lock request of an 8-process job, written into the memory of the one
// before as the acquiring thread does: its type, the lock, the flag, the
// acquirer's vector time.
void message_lock_request(benchmark::State& state) {
  tmk::message_writer request(tmk::message_type::lock_acquire);
  std::vector<std::uint32_t> time{3, 1, 4, 1, 5, 9, 2, 6};
  std::uint32_t lock = 0;
  for (auto _ : state) {
    request.restart(tmk::message_type::lock_acquire);
    request.put<std::uint32_t>(lock++);
    request.put<std::uint8_t>(0);
    request.put_array(time);
    benchmark::DoNotOptimize(request.bytes().data());
    benchmark::ClobberMemory();
  }
}

void memcpy_page(benchmark::State& state) {
  page_pair pair(0);
  for (auto _ : state) {
    std::memcpy(pair.page, pair.twin, page_size);
    benchmark::DoNotOptimize(pair.page);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * page_size));
}

// The memory a kept diff lands in (runtime/diff_store.h): a fresh page
// faulted in by its first write, against a page of a 1 MiB mapping the
// kernel populated in one call, then written, and against a page of a
// 2 MiB mapping populated in huge pages, as the store maps them.  An
// iteration is one mapping; "pages" says how many 4 KiB pages it has.
void fresh_memory(benchmark::State& state, bool populated) {
  constexpr std::size_t chunk = std::size_t{1} << 20;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (populated ? MAP_POPULATE : 0);
  for (auto _ : state) {
    void* mapped = mmap(nullptr, chunk, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (mapped == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      break;
    }
    auto* bytes = static_cast<volatile char*>(mapped);
    for (std::size_t at = 0; at < chunk; at += page_size) bytes[at] = 1;
    state.PauseTiming();
    munmap(mapped, chunk);
    state.ResumeTiming();
  }
  state.counters["pages"] = static_cast<double>(chunk / page_size);
}

void fresh_page_faulted(benchmark::State& state) { fresh_memory(state, false); }
void fresh_page_populated(benchmark::State& state) { fresh_memory(state, true); }

void fresh_page_huge(benchmark::State& state) {
  constexpr std::size_t chunk = std::size_t{2} << 20;
  for (auto _ : state) {
    void* mapped = mmap(nullptr, 2 * chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      break;
    }
    auto address = reinterpret_cast<std::uintptr_t>(mapped);
    auto* base = static_cast<char*>(mapped) + (chunk - address % chunk) % chunk;
    madvise(base, chunk, MADV_HUGEPAGE);
#if defined(MADV_POPULATE_WRITE)
    madvise(base, chunk, MADV_POPULATE_WRITE);
#endif
    auto* bytes = reinterpret_cast<volatile char*>(base);
    for (std::size_t at = 0; at < chunk; at += page_size) bytes[at] = 1;
    state.PauseTiming();
    munmap(mapped, 2 * chunk);
    state.ResumeTiming();
  }
  state.counters["pages"] = static_cast<double>(chunk / page_size);
}

}  // namespace

BENCHMARK(diff_create_page)->ArgName("changed_words")->Arg(0)->Arg(1)->Arg(64)->Arg(words);
BENCHMARK(diff_apply_page)->ArgName("changed_words")->Arg(0)->Arg(1)->Arg(64)->Arg(words);
BENCHMARK(diff_create_low_bytes)->ArgName("changed_words")->Arg(64)->Arg(words);
BENCHMARK(diff_apply_low_bytes)->ArgName("changed_words")->Arg(64)->Arg(words);
BENCHMARK(diff_subtract_rewritten_floats);
BENCHMARK(diff_subtract_evolved_doubles);
BENCHMARK(memcpy_page);
BENCHMARK(message_lock_request);
BENCHMARK(fresh_page_faulted)->Unit(benchmark::kMicrosecond);
BENCHMARK(fresh_page_populated)->Unit(benchmark::kMicrosecond);
BENCHMARK(fresh_page_huge)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
