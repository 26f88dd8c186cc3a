/*
 * tsp — branch-and-bound travelling salesman on TreadMarks shared memory.
 *
 * Tours start and end at city 0.  The shared data are a pool of partial
 * tours, a priority queue of the pool entries waiting to be looked at
 * (lowest lower bound first), a stack of the free pool entries, and the
 * shortest tour found so far.  A process takes work under the queue lock:
 * it pops the most promising partial tour and, while that tour has fewer
 * than EXPAND_CITIES cities, replaces it in the queue by its extensions and
 * pops again.  A tour long enough is copied to private memory and searched
 * depth first without any lock, pruned by the shared shortest length, which
 * is read without a lock (a stale value only prunes less) and updated under
 * the tour lock.  Only the holder of the queue lock adds to the queue, so a
 * process that finds it empty knows that the search is over.
 *
 * Afterwards process 0 checks the tour and compares its length with the
 * optimum computed by Held-Karp dynamic programming in private memory.
 *
 * Usage: tsp [-f CITY_FILE] [-- tmk options]
 * A city file holds the number of cities, then one "x y" line per city;
 * '#' starts a comment.  Distances are Euclidean, rounded to the nearest
 * integer (TSPLIB's EUC_2D).
 */
#define _POSIX_C_SOURCE 200809L

#include <Tmk.h>

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tsp_cities.h"  /* private: every process reads the city file before Tmk_startup */

#define EXPAND_CITIES 3    /* partial tours shorter than this are expanded in the queue */
#define MAX_POOL (1 + (MAX_CITIES - 1) + (MAX_CITIES - 1) * (MAX_CITIES - 2))

enum { QUEUE_LOCK = 0, TOUR_LOCK = 1 };

struct tour {
  int length;                     /* of the path so far */
  int bound;                      /* no completion of the path is shorter */
  int ncities;                    /* cities on the path */
  unsigned visited;               /* bit c is set when city c is on the path */
  unsigned char path[MAX_CITIES];
};

/* Guarded by QUEUE_LOCK. */
struct tour_queue {
  int size;                       /* pool entries in the heap */
  int free_count;                 /* pool entries on the free stack */
  int heap[MAX_POOL];             /* binary heap ordered by bound */
  int free_stack[MAX_POOL];
  struct tour pool[MAX_POOL];
};

/* Written under TOUR_LOCK. */
struct best_tour {
  int length;
  unsigned char path[MAX_CITIES];
};

/* Shared, allocated by process 0 and distributed to the others. */
static struct tour_queue *queue;
static struct best_tour *best;

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-f CITY_FILE] [-- tmk options]\n"
          "  -f CITY_FILE  the cities to visit (default %s in the tsp-cities\n"
          "                directory next to the program or in the source tree)\n",
          program, DEFAULT_CITY_FILE);
  exit(2);
}

/* The binary heap of pool entries, smallest bound on top. */
static bool heap_before(int a, int b)
{
  return queue->pool[a].bound < queue->pool[b].bound;
}

static void heap_push(int entry)
{
  int at = queue->size++;
  while (at > 0 && heap_before(entry, queue->heap[(at - 1) / 2])) {
    queue->heap[at] = queue->heap[(at - 1) / 2];
    at = (at - 1) / 2;
  }
  queue->heap[at] = entry;
}

static int heap_pop(void)
{
  int top = queue->heap[0];
  int last = queue->heap[--queue->size];
  int at = 0;
  for (;;) {
    int child = 2 * at + 1;
    if (child >= queue->size)
      break;
    if (child + 1 < queue->size && heap_before(queue->heap[child + 1], queue->heap[child]))
      child++;
    if (!heap_before(queue->heap[child], last))
      break;
    queue->heap[at] = queue->heap[child];
    at = child;
  }
  queue->heap[at] = last;
  return top;
}

/* The sum of the cheapest exits of the cities not yet visited: each of
 * them must still be left once. */
