/*
 * jacobi — Jacobi relaxation on a TreadMarks shared grid.
 *
 * The grid has ROWS x COLS interior points inside a fixed boundary; the
 * default 1022 x 1022 makes a shared row of 1024 floats exactly one 4 kB
 * page.  Each process owns a band of rows.  An iteration computes the new
 * value of every point of the band, the mean of its four neighbours, into a
 * private scratch band, waits at a barrier until every process has read the
 * old grid, copies the scratch band into the shared grid and waits again.
 * Barriers are the only synchronization; only the rows at the edges of a band
 * travel between processes.
 *
 * Afterwards process 0 repeats the computation sequentially in private
 * memory and compares every point bit for bit.
 *
 * Usage: jacobi [-i ITERATIONS] [-m ROWS] [-n COLS] [-s SIZE] [-- tmk options]
 */
#define _POSIX_C_SOURCE 200809L

#include <Tmk.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The shared grid, allocated by process 0 and distributed to the others. */
static float *grid;

static int rows = 1022;  /* interior rows */
static int cols = 1022;  /* interior columns */
static int iterations = 500;  /* about 0.3 s on one process of a current core */
static size_t stride;    /* floats in a row, boundary included */

#define GRID(i, j) grid[(size_t)(i) * stride + (j)]

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-i ITERATIONS] [-m ROWS] [-n COLS] [-s SIZE] [-- tmk options]\n"
          "  -i ITERATIONS  iterations (default 500)\n"
          "  -m ROWS        interior rows of the grid (default 1022)\n"
          "  -n COLS        interior columns of the grid (default 1022)\n"
          "  -s SIZE        a SIZE x SIZE grid, the same as -m SIZE -n SIZE\n",
          program);
  exit(2);
}

/* The value of option -letter: a positive decimal number no larger than
 * max, or the program stops saying which option was wrong. */
static int parse_count(const char *program, int letter, const char *text, long max)
{
  char *end;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > max) {
    fprintf(stderr, "%s: -%c %s: expected a whole number from 1 to %ld\n", program, letter,
            text, max);
    usage(program);
  }
  return (int)value;
}

/* The starting value of point (i, j): the boundary rises from 0 to 1 along
 * the rows, and the interior holds reproducible pseudo-random values in
 * [0, 1), so that every point changes in every iteration and a stale copy
 * anywhere shows up in the check. */
static float initial_value(int i, int j)
{
  if (i == 0 || i == rows + 1 || j == 0 || j == cols + 1)
    return (float)i / (float)(rows + 1);
  uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)j * 0x85EBCA77u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return (float)(h >> 8) / 16777216.0f;
}

static void initialize_row(float *row, int i)
{
  for (int j = 0; j <= cols + 1; j++)
    row[j] = initial_value(i, j);
}

/* One Jacobi step for rows begin..end-1 of old, written to new_rows, whose
 * first row is row begin.  Both the parallel and the sequential version use
 * it, so the two do the same arithmetic in the same order. */
static void relax(const float *old, float *new_rows, int begin, int end)
{
  for (int i = begin; i < end; i++) {
    const float *up = old + (size_t)(i - 1) * stride;
    const float *here = old + (size_t)i * stride;
    const float *down = old + (size_t)(i + 1) * stride;
    float *out = new_rows + (size_t)(i - begin) * stride;
    for (int j = 1; j <= cols; j++)
      out[j] = (up[j] + down[j] + here[j - 1] + here[j + 1]) / 4;
  }
}

static void copy_back(float *target, const float *new_rows, int begin, int end)
{
  for (int i = begin; i < end; i++)
    memcpy(target + (size_t)i * stride + 1, new_rows + (size_t)(i - begin) * stride + 1,
           (size_t)cols * sizeof(float));
}

/* The same iterations on a private grid. */
static float *solve_sequentially(void)
{
  size_t count = ((size_t)rows + 2) * stride;
  float *old = malloc(count * sizeof *old);
  float *scratch = malloc((size_t)rows * stride * sizeof *scratch);
  if (old == NULL || scratch == NULL) {
    free(old);
    free(scratch);
    return NULL;
  }
  for (int i = 0; i <= rows + 1; i++)
    initialize_row(old + (size_t)i * stride, i);
  for (int iteration = 0; iteration < iterations; iteration++) {
    relax(old, scratch, 1, rows + 1);
    copy_back(old, scratch, 1, rows + 1);
  }
  free(scratch);
  return old;
}

