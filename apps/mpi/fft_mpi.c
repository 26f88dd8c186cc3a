/*
 * fft_mpi — a 3-D FFT PDE solver in the manner of NAS FT, with MPI: the
 * message passing counterpart of fft.c, with the same slabs, 1-D transforms
 * and arithmetic.
 *
 * Each rank keeps a slab of z planes of the field, stored [z][y][x], and a
 * slab of x planes of the transposed arrays, stored [x][y][z].  The x and y
 * rounds of a transform run on the z slab; the transposes between the slabs
 * are all-to-all exchanges; the z round runs on the x slab.  The checksum of
 * each iteration is reduced to rank 0.  At the end rank 0 gathers the field,
 * repeats the computation sequentially, compares the field bit for bit and
 * the checksums within a relative 1e-12 (their terms are added in another
 * order).
 *
 * Usage: mpirun -np P fft_mpi [-i ITERATIONS] [-n N]
 */
#define _POSIX_C_SOURCE 200809L

#include "traffic.h"

#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALPHA 1e-6      /* NAS FT's diffusion constant */
#define CHECKSUM_POINTS 1024
#define MAX_SIZE 256

typedef struct {
  double re, im;
} dcomplex;

static int size = 32;
static int iterations = 6;   /* as NAS FT */
static dcomplex *roots;      /* exp(-2 pi i k / size), k < size/2 */
static dcomplex *line;       /* one line being transformed */
static int nprocs, rank;
static MPI_Datatype complex_type;

#define AT(array, a, b, c) (array)[((size_t)(a) * size + (b)) * size + (c)]

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-i ITERATIONS] [-n N]\n"
          "  -i ITERATIONS  time steps (default 6)\n"
          "  -n N           an N x N x N grid, N a power of two from 2 to %d (default 32)\n",
          program, MAX_SIZE);
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

/* A reproducible pseudo-random number in [0, 1) for each index. */
static double random_at(uint64_t index)
{
  uint64_t h = index + 0x9E3779B97F4A7C15u;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9u;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBu;
  h ^= h >> 31;
  return (double)(h >> 11) * 0x1.0p-53;
}

/* Fills plane z of the field into plane (stored [y][x]). */
static void initialize_plane(dcomplex *plane, int z)
{
  for (int y = 0; y < size; y++)
    for (int x = 0; x < size; x++) {
      uint64_t index = ((uint64_t)z * size + y) * size + x;
      plane[(size_t)y * size + x].re = random_at(2 * index);
      plane[(size_t)y * size + x].im = random_at(2 * index + 1);
    }
}

/* The evolution factor of the x plane at wave number x, stored [y][z]. */
static void initialize_twiddle_plane(double *plane, int x)
{
  const double pi = 3.141592653589793238;
  int kx = x < size / 2 ? x : x - size;
  for (int y = 0; y < size; y++) {
    int ky = y < size / 2 ? y : y - size;
    for (int z = 0; z < size; z++) {
      int kz = z < size / 2 ? z : z - size;
      plane[(size_t)y * size + z] =
          exp(-4.0 * ALPHA * pi * pi * (double)(kx * kx + ky * ky + kz * kz));
    }
  }
}

/* An in-place radix-2 transform of size points; inverse without scaling. */
static void fft_line(dcomplex *a, bool inverse)
{
  for (int i = 1, j = 0; i < size; i++) {
    int bit = size >> 1;
    for (; j & bit; bit >>= 1)
      j ^= bit;
    j ^= bit;
    if (i < j) {
      dcomplex t = a[i];
      a[i] = a[j];
      a[j] = t;
    }
  }
  for (int length = 2; length <= size; length <<= 1) {
    int half = length / 2, step = size / length;
    for (int start = 0; start < size; start += length) {
      for (int k = 0; k < half; k++) {
        dcomplex w = roots[k * step];
        if (inverse)
          w.im = -w.im;
        dcomplex *p = &a[start + k], *q = &a[start + k + half];
        dcomplex t = {w.re * q->re - w.im * q->im, w.re * q->im + w.im * q->re};
        q->re = p->re - t.re;
        q->im = p->im - t.im;
        p->re += t.re;
        p->im += t.im;
      }
    }
  }
}

