/*
 * sor_mpi — red-black successive over-relaxation with MPI, the message
 * passing counterpart of sor.c: the same grid, colours, bands and
 * arithmetic.
 *
 * Each rank keeps its band of rows of the red and the black matrix plus a
 * ghost row above and below.  Before a phase updates one colour, neighbours
 * exchange the edge rows of the other colour.  At the end rank 0 gathers the
 * bands, repeats the computation sequentially on one ordinary grid and
 * compares every point bit for bit.
 *
 * Usage: mpirun -np P sor_mpi [-i ITERATIONS] [-m ROWS] [-n COLS]
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

static int rows = 2000;     /* interior rows */
static int cols = 1000;     /* interior columns */
static int iterations = 10;
static int width;           /* entries in a row of either colour matrix */
static int nprocs, rank;

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-i ITERATIONS] [-m ROWS] [-n COLS]\n"
          "  -i ITERATIONS  red-black iterations (default 10)\n"
          "  -m ROWS        interior rows of the grid (default 2000)\n"
          "  -n COLS        interior columns of the grid (default 1000)\n",
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

/* The starting value of grid point (i, j), as in sor.c. */
static float initial_value(int i, int j)
{
  if (i == 0 || i == rows + 1 || j == 0 || j == cols + 1)
    return 1.0f;
  uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)j * 0x85EBCA77u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return (float)(h >> 8) / 16777216.0f;
}

