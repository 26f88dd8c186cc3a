/*
 * microbench.h — what the TreadMarks microbenchmarks (barrier, lock, page,
 * diff) share: their command line, the clock, the hand-over of the times
 * measured by one process to process 0, and the report.
 *
 * A benchmark makes one untimed warm-up run, then RUNS timed runs of
 * ITERATIONS operations each, and reports the median run's time per
 * operation in microseconds.  Process 0 prints, one line for people or,
 * with --csv, the header
 *   benchmark,case,nprocs,substrate,notify,us_per_op
 * and one row; the substrate and notification mode are those tmk runs on
 * (TMK_SUBSTRATE, TMK_NOTIFY; ucx and interrupt by default).
 *
 * Usage: NAME [-c CASE] [-i ITERATIONS] [-r RUNS] [--csv] [-- tmk options]
 *
 * Plain C11 over Tmk.h, like the programs a TreadMarks user writes.  Each
 * benchmark is one translation unit that includes this header once.  What
 * needs no runtime (number options, the clock, sorting) is in measure.h.
 */
#ifndef MICROBENCH_H
#define MICROBENCH_H

#include <Tmk.h>

#include "measure.h"

#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MICROBENCH_MAX_RUNS 1000

struct microbench_options {
  const char *name;        /* the benchmark: barrier, lock, page, diff */
  const char *operation;   /* what one operation is, for the report */
  const char *const *cases;  /* the accepted cases, NULL-terminated; NULL: none */
  const char *which;       /* the chosen case ("-" when there are none) */
  int iterations;          /* operations per run */
  int runs;                /* timed runs; the report is their median */
  int csv;
};

static inline void microbench_usage(const struct microbench_options *options, const char *why)
{
  if (why != NULL)
    fprintf(stderr, "%s: %s\n", options->name, why);
  fprintf(stderr,
          "usage: %s%s [-i ITERATIONS] [-r RUNS] [--csv] [-- tmk options]\n"
          "  -i ITERATIONS  %ss per run (default %d)\n"
          "  -r RUNS        timed runs, the report is their median (default %d)\n"
          "  --csv          print benchmark,case,nprocs,substrate,notify,us_per_op\n",
          options->name, options->cases != NULL ? " [-c CASE]" : "", options->operation,
          options->iterations, options->runs);
  if (options->cases != NULL) {
    fprintf(stderr, "  -c CASE        one of:");
    for (const char *const *one = options->cases; *one != NULL; one++)
      fprintf(stderr, " %s", *one);
    fprintf(stderr, " (default %s)\n", options->cases[0]);
  }
  exit(2);
}

/* Parses the benchmark's own options, which stop at "--"; tmk's follow it
 * and are left for Tmk_startup.  Exits with status 2 on a bad option. */
