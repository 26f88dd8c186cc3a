/*
 * lock — the time of one Tmk_lock_acquire that needs messages (the Lock
 * microbenchmark of the TreadMarks distribution), in four cases:
 *
 *   direct    the lock was last released by its manager: process 0, which
 *             manages lock 0, takes and releases it, then process 1
 *             acquires it (a request to the manager, which grants it)
 *   indirect  the lock was last released by a third process: process 2
 *             takes and releases it, then process 1 acquires it (a request
 *             to the manager, process 0, which forwards it to process 2,
 *             which grants it); needs at least 3 processes
 *   migratory as direct, with data that migrates under the lock: a block of
 *             16 pages whose every word the releaser increments in its
 *             critical section and process 1 in its own; the time is
 *             process 1's acquire and pass over the block.  Run after run,
 *             the lock has changed hands more times: the times of the
 *             runs show whether a hand-off costs more the more there have
 *             been.  Process 1 checks every word it reads.
 *   round     the lock goes around every process in turn, each waiting on a
 *             condition of its own until the one before signals it, then
 *             adding 1 to a counter and to ROUND_WORDS words beside it;
 *             the time is process 0's for a run, divided by the turns of
 *             all processes in it.  Each acquirer lacks the writes of every
 *             other process since its last turn, which the grant carries
 *             from the last holder.  Process 0 checks the counter and the
 *             words at the end.
 *
 * A process that released a lock last takes it again with no message, so
 * the holders alternate: in each iteration the releaser takes the lock
 * back and releases it, all meet at a barrier, process 1 acquires (timed)
 * and releases, and all meet again.  Only the acquire is timed; process 1
 * checks with its statistics that every timed acquire was remote.  Other
 * processes only pass the barriers.
 *
 * Usage: lock [-c direct|indirect|migratory|round] [-i ITERATIONS] [-r RUNS] [--csv]
 *             [-- -n NPROCS]
 */
#define _POSIX_C_SOURCE 200809L

#include "microbench.h"

enum { LOCK_ID = 0 };  /* managed by process 0 (id % nprocs) */

static const char *const cases[] = {"direct", "indirect", "migratory", "round", NULL};

enum { BLOCK_PAGES = 16 };

/* The migratory case's block (NULL in the others), allocated by process 0, and
 * how many times each of its two holders has incremented every word. */
static uint32_t *block;
static size_t block_words;
static uint32_t increments;

static void increment_block(void)
{
  for (size_t k = 0; k < block_words; k++)
    block[k]++;
}

/* Process 1, holding the lock: every word must be as many increments as
 * both holders made. */
static void check_block(void)
{
  for (size_t k = 0; k < block_words; k++)
    if (block[k] != 2 * increments)
      Tmk_errexit("lock: word %zu of the migrating block is %u after %u hand-offs each way; "
                  "expected %u", k, block[k], increments, 2 * increments);
}

/* Runs iterations rounds; returns process 1's time in acquires, in us.
 * The barriers order the two holders: the releaser has released before
 * process 1 asks, and process 1 has released before the releaser asks
 * again: neither waits for the other's release, and neither still holds
 * the token when it asks. */
static double alternate(unsigned releaser, int iterations)
{
  double acquiring = 0;
  for (int i = 0; i < iterations; i++) {
    if (Tmk_proc_id == releaser) {
      Tmk_lock_acquire(LOCK_ID);
      if (block != NULL)
        increment_block();
      Tmk_lock_release(LOCK_ID);
    }
    Tmk_barrier(1);
    if (Tmk_proc_id == 1) {
      double start = microbench_now_us();
      Tmk_lock_acquire(LOCK_ID);
      if (block != NULL)
        increment_block();
      acquiring += microbench_now_us() - start;
      if (block != NULL) {
        increments++;
        check_block();
      }
      Tmk_lock_release(LOCK_ID);
    }
    Tmk_barrier(2);
  }
  return acquiring;
}

enum { ROUND_WORDS = 16 };

/* The round case's counter, then its words (allocated by process 0). */
static uint32_t *round_data;

/* One run of the round case: iterations turns of each process; returns
 * process 0's time a turn, in us. */