static double seconds_now(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
  int option;
  while ((option = getopt(argc, argv, "i:m:n:s:")) != -1) {
    switch (option) {
    case 'i':
      iterations = parse_count(argv[0], option, optarg, INT_MAX);
      break;
    case 'm':
      rows = parse_count(argv[0], option, optarg, 1000000);
      break;
    case 'n':
      cols = parse_count(argv[0], option, optarg, 1000000);
      break;
    case 's':
      rows = cols = parse_count(argv[0], option, optarg, 1000000);
      break;
    default:
      usage(argv[0]);
    }
  }
  if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
    fprintf(stderr, "%s: unexpected argument %s (tmk's options go after --)\n", argv[0],
            argv[optind]);
    usage(argv[0]);
  }
  stride = (size_t)cols + 2;
  size_t grid_bytes = ((size_t)rows + 2) * stride * sizeof(float);
  if (grid_bytes > UINT_MAX) {
    fprintf(stderr, "%s: a %d x %d grid is too large\n", argv[0], rows, cols);
    exit(2);
  }

  Tmk_startup(argc, argv);

  if (Tmk_proc_id == 0) {
    grid = Tmk_malloc((unsigned)grid_bytes);
    if (grid == NULL)
      Tmk_errexit("jacobi: cannot allocate a %zu-byte grid in shared memory", grid_bytes);
    Tmk_distribute(&grid, sizeof grid);
  }
  Tmk_barrier(0);

  /* Rows 1..rows are dealt out in bands that differ by at most one row. */
  int begin = 1 + (int)((long)Tmk_proc_id * rows / Tmk_nprocs);
  int end = 1 + (int)((long)(Tmk_proc_id + 1) * rows / Tmk_nprocs);
  float *scratch = malloc(((size_t)(end - begin) + 1) * stride * sizeof *scratch);
  if (scratch == NULL)
    Tmk_errexit("jacobi: cannot allocate the scratch band");

  for (int i = begin; i < end; i++)
    initialize_row(&GRID(i, 0), i);
  if (Tmk_proc_id == 0)
    initialize_row(&GRID(0, 0), 0);
  if (Tmk_proc_id == Tmk_nprocs - 1)
    initialize_row(&GRID(rows + 1, 0), rows + 1);
  Tmk_barrier(0);

  double start = seconds_now();
  for (int iteration = 0; iteration < iterations; iteration++) {
    relax(grid, scratch, begin, end);
    Tmk_barrier(1);
    copy_back(grid, scratch, begin, end);
    Tmk_barrier(2);
  }
  double elapsed = seconds_now() - start;
  free(scratch);

  if (Tmk_proc_id != 0)
    Tmk_exit(0);

  printf("jacobi: %d x %d grid, %d iterations, %u processes\n", rows, cols, iterations,
         Tmk_nprocs);
  float *expected = solve_sequentially();
  if (expected == NULL)
    Tmk_errexit("jacobi: cannot allocate the grids for the sequential check");
  long mismatches = 0;
  char detail[160] = "";
  for (int i = 0; i <= rows + 1; i++) {
    for (int j = 0; j <= cols + 1; j++) {
      float want = expected[(size_t)i * stride + j];
      if (memcmp(&GRID(i, j), &want, sizeof want) != 0) {
        if (mismatches == 0)
          snprintf(detail, sizeof detail, "point (%d, %d) is %.9g, expected %.9g", i, j,
                   (double)GRID(i, j), (double)want);
        mismatches++;
      }
    }
  }
  free(expected);
  if (mismatches == 0)
    printf("check: passed (all %ld grid points bit for bit equal to a sequential run)\n",
           ((long)rows + 2) * ((long)cols + 2));
  else
    printf("check: FAILED (%ld grid points differ from a sequential run; %s)\n", mismatches,
           detail);
  printf("time: %.6f s\n", elapsed);
  Tmk_exit(mismatches == 0 ? 0 : 1);
}
