/*
 * fault — the cost of one page fault that needs other processes' data.
 *
 *   cold       a page this process has never seen, which process 0 wrote:
 *              it comes whole from process 0 (with the never-seen pages
 *              after it; a page nobody wrote would be zeros, not fetched)
 *   writers-1  a page this process holds, invalidated by the writes of one
 *              other process: its diff is fetched from that writer
 *   writers-4  the same page written (different words) by four other
 *              processes: their diffs are fetched from all four at once
 *
 * Process 1 is the reader; the writers are processes 0 (and 2, 3, 4 for
 * writers-4).  Each access is to a page 32 pages after the previous one,
 * beyond the pages a fault validates together, so that every access is a
 * fault of its own; the time per access is the time per fault.  The
 * writes reach the reader through a process that writes nothing, the
 * relay (the last process): by a lock and a condition variable from the
 * writers to the relay and another from the relay to the reader.  A
 * process sends the diffs of the pages another fetched from it lately
 * along with its barriers and its lock grants to it, so that with a
 * barrier, or a grant from a writer, the diffs would come with the
 * synchronisation and leave nothing to fault for; the program stops with
 * an error if the reader's faults fetched no diffs.
 *
 * Usage: fault [-c cold|writers-1|writers-4] [-i FAULTS] [-r RUNS] [--csv]
 *              [-- -n NPROCS]   (writers-1 needs 3 processes, writers-4 6)
 */
#define _POSIX_C_SOURCE 200809L

#include "microbench.h"

#include <stdint.h>

#define STRIDE 32 /* pages between two accesses */

static uint32_t *region;
static volatile uint32_t sink;
static unsigned long short_fetches; /* the reader's runs with fewer diff requests than faults */

static size_t words_per_page(void) { return Tmk_page_size / sizeof *region; }

static uint32_t read_pages(int faults)
{
  uint32_t sum = 0;
  for (int i = 0; i < faults; i++)
    sum += ((volatile uint32_t *)region)[(size_t)i * STRIDE * words_per_page()];
  return sum;
}

/* Writer w of writers writes its own word of each accessed page. */
static void write_pages(int faults, unsigned writer, unsigned value)
{
  for (int i = 0; i < faults; i++)
    region[(size_t)i * STRIDE * words_per_page() + writer] = value;
}

/* The words after the last accessed page count the writers' rounds
 * (under lock 1) and the relay's (under lock 0). */
static volatile uint32_t *done_count(int faults)
{
  return (volatile uint32_t *)&region[(size_t)faults * STRIDE * words_per_page()];
}

static volatile uint32_t *relayed_count(int faults)
{
  return done_count(faults) + 1;
}

static double run_once(const char *which, int faults, unsigned round)
{
  /* Whether to allocate is decided on what every process knows: region
   * itself arrives from process 0 at any time before barrier 1. */
  static int allocated;
  static unsigned writes_done; /* rounds of writes so far, the same everywhere */
  int writers = strcmp(which, "writers-4") == 0 ? 4 : 1;
  int cold = strcmp(which, "cold") == 0;
  if (cold || !allocated) {
    allocated = 1;
    if (Tmk_proc_id == 0) {
      region = Tmk_malloc((unsigned)(faults + 1) * STRIDE * Tmk_page_size);
      if (region == NULL)
        Tmk_errexit("fault: cannot allocate %d pages of shared memory", (faults + 1) * STRIDE);
      *done_count(faults) = 0;
      *relayed_count(faults) = 0;
      Tmk_distribute(&region, sizeof region);
    }
    Tmk_barrier(1);
    if (!cold && Tmk_proc_id == 1)
      sink = read_pages(faults); /* now held here, to be invalidated */
    Tmk_barrier(2);
  }
  double time = 0;
  unsigned long requests_before = 0;
  if (cold) {
    if (Tmk_proc_id == 0)
      write_pages(faults, 0, round + 1);
    Tmk_barrier(3);
    if (Tmk_proc_id == 1) {
      double start = microbench_now_us();
      sink = read_pages(faults);
      time = (microbench_now_us() - start) / faults;
    }
  } else {
    /* The writes reach the relay through lock 1 and the reader through
     * lock 0 (microbench_writes_done).  The writers are process 0, and
     * 2 .. writers for more than one. */
    unsigned me = Tmk_proc_id;
    writes_done++;
    Tmk_barrier(3);
    if (me == 0 || (me >= 2 && me <= (unsigned)writers)) {
      write_pages(faults, me, round);
      microbench_writes_done(done_count(faults), 1);
    } else if (me == Tmk_nprocs - 1) {
      microbench_await_writes(done_count(faults), writes_done * (unsigned)writers, 1);
      microbench_writes_done(relayed_count(faults), 0);
    } else if (me == 1) {
      microbench_await_writes(relayed_count(faults), writes_done, 0);
      requests_before = Tmk_stat.diff_requests; /* up to date at the release */
      double start = microbench_now_us();
      sink = read_pages(faults);
      time = (microbench_now_us() - start) / faults;
    }
  }
  Tmk_barrier(4);
  /* A diff request a fault at least (one to each writer): had the diffs
   * come with the handover, the faults would have asked for none. */
  if (!cold && Tmk_proc_id == 1 && round > 1 &&
      Tmk_stat.diff_requests - requests_before < (unsigned long)faults)
    short_fetches++;
  return time;
}

int main(int argc, char **argv)
{
  static const char *const cases[] = {"cold", "writers-1", "writers-4", NULL};
  struct microbench_options options = {
      .name = "fault", .operation = "fault", .cases = cases, .iterations = 256, .runs = 7};
  microbench_parse(&options, argc, argv);

  Tmk_startup(argc, argv);
  if (Tmk_nprocs < 2)
    Tmk_errexit("fault: needs at least 2 processes (-- -n 2)");
  if (strcmp(options.which, "writers-1") == 0 && Tmk_nprocs < 3)
    Tmk_errexit("fault: writers-1 needs 3 processes (-- -n 3): the last hands the writes on");
  if (strcmp(options.which, "writers-4") == 0 && Tmk_nprocs < 6)
    Tmk_errexit("fault: writers-4 needs 6 processes (-- -n 6): the last hands the writes on");
  if ((unsigned long)(options.iterations + 1) * STRIDE * Tmk_page_size > UINT_MAX)
    Tmk_errexit("fault: %d faults need too large a region", options.iterations);

  double times[MICROBENCH_MAX_RUNS];
  run_once(options.which, options.iterations, 1); /* warm-up */
  for (int run = 0; run < options.runs; run++)
    times[run] = run_once(options.which, options.iterations, 2 + (unsigned)run);
  Tmk_barrier(0);
  if (short_fetches > 0)
    Tmk_errexit("fault: in %lu of %d runs the reader's faults asked for fewer diffs than they "
                "were: the diffs came another way, and the times measure no fetch",
                short_fetches, options.runs);
  microbench_collect(times, options.runs, 1);
  microbench_report(&options, times);
  Tmk_exit(0);
}
