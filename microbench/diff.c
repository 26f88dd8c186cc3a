/*
 * diff — the time to bring a modified page up to date with a diff (the
 * Diff microbenchmark of the TreadMarks distribution), in two cases:
 *
 *   small  process 0 writes one word of each page of a region
 *   large  process 0 writes every word of every page
 *
 * Process 1 holds a copy of every page beforehand.  In each run process 0
 * writes (new values each run, so that every written word differs from its
 * twin), which invalidates process 1's copies once the writes reach it,
 * and process 1 reads the same words in address order: each page it
 * touches faults and fetches process 0's diff, which process 0 creates on
 * demand.  The writes reach process 1 through process 2, by a lock and a
 * condition variable from process 0 to process 2 and another from process
 * 2 to process 1: a process sends the diffs of the pages another fetched
 * from it lately along with its barriers and its lock grants to it, so
 * that with a barrier, or a grant from process 0, the diffs would come
 * with the synchronisation and nothing would fault.
 * Process 1's pass divided by the number of pages is the time per page.  A
 * second barrier ends the run before process 0 writes again.  Process 1
 * checks every value it read, and with its statistics that the pages came
 * as diffs.  (tmk validates the pages after a faulting one together, up to
 * TMK_PREFETCH_PAGES of them: TMK_PREFETCH_PAGES=1 makes every page its own
 * fault and round trip, as in TreadMarks.)  The program stops with an
 * error if process 1's reads fetched no diffs.  Other processes only pass
 * the barriers.
 *
 * Usage: diff [-c small|large] [-i PAGES] [-r RUNS] [--csv] [-- -n NPROCS]
 *        (at least 3 processes)
 */
#define _POSIX_C_SOURCE 200809L

#include "microbench.h"

#include <stdint.h>

static const char *const cases[] = {"small", "large", NULL};

/* The region, allocated once by process 0, and after its pages two words:
 * the runs process 0 has written (under lock 1), and the runs process 2
 * has handed on (under lock 0). */
static uint32_t *region;
static unsigned long runs_without_fetch; /* process 1's, since the warm-up */

static volatile uint32_t *runs_written(int pages)
{
  return (volatile uint32_t *)&region[(size_t)pages * (Tmk_page_size / sizeof *region)];
}

static volatile uint32_t *runs_handed_on(int pages)
{
  return runs_written(pages) + 1;
}

/* The value of word `word` of page `page` in run `run`: it changes from
 * one run to the next in every word. */
static uint32_t value_of(int run, int page, size_t word, size_t words_per_page)
{
  return (uint32_t)run * 0x9E3779B1u + (uint32_t)((size_t)page * words_per_page + word);
}

/* The words a run touches in each page: the first, or all. */
static size_t words_touched(int large)
{
  return large ? Tmk_page_size / sizeof *region : 1;
}

static void write_pages(int run, int pages, int large)
{
  size_t words_per_page = Tmk_page_size / sizeof *region;
  size_t touched = words_touched(large);
  for (int page = 0; page < pages; page++)
    for (size_t word = 0; word < touched; word++)
      region[(size_t)page * words_per_page + word] = value_of(run, page, word, words_per_page);
}

static uint32_t read_pages(int pages, int large)
{
  size_t words_per_page = Tmk_page_size / sizeof *region;
  size_t touched = words_touched(large);
  uint32_t sum = 0;
  for (int page = 0; page < pages; page++)
    for (size_t word = 0; word < touched; word++)
      sum += ((volatile uint32_t *)region)[(size_t)page * words_per_page + word];
  return sum;
}

static uint32_t expected_sum(int run, int pages, int large)
{
  size_t words_per_page = Tmk_page_size / sizeof *region;
  size_t touched = words_touched(large);
  uint32_t sum = 0;
  for (int page = 0; page < pages; page++)
    for (size_t word = 0; word < touched; word++)
      sum += value_of(run, page, word, words_per_page);
  return sum;
}

/* One run; returns process 1's time per page in us. */
static double run_once(int run, int pages, int large)
{
  if (Tmk_proc_id == 0) {
    write_pages(run, pages, large);
    microbench_writes_done(runs_written(pages), 1);
  } else if (Tmk_proc_id == 2) {
    microbench_await_writes(runs_written(pages), (uint32_t)run + 1, 1);
    microbench_writes_done(runs_handed_on(pages), 0);
  }
  double time = 0;
  unsigned long requests_before = 0;
  if (Tmk_proc_id == 1) {
    microbench_await_writes(runs_handed_on(pages), (uint32_t)run + 1, 0);
    requests_before = Tmk_stat.diff_requests; /* up to date at the release */
    double start = microbench_now_us();
    uint32_t sum = read_pages(pages, large);
    time = (microbench_now_us() - start) / pages;
    if (sum != expected_sum(run, pages, large))
      Tmk_errexit("diff: process 1 read values other than process 0 wrote in run %d", run);
  }
  Tmk_barrier(2);
  if (Tmk_proc_id == 1 && run > 0 && Tmk_stat.diff_requests == requests_before)
    runs_without_fetch++;
  return time;
}

int main(int argc, char **argv)
{
  struct microbench_options options = {
      .name = "diff", .operation = "page", .cases = cases, .iterations = 1024, .runs = 7};
  microbench_parse(&options, argc, argv);
  int large = strcmp(options.which, "large") == 0;
  int pages = options.iterations;

  Tmk_startup(argc, argv);
  if (Tmk_nprocs < 3)
    Tmk_errexit("diff: needs at least 3 processes (-- -n 3): process 2 hands process 0's writes "
                "on to process 1");
  if ((unsigned long)(pages + 1) * Tmk_page_size > UINT_MAX)
    Tmk_errexit("diff: %d pages are too many for one Tmk_malloc", pages);

  if (Tmk_proc_id == 0) {
    region = Tmk_malloc((unsigned)(pages + 1) * Tmk_page_size);
    if (region == NULL)
      Tmk_errexit("diff: cannot allocate %d pages of shared memory", pages);
    *runs_written(pages) = 0;
    *runs_handed_on(pages) = 0;
    Tmk_distribute(&region, sizeof region);
  }
  Tmk_barrier(0);
  if (Tmk_proc_id == 1)
    read_pages(pages, 1); /* process 1's first copies: whole pages */
  Tmk_barrier(0);

  double times[MICROBENCH_MAX_RUNS];
  run_once(0, pages, large); /* warm-up */
  unsigned long applied_before = Tmk_stat.diffs_applied;
  for (int run = 0; run < options.runs; run++)
    times[run] = run_once(run + 1, pages, large);
  Tmk_barrier(0);
  if (Tmk_proc_id == 1) {
    unsigned long expected = (unsigned long)options.runs * (unsigned long)pages;
    unsigned long applied = Tmk_stat.diffs_applied - applied_before;
    if (runs_without_fetch > 0)
      Tmk_errexit("diff: in %lu of %d runs process 1's reads fetched no diff: the diffs came "
                  "another way, and the times measure no fetch",
                  runs_without_fetch, options.runs);
    if (applied < expected)
      fprintf(stderr, "diff: warning: only %lu of the %lu pages read came as diffs\n", applied,
              expected);
  }
  microbench_collect(times, options.runs, 1);
  microbench_report(&options, times);
  Tmk_exit(0);
}