/* Fills grid row i into red_row and black_row; see sor.c for the layout. */
static void initialize_row(float *red_row, float *black_row, int i)
{
  for (int k = 0; k < width; k++) {
    int even = 2 * k, odd = 2 * k + 1;
    float at_even = even <= cols + 1 ? initial_value(i, even) : 0.0f;
    float at_odd = odd <= cols + 1 ? initial_value(i, odd) : 0.0f;
    red_row[k] = i % 2 == 0 ? at_even : at_odd;
    black_row[k] = i % 2 == 0 ? at_odd : at_even;
  }
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

/*
 * A local matrix holds rows begin-1 .. end of one colour: local row l is
 * grid row begin - 1 + l.  update() writes local rows 1..count of the
 * colour `to` (red when `red` is set) from the other colour `from`, with
 * the index arithmetic of sor.c.
 */
static void update(float *to, const float *from, int begin, int count, int red)
{
#define TO(l, k) to[(size_t)(l) * width + (k)]
#define FROM(l, k) from[(size_t)(l) * width + (k)]
  for (int l = 1; l <= count; l++) {
    int i = begin - 1 + l;
    if ((i % 2 == 0) == red) {
      for (int k = 1; k <= cols / 2; k++)
        TO(l, k) = (FROM(l - 1, k) + FROM(l + 1, k) + FROM(l, k - 1) + FROM(l, k)) / 4;
    } else {
      for (int k = 0; k <= (cols - 1) / 2; k++)
        TO(l, k) = (FROM(l - 1, k) + FROM(l + 1, k) + FROM(l, k) + FROM(l, k + 1)) / 4;
    }
  }
#undef TO
#undef FROM
}

/* Sends the edge rows of matrix to the neighbours and receives its ghost
 * rows from them. */
static void exchange(float *matrix, int count, int up, int down)
{
  MPI_Request requests[4];
  int n = 0;
  if (up != MPI_PROC_NULL) {
    MPI_Irecv(matrix, width, MPI_FLOAT, up, 0, MPI_COMM_WORLD, &requests[n++]);
    traffic_isend(matrix + width, width, MPI_FLOAT, up, 0, &requests[n++]);
  }
  if (down != MPI_PROC_NULL) {
    MPI_Irecv(matrix + (size_t)(count + 1) * width, width, MPI_FLOAT, down, 0, MPI_COMM_WORLD,
              &requests[n++]);
    traffic_isend(matrix + (size_t)count * width, width, MPI_FLOAT, down, 0, &requests[n++]);
  }
  MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
}

/* The same iterations done the textbook way, on one private grid. */
static float *solve_sequentially(void)
{
  size_t stride = (size_t)cols + 2;
  float *grid = malloc(((size_t)rows + 2) * stride * sizeof *grid);
  if (grid == NULL)
    return NULL;
  for (int i = 0; i <= rows + 1; i++)
    for (int j = 0; j <= cols + 1; j++)
      grid[i * stride + j] = initial_value(i, j);
  for (int iteration = 0; iteration < iterations; iteration++) {
    for (int colour = 0; colour < 2; colour++) {
      for (int i = 1; i <= rows; i++)
        for (int j = 1 + (i + 1 + colour) % 2; j <= cols; j += 2)
          grid[i * stride + j] = (grid[(i - 1) * stride + j] + grid[(i + 1) * stride + j] +
                                  grid[i * stride + j - 1] + grid[i * stride + j + 1]) / 4;
    }
  }
  return grid;
}

/* Compares every grid point of the gathered matrices with the private
 * grid; returns the number of points that differ and reports the first. */
static long compare(const float *red, const float *black, const float *grid, char *detail,
                    size_t detail_size)
{
  size_t stride = (size_t)cols + 2;
  long mismatches = 0;
  for (int i = 0; i <= rows + 1; i++) {
    for (int j = 0; j <= cols + 1; j++) {
      const float *matrix = (i + j) % 2 == 0 ? red : black;
      float got = matrix[(size_t)i * width + j / 2];
      float expected = grid[i * stride + j];
      if (memcmp(&got, &expected, sizeof got) != 0) {
        if (mismatches == 0)
          snprintf(detail, detail_size, "point (%d, %d) is %.9g, expected %.9g", i, j,
                   (double)got, (double)expected);
        mismatches++;
      }
    }
  }
  return mismatches;
}

int main(int argc, char **argv)
{
  int option;
  while ((option = getopt(argc, argv, "i:m:n:")) != -1) {
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
    default:
      usage(argv[0]);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument %s\n", argv[0], argv[optind]);
    usage(argv[0]);
  }
  width = (cols + 3) / 2;
  if (((size_t)rows + 2) * width > INT_MAX) {
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
  size_t local_bytes = ((size_t)count + 2) * width * sizeof(float);
  float *red = malloc(local_bytes);
  float *black = malloc(local_bytes);
  if (red == NULL || black == NULL) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int l = 0; l <= count + 1; l++)
    initialize_row(red + (size_t)l * width, black + (size_t)l * width, begin - 1 + l);

  traffic_barrier();
  double start = MPI_Wtime();
  for (int iteration = 0; iteration < iterations; iteration++) {
    exchange(black, count, up, down);
    update(red, black, begin, count, 1);
    exchange(red, count, up, down);
    update(black, red, begin, count, 0);
  }
  traffic_barrier();
  double elapsed = MPI_Wtime() - start;

  /* Rank 0 gathers rows 1..rows of both colours; rows 0 and rows+1 never
   * change. */
  float *all_red = NULL, *all_black = NULL;
  int *counts = NULL, *offsets = NULL;
  if (rank == 0) {
    size_t all = ((size_t)rows + 2) * width;
    all_red = malloc(all * sizeof *all_red);
    all_black = malloc(all * sizeof *all_black);
    counts = malloc((size_t)nprocs * sizeof *counts);
    offsets = malloc((size_t)nprocs * sizeof *offsets);
    if (all_red == NULL || all_black == NULL || counts == NULL || offsets == NULL) {
      fprintf(stderr, "%s: out of memory\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int p = 0; p < nprocs; p++) {
      counts[p] = (band_begin(p + 1) - band_begin(p)) * width;
      offsets[p] = band_begin(p) * width;
    }
    initialize_row(all_red, all_black, 0);
    initialize_row(all_red + (size_t)(rows + 1) * width, all_black + (size_t)(rows + 1) * width,
                   rows + 1);
  }
  traffic_gatherv(red + width, count * width, MPI_FLOAT, all_red, counts, offsets, 0);
  traffic_gatherv(black + width, count * width, MPI_FLOAT, all_black, counts, offsets, 0);
  free(red);
  free(black);

  int status = 0;
  if (rank == 0) {
    printf("sor: %d x %d grid, %d iterations, %d processes\n", rows, cols, iterations, nprocs);
    float *grid = solve_sequentially();
    if (grid == NULL) {
      fprintf(stderr, "%s: cannot allocate the grid for the sequential check\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char detail[160];
    long mismatches = compare(all_red, all_black, grid, detail, sizeof detail);
    if (mismatches == 0)
      printf("check: passed (all %ld grid points bit for bit equal to a sequential run)\n",
             ((long)rows + 2) * ((long)cols + 2));
    else
      printf("check: FAILED (%ld grid points differ from a sequential run; %s)\n", mismatches,
             detail);
    printf("time: %.6f s\n", elapsed);
    status = mismatches == 0 ? 0 : 1;
    free(grid);
    free(all_red);
    free(all_black);
    free(counts);
    free(offsets);
  }
  traffic_report();
  MPI_Finalize();
  return status;
}
