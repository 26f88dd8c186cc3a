/*
 * sor — red-black successive over-relaxation on a TreadMarks shared grid.
 *
 * The grid has ROWS x COLS interior points inside a fixed boundary.  Point
 * (i, j) is red when i + j is even and black otherwise.  As in the classic
 * TreadMarks program the two colours live in separate matrices, red[i][j/2]
 * and black[i][j/2], so that a phase writes one matrix and reads only the
 * other.  Each process owns a band of rows; an iteration updates the red
 * points of the band, meets the others at a barrier, updates the black points
 * and meets them again.  Only the rows at the edges of a band are shared with
 * the neighbouring processes.
 *
 * Afterwards process 0 repeats the computation sequentially on one ordinary
 * (ROWS+2) x (COLS+2) grid and compares every point bit for bit.
 *
 * Usage: sor [-i ITERATIONS] [-m ROWS] [-n COLS] [-- tmk options]
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

/* Shared matrices, allocated by process 0 and distributed to the others. */
static float *red;
static float *black;

static int rows = 2000;     /* interior rows */
static int cols = 1000;     /* interior columns */
static int iterations = 10;
static int width;           /* entries in a row of either colour matrix */

#define RED(i, k) red[(size_t)(i) * width + (k)]
#define BLACK(i, k) black[(size_t)(i) * width + (k)]

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-i ITERATIONS] [-m ROWS] [-n COLS] [-- tmk options]\n"
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

/* The starting value of grid point (i, j): 1 on the boundary, a
 * reproducible pseudo-random value in [0, 1) inside, so that every point
 * changes in every phase and a stale copy anywhere shows up in the check. */
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

/* Fills row i of both colour matrices.  Entry k of a row holds column 2k
 * of one colour and column 2k+1 of the other; the last entry of a row may
 * lie past the boundary column and is set to zero. */
static void initialize_row(int i)
{
  for (int k = 0; k < width; k++) {
    int even = 2 * k, odd = 2 * k + 1;
    float at_even = even <= cols + 1 ? initial_value(i, even) : 0.0f;
    float at_odd = odd <= cols + 1 ? initial_value(i, odd) : 0.0f;
    if (i % 2 == 0) {
      RED(i, k) = at_even;
      BLACK(i, k) = at_odd;
    } else {
      RED(i, k) = at_odd;
      BLACK(i, k) = at_even;
    }
  }
}

/* In row i the red points sit in entries 1..cols/2 when i is even, 0..(cols-1)/2
 * when i is odd, and the black points the other way round.  A red point's left
 * and right neighbours are black entries k-1 and k in an even row, k and k+1 in
 * an odd one, and a black point's the other way round.  Updates rows
 * begin..end-1 of colour `to` (red when `to_red` is set) from the other colour
 * `from`: the kernel of sor_mpi.c, written the same way, so that the two
 * compare the runtimes and not two compilations.  Written as two functions
 * over the globals, inlined into main, the same iterations ran 1.12-1.15
 * times as long on one process (GCC 12, -O2), their inner loops instruction
 * for instruction the same. */
static void update(float *to, const float *from, int begin, int end, int to_red)
{
#define TO(i, k) to[(size_t)(i) * width + (k)]
#define FROM(i, k) from[(size_t)(i) * width + (k)]
  for (int i = begin; i < end; i++) {
    if ((i % 2 == 0) == to_red) {
      for (int k = 1; k <= cols / 2; k++)
        TO(i, k) = (FROM(i - 1, k) + FROM(i + 1, k) + FROM(i, k - 1) + FROM(i, k)) / 4;
    } else {
      for (int k = 0; k <= (cols - 1) / 2; k++)
        TO(i, k) = (FROM(i - 1, k) + FROM(i + 1, k) + FROM(i, k) + FROM(i, k + 1)) / 4;
    }
  }
#undef TO
#undef FROM
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

static double seconds_now(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Compares every grid point of the shared matrices with the private grid;
 * returns the number of points that differ and reports the first. */
static long compare(const float *grid, char *detail, size_t detail_size)
{
  size_t stride = (size_t)cols + 2;
  long mismatches = 0;
  for (int i = 0; i <= rows + 1; i++) {
    for (int j = 0; j <= cols + 1; j++) {
      float shared = (i + j) % 2 == 0 ? RED(i, j / 2) : BLACK(i, j / 2);
      float expected = grid[i * stride + j];
      if (memcmp(&shared, &expected, sizeof shared) != 0) {
        if (mismatches == 0)
          snprintf(detail, detail_size, "point (%d, %d) is %.9g, expected %.9g", i, j,
                   (double)shared, (double)expected);
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
  if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
    fprintf(stderr, "%s: unexpected argument %s (tmk's options go after --)\n", argv[0],
            argv[optind]);
    usage(argv[0]);
  }
  width = (cols + 3) / 2;
  size_t matrix_bytes = ((size_t)rows + 2) * width * sizeof(float);
  if (matrix_bytes > UINT_MAX) {
    fprintf(stderr, "%s: a %d x %d grid is too large\n", argv[0], rows, cols);
    exit(2);
  }

  Tmk_startup(argc, argv);

  if (Tmk_proc_id == 0) {
    red = Tmk_malloc((unsigned)matrix_bytes);
    black = Tmk_malloc((unsigned)matrix_bytes);
    if (red == NULL || black == NULL)
      Tmk_errexit("sor: cannot allocate two %zu-byte matrices in shared memory", matrix_bytes);
    Tmk_distribute(&red, sizeof red);
    Tmk_distribute(&black, sizeof black);
  }
  Tmk_barrier(0);

  /* Rows 1..rows are dealt out in bands that differ by at most one row. */
  int begin = 1 + (int)((long)Tmk_proc_id * rows / Tmk_nprocs);
  int end = 1 + (int)((long)(Tmk_proc_id + 1) * rows / Tmk_nprocs);

  for (int i = begin; i < end; i++)
    initialize_row(i);
  if (Tmk_proc_id == 0)
    initialize_row(0);
  if (Tmk_proc_id == Tmk_nprocs - 1)
    initialize_row(rows + 1);
  Tmk_barrier(0);

  double start = seconds_now();
  for (int iteration = 0; iteration < iterations; iteration++) {
    update(red, black, begin, end, 1);
    Tmk_barrier(1);
    update(black, red, begin, end, 0);
    Tmk_barrier(2);
  }
  double elapsed = seconds_now() - start;

  if (Tmk_proc_id != 0)
    Tmk_exit(0);

  printf("sor: %d x %d grid, %d iterations, %u processes\n", rows, cols, iterations, Tmk_nprocs);
  float *grid = solve_sequentially();
  if (grid == NULL)
    Tmk_errexit("sor: cannot allocate the grid for the sequential check");
  char detail[160];
  long mismatches = compare(grid, detail, sizeof detail);
  free(grid);
  if (mismatches == 0)
    printf("check: passed (all %ld grid points bit for bit equal to a sequential run)\n",
           ((long)rows + 2) * ((long)cols + 2));
  else
    printf("check: FAILED (%ld grid points differ from a sequential run; %s)\n", mismatches, detail);
  printf("time: %.6f s\n", elapsed);
  Tmk_exit(mismatches == 0 ? 0 : 1);
}