static int unvisited_exits(unsigned visited)
{
  int sum = 0;
  for (int c = 0; c < ncities; c++)
    if (!(visited & 1u << c))
      sum += cheapest_exit[c];
  return sum;
}

/* Puts every promising extension of pool entry parent into the queue. */
static void expand(int parent)
{
  const struct tour *from = &queue->pool[parent];
  int last = from->path[from->ncities - 1];
  int exits = unvisited_exits(from->visited);
  for (int k = 0; k < ncities - 1; k++) {
    int city = nearest[last][k];
    if (from->visited & 1u << city)
      continue;
    int length = from->length + distance[last][city];
    /* Leaving city is counted in exits already; it also has to be reached. */
    int bound = length + exits;
    if (from->ncities + 1 == ncities)
      bound = length + distance[city][0];
    if (bound >= best->length)
      continue;
    int child = queue->free_stack[--queue->free_count];
    struct tour *to = &queue->pool[child];
    *to = *from;
    to->length = length;
    to->bound = bound;
    to->path[to->ncities++] = (unsigned char)city;
    to->visited |= 1u << city;
    heap_push(child);
  }
}

/* Takes the next partial tour to search into job; false when none is left. */
static bool get_tour(struct tour *job)
{
  Tmk_lock_acquire(QUEUE_LOCK);
  for (;;) {
    if (queue->size == 0) {
      Tmk_lock_release(QUEUE_LOCK);
      return false;
    }
    int entry = heap_pop();
    const struct tour *tour = &queue->pool[entry];
    if (tour->bound < best->length) {
      if (tour->ncities >= EXPAND_CITIES || tour->ncities == ncities) {
        *job = *tour;
        queue->free_stack[queue->free_count++] = entry;
        Tmk_lock_release(QUEUE_LOCK);
        return true;
      }
      expand(entry);
    }
    queue->free_stack[queue->free_count++] = entry;
  }
}

/* The path being searched by this process. */
static unsigned char path[MAX_CITIES];

static void record_tour(int length)
{
  Tmk_lock_acquire(TOUR_LOCK);
  if (length < best->length) {
    best->length = length;
    memcpy(best->path, path, (size_t)ncities);
  }
  Tmk_lock_release(TOUR_LOCK);
}

/* Depth-first search of every completion of path[0..depth-1]; exits is
 * the sum of the cheapest exits of the cities not yet visited. */
static void search(int depth, int length, unsigned visited, int exits)
{
  int last = path[depth - 1];
  if (depth == ncities) {
    length += distance[last][0];
    if (length < best->length)
      record_tour(length);
    return;
  }
  for (int k = 0; k < ncities - 1; k++) {
    int city = nearest[last][k];
    if (visited & 1u << city)
      continue;
    int extended = length + distance[last][city];
    /* The cities are in order of distance: once one is too far, all are. */
    if (extended + exits >= best->length)
      break;
    path[depth] = (unsigned char)city;
    search(depth + 1, extended, visited | 1u << city, exits - cheapest_exit[city]);
  }
}

/* Held-Karp: the length of the shortest tour, by dynamic programming over
 * the subsets of cities 1..n-1; -1 if the table does not fit in memory. */
static int held_karp(void)
{
  int others = ncities - 1;
  size_t subsets = (size_t)1 << others;
  int *cost = malloc(subsets * (size_t)others * sizeof *cost);
  if (cost == NULL)
    return -1;
  /* cost[s * others + j]: shortest path from city 0 through the cities of
   * subset s, ending at city j + 1, which is in s. */
  for (size_t s = 1; s < subsets; s++) {
    for (int j = 0; j < others; j++) {
      if (!(s & (size_t)1 << j))
        continue;
      size_t rest = s & ~((size_t)1 << j);
      int shortest = INT_MAX;
      if (rest == 0) {
        shortest = distance[0][j + 1];
      } else {
        for (int i = 0; i < others; i++)
          if (rest & (size_t)1 << i) {
            int via = cost[rest * others + i] + distance[i + 1][j + 1];
            if (via < shortest)
              shortest = via;
          }
      }
      cost[s * others + j] = shortest;
    }
  }
  int optimum = INT_MAX;
  for (int j = 0; j < others; j++) {
    int tour = cost[(subsets - 1) * others + j] + distance[j + 1][0];
    if (tour < optimum)
      optimum = tour;
  }
  free(cost);
  return optimum;
}