static inline void microbench_parse(struct microbench_options *options, int argc, char **argv)
{
  static const struct option longs[] = {
      {"csv", no_argument, NULL, 'C'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  options->which = options->cases != NULL ? options->cases[0] : "-";
  int option;
  /* "+": stop at the first word that is not an option, never permute. */
  while ((option = getopt_long(argc, argv, "+c:i:r:h", longs, NULL)) != -1) {
    switch (option) {
    case 'c': {
      const char *const *one = options->cases;
      while (one != NULL && *one != NULL && strcmp(*one, optarg) != 0)
        one++;
      if (one == NULL)
        microbench_usage(options, "this benchmark has no cases");
      if (*one == NULL)
        microbench_usage(options, "unknown case");
      options->which = *one;
      break;
    }
    case 'i': {
      int iterations = microbench_count(optarg, INT_MAX);
      if (iterations < 0)
        microbench_usage(options, "-i needs a positive number");
      options->iterations = iterations;
      break;
    }
    case 'r': {
      int runs = microbench_count(optarg, MICROBENCH_MAX_RUNS);
      if (runs < 0)
        microbench_usage(options, "-r needs a number from 1 to 1000");
      options->runs = runs;
      break;
    }
    case 'C':
      options->csv = 1;
      break;
    case 'h':
      microbench_usage(options, NULL);
      break;
    default:
      microbench_usage(options, NULL);
    }
  }
  if (optind < argc && strcmp(argv[optind - 1], "--") != 0)
    microbench_usage(options, "unexpected argument");
}

/*
 * Writes handed from writers to a reader through lock `lock` and its
 * condition 0, not through a barrier: a barrier carries the diffs of pages
 * with readers along, and the reader would not fault for them.  `count`
 * is a shared word (0 at first) that each writer bumps once per round.
 */
static inline void microbench_writes_done(volatile uint32_t *count, unsigned lock)
{
  Tmk_lock_acquire(lock);
  (*count)++;
  Tmk_lock_cond_signal(lock, 0);
  Tmk_lock_release(lock);
}

/* The reader: returns once `count` has reached `target`, with the writes
 * made before it visible here (they fault in as the reader touches them). */
static inline void microbench_await_writes(volatile uint32_t *count, uint32_t target,
                                           unsigned lock)
{
  Tmk_lock_acquire(lock);
  while (*count < target)
    Tmk_lock_cond_wait(lock, 0);
  Tmk_lock_release(lock);
}

/* The shared block through which the timing process hands its run times to
 * process 0; allocated by process 0 and distributed to the others. */
static double *microbench_handover;

/*
 * Collective: every process calls it once, after the timed runs.  The
 * process `timer` measured times[0 .. runs-1]; afterwards process 0 holds
 * them in its own times.  Costs two barriers (ids 1000 and 1001) and one
 * page of shared memory, all outside the timed runs.
 */
static inline void microbench_collect(double *times, int runs, unsigned timer)
{
  if (timer == 0)
    return;
  if (Tmk_proc_id == 0) {
    microbench_handover = Tmk_malloc((unsigned)(runs * sizeof *times));
    if (microbench_handover == NULL)
      Tmk_errexit("cannot allocate %d doubles of shared memory", runs);
    Tmk_distribute(&microbench_handover, sizeof microbench_handover);
  }
  Tmk_barrier(1000);
  if (Tmk_proc_id == timer)
    memcpy(microbench_handover, times, (size_t)runs * sizeof *times);
  Tmk_barrier(1001);
  if (Tmk_proc_id == 0)
    memcpy(times, microbench_handover, (size_t)runs * sizeof *times);
}

/* At process 0: prints the median of times[0 .. runs-1] (microseconds per
 * operation), which it sorts. */
static inline void microbench_report(const struct microbench_options *options, double *times)
{
  if (Tmk_proc_id != 0)
    return;
  const char *substrate = getenv("TMK_SUBSTRATE");
  const char *notify = getenv("TMK_NOTIFY");
  if (substrate == NULL || *substrate == '\0')
    substrate = "ucx";
  if (notify == NULL || *notify == '\0')
    notify = "interrupt";
  int runs = options->runs;
  microbench_sort(times, runs);
  double median = runs % 2 ? times[runs / 2] : (times[runs / 2 - 1] + times[runs / 2]) / 2;
  if (options->csv) {
    printf("benchmark,case,nprocs,substrate,notify,us_per_op\n");
    printf("%s,%s,%u,%s,%s,%.3f\n", options->name, options->which, Tmk_nprocs, substrate,
           notify, median);
  } else {
    printf("%s%s%s: %u processes, %s, %s: %.3f us per %s (median of %d runs of %d; "
           "fastest %.3f, slowest %.3f)\n",
           options->name, options->cases != NULL ? " " : "",
           options->cases != NULL ? options->which : "", Tmk_nprocs, substrate, notify, median,
           options->operation, runs, options->iterations, times[0], times[runs - 1]);
  }
  fflush(stdout);
}

#endif /* MICROBENCH_H */
