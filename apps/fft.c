/*
 * fft — a 3-D FFT PDE solver in the manner of NAS FT, on TreadMarks shared
 * memory.
 *
 * The initial field u (N x N x N complex doubles, indexed u(z, y, x)) is
 * transformed forward once; then every iteration multiplies the spectrum
 * by exp(-4 pi^2 alpha |k|^2), transforms it back and adds up NAS FT's
 * checksum of 1024 points of the result.  A 3-D transform is three rounds of
 * 1-D transforms.  Each process owns a slab of z planes of u and does the x
 * and y rounds there; for the z round the data are transposed through shared
 * memory into arrays indexed (x, y, z), of which each process owns a slab of
 * x planes.  A process transposes by reading the other processes' slabs into
 * its own, so every transpose is an all-to-all exchange after a barrier.
 * Each process keeps its checksum contributions in pages of its own, and
 * process 0 adds them up at the end: nothing but barriers synchronises
 * the iterations.  (Added under a lock instead, every iteration passed the
 * lock through every process in turn: on 4 processes 150-170 us of an
 * iteration of about 800, against 180 us of computation.)
 *
 * Layout: shared memory is kept coherent a page at a time, so each array
 * a(i, j, k) is stored in one block per process, block q holding the points
 * whose last index k lies in q's slab, [i][j][k] within it.  A process
 * transposing reads only its own block of the other array: the pages it
 * fetches hold what it reads and nothing else.  Stored plainly [i][j][k],
 * every page of another process's slab held a share of every process's k
 * range, and each process fetched all of the others' slabs for its share
 * of them (on 2 processes twice the data, on 8 processes eight times).
 *
 * Afterwards process 0 repeats the computation sequentially in private
 * memory with the same 1-D transforms, compares the final field bit for
 * bit and the checksums within a relative 1e-12 (their terms are added in
 * another order).
 *
 * Usage: fft [-i ITERATIONS] [-n N] [-- tmk options]
 */
#define _POSIX_C_SOURCE 200809L

#include <Tmk.h>

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALPHA 1e-6      /* NAS FT's diffusion constant */
#define CHECKSUM_POINTS 1024
#define MAX_SIZE 256

typedef struct {
  double re, im;
} dcomplex;

/* Shared arrays, allocated by process 0 and distributed to the others. */
static dcomplex *u;          /* (z, y, x): the field */
static dcomplex *spectrum;   /* (x, y, z): the forward transform, evolved each iteration */
static dcomplex *work;       /* (x, y, z): this iteration's spectrum, z-transformed back */
static double *twiddle;      /* (x, y, z): the evolution factor */
static dcomplex *checksum_parts;  /* per process, one per iteration, in pages of its own */

static int size = 32;
static int iterations = 6;   /* as NAS FT */
static dcomplex *roots;      /* private: exp(-2 pi i k / size), k < size/2 */
static dcomplex *line;       /* private: one line being transformed */

/* How an array a(i, j, k) is split into blocks by its last index: block q
 * holds k from first[q] to first[q + 1] - 1, stored [i][j][k - first[q]]. */
typedef struct {
  int blocks;
  int *first;     /* blocks + 1 entries */
  int *block_of;  /* size entries: the block of each k */
} layout;

static layout shared_layout;  /* a block per process */
static layout whole_layout;   /* one block: plainly [i][j][k] (the sequential check) */

/* The first point of block q. */
static size_t block_start(const layout *l, int q)
{
  return (size_t)size * size * l->first[q];
}

static int block_width(const layout *l, int q)
{
  return l->first[q + 1] - l->first[q];
}

static size_t at(const layout *l, int i, int j, int k)
{
  int q = l->block_of[k];
  return block_start(l, q) + ((size_t)i * size + j) * block_width(l, q) + (k - l->first[q]);
}

static bool make_layout(layout *l, int blocks)
{
  l->blocks = blocks;
  l->first = malloc(((size_t)blocks + 1) * sizeof *l->first);
  l->block_of = malloc((size_t)size * sizeof *l->block_of);
  if (l->first == NULL || l->block_of == NULL)
    return false;
  for (int q = 0; q <= blocks; q++)
    l->first[q] = (int)((long)q * size / blocks);
  for (int q = 0; q < blocks; q++)
    for (int k = l->first[q]; k < l->first[q + 1]; k++)
      l->block_of[k] = q;
  return true;
}