/* Checks that the best tour visits every city once, starting at city 0,
 * and has the length recorded with it. */
static bool tour_is_valid(char *detail, size_t size)
{
  unsigned seen = 0;
  int length = 0;
  if (best->path[0] != 0) {
    snprintf(detail, size, "the tour starts at city %d", best->path[0]);
    return false;
  }
  for (int k = 0; k < ncities; k++) {
    int city = best->path[k];
    if (city >= ncities || seen & 1u << city) {
      snprintf(detail, size, "city %d appears twice or does not exist", city);
      return false;
    }
    seen |= 1u << city;
    length += distance[city][best->path[(k + 1) % ncities]];
  }
  if (length != best->length) {
    snprintf(detail, size, "the tour recorded as %d long is %d long", best->length, length);
    return false;
  }
  return true;
}

static double seconds_now(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
  const char *city_file = NULL;
  int option;
  while ((option = getopt(argc, argv, "f:")) != -1) {
    switch (option) {
    case 'f':
      city_file = optarg;
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
  char found[4200];
  if (city_file == NULL) {
    if (!find_default_cities(argv[0], found, sizeof found))
      exit(2);
    city_file = found;
  }
  if (!read_cities(city_file))
    exit(2);

  Tmk_startup(argc, argv);

  if (Tmk_proc_id == 0) {
    queue = Tmk_malloc(sizeof *queue);
    best = Tmk_malloc(sizeof *best);
    if (queue == NULL || best == NULL)
      Tmk_errexit("tsp: cannot allocate the tour queue in shared memory");
    best->length = INT_MAX;
    memset(best->path, 0, sizeof best->path);
    queue->free_count = 0;
    for (int entry = MAX_POOL - 1; entry > 0; entry--)
      queue->free_stack[queue->free_count++] = entry;
    struct tour *root = &queue->pool[0];
    memset(root, 0, sizeof *root);
    root->ncities = 1;
    root->path[0] = 0;
    root->visited = 1;
    root->bound = cheapest_exit[0] + unvisited_exits(1);
    queue->size = 0;
    heap_push(0);
    Tmk_distribute(&queue, sizeof queue);
    Tmk_distribute(&best, sizeof best);
  }
  Tmk_barrier(0);

  double start = seconds_now();
  struct tour job;
  while (get_tour(&job)) {
    memcpy(path, job.path, sizeof path);
    /* The job's bound already counts leaving its last city. */
    search(job.ncities, job.length, job.visited,
           job.bound - job.length - cheapest_exit[job.path[job.ncities - 1]]);
  }
  Tmk_barrier(1);
  double elapsed = seconds_now() - start;

  if (Tmk_proc_id != 0)
    Tmk_exit(0);

  printf("tsp: %d cities from %s, %u processes\n", ncities, city_file, Tmk_nprocs);
  char detail[200];
  int optimum = held_karp();
  bool passed = false;
  if (optimum < 0)
    snprintf(detail, sizeof detail, "no memory for the Held-Karp table");
  else if (!tour_is_valid(detail, sizeof detail))
    ;
  else if (best->length != optimum)
    snprintf(detail, sizeof detail, "tour length %d, but the Held-Karp optimum is %d",
             best->length, optimum);
  else
    passed = true;
  if (passed)
    printf("check: passed (tour length %d equals the Held-Karp optimum %d)\n", best->length,
           optimum);
  else
    printf("check: FAILED (%s)\n", detail);
  printf("time: %.6f s\n", elapsed);
  Tmk_exit(passed ? 0 : 1);
}
