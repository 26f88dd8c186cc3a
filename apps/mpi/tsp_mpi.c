/*
 * tsp_mpi — branch-and-bound travelling salesman with MPI, the message
 * passing counterpart of tsp.c: the same bounds, queue and search.
 *
 * Rank 0 keeps the priority queue of partial tours in its private memory
 * and hands out work: a rank that runs out asks rank 0, reporting the
 * shortest tour it has found, and gets back a partial tour to search (taken
 * from the queue exactly as tsp.c's get_tour does) with the shortest length
 * known, or the news that the queue is empty.  Rank 0 searches tours
 * itself and answers requests every few thousand search steps.  The bound a
 * rank prunes with is therefore the shortest length it knew at its last
 * request, or its own since.
 *
 * Afterwards rank 0 checks the tour and compares its length with the
 * optimum computed by Held-Karp dynamic programming.
 *
 * Usage: mpirun -np P tsp_mpi [-f CITY_FILE]
 */
#define _POSIX_C_SOURCE 200809L

#include "traffic.h"

#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tsp_cities.h"

#define EXPAND_CITIES 3    /* partial tours shorter than this are expanded in the queue */
#define MAX_POOL (1 + (MAX_CITIES - 1) + (MAX_CITIES - 1) * (MAX_CITIES - 2))
#define POLL_INTERVAL 4096 /* search steps between rank 0's looks for requests */

enum { TAG_REQUEST = 1, TAG_REPLY = 2 };

struct tour {
  int length;                     /* of the path so far */
  int bound;                      /* no completion of the path is shorter */
  int ncities;                    /* cities on the path */
  unsigned visited;               /* bit c is set when city c is on the path */
  unsigned char path[MAX_CITIES];
};

/* Rank 0's. */
struct tour_queue {
  int size;                       /* pool entries in the heap */
  int free_count;                 /* pool entries on the free stack */
  int heap[MAX_POOL];             /* binary heap ordered by bound */
  int free_stack[MAX_POOL];
  struct tour pool[MAX_POOL];
};

/* What a rank that needs work tells rank 0. */
struct request {
  int found_length;               /* its shortest tour, INT_MAX if none */
  unsigned char found_path[MAX_CITIES];
};

/* Rank 0's answer. */
struct reply {
  int best_length;                /* the shortest tour length known */
  int has_job;                    /* 0: the queue is empty, stop */
  struct tour job;
};

struct best_tour {
  int length;
  unsigned char path[MAX_CITIES];
};

static struct tour_queue queue_storage;
static struct tour_queue *queue = &queue_storage;
/* best->length is the length this rank prunes with: on rank 0 the shortest
 * known, elsewhere the shortest known at the last reply or found since.
 * Rank 0 fills in best->path at the end, for the check. */
static struct best_tour best_storage = {INT_MAX, {0}};
static struct best_tour *best = &best_storage;
/* The shortest tour this rank found itself; on rank 0 the shortest known. */
static int found_length = INT_MAX;
static unsigned char found_path[MAX_CITIES];

static int nprocs, rank;
static int active_ranks;                         /* rank 0: ranks not yet told to stop */

static void usage(const char *program)
{
  fprintf(stderr,
          "usage: %s [-f CITY_FILE]\n"
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

/* Takes the next partial tour to search into job; false when none is left.
 * The same as tsp.c's, without the lock: only rank 0 calls it. */
static bool get_tour(struct tour *job)
{
  for (;;) {
    if (queue->size == 0)
      return false;
    int entry = heap_pop();
    const struct tour *tour = &queue->pool[entry];
    if (tour->bound < best->length) {
      if (tour->ncities >= EXPAND_CITIES || tour->ncities == ncities) {
        *job = *tour;
        queue->free_stack[queue->free_count++] = entry;
        return true;
      }
      expand(entry);
    }
    queue->free_stack[queue->free_count++] = entry;
  }
}

/* Rank 0: takes in a request's tour and answers it with a job or a stop. */
static void answer(const struct request *request, int from)
{
  if (request->found_length < best->length) {
    best->length = found_length = request->found_length;
    memcpy(found_path, request->found_path, sizeof found_path);
  }
  struct reply reply;
  memset(&reply, 0, sizeof reply);
  reply.has_job = get_tour(&reply.job);
  reply.best_length = best->length;
  if (!reply.has_job)
    active_ranks--;
  traffic_send(&reply, (int)sizeof reply, MPI_BYTE, from, TAG_REPLY);
}

/* Rank 0: answers every request that has arrived. */
static void answer_waiting_requests(void)
{
  for (;;) {
    int waiting;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_REQUEST, MPI_COMM_WORLD, &waiting, &status);
    if (!waiting)
      return;
    struct request request;
    MPI_Recv(&request, (int)sizeof request, MPI_BYTE, status.MPI_SOURCE, TAG_REQUEST,
             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    answer(&request, status.MPI_SOURCE);
  }
}

/* The path being searched by this rank. */
static unsigned char path[MAX_CITIES];
static unsigned long steps;

static void record_tour(int length)
{
  best->length = found_length = length;
  memcpy(found_path, path, (size_t)ncities);
}

/* Depth-first search of every completion of path[0..depth-1]; exits is
 * the sum of the cheapest exits of the cities not yet visited. */
static void search(int depth, int length, unsigned visited, int exits)
{
  if (rank == 0 && active_ranks > 0 && ++steps % POLL_INTERVAL == 0)
    answer_waiting_requests();
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

static void search_job(const struct tour *job)
{
  memcpy(path, job->path, sizeof path);
  /* The job's bound already counts leaving its last city. */
  search(job->ncities, job->length, job->visited,
         job->bound - job->length - cheapest_exit[job->path[job->ncities - 1]]);
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
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument %s\n", argv[0], argv[optind]);
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

  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  if (rank == 0) {
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
    active_ranks = nprocs - 1;
  }

  traffic_barrier();
  double start = MPI_Wtime();
  if (rank == 0) {
    struct tour job;
    while (get_tour(&job))
      search_job(&job);
    while (active_ranks > 0) {
      struct request request;
      MPI_Status status;
      MPI_Recv(&request, (int)sizeof request, MPI_BYTE, MPI_ANY_SOURCE, TAG_REQUEST,
               MPI_COMM_WORLD, &status);
      answer(&request, status.MPI_SOURCE);
    }
  } else {
    for (;;) {
      struct request request;
      memset(&request, 0, sizeof request);
      request.found_length = found_length;
      memcpy(request.found_path, found_path, sizeof found_path);
      traffic_send(&request, (int)sizeof request, MPI_BYTE, 0, TAG_REQUEST);
      struct reply reply;
      MPI_Recv(&reply, (int)sizeof reply, MPI_BYTE, 0, TAG_REPLY, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      if (reply.best_length < best->length)
        best->length = reply.best_length;
      if (!reply.has_job)
        break;
      search_job(&reply.job);
    }
  }
  traffic_barrier();
  double elapsed = MPI_Wtime() - start;

  int status = 0;
  if (rank == 0) {
    best->length = found_length;
    memcpy(best->path, found_path, sizeof best->path);
    printf("tsp: %d cities from %s, %d processes\n", ncities, city_file, nprocs);
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
    status = passed ? 0 : 1;
  }
  traffic_report();
  MPI_Finalize();
  return status;
}