/* The line a(i, j, 0 .. size-1) into out, a run from each block. */
static void load_line(dcomplex *out, const dcomplex *a, const layout *l, int i, int j)
{
  for (int q = 0; q < l->blocks; q++) {
    int width = block_width(l, q);
    memcpy(out + l->first[q], a + block_start(l, q) + ((size_t)i * size + j) * width,
           (size_t)width * sizeof *out);
  }
}

static void store_line(dcomplex *a, const dcomplex *in, const layout *l, int i, int j)
{
  for (int q = 0; q < l->blocks; q++) {
    int width = block_width(l, q);
    memcpy(a + block_start(l, q) + ((size_t)i * size + j) * width, in + l->first[q],
           (size_t)width * sizeof *in);
  }
}

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-i ITERATIONS] [-n N] [-- tmk options]\n"
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

static void initialize_plane(dcomplex *field, const layout *l, int z)
{
  for (int y = 0; y < size; y++)
    for (int x = 0; x < size; x++) {
      uint64_t index = ((uint64_t)z * size + y) * size + x;
      dcomplex *point = &field[at(l, z, y, x)];
      point->re = random_at(2 * index);
      point->im = random_at(2 * index + 1);
    }
}

/* The evolution factor of the x plane at wave number x. */
static void initialize_twiddle_plane(double *factor, const layout *l, int x)
{
  const double pi = 3.141592653589793238;
  int kx = x < size / 2 ? x : x - size;
  for (int y = 0; y < size; y++) {
    int ky = y < size / 2 ? y : y - size;
    for (int z = 0; z < size; z++) {
      int kz = z < size / 2 ? z : z - size;
      factor[at(l, x, y, z)] = exp(-4.0 * ALPHA * pi * pi * (double)(kx * kx + ky * ky + kz * kz));
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

/* Transforms the line a(i, j, 0 .. size-1): in place where it is one run
 * (a single block), else gathered from the blocks and put back. */
static void fft_last_index(dcomplex *a, const layout *l, int i, int j, bool inverse)
{
  if (l->blocks == 1) {
    fft_line(a + ((size_t)i * size + j) * size, inverse);
    return;
  }
  load_line(line, a, l, i, j);
  fft_line(line, inverse);
  store_line(a, line, l, i, j);
}

/* The x and y rounds of a transform, on z planes z0..z1-1 of field(z, y, x). */
static void fft_xy(dcomplex *field, const layout *l, int z0, int z1, bool inverse)
{
  for (int z = z0; z < z1; z++) {
    for (int y = 0; y < size; y++)
      fft_last_index(field, l, z, y, inverse);
    for (int x = 0; x < size; x++) {
      int q = l->block_of[x], width = block_width(l, q);
      dcomplex *column = field + at(l, z, 0, x);  /* y runs width points apart */
      for (int y = 0; y < size; y++)
        line[y] = column[(size_t)y * width];
      fft_line(line, inverse);
      for (int y = 0; y < size; y++)
        column[(size_t)y * width] = line[y];
    }
  }
}

/* The z round, on x planes x0..x1-1 of an array a(x, y, z). */
static void fft_z(dcomplex *transposed, const layout *l, int x0, int x1, bool inverse)
{
  for (int x = x0; x < x1; x++)
    for (int y = 0; y < size; y++)
      fft_last_index(transposed, l, x, y, inverse);
}

/* Fills planes i0..i1-1 of to(i, j, k) from from(k, j, i): a block of to at
 * a time, whose k run is contiguous. */
static void transpose(dcomplex *to, const dcomplex *from, const layout *l, int i0, int i1)
{
  for (int i = i0; i < i1; i++) {
    int from_block = l->block_of[i], from_width = block_width(l, from_block);
    const dcomplex *column = from + block_start(l, from_block) + (i - l->first[from_block]);
    for (int q = 0; q < l->blocks; q++) {
      int width = block_width(l, q);
      for (int j = 0; j < size; j++) {
        dcomplex *run = to + block_start(l, q) + ((size_t)i * size + j) * width;
        for (int k = l->first[q]; k < l->first[q + 1]; k++)
          run[k - l->first[q]] = column[((size_t)k * size + j) * from_width];
      }
    }
  }
}

/* One time step on x planes x0..x1-1: evolves the spectrum and copies it
 * into the work array (in each block, the planes' points are one run). */
static void evolve(dcomplex *evolving, dcomplex *copy, const double *factor, const layout *l,
                   int x0, int x1)
{
  for (int q = 0; q < l->blocks; q++) {
    size_t width = (size_t)block_width(l, q);
    size_t begin = block_start(l, q) + (size_t)x0 * size * width;
    size_t end = block_start(l, q) + (size_t)x1 * size * width;
    for (size_t i = begin; i < end; i++) {
      evolving[i].re *= factor[i];
      evolving[i].im *= factor[i];
      copy[i] = evolving[i];
    }
  }
}

/* NAS FT's checksum terms that lie in z planes z0..z1-1, in order. */
static dcomplex checksum_part(const dcomplex *field, const layout *l, int z0, int z1)
{
  dcomplex sum = {0.0, 0.0};
  for (int j = 1; j <= CHECKSUM_POINTS; j++) {
    int x = j % size, y = 3 * j % size, z = 5 * j % size;
    if (z >= z0 && z < z1) {
      const dcomplex *point = &field[at(l, z, y, x)];
      sum.re += point->re;
      sum.im += point->im;
    }
  }
  return sum;
}

/* The whole computation on private arrays; the final field is returned
 * and the checksums are stored in sums. */
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
  const layout *l = &whole_layout;
  for (int z = 0; z < size; z++)
    initialize_plane(field, l, z);
  for (int x = 0; x < size; x++)
    initialize_twiddle_plane(factor, l, x);
  fft_xy(field, l, 0, size, false);
  transpose(evolving, field, l, 0, size);
  fft_z(evolving, l, 0, size, false);
  for (int t = 0; t < iterations; t++) {
    evolve(evolving, copy, factor, l, 0, size);
    fft_z(copy, l, 0, size, true);
    transpose(field, copy, l, 0, size);
    fft_xy(field, l, 0, size, true);
    sums[t] = checksum_part(field, l, 0, size);
  }
  free(evolving);
  free(copy);
  free(factor);
  return field;
}

/* Elements between two processes' checksum contributions: whole pages, so
 * that no process writes a page another writes. */
static size_t parts_stride(void)
{
  size_t per_page = Tmk_page_size / sizeof(dcomplex);
  return ((size_t)iterations + per_page - 1) / per_page * per_page;
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
  if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
    fprintf(stderr, "%s: unexpected argument %s (tmk's options go after --)\n", argv[0],
            argv[optind]);
    usage(argv[0]);
  }
  if (size < 2 || (size & (size - 1)) != 0) {
    fprintf(stderr, "%s: -n %d: the grid's side must be a power of two from 2 to %d\n", argv[0],
            size, MAX_SIZE);
    usage(argv[0]);
  }

  roots = malloc((size_t)size / 2 * sizeof *roots);
  line = malloc((size_t)size * sizeof *line);
  if (roots == NULL || line == NULL) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    exit(2);
  }
  for (int k = 0; k < size / 2; k++) {
    double angle = 2.0 * 3.141592653589793238 * k / size;
    roots[k].re = cos(angle);
    roots[k].im = -sin(angle);
  }

  Tmk_startup(argc, argv);

  size_t points = (size_t)size * size * size;
  if (Tmk_proc_id == 0) {
    u = Tmk_malloc((unsigned)(points * sizeof *u));
    spectrum = Tmk_malloc((unsigned)(points * sizeof *spectrum));
    work = Tmk_malloc((unsigned)(points * sizeof *work));
    twiddle = Tmk_malloc((unsigned)(points * sizeof *twiddle));
    size_t parts_bytes = (size_t)Tmk_nprocs * parts_stride() * sizeof *checksum_parts;
    if (parts_bytes > UINT_MAX)
      Tmk_errexit("fft: %d iterations on %u processes need %zu bytes of checksums, more than "
                  "one Tmk_malloc gives", iterations, Tmk_nprocs, parts_bytes);
    checksum_parts = Tmk_malloc((unsigned)parts_bytes);
    if (u == NULL || spectrum == NULL || work == NULL || twiddle == NULL || checksum_parts == NULL)
      Tmk_errexit("fft: cannot allocate the %d^3 arrays in shared memory", size);
    Tmk_distribute(&u, sizeof u);
    Tmk_distribute(&spectrum, sizeof spectrum);
    Tmk_distribute(&work, sizeof work);
    Tmk_distribute(&twiddle, sizeof twiddle);
    Tmk_distribute(&checksum_parts, sizeof checksum_parts);
  }
  Tmk_barrier(0);

  /* Planes are dealt out in slabs that differ by at most one plane; the
   * same numbers select this process's z planes of u, its x planes of the
   * transposed arrays and its block of each. */
  const layout *l = &shared_layout;
  if (!make_layout(&shared_layout, (int)Tmk_nprocs) || !make_layout(&whole_layout, 1))
    Tmk_errexit("fft: out of memory");
  int first = l->first[Tmk_proc_id];
  int last = l->first[Tmk_proc_id + 1];

  for (int z = first; z < last; z++)
    initialize_plane(u, l, z);
  for (int x = first; x < last; x++)
    initialize_twiddle_plane(twiddle, l, x);
  Tmk_barrier(0);

  double start = seconds_now();
  fft_xy(u, l, first, last, false);
  Tmk_barrier(1);
  transpose(spectrum, u, l, first, last);
  fft_z(spectrum, l, first, last, false);
  for (int t = 0; t < iterations; t++) {
    evolve(spectrum, work, twiddle, l, first, last);
    fft_z(work, l, first, last, true);
    Tmk_barrier(2);
    transpose(u, work, l, first, last);
    fft_xy(u, l, first, last, true);
    checksum_parts[Tmk_proc_id * parts_stride() + (size_t)t] = checksum_part(u, l, first, last);
    Tmk_barrier(3);
  }
  double elapsed = seconds_now() - start;

  if (Tmk_proc_id != 0)
    Tmk_exit(0);

  printf("fft: %d x %d x %d complex doubles, %d iterations, %u processes\n", size, size, size,
         iterations, Tmk_nprocs);
  dcomplex *sums = malloc((size_t)iterations * sizeof *sums);
  dcomplex *expected = sums == NULL ? NULL : solve_sequentially(sums);
  if (expected == NULL)
    Tmk_errexit("fft: cannot allocate the arrays for the sequential check");
  long mismatches = 0;
  char detail[200] = "";
  for (int z = 0; z < size; z++)
    for (int y = 0; y < size; y++)
      for (int x = 0; x < size; x++) {
        const dcomplex *got = &u[at(l, z, y, x)], *want = &expected[at(&whole_layout, z, y, x)];
        if (memcmp(got, want, sizeof *got) != 0) {
          if (mismatches == 0)
            snprintf(detail, sizeof detail,
                     "; point (z %d, y %d, x %d) is (%.17g, %.17g), expected (%.17g, %.17g)", z,
                     y, x, got->re, got->im, want->re, want->im);
          mismatches++;
        }
      }
  /* Each iteration's contributions, added in process order. */
  dcomplex *checksums = calloc((size_t)iterations, sizeof *checksums);
  if (checksums == NULL)
    Tmk_errexit("fft: cannot allocate the checksums");
  for (unsigned p = 0; p < Tmk_nprocs; p++)
    for (int t = 0; t < iterations; t++) {
      checksums[t].re += checksum_parts[p * parts_stride() + (size_t)t].re;
      checksums[t].im += checksum_parts[p * parts_stride() + (size_t)t].im;
    }
  int bad_sums = 0;
  for (int t = 0; t < iterations; t++) {
    double error = hypot(checksums[t].re - sums[t].re, checksums[t].im - sums[t].im);
    if (!(error <= 1e-12 * hypot(sums[t].re, sums[t].im))) {
      if (bad_sums == 0 && mismatches == 0)
        snprintf(detail, sizeof detail, "; checksum %d is (%.17g, %.17g), expected (%.17g, %.17g)",
                 t + 1, checksums[t].re, checksums[t].im, sums[t].re, sums[t].im);
      bad_sums++;
    }
  }
  bool passed = mismatches == 0 && bad_sums == 0;
  double n3 = (double)points;
  if (passed)
    printf("check: passed (final field bit for bit equal to a sequential run; %d checksums "
           "within 1e-12, last %.12e %+.12e i)\n",
           iterations, sums[iterations - 1].re / n3, sums[iterations - 1].im / n3);
  else
    printf("check: FAILED (%ld points and %d checksums differ from a sequential run%s)\n",
           mismatches, bad_sums, detail);
  printf("time: %.6f s\n", elapsed);
  free(expected);
  free(sums);
  free(checksums);
  Tmk_exit(passed ? 0 : 1);
}
