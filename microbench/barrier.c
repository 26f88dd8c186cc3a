/*
 * barrier — the time of one Tmk_barrier across every process of the job
 * (the Barrier microbenchmark of the TreadMarks distribution).
 *
 * All processes pass ITERATIONS barriers back to back; nothing is written
 * between them, so each barrier carries no intervals and measures the
 * synchronization alone.  Process 0 times each run from the barrier that
 * starts it to its own departure from the last one.
 *
 * Usage: barrier [-i ITERATIONS] [-r RUNS] [--csv] [-- -n NPROCS]
 */
#define _POSIX_C_SOURCE 200809L

#include "microbench.h"

static void pass_barriers(int count)
{
  for (int i = 0; i < count; i++)
    Tmk_barrier(1);
}

int main(int argc, char **argv)
{
  struct microbench_options options = {
      .name = "barrier", .operation = "barrier", .iterations = 1000, .runs = 7};
  microbench_parse(&options, argc, argv);

  Tmk_startup(argc, argv);

  double times[MICROBENCH_MAX_RUNS];
  pass_barriers(options.iterations < 100 ? options.iterations : 100); /* warm-up */
  for (int run = 0; run < options.runs; run++) {
    Tmk_barrier(0);
    double start = microbench_now_us();
    pass_barriers(options.iterations);
    times[run] = (microbench_now_us() - start) / options.iterations;
  }
  microbench_report(&options, times);
  Tmk_exit(0);
}
