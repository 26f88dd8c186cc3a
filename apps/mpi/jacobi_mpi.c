/*
 * jacobi_mpi — Jacobi relaxation with MPI, the message passing counterpart
 * of jacobi.c: the same grid, bands and arithmetic.
 *
 * Each rank keeps its band of rows plus a ghost row above and below.  An
 * iteration exchanges the edge rows with the neighbours, computes the new
 * band into a scratch band and copies it back.  At the end rank 0 gathers
 * the bands, repeats the computation sequentially and compares every point
 * bit for bit.
 *
 * Usage: mpirun -np P jacobi_mpi [-i ITERATIONS] [-m ROWS] [-n COLS] [-s SIZE]
 */
#define _POSIX_C_SOURCE 200809L

#include "traffic.h"

#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rows = 1022;  /* interior rows */
static int cols = 1022;  /* interior columns */
static int iterations = 500;  /* about 0.3 s on one process of a current core */
static size_t stride;    /* floats in a row, boundary included */
static int nprocs, rank;

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-i ITERATIONS] [-m ROWS] [-n COLS] [-s SIZE]\n"
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

/* The starting value of point (i, j), as in jacobi.c. */
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

/* One Jacobi step for rows begin..end-1 into new_rows, whose first row is
 * row begin; old's first row is grid row first.  The arithmetic is
 * jacobi.c's, in the same order. */
static void relax(const float *old, int first, float *new_rows, int begin, int end)
{
  for (int i = begin; i < end; i++) {
    const float *up = old + (size_t)(i - 1 - first) * stride;
    const float *here = old + (size_t)(i - first) * stride;
    const float *down = old + (size_t)(i + 1 - first) * stride;
    float *out = new_rows + (size_t)(i - begin) * stride;
    for (int j = 1; j <= cols; j++)
      out[j] = (up[j] + down[j] + here[j - 1] + here[j + 1]) / 4;
  }
}

static void copy_back(float *target, int first, const float *new_rows, int begin, int end)
{
  for (int i = begin; i < end; i++)
    memcpy(target + (size_t)(i - first) * stride + 1,
           new_rows + (size_t)(i - begin) * stride + 1, (size_t)cols * sizeof(float));
}

/* The first row of rank p's band; its band ends where p+1's begins. */
static int band_begin(int p)
{
  return 1 + (int)((long)p * rows / nprocs);
}

/* The rank whose band holds interior row i. */
static int owner(int i)
{
  int p = 0;
  while (band_begin(p + 1) <= i)
    p++;
  return p;
}

/* Sends the edge rows of the band to the neighbours and receives the ghost
 * rows from them; band points at local row 0, the upper ghost row. */
static void exchange(float *band, int count, int up, int down)
{
  MPI_Request requests[4];
  int n = 0;
  if (up != MPI_PROC_NULL) {
    MPI_Irecv(band, (int)stride, MPI_FLOAT, up, 0, MPI_COMM_WORLD, &requests[n++]);
    traffic_isend(band + stride, (int)stride, MPI_FLOAT, up, 0, &requests[n++]);
  }
  if (down != MPI_PROC_NULL) {
    MPI_Irecv(band + (size_t)(count + 1) * stride, (int)stride, MPI_FLOAT, down, 0,
              MPI_COMM_WORLD, &requests[n++]);
    traffic_isend(band + (size_t)count * stride, (int)stride, MPI_FLOAT, down, 0,
                  &requests[n++]);
  }
  MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
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
    relax(old, 0, scratch, 1, rows + 1);
    copy_back(old, 0, scratch, 1, rows + 1);
  }
  free(scratch);
  return old;
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
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument %s\n", argv[0], argv[optind]);
    usage(argv[0]);
  }
  stride = (size_t)cols + 2;
  if (((size_t)rows + 2) * stride > INT_MAX) {
    fprintf(stderr, "%s: a %d x %d grid is too large\n", argv[0], rows, cols);
    exit(2);
  }

  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int begin = band_begin(rank), end = band_begin(rank + 1);
  int count = end - begin;
  int up = count > 0 && begin > 1 ? owner(begin - 1) : MPI_PROC_NULL;
  int down = count > 0 && end <= rows ? owner(end) : MPI_PROC_NULL;
  /* band holds rows begin-1 .. end. */
  float *band = malloc(((size_t)count + 2) * stride * sizeof *band);
  float *scratch = malloc(((size_t)count + 1) * stride * sizeof *scratch);
  if (band == NULL || scratch == NULL) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int i = begin - 1; i <= end; i++)
    initialize_row(band + (size_t)(i - begin + 1) * stride, i);

  traffic_barrier();
  double start = MPI_Wtime();
  for (int iteration = 0; iteration < iterations; iteration++) {
    exchange(band, count, up, down);
    relax(band, begin - 1, scratch, begin, end);
    copy_back(band, begin - 1, scratch, begin, end);
  }
  traffic_barrier();
  double elapsed = MPI_Wtime() - start;
  free(scratch);

  /* Rank 0 gathers rows 1..rows; rows 0 and rows+1 never change. */
  float *all = NULL;
  int *counts = NULL, *offsets = NULL;
  if (rank == 0) {
    all = malloc(((size_t)rows + 2) * stride * sizeof *all);
    counts = malloc((size_t)nprocs * sizeof *counts);
    offsets = malloc((size_t)nprocs * sizeof *offsets);
    if (all == NULL || counts == NULL || offsets == NULL) {
      fprintf(stderr, "%s: out of memory\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int p = 0; p < nprocs; p++) {
      counts[p] = (band_begin(p + 1) - band_begin(p)) * (int)stride;
      offsets[p] = band_begin(p) * (int)stride;
    }
    initialize_row(all, 0);
    initialize_row(all + (size_t)(rows + 1) * stride, rows + 1);
  }
  traffic_gatherv(band + stride, count * (int)stride, MPI_FLOAT, all, counts, offsets, 0);
  free(band);

  int status = 0;
  if (rank == 0) {
    printf("jacobi: %d x %d grid, %d iterations, %d processes\n", rows, cols, iterations,
           nprocs);
    float *expected = solve_sequentially();
    if (expected == NULL) {
      fprintf(stderr, "%s: cannot allocate the grids for the sequential check\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long mismatches = 0;
    char detail[160] = "";
    for (int i = 0; i <= rows + 1; i++) {
      for (int j = 0; j <= cols + 1; j++) {
        size_t at = (size_t)i * stride + j;
        if (memcmp(&all[at], &expected[at], sizeof all[at]) != 0) {
          if (mismatches == 0)
            snprintf(detail, sizeof detail, "point (%d, %d) is %.9g, expected %.9g", i, j,
                     (double)all[at], (double)expected[at]);
          mismatches++;
        }
      }
    }
    if (mismatches == 0)
      printf("check: passed (all %ld grid points bit for bit equal to a sequential run)\n",
             ((long)rows + 2) * ((long)cols + 2));
    else
      printf("check: FAILED (%ld grid points differ from a sequential run; %s)\n", mismatches,
             detail);
    printf("time: %.6f s\n", elapsed);
    status = mismatches == 0 ? 0 : 1;
    free(expected);
    free(all);
    free(counts);
    free(offsets);
  }
  traffic_report();
  MPI_Finalize();
  return status;
}