/* The x and y rounds of a transform on planes 0..count-1 of a [z][y][x]
 * slab. */
static void fft_xy(dcomplex *field, int count, bool inverse)
{
  for (int z = 0; z < count; z++) {
    for (int y = 0; y < size; y++)
      fft_line(&AT(field, z, y, 0), inverse);
    for (int x = 0; x < size; x++) {
      for (int y = 0; y < size; y++)
        line[y] = AT(field, z, y, x);
      fft_line(line, inverse);
      for (int y = 0; y < size; y++)
        AT(field, z, y, x) = line[y];
    }
  }
}

/* The z round on planes 0..count-1 of an [x][y][z] slab. */
static void fft_z(dcomplex *transposed, int count, bool inverse)
{
  for (int x = 0; x < count; x++)
    for (int y = 0; y < size; y++)
      fft_line(&AT(transposed, x, y, 0), inverse);
}

/* One time step on count x planes: evolves the spectrum and copies it. */
static void evolve(dcomplex *evolving, dcomplex *copy, const double *factor, int count)
{
  for (size_t i = 0; i < (size_t)count * size * size; i++) {
    evolving[i].re *= factor[i];
    evolving[i].im *= factor[i];
    copy[i] = evolving[i];
  }
}

/* NAS FT's checksum terms in planes z0..z1-1 of a slab whose plane 0 is
 * plane `first` of the field, in order. */
static dcomplex checksum_part(const dcomplex *slab, int first, int z0, int z1)
{
  dcomplex sum = {0.0, 0.0};
  for (int j = 1; j <= CHECKSUM_POINTS; j++) {
    int x = j % size, y = 3 * j % size, z = 5 * j % size;
    if (z >= z0 && z < z1) {
      sum.re += AT(slab, z - first, y, x).re;
      sum.im += AT(slab, z - first, y, x).im;
    }
  }
  return sum;
}

/* The first plane of rank p's slabs; its slabs end where p+1's begin. */
static int slab_begin(int p)
{
  return (int)((long)p * size / nprocs);
}

/*
 * Moves the data of a slab stored [a][y][b] (planes a0..a1-1 of the a
 * direction, all of b) into a slab stored [b][y][a] (planes b0..b1-1 of
 * b, all of a): rank p sends rank q the block with q's b planes and p's a
 * planes, in [b][y][a] order.
 */
static void transpose(const dcomplex *from, dcomplex *to, dcomplex *send_buffer,
                      dcomplex *receive_buffer, int *counts, int *offsets,
                      int *receive_counts, int *receive_offsets)
{
  int my0 = slab_begin(rank), my1 = slab_begin(rank + 1);
  size_t at = 0;
  for (int q = 0; q < nprocs; q++) {
    int b0 = slab_begin(q), b1 = slab_begin(q + 1);
    offsets[q] = (int)at;
    for (int b = b0; b < b1; b++)
      for (int y = 0; y < size; y++)
        for (int a = my0; a < my1; a++)
          send_buffer[at++] = AT(from, a - my0, y, b);
    counts[q] = (int)at - offsets[q];
  }
  at = 0;
  for (int p = 0; p < nprocs; p++) {
    receive_offsets[p] = (int)at;
    receive_counts[p] = (my1 - my0) * size * (slab_begin(p + 1) - slab_begin(p));
    at += (size_t)receive_counts[p];
  }
  traffic_alltoallv(send_buffer, counts, offsets, receive_buffer, receive_counts,
                    receive_offsets, complex_type);
  for (int p = 0; p < nprocs; p++) {
    int a0 = slab_begin(p), a1 = slab_begin(p + 1);
    const dcomplex *block = receive_buffer + receive_offsets[p];
    for (int b = my0; b < my1; b++)
      for (int y = 0; y < size; y++)
        for (int a = a0; a < a1; a++)
          AT(to, b - my0, y, a) = *block++;
  }
}

