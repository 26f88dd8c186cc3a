/*
 * kr_example.c — a TreadMarks program in the old style many of them were
 * written in: K&R function definitions, implicit int, functions used before
 * they are declared.  tmkcc must compile it with the compiler's default
 * language (gnu17 for GCC 12 accepts all of this with warnings at most).
 *
 *   ./kr_example -- -n 2
 */
#include <stdio.h>
#include "Tmk.h"

#define N 4096

int *grid;
int *sums;

fill(first, last, value)
int first, last;
int value;
{
  register int i;
  for (i = first; i < last; i++)
    grid[i] = value + i;
  return last - first;
}

long
add_up(count)
int count;
{
  long s = 0;
  int i;
  for (i = 0; i < count; i++)
    s += grid[i];
  return s;
}

main(argc, argv)
int argc;
char **argv;
{
  int filled;
  long sum, expected;
  unsigned p;
  int ok;

  Tmk_startup(argc, argv);
  if (Tmk_proc_id == 0) {
    grid = (int *) Tmk_malloc(N * sizeof(int));
    sums = (int *) Tmk_malloc(Tmk_nprocs * sizeof(int));
    Tmk_distribute((char *) &grid, sizeof(grid));
    Tmk_distribute((char *) &sums, sizeof(sums));
  }
  Tmk_barrier(0);

  filled = fill(N * Tmk_proc_id / Tmk_nprocs, N * (Tmk_proc_id + 1) / Tmk_nprocs, 7);
  sums[Tmk_proc_id] = filled;
  Tmk_barrier(1);

  if (Tmk_proc_id == 0) {
    sum = add_up(N);
    expected = 7L * N + (long) N * (N - 1) / 2;
    filled = 0;
    for (p = 0; p < Tmk_nprocs; p++)
      filled += sums[p];
    ok = check(sum, expected, filled);
    Tmk_exit(ok ? 0 : 1);
  }
  Tmk_exit(0);
}

check(sum, expected, filled)
long sum, expected;
{
  int passed = sum == expected && filled == N;
  printf("kr_example: %u processes, %d filled, sum %ld: %s\n", Tmk_nprocs, filled, sum,
         passed ? "passed" : "FAILED");
  return passed;
}