static double go_round(int iterations)
{
  unsigned me = Tmk_proc_id, n = Tmk_nprocs;
  Tmk_barrier(0);
  double start = microbench_now_us();
  for (int turn = 0; turn < iterations; turn++) {
    Tmk_lock_acquire(LOCK_ID);
    while (round_data[0] % n != me)
      Tmk_lock_cond_wait(LOCK_ID, me);
    for (int k = 0; k <= ROUND_WORDS; k++)
      round_data[k]++;
    Tmk_lock_cond_signal(LOCK_ID, (me + 1) % n);
    Tmk_lock_release(LOCK_ID);
  }
  double time = (microbench_now_us() - start) / ((double)iterations * n);
  Tmk_barrier(0);
  return time;
}

static void round_case(struct microbench_options *options)
{
  if (Tmk_proc_id == 0) {
    round_data = Tmk_malloc((ROUND_WORDS + 1) * sizeof *round_data);
    if (round_data == NULL)
      Tmk_errexit("lock: cannot allocate %d words of shared memory", ROUND_WORDS + 1);
    memset(round_data, 0, (ROUND_WORDS + 1) * sizeof *round_data);
    Tmk_distribute(&round_data, sizeof round_data);
  }
  Tmk_barrier(0);
  double times[MICROBENCH_MAX_RUNS];
  int warm_up = options->iterations < 100 ? options->iterations : 100;
  go_round(warm_up);
  for (int run = 0; run < options->runs; run++)
    times[run] = go_round(options->iterations);
  if (Tmk_proc_id == 0) {
    uint32_t turns = (uint32_t)(warm_up + options->runs * options->iterations) * Tmk_nprocs;
    for (int k = 0; k <= ROUND_WORDS; k++)
      if (round_data[k] != turns)
        Tmk_errexit("lock: word %d is %u after %u turns", k, round_data[k], turns);
  }
  microbench_collect(times, options->runs, 0);
  microbench_report(options, times);
  Tmk_exit(0);
}

int main(int argc, char **argv)
{
  struct microbench_options options = {
      .name = "lock", .operation = "acquire", .cases = cases, .iterations = 1000, .runs = 7};
  microbench_parse(&options, argc, argv);
  int indirect = strcmp(options.which, "indirect") == 0;

  Tmk_startup(argc, argv);
  if (Tmk_nprocs < (indirect ? 3u : 2u))
    Tmk_errexit("lock: the %s case needs at least %d processes (-- -n %d)", options.which,
                indirect ? 3 : 2, indirect ? 3 : 2);
  unsigned releaser = indirect ? 2 : 0;
  if (strcmp(options.which, "round") == 0) {
    options.operation = "turn";
    round_case(&options);
  }
  if (strcmp(options.which, "migratory") == 0) {
    options.operation = "hand-off";
    block_words = (size_t)BLOCK_PAGES * Tmk_page_size / sizeof *block;
    if (Tmk_proc_id == 0) {
      block = Tmk_malloc(BLOCK_PAGES * Tmk_page_size);
      if (block == NULL)
        Tmk_errexit("lock: cannot allocate %d pages of shared memory", BLOCK_PAGES);
      Tmk_distribute(&block, sizeof block);
    }
    Tmk_barrier(0);
  }

  double times[MICROBENCH_MAX_RUNS];
  alternate(releaser, options.iterations < 100 ? options.iterations : 100); /* warm-up */
  Tmk_barrier(0);
  unsigned long remote_before = Tmk_stat.remote_acquires;
  for (int run = 0; run < options.runs; run++) {
    Tmk_barrier(0);
    times[run] = alternate(releaser, options.iterations) / options.iterations;
  }
  Tmk_barrier(0);  /* also brings Tmk_stat up to date */
  if (Tmk_proc_id == 1) {
    unsigned long timed = (unsigned long)options.runs * (unsigned long)options.iterations;
    unsigned long remote = Tmk_stat.remote_acquires - remote_before;
    if (remote != timed)
      Tmk_errexit("lock: %lu of %lu timed acquires needed a message; the benchmark measures "
                  "remote acquires only", remote, timed);
  }
  microbench_collect(times, options.runs, 1);
  microbench_report(&options, times);
  Tmk_exit(0);
}