/* The whole computation on private arrays, as fft.c does it; the final
 * field is returned and the checksums are stored in sums. */
static dcomplex *solve_sequentially(dcomplex *sums)
{
  size_t points = (size_t)size * size * size;
  dcomplex *field = malloc(points * sizeof *field);
  dcomplex *evolving = malloc(points * sizeof *evolving);
  dcomplex *copy = malloc(points * sizeof *copy);
  double *factor = malloc(points * sizeof *factor);
  if (field == NULL || evolving == NULL || copy == NULL || factor == NULL) {
    free(field);
    free(evolving);
    free(copy);
    free(factor);
    return NULL;
  }
  size_t plane = (size_t)size * size;
  for (int z = 0; z < size; z++)
    initialize_plane(field + z * plane, z);
  for (int x = 0; x < size; x++)
    initialize_twiddle_plane(factor + x * plane, x);
  fft_xy(field, size, false);
  for (int x = 0; x < size; x++)
    for (int y = 0; y < size; y++)
      for (int z = 0; z < size; z++)
        AT(evolving, x, y, z) = AT(field, z, y, x);
  fft_z(evolving, size, false);
  for (int t = 0; t < iterations; t++) {
    evolve(evolving, copy, factor, size);
    fft_z(copy, size, true);
    for (int z = 0; z < size; z++)
      for (int y = 0; y < size; y++)
        for (int x = 0; x < size; x++)
          AT(field, z, y, x) = AT(copy, x, y, z);
    fft_xy(field, size, true);
    sums[t] = checksum_part(field, 0, 0, size);
  }
  free(evolving);
  free(copy);
  free(factor);
  return field;
}

