/*
 * page — the time to fetch a shared page another process holds (the Page
 * microbenchmark of the TreadMarks distribution).
 *
 * In each run process 0 allocates a fresh region of ITERATIONS pages with
 * Tmk_malloc, distributes its address with Tmk_distribute and writes one
 * word of every page; after a barrier process 1 reads the same words, in
 * address order, and the time of that pass divided by the number of pages
 * is the time per page.  Each run uses new pages, which process 1 has never
 * seen, so every one of them comes from process 0.  A page no process has
 * written holds zeros, which tmk reads without fetching: process 0 writes
 * each page so that there is something to fetch.  (tmk validates the
 * pages after a faulting one together, up to TMK_PREFETCH_PAGES of them:
 * TMK_PREFETCH_PAGES=1 makes every page its own fault and round trip, as
 * in TreadMarks.)  Other processes only pass the barriers.
 *
 * Usage: page [-i PAGES] [-r RUNS] [--csv] [-- -n NPROCS]
 */
#define _POSIX_C_SOURCE 200809L

#include "microbench.h"

#include <stdint.h>

/* The region of the current run, allocated by process 0. */
static uint32_t *region;

/* One word of each page: the first, which process 0 sets to the page's
 * number plus one. */
static void write_pages(int pages, size_t words_per_page)
{
  for (int page = 0; page < pages; page++)
    region[(size_t)page * words_per_page] = (uint32_t)page + 1;
}

static uint32_t read_pages(int pages, size_t words_per_page)
{
  uint32_t sum = 0;
  for (int page = 0; page < pages; page++)
    sum += ((volatile uint32_t *)region)[(size_t)page * words_per_page];
  return sum;
}

/* One run; returns process 1's time per page in us. */
static double run_once(int pages)
{
  size_t words_per_page = Tmk_page_size / sizeof *region;
  if (Tmk_proc_id == 0) {
    /* Twice the pages read: prefetching past the end of the pages read
     * must not reach the next run's. */
    region = Tmk_malloc(2u * (unsigned)pages * Tmk_page_size);
    if (region == NULL)
      Tmk_errexit("page: cannot allocate %d pages of shared memory", pages);
    Tmk_distribute(&region, sizeof region);
    write_pages(pages, words_per_page);
  }
  Tmk_barrier(1);
  double time = 0;
  if (Tmk_proc_id == 1) {
    double start = microbench_now_us();
    uint32_t sum = read_pages(pages, words_per_page);
    time = (microbench_now_us() - start) / pages;
    uint32_t expected = (uint32_t)((uint64_t)pages * (pages + 1) / 2);
    if (sum != expected)
      Tmk_errexit("page: process 1 read words summing to %u where process 0 wrote %u", sum, expected);
  }
  Tmk_barrier(2);
  return time;
}

int main(int argc, char **argv)
{
  struct microbench_options options = {
      .name = "page", .operation = "page", .iterations = 1024, .runs = 7};
  microbench_parse(&options, argc, argv);

  Tmk_startup(argc, argv);
  if (Tmk_nprocs < 2)
    Tmk_errexit("page: needs at least 2 processes (-- -n 2)");
  if (2ul * (unsigned long)options.iterations * Tmk_page_size > UINT_MAX)
    Tmk_errexit("page: %d pages are too many for one Tmk_malloc", options.iterations);

  double times[MICROBENCH_MAX_RUNS];
  run_once(options.iterations); /* warm-up */
  unsigned long fetched_before = Tmk_stat.page_fetches;
  for (int run = 0; run < options.runs; run++)
    times[run] = run_once(options.iterations);
  Tmk_barrier(0);
  if (Tmk_proc_id == 1) {
    unsigned long expected = (unsigned long)options.runs * (unsigned long)options.iterations;
    unsigned long fetched = Tmk_stat.page_fetches - fetched_before;
    if (fetched < expected)
      fprintf(stderr, "page: warning: only %lu of the %lu pages read were fetched\n", fetched,
              expected);
  }
  microbench_collect(times, options.runs, 1);
  microbench_report(&options, times);
  Tmk_exit(0);
}
