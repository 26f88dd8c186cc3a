/*
 * example.c — a small TreadMarks program, built against an installed tmk
 * the ways a user would (CMake, pkg-config, tmkcc) by the package tests.
 *
 * Process 0 allocates a shared array and a shared total and distributes
 * their addresses; every process fills its stripe of the array; after a
 * barrier every process sums the whole array and adds the sum to the total
 * under a lock; process 0 checks the total against the closed form.
 *
 *   ./example [-m ELEMENTS] -- -n 2
 */
#include <Tmk.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long *array;
static long *total;

int main(int argc, char **argv) {
  long elements = 10000;
  int option;
  while ((option = getopt(argc, argv, "m:")) != -1) {
    if (option == 'm') elements = atol(optarg);
    else return 2;
  }

  Tmk_startup(argc, argv);
  if (Tmk_proc_id == 0) {
    array = Tmk_malloc((unsigned)(elements * sizeof(long)));
    total = Tmk_malloc(sizeof(long));
    if (array == NULL || total == NULL) Tmk_errexit("out of shared memory");
    *total = 0;
    Tmk_distribute(&array, sizeof array);
    Tmk_distribute(&total, sizeof total);
  }
  Tmk_barrier(0);

  long begin = elements * Tmk_proc_id / Tmk_nprocs;
  long end = elements * (Tmk_proc_id + 1) / Tmk_nprocs;
  for (long i = begin; i < end; ++i) array[i] = i + 1;
  Tmk_barrier(1);

  long sum = 0;
  for (long i = 0; i < elements; ++i) sum += array[i];
  Tmk_lock_acquire(0);
  *total += sum;
  Tmk_lock_release(0);
  Tmk_barrier(2);

  if (Tmk_proc_id == 0) {
    long expected = (long)Tmk_nprocs * (elements * (elements + 1) / 2);
    printf("example: %u processes, total %ld, expected %ld: %s\n", Tmk_nprocs, *total, expected,
           *total == expected ? "passed" : "FAILED");
    Tmk_exit(*total == expected ? 0 : 1);
  }
  Tmk_exit(0);
  return 0;
}