int main(int argc, char **argv)
{
  int option;
  while ((option = getopt(argc, argv, "i:n:")) != -1) {
    switch (option) {
    case 'i':
      iterations = parse_count(argv[0], option, optarg, 1000000);
      break;
    case 'n':
      size = parse_count(argv[0], option, optarg, MAX_SIZE);
      break;
    default:
      usage(argv[0]);
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument %s\n", argv[0], argv[optind]);
    usage(argv[0]);
  }
  if (size < 2 || (size & (size - 1)) != 0) {
    fprintf(stderr, "%s: -n %d: the grid's side must be a power of two from 2 to %d\n", argv[0],
            size, MAX_SIZE);
    usage(argv[0]);
  }

  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Type_contiguous(2, MPI_DOUBLE, &complex_type);
  MPI_Type_commit(&complex_type);

  roots = malloc((size_t)size / 2 * sizeof *roots);
  line = malloc((size_t)size * sizeof *line);
  for (int k = 0; k < size / 2 && roots != NULL; k++) {
    double angle = 2.0 * 3.141592653589793238 * k / size;
    roots[k].re = cos(angle);
    roots[k].im = -sin(angle);
  }

  int first = slab_begin(rank), last = slab_begin(rank + 1);
  size_t plane = (size_t)size * size;
  size_t slab = (size_t)(last - first) * plane;
  /* One extra plane keeps the allocations non-empty. */
  dcomplex *u = malloc((slab + plane) * sizeof *u);
  dcomplex *spectrum = malloc((slab + plane) * sizeof *spectrum);
  dcomplex *work = malloc((slab + plane) * sizeof *work);
  double *twiddle = malloc((slab + plane) * sizeof *twiddle);
  dcomplex *send_buffer = malloc((slab + plane) * sizeof *send_buffer);
  dcomplex *receive_buffer = malloc((slab + plane) * sizeof *receive_buffer);
  int *counters = malloc(4 * (size_t)nprocs * sizeof *counters);
  dcomplex *sums = malloc((size_t)iterations * sizeof *sums);
  if (roots == NULL || line == NULL || u == NULL || spectrum == NULL || work == NULL ||
      twiddle == NULL || send_buffer == NULL || receive_buffer == NULL || counters == NULL ||
      sums == NULL) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int *counts = counters, *offsets = counters + nprocs;
  int *receive_counts = counters + 2 * nprocs, *receive_offsets = counters + 3 * nprocs;

  for (int z = first; z < last; z++)
    initialize_plane(u + (size_t)(z - first) * plane, z);
  for (int x = first; x < last; x++)
    initialize_twiddle_plane(twiddle + (size_t)(x - first) * plane, x);

  traffic_barrier();
  double start = MPI_Wtime();
  fft_xy(u, last - first, false);
  transpose(u, spectrum, send_buffer, receive_buffer, counts, offsets, receive_counts,
            receive_offsets);
  fft_z(spectrum, last - first, false);
  for (int t = 0; t < iterations; t++) {
    evolve(spectrum, work, twiddle, last - first);
    fft_z(work, last - first, true);
    transpose(work, u, send_buffer, receive_buffer, counts, offsets, receive_counts,
              receive_offsets);
    fft_xy(u, last - first, true);
    dcomplex part = checksum_part(u, first, first, last);
    traffic_reduce(&part, &sums[t], 2, MPI_DOUBLE, MPI_SUM, 0);
  }
  traffic_barrier();
  double elapsed = MPI_Wtime() - start;

  /* Rank 0 gathers the field. */
  dcomplex *field = NULL;
  if (rank == 0) {
    field = malloc(plane * size * sizeof *field);
    if (field == NULL) {
      fprintf(stderr, "%s: out of memory\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int p = 0; p < nprocs; p++) {
      counts[p] = (slab_begin(p + 1) - slab_begin(p)) * (int)plane;
      offsets[p] = slab_begin(p) * (int)plane;
    }
  }
  traffic_gatherv(u, (int)slab, complex_type, field, counts, offsets, 0);

  int status = 0;
  if (rank == 0) {
    printf("fft: %d x %d x %d complex doubles, %d iterations, %d processes\n", size, size, size,
           iterations, nprocs);
    dcomplex *expected_sums = malloc((size_t)iterations * sizeof *expected_sums);
    dcomplex *expected = expected_sums == NULL ? NULL : solve_sequentially(expected_sums);
    if (expected == NULL) {
      fprintf(stderr, "%s: cannot allocate the arrays for the sequential check\n", argv[0]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t points = plane * size;
    long mismatches = 0;
    char detail[200] = "";
    for (size_t i = 0; i < points; i++) {
      if (memcmp(&field[i], &expected[i], sizeof field[i]) != 0) {
        if (mismatches == 0)
          snprintf(detail, sizeof detail,
                   "; point %zu is (%.17g, %.17g), expected (%.17g, %.17g)", i, field[i].re,
                   field[i].im, expected[i].re, expected[i].im);
        mismatches++;
      }
    }
    int bad_sums = 0;
    for (int t = 0; t < iterations; t++) {
      double error = hypot(sums[t].re - expected_sums[t].re, sums[t].im - expected_sums[t].im);
      if (!(error <= 1e-12 * hypot(expected_sums[t].re, expected_sums[t].im))) {
        if (bad_sums == 0 && mismatches == 0)
          snprintf(detail, sizeof detail,
                   "; checksum %d is (%.17g, %.17g), expected (%.17g, %.17g)", t + 1,
                   sums[t].re, sums[t].im, expected_sums[t].re, expected_sums[t].im);
        bad_sums++;
      }
    }
    bool passed = mismatches == 0 && bad_sums == 0;
    double n3 = (double)points;
    if (passed)
      printf("check: passed (final field bit for bit equal to a sequential run; %d checksums "
             "within 1e-12, last %.12e %+.12e i)\n",
             iterations, expected_sums[iterations - 1].re / n3,
             expected_sums[iterations - 1].im / n3);
    else
      printf("check: FAILED (%ld points and %d checksums differ from a sequential run%s)\n",
             mismatches, bad_sums, detail);
    printf("time: %.6f s\n", elapsed);
    status = passed ? 0 : 1;
    free(expected);
    free(expected_sums);
    free(field);
  }
  traffic_report();
  MPI_Type_free(&complex_type);
  MPI_Finalize();
  return status;
}
