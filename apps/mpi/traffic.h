/*
 * traffic.h — counts the messages an MPI application sends, for comparison
 * with tmk's message statistics.
 *
 * Every point-to-point send adds one message and its payload bytes to the
 * sending rank's count.  A collective adds to each rank's count what that
 * rank would send in a straightforward implementation, whatever the MPI
 * library really does; in all:
 *   gather(v), reduce, broadcast   P-1 messages (one per non-root rank)
 *   barrier                        2(P-1) empty messages (in to rank 0 and
 *                                  back out)
 *   all-to-all(v)                  P-1 messages from every rank, one to
 *                                  each other rank, even when empty
 * traffic_report adds up the counts of all ranks on rank 0, which prints
 *   traffic: <messages> messages, <kilobytes> kB       (1 kB = 1000 bytes)
 * The reduction that does so is not counted.
 */
#ifndef TRAFFIC_H
#define TRAFFIC_H

#include <mpi.h>
#include <stdio.h>

static unsigned long traffic_messages;
static unsigned long traffic_bytes;

static inline void traffic_count(unsigned long messages, unsigned long bytes)
{
  traffic_messages += messages;
  traffic_bytes += bytes;
}

/* MPI_Send, counted. */
static inline void traffic_send(const void *data, int count, MPI_Datatype type, int to, int tag)
{
  int type_size;
  MPI_Type_size(type, &type_size);
  traffic_count(1, (unsigned long)count * (unsigned long)type_size);
  MPI_Send(data, count, type, to, tag, MPI_COMM_WORLD);
}

/* MPI_Isend, counted. */
static inline void traffic_isend(const void *data, int count, MPI_Datatype type, int to, int tag,
                                 MPI_Request *request)
{
  int type_size;
  MPI_Type_size(type, &type_size);
  traffic_count(1, (unsigned long)count * (unsigned long)type_size);
  MPI_Isend(data, count, type, to, tag, MPI_COMM_WORLD, request);
}

/* MPI_Barrier, counted as every other rank reporting to rank 0 and rank 0
 * releasing each of them. */
static inline void traffic_barrier(void)
{
  int rank, nprocs;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  traffic_count(rank == 0 ? (unsigned long)(nprocs - 1) : 1, 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

/* MPI_Gatherv to root, counted. */
static inline void traffic_gatherv(const void *data, int count, MPI_Datatype type, void *gathered,
                                   const int *counts, const int *offsets, int root)
{
  int rank, type_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Type_size(type, &type_size);
  if (rank != root)
    traffic_count(1, (unsigned long)count * (unsigned long)type_size);
  MPI_Gatherv(data, count, type, gathered, counts, offsets, type, root, MPI_COMM_WORLD);
}

/* MPI_Reduce to root, counted. */
static inline void traffic_reduce(const void *data, void *result, int count, MPI_Datatype type,
                                  MPI_Op op, int root)
{
  int rank, type_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Type_size(type, &type_size);
  if (rank != root)
    traffic_count(1, (unsigned long)count * (unsigned long)type_size);
  MPI_Reduce(data, result, count, type, op, root, MPI_COMM_WORLD);
}

/* MPI_Alltoallv, counted. */
static inline void traffic_alltoallv(const void *data, const int *counts, const int *offsets,
                                     void *received, const int *received_counts,
                                     const int *received_offsets, MPI_Datatype type)
{
  int rank, nprocs, type_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  MPI_Type_size(type, &type_size);
  for (int to = 0; to < nprocs; to++)
    if (to != rank)
      traffic_count(1, (unsigned long)counts[to] * (unsigned long)type_size);
  MPI_Alltoallv(data, counts, offsets, type, received, received_counts, received_offsets, type,
                MPI_COMM_WORLD);
}

/* Collective; call on every rank. */
static void traffic_report(void)
{
  unsigned long mine[2] = {traffic_messages, traffic_bytes}, total[2];
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Reduce(mine, total, 2, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("traffic: %lu messages, %.1f kB\n", total[0], (double)total[1] / 1000.0);
}

#endif /* TRAFFIC_H */
