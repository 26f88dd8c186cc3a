/*
 * api_worker — multi-process checks of every Tmk_* call, written as a
 * TreadMarks user writes programs (only <Tmk.h>).  api_test.cc runs it
 * with each scenario, substrate and process count.
 *
 *   api_worker -t SCENARIO [-i ITERATIONS] [-x SEED] -- -n NPROCS
 *
 * A scenario checks its own results; process 0 prints "SCENARIO: passed"
 * when every process succeeded, and the job's exit status says the same.
 */
#define _DEFAULT_SOURCE
#include <Tmk.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE_WORDS 1024

static int iterations = 200;
static unsigned seed = 1;
static int failures;

/* Globals handed to everyone with Tmk_distribute. */
static int *shared_ints;
static long *shared_longs;
static struct {
  int count;
  double scale;
  char name[24];
  int *table;
} settings;
static int numbers[5];

static void check(int ok, const char *what, long got, long expected) {
  if (!ok) {  /* the threads scenario checks from several threads at once */
    if (__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED) < 10)
      fprintf(stderr, "process %u: %s: got %ld, expected %ld\n", Tmk_proc_id, what, got, expected);
  }
}

/* Combines every process's failure count at process 0 through shared
 * memory, so that its exit status and message cover the whole job. */
static void finish(const char *scenario) {
  static int *verdicts;
  unsigned p;
  int total = 0;
  if (Tmk_proc_id == 0) {
    verdicts = Tmk_malloc(Tmk_nprocs * sizeof(int));
    Tmk_distribute(&verdicts, sizeof verdicts);
  }
  Tmk_barrier(900);
  verdicts[Tmk_proc_id] = failures;
  Tmk_barrier(901);
  for (p = 0; p < Tmk_nprocs; p++) total += verdicts[p];
  if (Tmk_proc_id == 0) printf("%s: %s on %u processes\n", scenario, total ? "FAILED" : "passed", Tmk_nprocs);
  Tmk_exit(total ? 1 : 0);
}

static unsigned next_random(unsigned *state) {
  *state = *state * 1103515245u + 12345u;
  return (*state >> 8) & 0xffffff;
}

/* Writes before a release are seen after the matching acquire: every
 * process adds to a counter and to its own cell under one lock, and reads
 * the counter's history back. */
static void release_acquire(void) {
  int i;
  unsigned p;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((Tmk_nprocs + 1) * sizeof(int));
    memset(shared_ints, 0, (Tmk_nprocs + 1) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (i = 0; i < iterations; i++) {
    Tmk_lock_acquire(3);
    shared_ints[0]++;
    shared_ints[1 + Tmk_proc_id]++;
    {
      int sum = 0;
      for (p = 0; p < Tmk_nprocs; p++) sum += shared_ints[1 + p];
      check(sum == shared_ints[0], "counter against the cells under the lock", sum, shared_ints[0]);
    }
    Tmk_lock_release(3);
  }
  Tmk_barrier(1);
  check(shared_ints[0] == iterations * (int)Tmk_nprocs, "final counter", shared_ints[0],
        iterations * (long)Tmk_nprocs);
  for (p = 0; p < Tmk_nprocs; p++)
    check(shared_ints[1 + p] == iterations, "a process's cell", shared_ints[1 + p], iterations);
  finish("release-acquire");
}

/* A lock taken again and again by the process that released it last, with
 * no one else asking (a work queue served locally): its critical sections
 * add no interval after the first, however many there are, and every
 * write in them reaches the next process to take the lock.  Process 0
 * makes 300 critical sections, each writing a counter and a slot of the
 * page; process 1 takes the lock and reads them (its fetch of the page's
 * diff seals it); process 0 makes 300 more, of which the first adds an
 * interval (the writes after the seal are new to process 1: without it,
 * process 1 would read its copy of the first 300); process 1 reads again.
 * (The first 300 may add none: the memset before the first barrier left
 * the page twinned and listed.) */
static void lock_again_sections(int from, int count) {
  unsigned long before = Tmk_stat.intervals;
  int section;
  for (section = from; section < from + count; section++) {
    Tmk_lock_acquire(3);
    shared_ints[0] = section;
    shared_ints[(section - 1) % 64 + 1] = section;
    Tmk_lock_release(3);
  }
  check(Tmk_stat.intervals - before <= 1, "intervals added by the critical sections (at most)",
        (long)(Tmk_stat.intervals - before), 1);
}

static void lock_again_read(int last) {
  int slot;
  Tmk_lock_acquire(3);
  for (slot = 0; slot <= 64; slot++) {
    int expected = slot == 0 ? last : slot + (last - slot) / 64 * 64;
    check(shared_ints[slot] == expected, "a slot written under the lock", shared_ints[slot], expected);
  }
  Tmk_lock_release(3);
}

static void lock_again(void) {
  unsigned reader = Tmk_nprocs > 1 ? 1 : 0;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(PAGE_WORDS * sizeof(int));
    memset(shared_ints, 0, PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  if (Tmk_proc_id == 0) lock_again_sections(1, 300);
  Tmk_barrier(1);
  if (Tmk_proc_id == reader) lock_again_read(300);
  Tmk_barrier(2);
  if (Tmk_proc_id == 0) lock_again_sections(301, 300);
  Tmk_barrier(3);
  if (Tmk_proc_id == reader) lock_again_read(600);
  finish("lock-again");
}

/* Many intervals between two barriers: two processes (0 and 1 on 2
 * processes, 1 and 2 from 3 on) take 3000 turns in alternation under lock
 * 7 (conditions 1 and 2 hand the turn over), each turn writing the turn
 * counter and a slot of each of 8 pages apart from one another, so that
 * each turn makes an interval of its own that lists 8 runs of pages.
 * From 4 processes on, the last one waits on condition 0 until the turns
 * are done and takes the lock back then: its grant carries the intervals
 * of every turn.  The others, process 0 among them, only wait at the
 * barrier, whose departures carry them too (process 0's to itself); each
 * writer's arrival carries its 1500.  A record takes 52-76 bytes on 2-8
 * processes: with TMK_MAX_MESSAGE=64K each of those takes more than one
 * message.  Every process then reads the counter and the slots.  (Turns,
 * not bytes, make the time: with another job of 8 processes on the 2
 * cores, each hand-over waits for a core, and 6000 turns of one page took
 * 15-20 s.) */
enum { many_intervals_pages = 8 };

static int many_intervals_slot(int slot, int turns) {
  return slot + (turns - 1 - slot) / 64 * 64 + 1;
}

static void many_intervals_check(int turns, const char *what) {
  int page, slot;
  for (page = 0; page < many_intervals_pages; page++)
    for (slot = 0; slot < 64; slot++) {
      int got = shared_ints[(2 * page + 1) * PAGE_WORDS + slot];
      if (got != many_intervals_slot(slot, turns)) check(0, what, got, many_intervals_slot(slot, turns));
    }
}

static void many_intervals(void) {
  const int turns = 3000, writers = Tmk_nprocs > 1 ? 2 : 1;
  const int me = (int)Tmk_proc_id - (Tmk_nprocs >= 3 ? 1 : 0);  /* as a writer */
  const long words = (2 * many_intervals_pages + 1) * (long)PAGE_WORDS;
  int page;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)(words * sizeof(int)));
    memset(shared_ints, 0, words * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  if (me >= 0 && me < writers) {
    Tmk_lock_acquire(7);
    for (;;) {
      while (shared_ints[0] < turns && shared_ints[0] % writers != me) Tmk_lock_cond_wait(7, 1 + me);
      if (shared_ints[0] >= turns) break;
      int turn = shared_ints[0];
      for (page = 0; page < many_intervals_pages; page++)
        shared_ints[(2 * page + 1) * PAGE_WORDS + turn % 64] = turn + 1;
      shared_ints[0] = turn + 1;
      if (writers > 1) Tmk_lock_cond_signal(7, 1 + (1 - me));
      if (turn + 1 == turns) Tmk_lock_cond_signal(7, 0);
    }
    Tmk_lock_release(7);
  } else if (Tmk_nprocs >= 4 && Tmk_proc_id == Tmk_nprocs - 1) {
    Tmk_lock_acquire(7);
    while (shared_ints[0] < turns) Tmk_lock_cond_wait(7, 0);
    many_intervals_check(turns, "a slot seen through the lock");
    Tmk_lock_release(7);
  }
  Tmk_barrier(1);
  check(shared_ints[0] == turns, "the turn counter", shared_ints[0], turns);
  many_intervals_check(turns, "a slot after the barrier");
  finish("many-intervals");
}

/* Locks anywhere in the id range (the test sets TMK_MAX_LOCKS to 2^30):
 * ids at the edges of the runtime's table of lock states and beyond it,
 * each guarding a counter on a page of its own, taken by every process in
 * turn with the others; every counter must come out right. */
static void lock_ids(void) {
  static const unsigned ids[] = {0,     1,      255,     256,         65535,
                                 65536, 100000, 1000000, 1073741822, 1073741823};
  enum { count = sizeof ids / sizeof ids[0], stride = 1024 };
  int i;
  unsigned k;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(count * stride * sizeof(int));
    for (k = 0; k < count; k++) shared_ints[k * stride] = 0;
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (i = 0; i < iterations; i++)
    for (k = 0; k < count; k++) {
      unsigned which = (k + Tmk_proc_id) % count;
      Tmk_lock_acquire(ids[which]);
      shared_ints[which * stride]++;
      Tmk_lock_release(ids[which]);
    }
  Tmk_barrier(1);
  for (k = 0; k < count; k++)
    check(shared_ints[k * stride] == iterations * (int)Tmk_nprocs, "a lock's counter",
          shared_ints[k * stride], iterations * (long)Tmk_nprocs);
  finish("lock-ids");
}

/* Data that migrates around every process in turn under a lock, each
 * waiting on a condition of its own until the one before signals it: a
 * grant comes from the last writer, and carries the diffs it was sent of
 * the writers before it as well as its own, which are all the acquirer
 * lacks.  Over the last half of the turns a process faults for diffs
 * twice at most, asking each other writer once (before grants carried
 * other writers' diffs, on 3 processes and more it asked each of them at
 * every turn; a writer pushes only to a process that has asked it for the
 * page, which one whose grants came from others may not have), and the
 * counter, the cells and the words each turn adds 1 to come out right.  (A grant carries 64 KiB of diffs at most: words enough
 * that every writer's diffs fill that would make the acquirers fault.) */
enum { ROUND_WORDS = 64 };
static void lock_round(void) {
  const int turns = 40;
  const unsigned nprocs = Tmk_nprocs, me = Tmk_proc_id;
  int mine = 0, i;
  unsigned long asked_before = 0;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((nprocs + 2 + ROUND_WORDS) * sizeof(int));
    memset(shared_ints, 0, (nprocs + 2 + ROUND_WORDS) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  while (mine < turns) {
    Tmk_lock_acquire(7);
    if (mine == turns / 2) asked_before = Tmk_stat.diff_requests;
    while ((unsigned)shared_ints[0] % nprocs != me) Tmk_lock_cond_wait(7, me);
    check(shared_ints[0] == mine * (int)nprocs + (int)me, "the turn counter", shared_ints[0],
          mine * (long)nprocs + me);
    shared_ints[0]++;
    shared_ints[2 + me] = ++mine;
    for (i = 0; i < ROUND_WORDS; i++) shared_ints[2 + nprocs + i]++;
    Tmk_lock_cond_signal(7, (me + 1) % nprocs);
    Tmk_lock_release(7);
  }
  check(Tmk_stat.diff_requests - asked_before <= 2 * (nprocs - 1), "diff requests over the last turns (at most)",
        (long)(Tmk_stat.diff_requests - asked_before), 2 * (nprocs - 1));
  Tmk_barrier(1);
  check(shared_ints[0] == turns * (int)nprocs, "the final counter", shared_ints[0], turns * (long)nprocs);
  {
    unsigned p;
    for (p = 0; p < nprocs; p++) check(shared_ints[2 + p] == turns, "a process's cell", shared_ints[2 + p], turns);
  }
  for (i = 0; i < ROUND_WORDS; i++)
    check(shared_ints[2 + nprocs + i] == turns * (int)nprocs, "a word every turn adds to",
          shared_ints[2 + nprocs + i], turns * (long)nprocs);
  finish("lock-round");
}

/* Data that migrates under a lock travels with the grant: the processes
 * take turns (a turn word under lock 6, no barriers), each adding to a
 * counter and stamping its cell on one page.  Once a process has asked a
 * writer for the page's diffs, that writer's grants carry them, and a
 * turn after it costs no diff request when the granter is the page's only
 * other writer, as on 2 processes: there, over the last half of the turns,
 * a process asks for diffs at most twice (once a turn without the push).
 * On more processes each acquirer lacks other writers' diffs too, and the
 * counter and cells must come out right all the same. */
static void lock_pushes(void) {
  const int turns = 40;
  const unsigned nprocs = Tmk_nprocs;
  int mine = 0;
  unsigned long asked_before = 0;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((nprocs + 2) * sizeof(int));
    memset(shared_ints, 0, (nprocs + 2) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  while (mine < turns) {
    Tmk_lock_acquire(6);
    if ((unsigned)shared_ints[0] % nprocs == Tmk_proc_id) {
      if (mine == turns / 2) asked_before = Tmk_stat.diff_requests;
      check(shared_ints[0] == mine * (int)nprocs + (int)Tmk_proc_id, "the turn counter", shared_ints[0],
            mine * (long)nprocs + Tmk_proc_id);
      shared_ints[0]++;
      shared_ints[2 + Tmk_proc_id] = ++mine;
    }
    Tmk_lock_release(6);
  }
  if (nprocs == 2)
    check(Tmk_stat.diff_requests - asked_before <= 2, "diff requests over the last turns (at most)",
          (long)(Tmk_stat.diff_requests - asked_before), 2);
  Tmk_barrier(1);
  check(shared_ints[0] == turns * (int)nprocs, "the final counter", shared_ints[0], turns * (long)nprocs);
  {
    unsigned p;
    for (p = 0; p < nprocs; p++) check(shared_ints[2 + p] == turns, "a process's cell", shared_ints[2 + p], turns);
  }
  finish("lock-pushes");
}

/* Different processes write different words of the same pages under
 * different locks: every write survives. */
static void false_sharing(void) {
  int round, word, pages = 3;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(pages * PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 1; round <= iterations / 20 + 1; round++) {
    Tmk_lock_acquire(10 + Tmk_proc_id);
    for (word = Tmk_proc_id; word < pages * PAGE_WORDS; word += Tmk_nprocs)
      shared_ints[word] = round * 1000 + Tmk_proc_id;
    Tmk_lock_release(10 + Tmk_proc_id);
    Tmk_barrier(1);
    for (word = 0; word < pages * PAGE_WORDS; word++) {
      int expected = round * 1000 + word % (int)Tmk_nprocs;
      check(shared_ints[word] == expected, "a word after the barrier", shared_ints[word], expected);
    }
    Tmk_barrier(2);
  }
  /* Rounds one barrier apart, as SOR's and Jacobi's are: each process
   * rewrites its words of the same pages every round and checks them
   * after the barrier.  Every fourth round it also checks everyone's words,
   * between two barriers.  Each process reads the others' writes, so their
   * diffs come with the barriers; a page keeps its mapping across them,
   * and the diffs a process sends must carry only its own writes, never
   * a stale copy of another's. */
  Tmk_barrier(3);
  for (round = 1; round <= iterations / 10 + 8; round++) {
    for (word = Tmk_proc_id; word < pages * PAGE_WORDS; word += Tmk_nprocs)
      shared_ints[word] = round * 1000 + Tmk_proc_id;
    Tmk_barrier(4);
    for (word = Tmk_proc_id; word < pages * PAGE_WORDS; word += Tmk_nprocs)
      check(shared_ints[word] == round * 1000 + (int)Tmk_proc_id, "its own word one barrier later",
            shared_ints[word], round * 1000 + Tmk_proc_id);
    if (round % 4 == 0) {
      for (word = 0; word < pages * PAGE_WORDS; word++) {
        int expected = round * 1000 + word % (int)Tmk_nprocs;
        check(shared_ints[word] == expected, "a word one barrier later", shared_ints[word], expected);
      }
      Tmk_barrier(5);
    }
  }
  finish("false-sharing");
}

/* Different processes write different bytes of the same words (a char
 * array, as per-process flags often are): between barriers, and under
 * different locks; every byte survives. */
static void byte_sharing(void) {
  int round, i, n = 3 * PAGE_WORDS * (int)sizeof(int); /* three pages of bytes */
  unsigned p;
  char *bytes;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(n);
    memset(shared_ints, 0, n);
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  bytes = (char *)shared_ints;
  for (round = 1; round <= 3; round++) {
    for (i = Tmk_proc_id; i < n; i += Tmk_nprocs) bytes[i] = (char)(round * 16 + Tmk_proc_id);
    Tmk_barrier(1);
    for (i = 0; i < n; i++) {
      char expected = (char)(round * 16 + i % (int)Tmk_nprocs);
      check(bytes[i] == expected, "a byte after the barrier", bytes[i], expected);
    }
    Tmk_barrier(2);
  }
  Tmk_lock_acquire(20 + Tmk_proc_id);
  bytes[Tmk_proc_id] = (char)(100 + Tmk_proc_id);
  Tmk_lock_release(20 + Tmk_proc_id);
  Tmk_barrier(3);
  for (p = 0; p < Tmk_nprocs; p++)
    check(bytes[p] == (char)(100 + p), "a byte written under its own lock", bytes[p], 100 + p);
  finish("byte-sharing");
}

/* Barriers propagate every write: each process rewrites its share of a
 * multi-page array every round, everyone reads all of it. */
static void barriers(void) {
  int round, i, n = 40000;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(n * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  /* Over a hundred barriers: the pushes of every page lapse (see push_barriers
   * in runtime/page.cc) and each reader faults for them again. */
  for (round = 0; round < iterations / 4 + 2; round++) {
    int lo = (int)((long)n * Tmk_proc_id / Tmk_nprocs), hi = (int)((long)n * (Tmk_proc_id + 1) / Tmk_nprocs);
    for (i = lo; i < hi; i++) shared_ints[i] = round * 7 + i;
    Tmk_barrier(round % 3 + 1);
    for (i = 0; i < n; i++) check(shared_ints[i] == round * 7 + i, "an element after the barrier", shared_ints[i], round * 7 + i);
    Tmk_barrier(10);
  }
  finish("barriers");
}

/* The pages at the top of the largest region the settings allow: process 0
 * extends the heap to the region's end, writes a run of two pages and a
 * page alone there, and every process reads them after a barrier (their
 * write notices carry the highest page numbers there are).  The heap is
 * full after it, so the verdict is the job's exit status. */
static char *top_of_heap;

static void top_pages(void) {
  size_t page = Tmk_page_size;
  if (Tmk_proc_id == 0) {
    unsigned step = 1u << 31;
    while (step >= page) {
      char *block = Tmk_sbrk(step);
      if (block != NULL) top_of_heap = block + step;
      else step /= 2;
    }
    Tmk_distribute(&top_of_heap, sizeof top_of_heap);
    top_of_heap[-4 * (long)page] = 1;
    top_of_heap[-3 * (long)page] = 2;
    top_of_heap[-1] = 3;
  }
  Tmk_barrier(0);
  check(top_of_heap[-4 * (long)page] == 1, "the first of two pages written at the top", top_of_heap[-4 * (long)page], 1);
  check(top_of_heap[-3 * (long)page] == 2, "the second of two pages written at the top", top_of_heap[-3 * (long)page], 2);
  check(top_of_heap[-1] == 3, "the last byte of the region", top_of_heap[-1], 3);
  Tmk_barrier(1);
  if (Tmk_proc_id == 0)
    printf("top-pages: checked on %u processes, %u pages\n", Tmk_nprocs, Tmk_npages);
  Tmk_exit(failures ? 1 : 0);
}

/* Shared memory touched by several threads of a process at once: in each
 * round four threads write the process's block (write faults) and, after
 * the main thread's barrier, read the whole array (read faults, fetches
 * from every other process), a quarter each, at the same time.  A fault is
 * served for one thread at a time; the others' wait their turn. */
enum { thread_count = 4, thread_words = 40000 };
struct thread_part {
  pthread_t thread;
  int index, round, writing;
};

static void *touch_part(void *arg) {
  struct thread_part *part = arg;
  long lo, hi, i;
  if (part->writing) {
    long begin = (long)thread_words * Tmk_proc_id / Tmk_nprocs, end = (long)thread_words * (Tmk_proc_id + 1) / Tmk_nprocs;
    lo = begin + (end - begin) * part->index / thread_count;
    hi = begin + (end - begin) * (part->index + 1) / thread_count;
    for (i = lo; i < hi; i++) shared_ints[i] = part->round * 13 + (int)i;
  } else {
    lo = (long)thread_words * part->index / thread_count;
    hi = (long)thread_words * (part->index + 1) / thread_count;
    for (i = lo; i < hi; i++)
      check(shared_ints[i] == part->round * 13 + i, "an element read by one of several threads",
            shared_ints[i], part->round * 13 + i);
  }
  return NULL;
}

static void run_threads(int round, int writing) {
  struct thread_part parts[thread_count];
  int t;
  for (t = 0; t < thread_count; t++) {
    parts[t] = (struct thread_part){.index = t, .round = round, .writing = writing};
    if (pthread_create(&parts[t].thread, NULL, touch_part, &parts[t]) != 0)
      Tmk_errexit("threads: pthread_create failed");
  }
  for (t = 0; t < thread_count; t++) pthread_join(parts[t].thread, NULL);
}

static void threads(void) {
  int round;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(thread_words * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 0; round < iterations / 10 + 2; round++) {
    run_threads(round, 1);
    Tmk_barrier(1);
    run_threads(round, 0);
    Tmk_barrier(2);
  }
  finish("threads");
}

/* Shared memory written by one thread of a process while another calls
 * Tmk_*: in each round a second thread takes and releases locks (one of
 * its own process's, whose acquires need no message, and one that every
 * process takes, adding to a count under it), or, in every third round,
 * passes barriers with the other processes' second threads, while the
 * main thread writes the process's block, pausing after the first word
 * of each page.  The main thread then joins it, and every process reads
 * the whole array after a barrier.  The closes, seals and invalidations
 * of the second thread's calls race with the main thread's writes, and
 * none may lose one: a close that dropped an unwritten twin and then
 * protected its page lost the write made in between (the page's first
 * word, in 12 runs of 20 of a program like this one). */
enum { calls_pages = 24, calls_rounds = 15, calls_turns = 20 };
static long *calls_count;

static void *take_locks_meanwhile(void *arg) {
  int turn;
  int barriers = *(int *)arg;
  for (turn = 0; turn < calls_turns; turn++) {
    if (barriers) {
      if (turn % 4 == 0) Tmk_barrier(3);
      continue;
    }
    Tmk_lock_acquire(10 + Tmk_proc_id);
    Tmk_lock_release(10 + Tmk_proc_id);
    Tmk_lock_acquire(1);
    (*calls_count)++;
    Tmk_lock_release(1);
  }
  return NULL;
}

static void write_block_slowly(int round) {
  long words = (long)calls_pages * PAGE_WORDS;
  long begin = words * Tmk_proc_id / Tmk_nprocs, end = words * (Tmk_proc_id + 1) / Tmk_nprocs, i;
  for (i = begin; i < end; i++) {
    shared_ints[i] = round * 7 + (int)i;
    if (i % PAGE_WORDS == 0) usleep(20);
  }
}

/* One page sealed twice in one interval of process 1, by its two
 * threads.  Process 1 writes word 1 of a fresh page; after a barrier
 * process 0 reads it (process 1 seals the page for it, keeping its twin)
 * and writes word 0, then comes to the next barrier late.  Process 1's
 * main thread waits in that barrier meanwhile, and a second thread of
 * process 1 writes word 2.  Process 0's notice then invalidates the page
 * at process 1, which seals the second thread's write with the twin in
 * the interval still open.  Process 1 then writes word 3, twinned anew in
 * that interval, and at the next barrier pushes the page to its reader,
 * process 0.  Labelled with the same interval, the two seals' diffs went
 * as two, and the push carried the second alone: process 0 lost word 2.
 * Every process then checks the four words.  The second thread writes
 * 20 ms into a wait of about 120 ms; on a machine so loaded that it
 * writes before the main thread's close, or after the barrier, the page
 * is sealed once and the round checks the usual case. */
enum { sealed_rounds = 4, sealed_late_us = 120000, sealed_write_us = 20000 };
static int sealed_waiting;  /* process 1's main thread is at the barrier */

static int sealed_value(int round, int word) { return 1000 * (round + 1) + word; }

struct sealed_word {
  int *word, value;
};

static void *write_while_waiting(void *arg) {
  struct sealed_word *write = arg;
  while (!__atomic_load_n(&sealed_waiting, __ATOMIC_ACQUIRE)) usleep(1000);
  usleep(sealed_write_us);
  *write->word = write->value;
  return NULL;
}

static void sealed_twice(void) {
  int round, word;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(sealed_rounds * PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  unsigned writer = Tmk_nprocs > 1 ? 1 : 0;
  for (round = 0; round < sealed_rounds; round++) {
    int *page = shared_ints + (long)round * PAGE_WORDS;
    pthread_t other;
    struct sealed_word second = {&page[2], sealed_value(round, 2)};
    if (Tmk_proc_id == writer) page[1] = sealed_value(round, 1);
    Tmk_barrier(1);
    if (Tmk_proc_id == 0) {
      check(page[1] == sealed_value(round, 1), "word 1 of a page, before the second seal", page[1],
            sealed_value(round, 1));
      page[0] = sealed_value(round, 0);
      usleep(sealed_late_us);
    }
    if (Tmk_proc_id == writer) {
      if (pthread_create(&other, NULL, write_while_waiting, &second) != 0)
        Tmk_errexit("sealed-twice: pthread_create failed");
      __atomic_store_n(&sealed_waiting, 1, __ATOMIC_RELEASE);
    }
    Tmk_barrier(2);
    if (Tmk_proc_id == writer) {
      pthread_join(other, NULL);
      __atomic_store_n(&sealed_waiting, 0, __ATOMIC_RELEASE);
      page[3] = sealed_value(round, 3);
    }
    Tmk_barrier(3);
    for (word = 0; word < 4; word++)
      check(page[word] == sealed_value(round, word), "a word of a page sealed twice in one interval",
            page[word], sealed_value(round, word));
  }
  finish("sealed-twice");
}

/* Process 0 allocates words longs (shared_longs), set to 0, and hands
 * them to everyone; every process returns after barrier 0. */
static long *allocate_zeroed_longs(long words, const char *scenario) {
  if (Tmk_proc_id == 0) {
    shared_longs = Tmk_malloc((unsigned)(words * sizeof(long)));
    if (shared_longs == NULL) Tmk_errexit("%s: cannot allocate %ld shared words", scenario, words);
    memset(shared_longs, 0, words * sizeof(long));
    Tmk_distribute(&shared_longs, sizeof shared_longs);
  }
  Tmk_barrier(0);
  return shared_longs;
}

/* Process 0 allocates words ints (shared_ints) and a count, set to 0,
 * whose address goes in *count (a global), and hands both to everyone. */
static void allocate_ints_and_count(long words, long **count) {
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)(words * sizeof(int)));
    *count = Tmk_malloc(sizeof(long));
    **count = 0;
    Tmk_distribute(&shared_ints, sizeof shared_ints);
    Tmk_distribute(count, sizeof *count);
  }
  Tmk_barrier(0);
}

static void thread_calls(void) {
  int round, barrier_rounds = 0;
  long i, words = (long)calls_pages * PAGE_WORDS;
  allocate_ints_and_count(words, &calls_count);
  for (round = 0; round < calls_rounds; round++) {
    pthread_t other;
    int barriers = round % 3 == 2;
    barrier_rounds += barriers;
    if (pthread_create(&other, NULL, take_locks_meanwhile, &barriers) != 0)
      Tmk_errexit("thread-calls: pthread_create failed");
    write_block_slowly(round);
    pthread_join(other, NULL);
    Tmk_barrier(1);
    for (i = 0; i < words; i++)
      check(shared_ints[i] == round * 7 + i,
            "an element written while another thread of its process called Tmk_*", shared_ints[i],
            round * 7 + i);
    Tmk_barrier(2);
  }
  Tmk_lock_acquire(1);
  check(*calls_count == (long)(calls_rounds - barrier_rounds) * calls_turns * Tmk_nprocs,
        "the count the second threads kept under a lock", *calls_count,
        (long)(calls_rounds - barrier_rounds) * calls_turns * Tmk_nprocs);
  Tmk_lock_release(1);
  finish("thread-calls");
}

/* A program that handles signals of its own: SIGALRM from a timer every
 * 100 us, without SA_RESTART, while the processes write their blocks,
 * pass barriers and take a lock.  The kernel gives a signal sent to the
 * process to any thread not blocking it; the program's handler must run
 * on the program's own thread, never on one of the runtime's (its service
 * thread, its monitor, UCX's), where it interrupted a thread holding the
 * runtime's locks, and a handler reading shared memory hung the process.
 * The runtime's own system calls, interrupted on the main thread, go on. */
enum { signal_pages = 8, signal_rounds = 30 };
static pid_t signal_main_thread;
static volatile sig_atomic_t signals_on_main, signals_elsewhere;

static void count_signal(int signal_number) {
  (void)signal_number;
  if ((pid_t)syscall(SYS_gettid) == signal_main_thread)
    signals_on_main++;
  else
    signals_elsewhere++;
}

static void program_signals(void) {
  struct sigaction on_alarm;
  struct itimerval every = {{0, 100}, {0, 100}}, off = {{0, 0}, {0, 0}};
  long i, words = (long)signal_pages * PAGE_WORDS;
  int round;
  allocate_ints_and_count(words, &shared_longs);
  signal_main_thread = (pid_t)syscall(SYS_gettid);
  memset(&on_alarm, 0, sizeof on_alarm);
  on_alarm.sa_handler = count_signal;
  sigemptyset(&on_alarm.sa_mask);
  sigaction(SIGALRM, &on_alarm, NULL);
  setitimer(ITIMER_REAL, &every, NULL);
  for (round = 0; round < signal_rounds; round++) {
    long begin = words * Tmk_proc_id / Tmk_nprocs, end = words * (Tmk_proc_id + 1) / Tmk_nprocs;
    for (i = begin; i < end; i++) shared_ints[i] = round * 31 + (int)i;
    usleep(300); /* a signal or two comes meanwhile */
    Tmk_barrier(1);
    for (i = 0; i < words; i++)
      check(shared_ints[i] == round * 31 + i, "an element written while signals came",
            shared_ints[i], round * 31 + i);
    Tmk_lock_acquire(1);
    (*shared_longs)++;
    Tmk_lock_release(1);
    Tmk_barrier(2);
  }
  setitimer(ITIMER_REAL, &off, NULL);
  Tmk_lock_acquire(1);
  check(*shared_longs == (long)signal_rounds * Tmk_nprocs, "the count kept under a lock while signals came",
        *shared_longs, (long)signal_rounds * Tmk_nprocs);
  Tmk_lock_release(1);
  check(signals_elsewhere == 0, "signals the program's handler took on a thread of the runtime's",
        signals_elsewhere, 0);
  check(signals_on_main >= signal_rounds, "signals the program's handler took on its own thread (at least)",
        signals_on_main, signal_rounds);
  finish("program-signals");
}

/* A program with a SIGSEGV handler of its own, installed before
 * Tmk_startup, for memory of its own: private pages mapped PROT_NONE,
 * opened by the handler at their first touch, while the processes write
 * and read shared memory, whose faults are the runtime's.  A fault
 * outside the shared region goes on to the program's handler (with the
 * kernel's siginfo); before, the runtime's handler took its place, and
 * process 0 crashed at its first private fault. */
enum { own_pages = 64, own_rounds = 5 };
static char *own_region;
static long own_page_bytes;
static volatile sig_atomic_t own_faults;

static void open_own_page(int signal_number, siginfo_t *info, void *context) {
  char *at = info->si_addr;
  (void)signal_number;
  (void)context;
  if (at >= own_region && at < own_region + own_pages * own_page_bytes) {
    mprotect((void *)((uintptr_t)at & ~(uintptr_t)(own_page_bytes - 1)), (size_t)own_page_bytes,
             PROT_READ | PROT_WRITE);
    own_faults++;
    return;
  }
  signal(SIGSEGV, SIG_DFL); /* not ours: crash there */
}

static void install_own_fault_handler(void) {
  struct sigaction own;
  own_page_bytes = sysconf(_SC_PAGESIZE);
  own_region = mmap(NULL, (size_t)(own_pages * own_page_bytes), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (own_region == MAP_FAILED) abort();
  memset(&own, 0, sizeof own);
  own.sa_sigaction = open_own_page;
  own.sa_flags = SA_SIGINFO;
  sigemptyset(&own.sa_mask);
  sigaction(SIGSEGV, &own, NULL);
}

static void own_fault_handler(void) {
  long words = 16L * PAGE_WORDS, i;
  int round, page;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)(words * sizeof(int)));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 0; round < own_rounds; round++) {
    for (i = Tmk_proc_id; i < words; i += Tmk_nprocs) shared_ints[i] = round + (int)i;
    for (page = 0; page < own_pages; page++) own_region[page * own_page_bytes + round] = (char)round;
    Tmk_barrier(1);
    for (i = 0; i < words; i++)
      check(shared_ints[i] == round + i, "a shared element beside the program's own faults", shared_ints[i],
            round + i);
    Tmk_barrier(2);
  }
  check(own_faults == own_pages, "faults the program's own handler took", own_faults, own_pages);
  for (page = 0; page < own_pages; page++)
    check(own_region[page * own_page_bytes + own_rounds - 1] == own_rounds - 1,
          "a byte of the program's own memory", own_region[page * own_page_bytes + own_rounds - 1],
          own_rounds - 1);
  finish("own-fault-handler");
}

/* Children a program forks after Tmk_startup (not fork and exec, which
 * never see the runtime) are plain processes: one that calls exit() ends
 * alone, where its exit hook took part in the job's end over its parent's
 * connections and the job hung; one that touches a shared page not valid
 * here, or calls Tmk_*, stops with a message (status 1) and leaves the
 * job alone.  The parents' shared data and the job go on. */
static int child_status(void (*body)(void)) {
  int status = -1;
  pid_t child = fork();
  if (child < 0) Tmk_errexit("forked-child: fork failed");
  if (child == 0) {
    body();
    _exit(0);
  }
  if (waitpid(child, &status, 0) != child) Tmk_errexit("forked-child: waitpid failed");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void child_exits(void) { exit(3); }

static int *unread_page; /* written by another process, never read by this one */

static void child_reads(void) { exit(unread_page[0] == 0 ? 4 : 5); }

static void child_calls(void) { Tmk_barrier(5); }

static void forked_child(void) {
  long i, words = 4L * PAGE_WORDS;
  int round;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)(words * sizeof(int)));
    shared_longs = Tmk_malloc(3 * Tmk_nprocs * PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
    Tmk_distribute(&shared_longs, sizeof shared_longs);
  }
  Tmk_barrier(0);
  for (round = 1; round <= 3; round++) {
    int *pages = (int *)shared_longs + (long)(round - 1) * Tmk_nprocs * PAGE_WORDS;
    for (i = Tmk_proc_id; i < words; i += Tmk_nprocs) shared_ints[i] = round * (int)i;
    pages[Tmk_proc_id * PAGE_WORDS] = round;
    Tmk_barrier(1);
    unread_page = pages + (Tmk_proc_id + 1) % Tmk_nprocs * PAGE_WORDS;
    int exited = child_status(child_exits), called;
    check(exited == 3, "the status of a child that called exit(3)", exited, 3);
    if (Tmk_nprocs > 1) {
      int read = child_status(child_reads);
      check(read == 1, "the status of a child that read shared memory", read, 1);
    }
    check(unread_page[0] == round, "a page the child could not read", unread_page[0], round);
    called = child_status(child_calls);
    check(called == 1, "the status of a child that called Tmk_barrier", called, 1);
    for (i = 0; i < words; i++)
      check(shared_ints[i] == round * i, "a shared element after the children", shared_ints[i], round * i);
    Tmk_barrier(2);
  }
  finish("forked-child");
}

/* A job suspended as a whole and continued (the test stops its process
 * group for longer than TMK_PEER_TIMEOUT meanwhile): 200 rounds of 10 ms
 * of sleep, a barrier and a count under a lock. */
static void suspend_resume(void) {
  int round;
  if (Tmk_proc_id == 0) {
    shared_longs = Tmk_malloc(sizeof(long));
    *shared_longs = 0;
    Tmk_distribute(&shared_longs, sizeof shared_longs);
  }
  Tmk_barrier(0);
  for (round = 0; round < 200; round++) {
    usleep(10000);
    Tmk_lock_acquire(1);
    (*shared_longs)++;
    Tmk_lock_release(1);
    Tmk_barrier(1);
  }
  Tmk_lock_acquire(1);
  check(*shared_longs == 200L * Tmk_nprocs, "the count kept under a lock across the suspension",
        *shared_longs, 200L * Tmk_nprocs);
  Tmk_lock_release(1);
  finish("suspend-resume");
}

/* A signal handler that enters the runtime again: process 1's handler
 * runs 50 ms into its wait at a barrier (the others arrive after 500 ms)
 * and reads a page process 0 wrote before the last barrier, invalid
 * there (touch), or calls Tmk_lock_acquire.  The runtime, in the middle
 * of the barrier on that same thread, cannot serve either: the job stops
 * at once with a message naming both.  Before, the fault or the acquire
 * ran inside the barrier's wait, a wait within a wait; the same fault
 * interrupting Tmk_lock_release's mprotect waited for a lock its own
 * thread held, until the peer timeout (30 s) called the process lost. */
static volatile sig_atomic_t handler_read;

static void touch_shared(int signal_number) {
  (void)signal_number;
  handler_read += shared_ints[0];
}

static void call_runtime(int signal_number) {
  (void)signal_number;
  Tmk_lock_acquire(3);
}

static void handler_reentry(int touch) {
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  if (Tmk_proc_id == 0) shared_ints[0] = 1;
  Tmk_barrier(1);
  if (Tmk_proc_id == 1) {
    struct sigaction on_alarm;
    struct itimerval once = {{0, 0}, {0, 50000}};
    memset(&on_alarm, 0, sizeof on_alarm);
    on_alarm.sa_handler = touch ? touch_shared : call_runtime;
    sigemptyset(&on_alarm.sa_mask);
    sigaction(SIGALRM, &on_alarm, NULL);
    setitimer(ITIMER_REAL, &once, NULL);
  } else {
    usleep(500000);
  }
  Tmk_barrier(2);
  check(0, "a barrier that a signal handler entered the runtime during", 0, 1);
  finish(touch ? "handler-touches" : "handler-calls");
}

/* Tmk_stat counts the program's own messages, and only those; what the
 * substrate exchanges at start-up (TMK_WARM_UP) is not counted.  By the
 * end of the first barrier every process but 0 has sent its arrival and
 * received its departure, and nothing else can reach it before it arrives
 * at the second; process 0, whose own arrival needs no message, has sent
 * the n-1 departures and received the n-1 arrivals, and perhaps some
 * arrivals at the second barrier already. */
static void traffic_counts(const char *scenario, int late) {
  long others = (long)Tmk_nprocs - 1;
  long sent_expected = Tmk_proc_id == 0 ? others : 1;
  long received_least = sent_expected, received_most = Tmk_proc_id == 0 ? 2 * others : 1;
  long sent, received;
  /* Late: process 0 waits 50 ms at the barrier, long enough to ask the
   * others what they wait for (TMK_DEADLOCK_CHECK), which is not counted. */
  if (late && Tmk_proc_id != 0) usleep(50000);
  Tmk_barrier(0);
  sent = (long)Tmk_stat.messages;
  received = (long)Tmk_stat.messages_received;
  Tmk_barrier(1);
  check(sent == sent_expected, "messages sent by the first barrier", sent, sent_expected);
  check(received >= received_least, "messages received by the first barrier (at least)", received,
        received_least);
  check(received <= received_most, "messages received by the first barrier (at most)", received,
        received_most);
  finish(scenario);
}

/* A banded computation, as SOR and Jacobi are: each process rewrites its
 * own band of rows every round and then reads the boundary row of each
 * neighbour's band (a row spans two pages: bands do not start on a page).
 * Every value read must be the latest, and a process must not be kept up
 * to date with the rest of its neighbours' bands: over the last rounds it
 * applies at most 6 diffs per neighbour a round (it reads 2 pages of
 * each), where fetching, and being pushed, the pages after the row made
 * it 32. */
static void boundary_rows(void) {
  const int row = PAGE_WORDS, rows_per_band = 33;
  int rounds = 12, round, i, k;
  long band = (long)rows_per_band * row + row / 2; /* ints */
  int up = Tmk_proc_id > 0, down = Tmk_proc_id + 1 < Tmk_nprocs;
  long neighbours = up + down;
  unsigned long applied_before = 0, received_before = 0;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)(band * Tmk_nprocs * sizeof(int)));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 0; round < rounds; round++) {
    long lo = band * Tmk_proc_id, hi = lo + band;
    if (round == rounds - 4) {
      applied_before = Tmk_stat.diffs_applied;
      received_before = Tmk_stat.bytes_received;
    }
    for (i = 0; i < band; i++) shared_ints[lo + i] = round * 100003 + (int)(lo + i);
    Tmk_barrier(1);
    /* The last row of the band above and the first row of the band below. */
    for (k = 0; k < 2; k++) {
      long first = k == 0 ? lo - row : hi;
      if ((k == 0 && !up) || (k == 1 && !down)) continue;
      for (i = 0; i < row; i++)
        check(shared_ints[first + i] == round * 100003 + (int)(first + i), "a neighbour's boundary row",
              shared_ints[first + i], round * 100003 + (int)(first + i));
    }
    Tmk_barrier(2);
  }
  {
    long applied = (long)(Tmk_stat.diffs_applied - applied_before), bound = 6 * neighbours * 4;
    check(applied <= bound, "diffs applied in the last 4 rounds of reading boundary rows (at most)",
          applied, bound);
  }
  /* A writer pushes its rows to their readers itself: process 0, which
   * gathers the barriers, receives its one neighbour's row and the
   * barriers' own messages (a row's diff spans 2 pages; 512 bytes for an
   * arrival's intervals), not the rows other neighbours push each other
   * (through process 0, 314 kB on 8 processes against 36 kB). */
  Tmk_barrier(3); /* brings Tmk_stat up to date */
  if (Tmk_proc_id == 0) {
    long received = (long)(Tmk_stat.bytes_received - received_before);
    long bound = 4 * (2 * 4096 + 3 * ((long)Tmk_nprocs - 1) * 512);
    check(received <= bound, "bytes process 0 received in the last 4 rounds (at most)", received,
          bound);
  }
  finish("boundary-rows");
}

/* Every process's block of `block` ints, as written in `round`, sampled. */
static void check_blocks(long block, int round) {
  long i;
  for (i = 0; i < block * (long)Tmk_nprocs; i += 97)
    check(shared_ints[i] == round * 100003 + (int)i, "a value of another process's block",
          shared_ints[i], round * 100003 + (int)i);
}

/* shared_ints: count ints from a page boundary, allocated by process 0
 * and known to every process after barrier 0. */
static void allocate_page_aligned_ints(long count) {
  if (Tmk_proc_id == 0) {
    char *bytes = Tmk_malloc((unsigned)(count * sizeof(int) + Tmk_page_size));
    shared_ints = (int *)(bytes + (Tmk_page_size - (uintptr_t)bytes % Tmk_page_size) % Tmk_page_size);
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
}

/* FFT's pattern in small: each process rewrites its block of pages once a
 * round, every process reads every block, and then each takes a lock in
 * turn to add to a counter.  A page is announced (a write notice) by the
 * interval in which it was written, not again by the intervals that follow
 * without writing it: those would invalidate every reader's copy at each
 * lock grant.  Over the last 4 rounds a process may receive, per other
 * process and round, the notices of its block (8 pages, 9 when it
 * straddles a page boundary) and of the counter's page at the lock and at
 * the barriers: at most 12.  Announcing a page in every interval while it
 * stayed twinned made it about 35. */
static void notices_once(void) {
  const int block_pages = 8, rounds = 10, nprocs = (int)Tmk_nprocs;
  long block = (long)block_pages * PAGE_WORDS; /* ints */
  int round;
  long i, notices_before = 0;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)((block * nprocs + 1) * sizeof(int)));
    memset(shared_ints, 0, (block * nprocs + 1) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 0; round < rounds; round++) {
    long lo = block * Tmk_proc_id;
    if (round == rounds - 4) notices_before = (long)Tmk_stat.write_notices;
    for (i = 0; i < block; i++) shared_ints[lo + i] = round * 100003 + (int)(lo + i);
    Tmk_barrier(1);
    check_blocks(block, round);
    Tmk_lock_acquire(3);
    shared_ints[block * nprocs]++;
    Tmk_lock_release(3);
    Tmk_barrier(2);
  }
  check(shared_ints[block * nprocs] == rounds * nprocs, "the counter", shared_ints[block * nprocs],
        (long)rounds * nprocs);
  {
    long received = (long)Tmk_stat.write_notices - notices_before, bound = 12L * (nprocs - 1) * 4;
    check(received <= bound, "write notices received in the last 4 rounds (at most)", received, bound);
  }
  finish("notices-once");
}

/* A block rewritten every other interval and read by the others after
 * each write (its diffs pushed with the barrier, and kept until a garbage
 * collection): the diffs kept grow by the block each round until their
 * store fills and each gives the next the bytes it rewrites (the test sets
 * TMK_GC_THRESHOLD to 2M), and the writer must keep its twins through the
 * interval that does not write.  Over the last 20 rounds a process may
 * make its block's twins again only after each garbage collection and once
 * more: dropping them at every close once the data kept passed half the
 * threshold, as the runtime once did, made them every round in about half
 * of those. */
static void twins_kept(void) {
  const int block_pages = 16, rounds = 40;
  const int nprocs = (int)Tmk_nprocs;
  long block = (long)block_pages * PAGE_WORDS; /* ints */
  int round;
  long i;
  unsigned long twins_before = 0, collections_before = 0;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)(block * nprocs * sizeof(int)));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 0; round < rounds; round++) {
    long lo = block * Tmk_proc_id;
    if (round == rounds - 20) {
      twins_before = Tmk_stat.twins;
      collections_before = Tmk_stat.gc_runs;
    }
    for (i = 0; i < block; i++) shared_ints[lo + i] = round * 100003 + (int)(lo + i);
    Tmk_barrier(1);
    check_blocks(block, round);
    Tmk_barrier(2);
  }
  if (nprocs > 1) {
    long made = (long)(Tmk_stat.twins - twins_before);
    long bound = block_pages * ((long)(Tmk_stat.gc_runs - collections_before) + 1);
    check(made <= bound, "twins made in the last 20 rounds (at most)", made, bound);
  }
  finish("twins-kept");
}

/* Written data above TMK_GC_THRESHOLD (1M, api_test.cc): each process
 * rewrites its block of 384 pages (1.5 MiB of twins) every round.  A
 * collection drops the twins, and the next round's writes make them
 * again: counted against the threshold, they made every process ask for a
 * collection at every round.  Nobody reads another's block until the end,
 * so the diffs and intervals kept grow by a round's notices alone, and no
 * collection comes in the last 15 rounds. */
static void working_set(void) {
  const int block_pages = 384, rounds = 20;
  long block = (long)block_pages * PAGE_WORDS; /* ints */
  int round;
  long i;
  unsigned long collections_before = 0;
  allocate_page_aligned_ints(block * Tmk_nprocs);
  for (round = 0; round < rounds; round++) {
    long lo = block * Tmk_proc_id;
    if (round == rounds - 15) collections_before = Tmk_stat.gc_runs;
    for (i = 0; i < block; i++) shared_ints[lo + i] = round * 100003 + (int)(lo + i);
    Tmk_barrier(1);
  }
  check(Tmk_stat.gc_runs == collections_before, "garbage collections in the last 15 rounds",
        (long)(Tmk_stat.gc_runs - collections_before), 0);
  check_blocks(block, rounds - 1);
  finish("working-set");
}

/* A word's value in round r: its low three bytes change every round, its
 * high byte (a float's sign and exponent, say) in one round of 64, a
 * different one for each word, so that consecutive diffs of a page write
 * different bytes of some words, and a diff holds the last change of some
 * high bytes that no later diff rewrites. */
static int rewritten_value(int round, long word) {
  unsigned low = ((unsigned)round * 2654435761u + (unsigned)word * 40503u) & 0xffffffu;
  unsigned high = (((unsigned)round + (unsigned)word) / 64 * 37u) & 0x7fu;
  return (int)(high << 24 | low);
}

/* Diffs that later ones rewrite give them their bytes once their store is
 * full (node::shrink_diffs), and a reader that lacks them gets the later
 * ones with them.  Each process rewrites its block of 32 pages every
 * round for 60 rounds, and the next process reads it after each barrier
 * (its diffs pushed: 8 MB a process in all).  The pages of m are written
 * by one process two rounds in a row, then by the next (the same words:
 * a writer's diffs before another's notice keep their bytes), and read by
 * nobody meanwhile.  At the end a process that never read them reads the
 * block of the process two before it and m: every diff since the start,
 * from every writer, in the right order (m's writers fetch it from the writers
 * before them in the same way).  Then records pass from holder to holder
 * under locks.  TMK_GC_THRESHOLD is 4M
 * (api_test.cc): kept whole, the diffs would pass it and need collections. */
static void shrunk_diffs(void) {
  const int block_pages = 32, m_pages = 4, rounds = 60, records = 8, nprocs = (int)Tmk_nprocs;
  long block = (long)block_pages * PAGE_WORDS, m_words = (long)m_pages * PAGE_WORDS;
  int *m, *record, round, step;
  long i;
  allocate_page_aligned_ints(block * nprocs + m_words + (long)records * PAGE_WORDS);
  m = shared_ints + block * nprocs;
  record = m + m_words;
  for (round = 0; round < rounds; round++) {
    int me = (int)Tmk_proc_id, before = (me + nprocs - 1) % nprocs;
    long lo = block * me;
    for (i = 0; i < block; i++) shared_ints[lo + i] = rewritten_value(round, lo + i);
    if ((round / 2) % nprocs == me)
      for (i = 0; i < m_words; i++) m[i] = rewritten_value(round, block * nprocs + i);
    Tmk_barrier(1);
    if (nprocs > 1)
      for (i = 0; i < block; i++) {
        long at = block * before + i;
        if (shared_ints[at] != rewritten_value(round, at)) {
          check(0, "the block of the process before, this round", shared_ints[at],
                rewritten_value(round, at));
          break;
        }
      }
    Tmk_barrier(2);
  }
  {
    int two_before = ((int)Tmk_proc_id + 2 * nprocs - 2) % nprocs;
    int last_m = rounds - 1; /* m as its writer wrote it in the last round */
    for (i = 0; i < block; i++) {
      long at = block * two_before + i;
      if (shared_ints[at] != rewritten_value(rounds - 1, at)) {
        check(0, "the block of the process two before, never read before", shared_ints[at],
              rewritten_value(rounds - 1, at));
        break;
      }
    }
    for (i = 0; i < m_words; i++)
      if (m[i] != rewritten_value(last_m, block * nprocs + i)) {
        check(0, "m, written by each process in turn", m[i], rewritten_value(last_m, block * nprocs + i));
        break;
      }
  }
  /* Then pages passed from process to process under locks, a record a
   * page: each holder finds the record as the holder before left it (its
   * version in word 0) and rewrites it.  The holders' diffs are asked for
   * by whoever takes the lock next, lacking any number of them. */
  Tmk_barrier(3);
  {
    unsigned state = seed * 7919u + Tmk_proc_id;
    for (step = 0; step < 300; step++) {
      int r = (int)(next_random(&state) % records);
      int *page = record + (long)r * PAGE_WORDS, version;
      Tmk_lock_acquire(10 + (unsigned)r);
      version = page[0];
      for (i = 1; i < PAGE_WORDS; i++) {
        int expected = version == 0 ? 0 : rewritten_value(version, i);
        if (page[i] != expected) {
          check(0, "a record as its last holder left it", page[i], expected);
          break;
        }
      }
      page[0] = ++version;
      for (i = 1; i < PAGE_WORDS; i++) page[i] = rewritten_value(version, i);
      Tmk_lock_release(10 + (unsigned)r);
    }
  }
  check(Tmk_stat.gc_runs == 0, "garbage collections", (long)Tmk_stat.gc_runs, 0);
  finish("shrunk-diffs");
}

/* A block read once and then only written (FFT's process 0 reads the other
 * half of u in its first transpose only): the reader's copy, which a lock
 * grant invalidates every round before the barrier pushes the writes, must
 * stop being pushed.  Each process writes its block of 8 pages holding its
 * own lock, then takes the next process's lock (whose grant carries at
 * least the next block's notices) and meets the others at a barrier; every
 * process reads every block in the first round only, and again after the
 * last.  Over the last 10 rounds a process applies no pushed diff (pushing
 * the next block on made it 8 a round; the grants, which protect every
 * read-only copy, stop the other blocks' pushes too). */
static void pushes_stop(void) {
  const int block_pages = 8, rounds = 24, nprocs = (int)Tmk_nprocs;
  long block = (long)block_pages * PAGE_WORDS; /* ints */
  unsigned me = Tmk_proc_id, next = (Tmk_proc_id + 1) % Tmk_nprocs;
  int round;
  long i;
  unsigned long applied_before = 0;
  /* Blocks on page boundaries: no page holds two processes' writes. */
  allocate_page_aligned_ints(block * nprocs);
  for (round = 0; round < rounds; round++) {
    long lo = block * me;
    if (round == rounds - 10) applied_before = Tmk_stat.diffs_applied;
    Tmk_lock_acquire(10 + me);
    Tmk_barrier(1); /* every process holds its lock before any asks for it */
    for (i = 0; i < block; i++) shared_ints[lo + i] = round * 100003 + (int)(lo + i);
    Tmk_lock_release(10 + me);
    if (next != me) {
      Tmk_lock_acquire(10 + next);
      Tmk_lock_release(10 + next);
    }
    Tmk_barrier(2);
    if (round == 0) check_blocks(block, round);
  }
  check(Tmk_stat.diffs_applied == applied_before, "diffs applied in the last 10 rounds",
        (long)(Tmk_stat.diffs_applied - applied_before), 0);
  Tmk_barrier(3);
  check_blocks(block, rounds - 1);
  finish("pushes-stop");
}

/* A block read once and then only pushed, with barriers alone: each
 * process rewrites its block of 8 pages every round, and every process
 * reads every block in the first round only, so its copies of the others'
 * blocks stay mapped, read-only, brought up to date by each barrier's
 * pushes, and never show that they are no longer read.  Those pushes must
 * stop all the same: over the last 10 of 30 rounds a process applies no
 * diff (without the stop, 10 * 8 * (processes - 1)); after the last round
 * every block reads its last values. */
static void read_once(void) {
  const int block_pages = 8, rounds = 30;
  long block = (long)block_pages * PAGE_WORDS; /* ints */
  long lo = block * Tmk_proc_id, i;
  int round;
  unsigned long applied_before = 0;
  allocate_page_aligned_ints(block * Tmk_nprocs);
  for (round = 0; round < rounds; round++) {
    if (round == rounds - 10) applied_before = Tmk_stat.diffs_applied;
    for (i = 0; i < block; i++) shared_ints[lo + i] = round * 100003 + (int)(lo + i);
    Tmk_barrier(1);
    if (round == 0) check_blocks(block, round);
    Tmk_barrier(2); /* read before the next round's writes */
  }
  check(Tmk_stat.diffs_applied == applied_before, "diffs applied in the last 10 rounds",
        (long)(Tmk_stat.diffs_applied - applied_before), 0);
  check_blocks(block, rounds - 1);
  finish("read-once");
}

/* A page a process reads for the first time comes whole from process 0,
 * and if process 0 goes on rewriting it, its diffs then come with the
 * barriers, as those of a page whose diffs were asked for do: process 0
 * rewrites a block of 8 pages every round, and every other process reads
 * the block after the barrier, fetching it whole in the first round and
 * asking for no diff in the rounds after (had the page request not made
 * it a reader, it would ask once more, in the second round). */
static void whole_then_pushed(void) {
  const int block_pages = 8, rounds = 6;
  long block = (long)block_pages * PAGE_WORDS, i;
  int round;
  unsigned long fetched_before = 0, asked_before = 0;
  allocate_page_aligned_ints(block);
  for (round = 0; round < rounds; round++) {
    if (Tmk_proc_id == 0)
      for (i = 0; i < block; i++) shared_ints[i] = round * 100003 + (int)i;
    Tmk_barrier(1);
    if (round == 0) fetched_before = Tmk_stat.page_fetches;
    if (round == 1) {
      check((long)(Tmk_stat.page_fetches - fetched_before) == (Tmk_proc_id == 0 ? 0 : block_pages),
            "pages fetched whole in the first round", (long)(Tmk_stat.page_fetches - fetched_before),
            Tmk_proc_id == 0 ? 0 : block_pages);
      asked_before = Tmk_stat.diff_requests;
    }
    if (Tmk_proc_id != 0)
      for (i = 0; i < block; i++)
        if (shared_ints[i] != round * 100003 + (int)i)
          check(0, "a word of process 0's block", shared_ints[i], round * 100003 + (int)i);
    Tmk_barrier(2);
  }
  check((long)(Tmk_stat.diff_requests - asked_before) == 0, "diff requests after the first round",
        (long)(Tmk_stat.diff_requests - asked_before), 0);
  finish("whole-then-pushed");
}

/* A first sweep that writes a few pages of every block opens only those,
 * and one that writes every page in order opens many at a time: each
 * process writes its own 2 pages of each 16-page block of a fresh array A,
 * in order, then of a fresh array B after a barrier.  The close at that
 * barrier finds most of the pages that A's first writes opened with them
 * unwritten, so B's first writes open 2 pages at a time, and B costs
 * exactly one twin a page written (opening 16 at each first write made 16
 * a block).  Then each process writes every page of its own 32-page share
 * of a fresh array C in order: the close after B found all the pages it
 * opened so written, and each first write in C finds the page before it
 * opened so and written, so the pages opened at a time go 4, 8, 16, 16:
 * 4 write faults (opening 2 at a time, 16).  Every process then checks
 * every word. */
static int strided_value(int array, long word) { return (int)(word * 3 + array + 1); }

static void strided_first_writes(void) {
  const long blocks = 8, block_words = 16L * PAGE_WORDS, words = blocks * block_words;
  const long share = 32L * PAGE_WORDS, nprocs = (long)Tmk_nprocs, me = (long)Tmk_proc_id;
  const long mine = 2L * PAGE_WORDS * me;
  long block, word;
  int array;
  unsigned long twins_before = 0, faults_before = 0;
  allocate_page_aligned_ints(2 * words + nprocs * share);
  int *c = shared_ints + 2 * words;
  for (array = 0; array < 2; array++) {
    if (array == 1) twins_before = Tmk_stat.twins;
    for (block = 0; block < blocks; block++)
      for (word = mine; word < mine + 2L * PAGE_WORDS; word++) {
        long at = array * words + block * block_words + word;
        shared_ints[at] = strided_value(array, at);
      }
    Tmk_barrier(1);
  }
  long expected = nprocs > 1 ? 2 * blocks : 0;
  check((long)(Tmk_stat.twins - twins_before) == expected, "twins made by the sweep of B",
        (long)(Tmk_stat.twins - twins_before), expected);
  faults_before = Tmk_stat.write_faults;
  for (word = me * share; word < (me + 1) * share; word++) c[word] = strided_value(2, word);
  Tmk_barrier(1);
  long faults = (long)(Tmk_stat.write_faults - faults_before);
  check(faults == (nprocs > 1 ? 4 : 0), "write faults of the sweep of C", faults,
        nprocs > 1 ? 4 : 0);
  for (array = 0; array < 2; array++)
    for (block = 0; block < blocks; block++)
      for (word = 0; word < block_words; word++) {
        long at = array * words + block * block_words + word;
        int want = word < 2L * PAGE_WORDS * nprocs ? strided_value(array, at) : 0;
        if (shared_ints[at] != want)
          check(0, array == 0 ? "a word of A" : "a word of B", shared_ints[at], want);
      }
  for (word = 0; word < nprocs * share; word++)
    if (c[word] != strided_value(2, word)) check(0, "a word of C", c[word], strided_value(2, word));
  finish("strided-first-writes");
}

/* First writes far apart: each process writes one word of each of 1500
 * pages 32 pages apart, in one interval.  A first write opens the pages
 * after it with its own, for a sweep; here they are never written, and
 * each write opened 16 pages, a twin and fresh memory each (24000 twins a
 * process).  Once 16 MiB of such pages are unconfirmed, first writes open
 * their own page only: the twins made stay below one a write plus those
 * 16 MiB and a batch.  Every process then reads the words the next one
 * wrote. */
enum { sparse_writes = 1500, sparse_stride = 32 };

static void sparse_first_writes(void) {
  const long nprocs = (long)Tmk_nprocs, me = (long)Tmk_proc_id;
  long k, next = (me + 1) % nprocs;
  allocate_page_aligned_ints((long)sparse_writes * nprocs * sparse_stride * PAGE_WORDS);
  unsigned long twins_before = Tmk_stat.twins;
  for (k = 0; k < sparse_writes; k++)
    shared_ints[((k * nprocs + me) * sparse_stride) * PAGE_WORDS + 3] = (int)(k * 10 + me + 1);
  Tmk_barrier(1);
  long twins = (long)(Tmk_stat.twins - twins_before);
  long bound = sparse_writes + (16L << 20) / (long)Tmk_page_size + 16;
  if (nprocs > 1) check(twins <= bound, "twins made by first writes far apart (at most)", twins, bound);
  for (k = 0; k < sparse_writes; k++) {
    long at = ((k * nprocs + next) * sparse_stride) * PAGE_WORDS + 3;
    if (shared_ints[at] != (int)(k * 10 + next + 1))
      check(0, "a word written far from the others", shared_ints[at], k * 10 + next + 1);
  }
  finish("sparse-first-writes");
}

/* A first write opens no page above the heap's break along with the page
 * it faults on: the program writes nothing there, and each page opened
 * costs a twin and memory.  Process 0 allocates a page-aligned array of 32
 * pages a process and, last in the heap, a page a process (FFT's
 * checksums); each process writes its 32 pages in order, which takes the
 * pages its first writes open at a time up to 16, then its own page of the
 * last block.  That write opens its page and those after it below the
 * break, nprocs - p pages, where 16 opened would reach past the break.
 * Every process then checks every page of the last block. */
static int heap_end_value(long word) { return (int)(word * 7 + 5); }

static void heap_end_writes(void) {
  static int *sweep, *last;
  const long share = 32L * PAGE_WORDS, nprocs = (long)Tmk_nprocs, me = (long)Tmk_proc_id;
  long word;
  if (Tmk_proc_id == 0) {
    sweep = Tmk_malloc((unsigned)(nprocs * share * sizeof(int)));
    last = Tmk_malloc((unsigned)(nprocs * PAGE_WORDS * sizeof(int)));
    if (sweep == NULL || last == NULL) Tmk_errexit("heap-end-writes: no memory");
    Tmk_distribute(&sweep, sizeof sweep);
    Tmk_distribute(&last, sizeof last);
  }
  Tmk_barrier(0);
  for (word = me * share; word < (me + 1) * share; word++) sweep[word] = (int)word;
  Tmk_barrier(1);
  unsigned long twins_before = Tmk_stat.twins;
  last[me * PAGE_WORDS] = heap_end_value(me * PAGE_WORDS);
  Tmk_barrier(2);
  long expected = nprocs > 1 ? nprocs - me : 0, opened = (long)(Tmk_stat.twins - twins_before);
  check(opened == expected, "pages opened by the first write to the heap's last block", opened,
        expected);
  for (word = 0; word < nprocs * PAGE_WORDS; word++) {
    int want = word % PAGE_WORDS == 0 ? heap_end_value(word) : 0;
    if (last[word] != want) check(0, "a word of the heap's last block", last[word], want);
  }
  for (word = 0; word < nprocs * share; word++)
    if (sweep[word] != (int)word) check(0, "a word of the swept array", sweep[word], (long)word);
  finish("heap-end-writes");
}

/* A read fault fetches the pages after the faulting one that it needs
 * together, passing over those valid here, and a page that a first write
 * opened but the program did not write is not taken for this process's
 * own.  In each of two page-aligned blocks of 16, X and Y, process 0
 * writes pages 2 and 3 (its first write opens more pages with them),
 * process 1 all the others.  Process 0 then reads pages 5 to 15 of X, the
 * first time it reads any of them: one request to process 1, as none is
 * at the edge of what process 0 writes (counted as written, pages 4 to 14
 * made every one of them such an edge, and a request each).  Then it reads
 * all of Y from its first page: one request more, for 0, 1 and 4 to 15,
 * past its own 2 and 3 (stopping at its own pages, it would ask for 0 and
 * 1, then for 4 alone as a neighbour's edge, then for the rest; the
 * library before both changes asked 11 times, then 5).  Every process
 * checks every word. */
static int past_own_value(long word) { return (int)(word * 5 + 3); }

static void read_past_own(void) {
  const long block = 16 * PAGE_WORDS, words = 2 * block;
  long word, page;
  unsigned long asked_before;
  allocate_page_aligned_ints(words);
  for (word = 0; word < words; word++) {
    page = word % block / PAGE_WORDS;
    if ((Tmk_proc_id == 0 && (page == 2 || page == 3)) ||
        (Tmk_proc_id == 1 && page != 2 && page != 3))
      shared_ints[word] = past_own_value(word);
  }
  Tmk_barrier(1);
  for (int pass = 0; pass < 2; pass++) {
    asked_before = Tmk_stat.diff_requests;
    if (Tmk_proc_id == 0)
      for (word = pass == 0 ? 5 * PAGE_WORDS : block; word < (pass + 1) * block; word++) {
        int want = Tmk_nprocs > 1 ? past_own_value(word) : 0;
        page = word % block / PAGE_WORDS;
        if (page == 2 || page == 3) want = past_own_value(word);
        if (shared_ints[word] != want)
          check(0, pass == 0 ? "a word of pages 5 to 15 of X" : "a word of Y", shared_ints[word],
                want);
      }
    Tmk_barrier(2);
    if (Tmk_proc_id == 0 && Tmk_nprocs > 1)
      check((long)(Tmk_stat.diff_requests - asked_before) == 1,
            pass == 0 ? "requests for pages 5 to 15 of X" : "requests for Y",
            (long)(Tmk_stat.diff_requests - asked_before), 1);
  }
  for (word = 0; word < words; word++) {
    page = word % block / PAGE_WORDS;
    int want = Tmk_nprocs > 1 || page == 2 || page == 3 ? past_own_value(word) : 0;
    if (shared_ints[word] != want) check(0, "a word of X or Y", shared_ints[word], want);
  }
  finish("read-past-own");
}

/* A read fault in a sweep also takes the invalid pages just before it that
 * the sweep passed over, back to a page it read, and no further: process
 * 0 writes pages 0 and 33 of a page-aligned block, process 1 pages 1 to 32
 * and 34 to 56.  Process 0 reads a word of page 1, then of page 3, then of
 * 2 and of every page up to 32.  Page 1, next to its own page, comes alone
 * (a neighbour's edge); the fault on 3 brings 2 with it and the 15 pages
 * after 3; the fault on 19 the rest, and 34 with them: 3 requests
 * (without looking back, page 2 came alone: 4).  Then it reads pages 45 to
 * 56: the fault on 45 brings those 12 pages and not 35 to 44, which follow
 * no page it read (taken, they made 22 diffs applied).  Every process
 * checks every word. */
static int passed_over_value(long word) { return (int)(word * 11 + 7); }

static void read_passed_over(void) {
  const long pages = 57, words = pages * PAGE_WORDS;
  long word, page;
  unsigned long asked_before, applied_before;
  allocate_page_aligned_ints(words);
  for (word = 0; word < words; word++) {
    page = word / PAGE_WORDS;
    if ((Tmk_proc_id == 0 && (page == 0 || page == 33)) ||
        (Tmk_proc_id == 1 && page != 0 && page != 33))
      shared_ints[word] = passed_over_value(word);
  }
  Tmk_barrier(1);
  asked_before = Tmk_stat.diff_requests;
  if (Tmk_proc_id == 0) {
    static const long order[] = {1, 3, 2};
    for (page = 0; page < 32; page++) {
      long at = (page < 3 ? order[page] : page + 1) * PAGE_WORDS;
      int want = Tmk_nprocs > 1 ? passed_over_value(at) : 0;
      if (shared_ints[at] != want) check(0, "the first word of a page", shared_ints[at], want);
    }
  }
  Tmk_barrier(2);
  if (Tmk_proc_id == 0 && Tmk_nprocs > 1)
    check((long)(Tmk_stat.diff_requests - asked_before) == 3, "requests for pages 1 to 32",
          (long)(Tmk_stat.diff_requests - asked_before), 3);
  applied_before = Tmk_stat.diffs_applied;
  if (Tmk_proc_id == 0)
    for (word = 45 * PAGE_WORDS; word < words; word++) {
      int want = Tmk_nprocs > 1 ? passed_over_value(word) : 0;
      if (shared_ints[word] != want) check(0, "a word of pages 45 to 56", shared_ints[word], want);
    }
  Tmk_barrier(3);
  if (Tmk_proc_id == 0 && Tmk_nprocs > 1)
    check((long)(Tmk_stat.diffs_applied - applied_before) == 12, "diffs applied for pages 45 to 56",
          (long)(Tmk_stat.diffs_applied - applied_before), 12);
  for (word = 0; word < words; word++) {
    page = word / PAGE_WORDS;
    int want = Tmk_nprocs > 1 || page == 0 || page == 33 ? passed_over_value(word) : 0;
    if (shared_ints[word] != want) check(0, "a word of the block", shared_ints[word], want);
  }
  finish("read-passed-over");
}

/* Pages first read by a process that never saw them, after others wrote
 * them: the last process reads three page-aligned blocks of 16 pages at the
 * end.  Process 0 wrote every word w of block A with w % n == 0, so A comes
 * whole from process 0; processes 1 to n-2 then wrote the words w % n == k
 * of blocks A and B, so both need their diffs as well (B a copy process 0
 * never wrote, served as zeros); nobody wrote block C.  Every process checks
 * every word of all three, the reader first, with the others waiting. */
static int whole_and_diffs_value(long word, long nprocs, int block) {
  long writer = word % nprocs;
  if (writer == nprocs - 1 && nprocs > 1) return 0;
  if (block == 2 || (block == 1 && writer == 0)) return 0;
  return (int)(word * 7 + block + 1);
}

static void whole_and_diffs(void) {
  const long block_words = 16L * PAGE_WORDS, nprocs = (long)Tmk_nprocs;
  long me = (long)Tmk_proc_id, word;
  int block, pass;
  allocate_page_aligned_ints(3 * block_words);
  if (me == 0)
    for (word = 0; word < block_words; word += nprocs) shared_ints[word] = whole_and_diffs_value(word, nprocs, 0);
  Tmk_barrier(1);
  if (me > 0 && me < nprocs - 1)
    for (block = 0; block < 2; block++)
      for (word = me; word < block_words; word += nprocs)
        shared_ints[block * block_words + word] = whole_and_diffs_value(word, nprocs, block);
  Tmk_barrier(2);
  for (pass = 0; pass < 2; pass++) {
    if ((pass == 0) == (me == nprocs - 1))
      for (block = 0; block < 3; block++)
        for (word = 0; word < block_words; word++) {
          int expected = whole_and_diffs_value(word, nprocs, block);
          if (shared_ints[block * block_words + word] != expected)
            check(0, block == 0 ? "a word of block A" : block == 1 ? "a word of block B" : "a word of block C",
                  shared_ints[block * block_words + word], expected);
        }
    Tmk_barrier(3);
  }
  finish("whole-and-diffs");
}

/* Fresh shared memory that no process has written reads as zeros without
 * a message: every process reads all of a new array, and none fetches a
 * page or asks for diffs (Tmk_stat is brought up to date by the barrier
 * after).  Then each process writes its share and, after a barrier, every
 * process reads every value. */
static void fresh_zeros(void) {
  const long words = 64L * PAGE_WORDS;
  long i;
  unsigned long fetched_before, asked_before;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)(words * sizeof(int)));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  fetched_before = Tmk_stat.page_fetches;
  asked_before = Tmk_stat.diff_requests;
  for (i = 0; i < words; i++)
    if (shared_ints[i] != 0) check(0, "a word of a fresh array", shared_ints[i], 0);
  Tmk_barrier(1);
  check((long)(Tmk_stat.page_fetches - fetched_before) == 0, "pages fetched to read a fresh array",
        (long)(Tmk_stat.page_fetches - fetched_before), 0);
  check((long)(Tmk_stat.diff_requests - asked_before) == 0, "diff requests to read a fresh array",
        (long)(Tmk_stat.diff_requests - asked_before), 0);
  for (i = Tmk_proc_id; i < words; i += (long)Tmk_nprocs) shared_ints[i] = (int)i + 1;
  Tmk_barrier(2);
  for (i = 0; i < words; i++)
    if (shared_ints[i] != (int)i + 1) check(0, "a word written after the barrier", shared_ints[i], i + 1);
  finish("fresh-zeros");
}

/* A first write to fresh pages fetches none of the pages after them that
 * another process wrote: it needs no message itself, and the pages it
 * would take along are perhaps never read here.  Process 0 writes the
 * second half of a 16-page array (TMK_PREFETCH_PAGES' default reach);
 * after a barrier the last process writes the first half, faulting on
 * its first page with the written half within reach, and neither fetches
 * a page nor asks for a diff (on 2 processes and more; on 1 the same
 * process wrote both).  After another barrier every process reads every
 * value. */
static int fresh_before_written_value(long word) { return (int)(word * 7 + 3); }

static void fresh_before_written(void) {
  const long half = 8L * PAGE_WORDS;
  long i;
  unsigned long fetched_before, asked_before;
  allocate_page_aligned_ints(2 * half);
  if (Tmk_proc_id == 0)
    for (i = half; i < 2 * half; i++) shared_ints[i] = fresh_before_written_value(i);
  Tmk_barrier(1);
  fetched_before = Tmk_stat.page_fetches;
  asked_before = Tmk_stat.diff_requests;
  if (Tmk_proc_id == Tmk_nprocs - 1)
    for (i = 0; i < half; i++) shared_ints[i] = fresh_before_written_value(i);
  Tmk_barrier(2);
  if (Tmk_proc_id == Tmk_nprocs - 1) {
    check((long)(Tmk_stat.page_fetches - fetched_before) == 0,
          "pages fetched to write fresh pages before written ones",
          (long)(Tmk_stat.page_fetches - fetched_before), 0);
    check((long)(Tmk_stat.diff_requests - asked_before) == 0,
          "diff requests to write fresh pages before written ones",
          (long)(Tmk_stat.diff_requests - asked_before), 0);
  }
  for (i = 0; i < 2 * half; i++)
    if (shared_ints[i] != fresh_before_written_value(i))
      check(0, "a word after both halves were written", shared_ints[i], fresh_before_written_value(i));
  finish("fresh-before-written");
}

/* A late reader of pages another process rewrote, a part at a time, over
 * many intervals gets each page's diffs merged into one.  The last process
 * writes a seventh of the words of block A in each of 30 rounds, a barrier
 * apart; process 1 reads the block in the first round, so that the writer
 * makes a diff of each page at every barrier (pushed to process 1).  After
 * the rounds every other process reads the block: one that did not read
 * it before applies at most one diff per page (30 without merging), and
 * each finds every word's last value.  Page B is written by two processes
 * (process 0 the even words, the last process the odd ones) in every
 * round: a reader that is neither merges nothing, and all writes
 * survive.  The bound on diffs tests merging from 3 processes on: on 2,
 * process 1 is both the writer and the early reader, no diff is made
 * between the rounds, and process 0's one diff a page needs no merge. */
static int merged_value(long word, int rounds) {
  int round;
  for (round = rounds - 1; round >= 0; round--)
    if (word % 7 == round % 7) return round * 100000 + (int)word + 1;
  return 0;
}

static void check_block_a(long block, int rounds) {
  long i;
  for (i = 0; i < block; i++)
    if (shared_ints[i] != merged_value(i, rounds))
      check(0, "a word of block A", shared_ints[i], merged_value(i, rounds));
}

static void merged_diffs(void) {
  const int pages = 4, rounds = 30, nprocs = (int)Tmk_nprocs;
  const unsigned writer = Tmk_nprocs - 1, early_reader = 1;
  const long block = (long)pages * PAGE_WORDS;
  int round;
  long i;
  unsigned long applied_before;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((unsigned)((block + PAGE_WORDS) * sizeof(int)));
    memset(shared_ints, 0, (block + PAGE_WORDS) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 0; round < rounds; round++) {
    if (Tmk_proc_id == writer)
      for (i = round % 7; i < block; i += 7) shared_ints[i] = round * 100000 + (int)i + 1;
    if (Tmk_proc_id == writer || Tmk_proc_id == 0)
      for (i = Tmk_proc_id == 0 ? 0 : 1; i < PAGE_WORDS; i += 2) shared_ints[block + i] = round + 1;
    Tmk_barrier(1);
    if (round == 0 && Tmk_proc_id == early_reader && Tmk_proc_id != writer) check_block_a(block, 1);
    Tmk_barrier(4);  /* read before the next round's writes */
  }
  applied_before = Tmk_stat.diffs_applied;
  check_block_a(block, rounds);
  Tmk_barrier(2);
  if (Tmk_proc_id != writer && Tmk_proc_id != early_reader)
    check(Tmk_stat.diffs_applied - applied_before <= (unsigned long)pages,
          "diffs applied to read block A (at most)", (long)(Tmk_stat.diffs_applied - applied_before),
          pages);
  for (i = 0; i < PAGE_WORDS; i++)
    if (shared_ints[block + i] != (nprocs == 1 && i % 2 == 1 ? 0 : rounds))
      check(0, "a word of page B", shared_ints[block + i], nprocs == 1 && i % 2 == 1 ? 0 : rounds);
  Tmk_barrier(3);
  finish("merged-diffs");
}

/* A bounded queue under lock 5 with conditions "not empty" (1) and "not
 * full" (2): process 0 produces, the others consume; every item is taken
 * exactly once. */
static void conditions(void) {
  /* shared_ints: [0] head, [1] tail, [2] done, [3..3+cap) items, then one
   * "taken" flag per item */
  int capacity = 4, items = iterations, i;
  int *taken;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((3 + capacity + items) * sizeof(int));
    memset(shared_ints, 0, (3 + capacity + items) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  taken = shared_ints + 3 + capacity;
  if (Tmk_nprocs == 1) {
    for (i = 0; i < items; i++) taken[i] = 1;
  } else if (Tmk_proc_id == 0) {
    for (i = 0; i < items; i++) {
      Tmk_lock_acquire(5);
      while (shared_ints[1] - shared_ints[0] == capacity) Tmk_lock_cond_wait(5, 2);
      shared_ints[3 + shared_ints[1] % capacity] = i;
      shared_ints[1]++;
      Tmk_lock_cond_signal(5, 1);
      Tmk_lock_release(5);
    }
    Tmk_lock_acquire(5);
    shared_ints[2] = 1;
    Tmk_lock_cond_broadcast(5, 1);
    Tmk_lock_release(5);
  } else {
    for (;;) {
      int item;
      Tmk_lock_acquire(5);
      while (shared_ints[1] == shared_ints[0] && !shared_ints[2]) Tmk_lock_cond_wait(5, 1);
      if (shared_ints[1] == shared_ints[0]) {
        Tmk_lock_release(5);
        break;
      }
      item = shared_ints[3 + shared_ints[0] % capacity];
      shared_ints[0]++;
      check(item >= 0 && item < items, "an item's number", item, 0);
      if (item >= 0 && item < items) {
        check(taken[item] == 0, "an item taken twice", taken[item], 0);
        taken[item] = 1;
      }
      Tmk_lock_cond_signal(5, 2);
      Tmk_lock_release(5);
    }
  }
  Tmk_barrier(1);
  for (i = 0; i < items; i++) check(taken[i] == 1, "an item never taken", taken[i], 1);
  finish("conditions");
}

/* Returns once *word, read under lock, is value or more; stops the
 * process after 30 s of looking. */
static void poll_lock_until(unsigned lock, const long *word, long value) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    long seen;
    Tmk_lock_acquire(lock);
    seen = *word;
    Tmk_lock_release(lock);
    if (seen >= value) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 30)
      Tmk_errexit("cond-order: a word under lock %u is %ld after 30 s, expected %ld", lock, seen, value);
    usleep(200);
  }
}

/* A signal wakes the longest waiter (Tmk.h): processes 1 .. n-1 come to
 * wait on one condition in turn (each joins it holding the lock, after
 * the one before has, which a word under the lock tells), then process 0
 * signals it once per waiter, each time once the last one woken has
 * written its place under the lock; the waiters must wake in the order
 * they came.  Then all but process 0 wait again and one broadcast wakes
 * every one of them.  Done twice, the second time coming in the reverse
 * order of process numbers. */
static void cond_order(void) {
  /* words: [0] arrivals, [1] wake-ups, [2..2+n) the order of wake-ups */
  long *words = allocate_zeroed_longs(2 + (long)Tmk_nprocs, "cond-order");
  unsigned lock = 9, cond = 3;
  long waiters = (long)Tmk_nprocs - 1, place, i;
  int round;
  for (round = 0; round < 2 && waiters > 0; round++) {
    /* This process's place among the waiters: 1 .. waiters. */
    place = round == 0 ? (long)Tmk_proc_id : (long)Tmk_nprocs - Tmk_proc_id;
    if (Tmk_proc_id != 0) {
      poll_lock_until(lock, &words[0], place - 1);
      Tmk_lock_acquire(lock);
      check(words[0] == place - 1, "the waiters before this one", words[0], place - 1);
      words[0]++;
      Tmk_lock_cond_wait(lock, cond);
      words[2 + words[1]] = place;
      words[1]++;
      Tmk_lock_release(lock);
    } else {
      poll_lock_until(lock, &words[0], waiters);
      for (i = 0; i < waiters; i++) {
        Tmk_lock_acquire(lock);
        Tmk_lock_cond_signal(lock, cond);
        Tmk_lock_release(lock);
        poll_lock_until(lock, &words[1], i + 1);
      }
    }
    Tmk_barrier(1);
    for (i = 0; i < waiters; i++)
      check(words[2 + i] == i + 1, "the place of the waiter woken by a signal", words[2 + i], i + 1);
    Tmk_barrier(2);
    if (Tmk_proc_id == 0) words[0] = words[1] = 0;
    Tmk_barrier(3);
    if (Tmk_proc_id != 0) {
      Tmk_lock_acquire(lock);
      words[0]++;
      Tmk_lock_cond_wait(lock, cond);
      words[1]++;
      Tmk_lock_release(lock);
    } else {
      poll_lock_until(lock, &words[0], waiters);
      Tmk_lock_acquire(lock);
      Tmk_lock_cond_broadcast(lock, cond);
      Tmk_lock_release(lock);
    }
    Tmk_barrier(4);
    check(words[1] == waiters, "waiters woken by one broadcast", words[1], waiters);
    Tmk_barrier(5);
    if (Tmk_proc_id == 0) words[0] = words[1] = 0;
    Tmk_barrier(6);
  }
  finish("cond-order");
}

/* Tmk_distribute of pointers, a structure and an array. */
static void distribution(void) {
  int i;
  if (Tmk_proc_id == 0) {
    settings.count = 42;
    settings.scale = 2.5;
    strcpy(settings.name, "distributed");
    settings.table = Tmk_malloc(100 * sizeof(int));
    for (i = 0; i < 100; i++) settings.table[i] = i * i;
    for (i = 0; i < 5; i++) numbers[i] = 10 + i;
    Tmk_distribute(&settings, sizeof settings);
    Tmk_distribute(numbers, sizeof numbers);
  }
  Tmk_barrier(0);
  check(settings.count == 42, "a distributed int", settings.count, 42);
  check(settings.scale == 2.5, "a distributed double", (long)(settings.scale * 10), 25);
  check(strcmp(settings.name, "distributed") == 0, "a distributed string", 0, 0);
  for (i = 0; i < 5; i++) check(numbers[i] == 10 + i, "a distributed array", numbers[i], 10 + i);
  for (i = 0; i < 100; i++) check(settings.table[i] == i * i, "data behind a distributed pointer", settings.table[i], i * i);
  finish("distribution");
}

/* Tmk_malloc from every process at once never returns overlapping blocks;
 * freed blocks come back. */
static void allocation(void) {
  enum { blocks = 40 };
  long *table; /* per process: blocks x (address, size) */
  unsigned state = seed * 7919 + Tmk_proc_id, p;
  int i, j, k;
  if (Tmk_proc_id == 0) {
    shared_longs = Tmk_malloc(Tmk_nprocs * blocks * 2 * sizeof(long));
    Tmk_distribute(&shared_longs, sizeof shared_longs);
  }
  Tmk_barrier(0);
  table = shared_longs;
  for (i = 0; i < blocks; i++) {
    unsigned size = 1 + next_random(&state) % (i % 5 == 0 ? 20000 : 300);
    char *block = Tmk_malloc(size);
    check(block != NULL, "Tmk_malloc returned NULL", 0, 1);
    if (!block) continue;
    memset(block, (int)(Tmk_proc_id + 1), size);
    table[(Tmk_proc_id * blocks + i) * 2] = (long)(uintptr_t)block;
    table[(Tmk_proc_id * blocks + i) * 2 + 1] = size;
  }
  Tmk_barrier(1);
  for (p = 0; p < Tmk_nprocs; p++)
    for (i = 0; i < blocks; i++) {
      long a = table[(p * blocks + i) * 2], as = table[(p * blocks + i) * 2 + 1];
      const char *bytes = (const char *)(uintptr_t)a;
      for (k = 0; k < as; k += 97) check(bytes[k] == (char)(p + 1), "a block's contents", bytes[k], p + 1);
      for (j = 0; j < (int)(Tmk_nprocs * blocks); j++) {
        long b = table[j * 2], bs = table[j * 2 + 1];
        if (j == (int)(p * blocks + i)) continue;
        check(a + as <= b || b + bs <= a, "overlapping blocks", a, b);
      }
    }
  Tmk_barrier(2);
  for (i = 0; i < blocks; i += 2) Tmk_free((void *)(uintptr_t)table[(Tmk_proc_id * blocks + i) * 2]);
  Tmk_barrier(3);
  /* Blocks made after the frees overlap no block still in use (freed
   * memory comes back, live memory never). */
  for (i = 0; i < blocks / 2; i++) {
    long again = (long)(uintptr_t)Tmk_malloc(64);
    check(again != 0, "Tmk_malloc after frees", 0, 1);
    for (j = 1; again != 0 && j < (int)(Tmk_nprocs * blocks); j += 2) {
      long b = table[j * 2], bs = table[j * 2 + 1];
      check(again + 64 <= b || b + bs <= again, "a block made after the frees overlaps a live one", again, b);
    }
  }
  finish("allocation");
}

/* Long enough, with a small TMK_GC_THRESHOLD, to collect garbage several
 * times; every result stays exact. */
static void garbage(void) {
  int round, i, n = 64 * PAGE_WORDS;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((n + 1) * sizeof(int));
    memset(shared_ints, 0, (n + 1) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 1; round <= iterations; round++) {
    for (i = Tmk_proc_id; i < n; i += Tmk_nprocs) shared_ints[i] += 1;
    Tmk_lock_acquire(0);
    shared_ints[n] += 1;
    Tmk_lock_release(0);
    Tmk_barrier(1);
    for (i = 0; i < n; i += 113) check(shared_ints[i] == round, "an element", shared_ints[i], round);
    check(shared_ints[n] == round * (int)Tmk_nprocs, "the counter", shared_ints[n], round * (long)Tmk_nprocs);
    Tmk_barrier(2);
  }
  if (Tmk_nprocs > 1)
    check(Tmk_stat.gc_runs >= 2, "garbage collections", (long)Tmk_stat.gc_runs, 2);
  finish("garbage");
}

/* A transfer's writes: delta from one counter to another, which gains 1
 * besides, as the group's sum does. */
static void move_amount(long *from, long *to, long *total, long delta) {
  *from += delta;
  *to -= delta;
  *to += 1;
  *total += 1;
}

/* Random transfers between counters of one group under the group's lock:
 * counter[0 .. counters-1], then each group's sum (the counters of group g
 * are g, g + groups, ...), each stride longs from the one before.  Each
 * keeps the sum but for one, which the group's sum follows; the sum is
 * checked at every acquire. */
static void random_transfer(long *counter, int stride, int counters, int groups, unsigned *state) {
  int a = (int)(next_random(state) % counters), b, i;
  int group = a % groups;
  long delta = (long)(next_random(state) % 100) - 50;
  long sum = 0, *total = &counter[(long)(counters + group) * stride];
  b = (int)((a + groups * (1 + next_random(state) % 7)) % counters); /* same group */
  Tmk_lock_acquire(group);
  for (i = group; i < counters; i += groups) sum += counter[(long)i * stride];
  check(sum == *total, "a group's invariant under its lock", sum, *total);
  move_amount(&counter[(long)a * stride], &counter[(long)b * stride], total, delta);
  Tmk_lock_release(group);
}

/* The sequential oracle: adds steps transfers drawn from state to expected
 * (additions commute, so the order of the processes does not matter). */
static void replay_transfers(long *expected, int counters, int groups, unsigned state, int steps) {
  int step;
  for (step = 0; step < steps; step++) {
    int a = (int)(next_random(&state) % counters), b;
    long delta = (long)(next_random(&state) % 100) - 50;
    b = (int)((a + groups * (1 + next_random(&state) % 7)) % counters);
    expected[a] += delta;
    expected[b] += 1 - delta;
  }
}

/* A seeded random data-race-free program compared with a sequential
 * oracle: counters updated under their locks (with a per-group invariant
 * checked at every acquire), and slices rewritten between barriers. */
static void stress(void) {
  enum { counters = 3008, groups = 16, slice_words = 2500 }; /* counters: a multiple of groups */
  long *counter, *slices;
  long expected[counters];
  unsigned p;
  int phase, step, i;
  allocate_zeroed_longs(counters + groups + (long)Tmk_nprocs * slice_words, "stress");
  counter = shared_longs;
  slices = shared_longs + counters + groups;
  memset(expected, 0, sizeof expected);
  for (phase = 0; phase < 4; phase++) {
    /* Locked updates: every process's operations, replayed by all for the
     * oracle (additions commute, so the order does not matter). */
    unsigned state = seed * 31 + phase * 977 + Tmk_proc_id;
    for (step = 0; step < iterations; step++) random_transfer(counter, 1, counters, groups, &state);
    for (p = 0; p < Tmk_nprocs; p++) replay_transfers(expected, counters, groups, seed * 31 + phase * 977 + p, iterations);
    /* Barrier-separated slices: each process rewrites its own. */
    for (i = 0; i < slice_words; i++) slices[Tmk_proc_id * slice_words + i] = phase * 100000 + Tmk_proc_id * 10000 + i;
    Tmk_barrier(1);
    for (i = 0; i < counters; i++) check(counter[i] == expected[i], "a counter after the barrier", counter[i], expected[i]);
    for (p = 0; p < Tmk_nprocs; p++)
      for (i = 0; i < slice_words; i += 7)
        check(slices[p * slice_words + i] == phase * 100000 + p * 10000 + i, "a slice word", slices[p * slice_words + i],
              phase * 100000 + p * 10000 + i);
    Tmk_barrier(2);
  }
  finish("stress");
}

/* The stress program with two threads a process: each thread has its own
 * seeded stream of locked transfers and its own slice, which it rewrites a
 * piece at a time between its transfers, so that one thread writes while
 * the other is in Tmk_lock_acquire or Tmk_lock_release (closing intervals,
 * sealing pages for requests, retiring the twins of pages other processes
 * wrote, taking in grants).  The two take turns at their transfers under a
 * mutex of their own, as the README asks of threads that share locks.
 * Every page holds counters and words of every thread's slice: a counter
 * every duo_stride longs, the slices' words dealt out between them in
 * turn, so that each page is written under every lock and by every
 * thread.  The threads meet before the main thread's barrier, after which
 * every counter is checked against the oracle and every slice word by
 * word. */
enum { duo_counters = 3008, duo_groups = 16, duo_stride = 4 };
static pthread_mutex_t duo_transfers = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t duo_meeting;

struct duo_thread {
  long *cells;
  int thread;
};

/* Words of each thread's slice: the cells' gaps shared out. */
static int duo_slice_words(void) {
  return (duo_stride - 1) * (duo_counters + duo_groups) / (2 * (int)Tmk_nprocs);
}

/* Word w of the slice of thread t of process p, in the gaps between the
 * counters, slices taking the gaps in turn. */
static long *duo_word(long *cells, unsigned process, int thread, int word) {
  long gap = (long)process * 2 + thread + (long)word * 2 * Tmk_nprocs;
  return &cells[gap / (duo_stride - 1) * duo_stride + 1 + gap % (duo_stride - 1)];
}

static unsigned duo_stream(int phase, unsigned process, int thread) {
  return seed * 31 + phase * 977 + (process * 2 + thread) * 7919;
}

static long duo_value(int phase, unsigned process, int thread, int word) {
  return phase * 1000000L + (process * 2 + thread) * 10000L + word;
}

/* Words from .. to-1 of this thread's slice. */
static void duo_write_piece(const struct duo_thread *self, int phase, int from, int to) {
  int word;
  for (word = from; word < to; word++)
    *duo_word(self->cells, Tmk_proc_id, self->thread, word) = duo_value(phase, Tmk_proc_id, self->thread, word);
}

static void duo_phase(const struct duo_thread *self, int phase) {
  unsigned state = duo_stream(phase, Tmk_proc_id, self->thread);
  int step, words = duo_slice_words();
  for (step = 0; step < iterations; step++) {
    pthread_mutex_lock(&duo_transfers);
    random_transfer(self->cells, duo_stride, duo_counters, duo_groups, &state);
    pthread_mutex_unlock(&duo_transfers);
    duo_write_piece(self, phase, step * words / iterations, (step + 1) * words / iterations);
  }
}

static void *duo_second_thread(void *arg) {
  int phase;
  for (phase = 0; phase < 4; phase++) {
    pthread_barrier_wait(&duo_meeting);
    duo_phase(arg, phase);
    pthread_barrier_wait(&duo_meeting);
  }
  return NULL;
}

static void thread_stress(void) {
  long *expected = calloc(duo_counters, sizeof *expected);
  long cells = (long)(duo_counters + duo_groups) * duo_stride;
  struct duo_thread main_thread = {NULL, 0}, second = {NULL, 1};
  pthread_t other;
  unsigned p;
  int phase, thread, i;
  if (expected == NULL) Tmk_errexit("thread-stress: out of memory");
  allocate_zeroed_longs(cells, "thread-stress");
  main_thread.cells = second.cells = shared_longs;
  if (pthread_barrier_init(&duo_meeting, NULL, 2) != 0 ||
      pthread_create(&other, NULL, duo_second_thread, &second) != 0)
    Tmk_errexit("thread-stress: cannot start the second thread");
  for (phase = 0; phase < 4; phase++) {
    pthread_barrier_wait(&duo_meeting);
    duo_phase(&main_thread, phase);
    pthread_barrier_wait(&duo_meeting);
    Tmk_barrier(1);
    for (p = 0; p < Tmk_nprocs; p++)
      for (thread = 0; thread < 2; thread++)
        replay_transfers(expected, duo_counters, duo_groups, duo_stream(phase, p, thread), iterations);
    for (i = 0; i < duo_counters; i++)
      check(shared_longs[(long)i * duo_stride] == expected[i], "a counter two threads of each process updated",
            shared_longs[(long)i * duo_stride], expected[i]);
    for (p = 0; p < Tmk_nprocs; p++)
      for (thread = 0; thread < 2; thread++)
        for (i = 0; i < duo_slice_words(); i++) {
          long got = *duo_word(shared_longs, p, thread, i), want = duo_value(phase, p, thread, i);
          check(got == want, "a slice word written beside another thread's calls", got, want);
        }
    Tmk_barrier(2);
  }
  pthread_join(other, NULL);
  pthread_barrier_destroy(&duo_meeting);
  free(expected);
  finish("thread-stress");
}

/* A seeded random program whose reads are ordered by chains of different
 * locks: what lazy release consistency owes a reader transitively.  Each
 * process appends entries to a log of its own, without any lock, and then
 * publishes its log's length through a random lock's mailbox, where it
 * also merges what the mailbox knows of every other log's length into
 * what it knows, and the mailbox what it knows: a length reaches a
 * process through a chain of acquires of different locks, none of which
 * the log's writer may ever have held after its reader.  Every known
 * entry is then the writer's, read without a lock.  Logs are dealt out a
 * word of each process's in turn, so that every page of them is written
 * by every process at once; the mailboxes share one page, each word of it
 * under its own lock.  Each phase uses another number of locks (8, 2, 5,
 * 1), and after its barrier every log is checked entry by entry and every
 * process's last mailbox against its final length. */
enum { causal_mailboxes = 8, causal_phases = 4 };

static int causal_locks(int phase) {
  static const int locks[causal_phases] = {8, 2, 5, 1};
  return locks[phase];
}

/* A log length as mailboxes keep it: the phase above the count, so that
 * the largest is the newest and a length of an earlier phase counts 0. */
static long causal_length(int phase, long count) { return (long)phase << 32 | count; }

static long causal_count(long length, int phase) { return length >> 32 == phase ? length & 0xffffffffL : 0; }

static long causal_value(int phase, unsigned process, long entry) {
  return ((long)(phase + 1) << 40) + ((long)process << 28) + entry + 1;
}

static long *causal_entry(long *log, unsigned process, long entry) {
  return &log[entry * Tmk_nprocs + process];
}

/* Process p's steps in a phase: the draws that make its log and choose its
 * locks, replayed by every process for the final check. */
struct causal_step {
  int appended;
  int lock;
};

static struct causal_step causal_draw(unsigned *state, int phase) {
  struct causal_step step;
  step.appended = 1 + (int)(next_random(state) % 3);
  step.lock = (int)(next_random(state) % causal_locks(phase));
  return step;
}

static unsigned causal_stream(int phase, unsigned process) { return seed * 131 + phase * 7573 + process * 104729; }

static void causal_check_entries(long *log, unsigned process, int phase, long from, long to, const char *what) {
  long entry;
  for (entry = from; entry < to; entry++) {
    long got = *causal_entry(log, process, entry), want = causal_value(phase, process, entry);
    check(got == want, what, got, want);
  }
}

static void causal(void) {
  long capacity = 3L * iterations; /* entries a process appends in a phase, at most */
  long words = causal_mailboxes * (long)Tmk_nprocs + capacity * Tmk_nprocs;
  long *known = calloc(Tmk_nprocs, sizeof *known), *mailbox, *log;
  long put[causal_mailboxes];
  unsigned p, q;
  int phase, step, l;
  if (known == NULL) Tmk_errexit("causal: out of memory");
  if (iterations < 1 || words * (long)sizeof(long) > 64L << 20) Tmk_errexit("causal: -i %d is out of range", iterations);
  mailbox = allocate_zeroed_longs(words, "causal"); /* lock l's word for process q: mailbox[q * causal_mailboxes + l] */
  log = shared_longs + causal_mailboxes * Tmk_nprocs;
  for (phase = 0; phase < causal_phases; phase++) {
    unsigned layout = causal_stream(phase, Tmk_proc_id), choices = layout ^ 0x5bd1e995u;
    long count = 0;
    for (l = 0; l < causal_mailboxes; l++) put[l] = 0;
    for (step = 0; step < iterations; step++) {
      struct causal_step drawn = causal_draw(&layout, phase);
      long entry, lengths;
      for (entry = count; entry < count + drawn.appended; entry++)
        *causal_entry(log, Tmk_proc_id, entry) = causal_value(phase, Tmk_proc_id, entry);
      count += drawn.appended;
      Tmk_lock_acquire(drawn.lock);
      for (q = 0; q < Tmk_nprocs; q++) {
        long *word = &mailbox[q * causal_mailboxes + drawn.lock];
        if (*word >> 32 > phase || causal_count(*word, phase) > capacity)
          check(0, "a mailbox word beyond anything published", *word, causal_length(phase, capacity));
        if (q == Tmk_proc_id) {
          check(*word >= put[drawn.lock], "this process's length in a mailbox it last wrote", *word, put[drawn.lock]);
          check(causal_count(*word, phase) < count, "this process's length in a mailbox, before this step", *word,
                causal_length(phase, count - drawn.appended));
        }
        if (*word > known[q]) known[q] = *word;
      }
      known[Tmk_proc_id] = put[drawn.lock] = causal_length(phase, count);
      for (q = 0; q < Tmk_nprocs; q++)
        if (mailbox[q * causal_mailboxes + drawn.lock] < known[q]) mailbox[q * causal_mailboxes + drawn.lock] = known[q];
      Tmk_lock_release(drawn.lock);
      /* Another process's log up to what this one knows of it, read
       * without a lock: its last entry and a few others. */
      q = (Tmk_proc_id + 1 + next_random(&choices) % (Tmk_nprocs > 1 ? Tmk_nprocs - 1 : 1)) % Tmk_nprocs;
      lengths = causal_count(known[q], phase);
      if (lengths > 0) {
        long from = (long)(next_random(&choices) % (unsigned long)lengths);
        causal_check_entries(log, q, phase, lengths - 1, lengths, "the last entry of a log known through a chain of locks");
        causal_check_entries(log, q, phase, from, from + 4 < lengths ? from + 4 : lengths,
                             "an entry of a log known through a chain of locks");
      }
    }
    Tmk_barrier(1);
    for (p = 0; p < Tmk_nprocs; p++) {
      unsigned state = causal_stream(phase, p);
      long final = 0;
      int last_lock = 0;
      for (step = 0; step < iterations; step++) {
        struct causal_step drawn = causal_draw(&state, phase);
        final += drawn.appended;
        last_lock = drawn.lock;
      }
      causal_check_entries(log, p, phase, 0, final, "a log entry after the barrier");
      check(mailbox[p * causal_mailboxes + last_lock] == causal_length(phase, final),
            "a process's length in the mailbox of its last lock", mailbox[p * causal_mailboxes + last_lock],
            causal_length(phase, final));
    }
    for (q = 0; q < Tmk_nprocs; q++) known[q] = 0;
    Tmk_barrier(2);
  }
  free(known);
  if (Tmk_proc_id == 0) printf("causal: process 0 took part in %lu garbage collections\n", Tmk_stat.gc_runs);
  finish("causal");
}

/* A seeded random program of allocations: slots of a directory, each under
 * one of a few locks, hold a block that any process may allocate, fill,
 * check, rewrite or free in its turn at the slot's lock.  A block freed by
 * one process is soon another's, allocated for another slot and written
 * under another lock, while its page's other blocks are written under
 * theirs; the allocator's own records are written under its lock beside
 * them.  Every check is of the words last written under the slot's lock:
 * a block's new owner's writes must win over its old owner's everywhere.
 * After each phase's barrier every live block is checked whole, and no
 * two overlap. */
enum { churn_slots = 32, churn_locks = 8, churn_fields = 4, churn_phases = 3, churn_most_words = 2500 };

static long churn_word(int slot, long version, long word) {
  return ((long)slot << 48) + (version << 24) + word + 1;
}

/* Slot i's fields: its block, its length in words, the version of its
 * words and the process that wrote them. */
static long *churn_entry(long *directory, int slot) { return &directory[slot * churn_fields]; }

static void churn_check_block(const long *entry, int slot, const char *what) {
  const long *block = (const long *)(uintptr_t)entry[0];
  long word;
  for (word = 0; word < entry[1]; word++)
    if (block[word] != churn_word(slot, entry[2], word)) {
      check(0, what, block[word], churn_word(slot, entry[2], word));
      return;
    }
}

static void churn_fill(long *entry, int slot) {
  long *block = (long *)(uintptr_t)entry[0], word;
  entry[2]++;
  entry[3] = Tmk_proc_id;
  for (word = 0; word < entry[1]; word++) block[word] = churn_word(slot, entry[2], word);
}

static int churn_by_address(const void *a, const void *b) {
  long x = ((const long *)a)[0], y = ((const long *)b)[0];
  return (x > y) - (x < y);
}

static void heap_churn(void) {
  long *directory, live[churn_slots][2];
  unsigned state = seed * 7919 + Tmk_proc_id * 104729;
  int phase, step, slot, lives;
  directory = allocate_zeroed_longs(churn_slots * churn_fields, "heap-churn");
  for (phase = 0; phase < churn_phases; phase++) {
    for (step = 0; step < iterations; step++) {
      long *entry;
      slot = (int)(next_random(&state) % churn_slots);
      entry = churn_entry(directory, slot);
      Tmk_lock_acquire((unsigned)(slot % churn_locks));
      if (entry[0] == 0) {
        long words = 1 + (long)(next_random(&state) % churn_most_words);
        long *block = Tmk_malloc((unsigned)(words * sizeof(long)));
        check(block != NULL, "Tmk_malloc with at most 32 blocks of 20000 bytes live", 0, (long)(words * sizeof(long)));
        if (block != NULL) {
          entry[0] = (long)(uintptr_t)block;
          entry[1] = words;
          churn_fill(entry, slot);
        }
      } else {
        churn_check_block(entry, slot, "a block's word, last written under its slot's lock");
        if (next_random(&state) % 3 == 0) {
          Tmk_free((void *)(uintptr_t)entry[0]);
          entry[0] = 0;
          entry[1] = 0;
        } else {
          churn_fill(entry, slot);
        }
      }
      Tmk_lock_release((unsigned)(slot % churn_locks));
    }
    Tmk_barrier(1);
    lives = 0;
    for (slot = 0; slot < churn_slots; slot++) {
      long *entry = churn_entry(directory, slot);
      if (entry[0] == 0) continue;
      churn_check_block(entry, slot, "a live block's word after the barrier");
      live[lives][0] = entry[0];
      live[lives][1] = entry[1];
      lives++;
    }
    qsort(live, (size_t)lives, sizeof live[0], churn_by_address);
    for (slot = 1; slot < lives; slot++)
      check(live[slot - 1][0] + live[slot - 1][1] * (long)sizeof(long) <= live[slot][0],
            "the end of a live block, before the next one's start", live[slot - 1][0] + live[slot - 1][1] * (long)sizeof(long),
            live[slot][0]);
    Tmk_barrier(2);
  }
  finish("heap-churn");
}

/* A seeded random program of bounded queues and the condition variables
 * that wait on them: in each phase some processes produce and the others
 * consume, each consumer serving one queue (so that a producer waiting on
 * a full queue is always drained, and no wait is for ever).  A producer
 * writes an item's block, without a lock, then puts the item in a queue
 * of its draw at the queue's lock, waiting on the queue's "not full"
 * condition while the queue is full; a consumer takes items from its
 * queue, waiting on "not empty" while it is empty and items are still to
 * come, and reads each item's block after letting go of the lock: the
 * producer's writes must reach it through the lock the item went through,
 * however many waits and wake-ups came between.  Wake-ups are signals or
 * broadcasts at random; the consumer that takes a queue's last item
 * broadcasts, so that the others serving it leave.  The phases: four
 * queues each under a lock of its own, holding 2 items, blocks of 3 words
 * (dozens to a page, of every producer); one queue holding 1 item, blocks
 * a little over a page, every process but one consuming (the last item's
 * broadcast wakes many); three queues under one lock, two conditions each,
 * holding 4 items.  Each consumer checks that a queue gives each
 * producer's items in the order it put them, and stamps every item it
 * takes; after each phase's barrier every item must carry the stamp of a
 * consumer of its queue, every block its producer's words, and every
 * queue must have passed on all that was put in it.  One process alone
 * produces everything first, into queues that hold it all, then consumes. */
enum { queue_phases = 3, queue_most = 4, queue_least_ring = 8 };

struct queue_phase {
  int queues;
  int capacity;
  int words;       /* of an item's block */
  int share;       /* a producer puts iterations / share items */
  int one_lock;    /* every queue under the same lock */
  int one_producer; /* and every other process consumes, else a draw */
};

static const struct queue_phase queue_plan[queue_phases] = {
    {4, 2, 3, 1, 0, 0},
    {1, 1, 520, 4, 0, 1},
    {3, 4, 40, 1, 1, 0},
};

static int queue_items(int phase) {
  int items = iterations / queue_plan[phase].share;
  return items > 0 ? items : 1;
}

static unsigned queue_lock(int phase, int queue) {
  return queue_plan[phase].one_lock ? 20u : 10u + (unsigned)queue;
}

static unsigned queue_not_empty(int queue) { return 2u * (unsigned)queue; }
static unsigned queue_not_full(int queue) { return 2u * (unsigned)queue + 1u; }

/* A queue's header: its head and tail (items taken and put since the
 * phase began), the number after the last item each process put that was
 * taken, then the ring. */
static long queue_ring(void) { return iterations > queue_least_ring ? iterations : queue_least_ring; }
static long queue_header_words(void) { return 2 + (long)Tmk_nprocs + queue_ring(); }

static long queue_block_words(void) {
  long most = 0;
  int phase;
  for (phase = 0; phase < queue_phases; phase++) {
    long words = (long)queue_items(phase) * queue_plan[phase].words;
    if (words > most) most = words;
  }
  return most * Tmk_nprocs;
}

static long queue_item(int phase, unsigned producer, long item) {
  return ((long)(phase + 1) << 56) + ((long)producer << 32) + item;
}

static long queue_word(int phase, unsigned producer, long item, long word) {
  return ((long)(phase + 1) << 56) + ((long)producer << 48) + (item << 16) + word + 1;
}

/* Item i of producer p's block: the blocks of all producers dealt out in
 * turn, so that neighbouring blocks are different processes'. */
static long *queue_block(long *blocks, int phase, unsigned producer, long item) {
  return &blocks[(item * Tmk_nprocs + producer) * queue_plan[phase].words];
}

/* The roles of a phase, the same in every process: the first consumers of
 * a shuffle of the processes consume, consumer j from queue j % queues;
 * serving[p] is the queue process p consumes from, -1 for a producer. */
static int queue_roles(int phase, int *serving) {
  unsigned state = seed * 613 + phase * 7919, p, served, *shuffle = malloc(Tmk_nprocs * sizeof *shuffle);
  unsigned consumers = Tmk_nprocs == 1                 ? 0
                       : queue_plan[phase].one_producer ? Tmk_nprocs - 1
                                                        : 1 + next_random(&state) % (Tmk_nprocs - 1);
  if (shuffle == NULL) Tmk_errexit("queues: out of memory");
  for (p = 0; p < Tmk_nprocs; p++) shuffle[p] = p;
  for (p = Tmk_nprocs - 1; p > 0; p--) {
    unsigned other = next_random(&state) % (p + 1), kept = shuffle[p];
    shuffle[p] = shuffle[other];
    shuffle[other] = kept;
  }
  for (p = 0; p < Tmk_nprocs; p++)
    serving[shuffle[p]] = p < consumers ? (int)(p % (unsigned)queue_plan[phase].queues) : -1;
  served = consumers < (unsigned)queue_plan[phase].queues ? consumers : (unsigned)queue_plan[phase].queues;
  free(shuffle);
  return Tmk_nprocs == 1 ? queue_plan[phase].queues : (int)served;
}

/* The queue of each of producer p's items, into draws[] (every process
 * replays them). */
static void queue_draws(int phase, unsigned producer, int served, int *draws) {
  unsigned state = seed * 131 + phase * 7573 + producer * 104729;
  int item;
  for (item = 0; item < queue_items(phase); item++) draws[item] = (int)(next_random(&state) % (unsigned)served);
}

static void queue_check_block(long *blocks, int phase, unsigned producer, long item, const char *what) {
  const long *block = queue_block(blocks, phase, producer, item);
  long word;
  for (word = 0; word < queue_plan[phase].words; word++)
    if (block[word] != queue_word(phase, producer, item, word)) {
      check(0, what, block[word], queue_word(phase, producer, item, word));
      return;
    }
}

static void queue_wake(int phase, int queue, unsigned condition, unsigned *choices) {
  if (next_random(choices) % 3 == 0)
    Tmk_lock_cond_broadcast(queue_lock(phase, queue), condition);
  else
    Tmk_lock_cond_signal(queue_lock(phase, queue), condition);
}

static void queue_produce(long *header, long *blocks, int phase, const int *draws, long capacity, unsigned *choices) {
  long item, word;
  for (item = 0; item < queue_items(phase); item++) {
    int q = draws[item];
    long *h = header + q * queue_header_words(), *block = queue_block(blocks, phase, Tmk_proc_id, item);
    for (word = 0; word < queue_plan[phase].words; word++) block[word] = queue_word(phase, Tmk_proc_id, item, word);
    Tmk_lock_acquire(queue_lock(phase, q));
    while (h[1] - h[0] >= capacity) Tmk_lock_cond_wait(queue_lock(phase, q), queue_not_full(q));
    check(h[1] - h[0] >= 0 && h[1] - h[0] < capacity, "a queue's length, woken as not full", h[1] - h[0], capacity - 1);
    h[2 + Tmk_nprocs + h[1] % queue_ring()] = queue_item(phase, Tmk_proc_id, item);
    h[1]++;
    queue_wake(phase, q, queue_not_empty(q), choices);
    Tmk_lock_release(queue_lock(phase, q));
  }
}

/* Takes queue q's items, with the other consumers of q, until all total
 * of them are taken. */
static void queue_consume(long *header, long *blocks, long *stamps, int phase, int q, long total, unsigned *choices) {
  long *h = header + q * queue_header_words();
  for (;;) {
    long item, entry;
    unsigned producer;
    Tmk_lock_acquire(queue_lock(phase, q));
    while (h[0] == h[1] && h[0] < total) Tmk_lock_cond_wait(queue_lock(phase, q), queue_not_empty(q));
    if (h[0] >= total) {
      check(h[0] == total && h[1] == total, "a queue's head and tail once all its items are taken", h[1], total);
      Tmk_lock_release(queue_lock(phase, q));
      return;
    }
    entry = h[2 + Tmk_nprocs + h[0] % queue_ring()];
    h[0]++;
    producer = (unsigned)(entry >> 32 & 0xffffff);
    item = entry & 0xffffffffL;
    if (entry >> 56 != phase + 1 || producer >= Tmk_nprocs || item >= queue_items(phase)) {
      check(0, "an item taken from a queue, one that was put in it this phase", entry, queue_item(phase, 0, 0));
      Tmk_lock_release(queue_lock(phase, q));
      continue;
    }
    check(item + 1 > h[2 + producer], "an item of a producer, after the one it put before", item, h[2 + producer]);
    h[2 + producer] = item + 1;
    if (h[0] == total) Tmk_lock_cond_broadcast(queue_lock(phase, q), queue_not_empty(q));
    queue_wake(phase, q, queue_not_full(q), choices);
    Tmk_lock_release(queue_lock(phase, q));
    queue_check_block(blocks, phase, producer, item, "a block's word, written before its item went through the queue's lock");
    stamps[item * Tmk_nprocs + producer] = ((long)(phase + 1) << 32) + Tmk_proc_id + 1;
  }
}

static void queues(void) {
  long ring = queue_ring(), header_words = queue_header_words();
  long headers = (long)queue_phases * queue_most * header_words, stamp_words = (long)iterations * Tmk_nprocs;
  long words = headers + stamp_words + queue_block_words(), item;
  int *serving = malloc(Tmk_nprocs * sizeof *serving), *draws = malloc((size_t)iterations * sizeof *draws);
  unsigned choices = seed * 2654435761u + Tmk_proc_id, p;
  long *shared, *stamps, *blocks;
  int phase, q;
  if (serving == NULL || draws == NULL) Tmk_errexit("queues: out of memory");
  if (iterations < 1 || words * (long)sizeof(long) > 64L << 20)
    Tmk_errexit("queues: -i %d is out of range", iterations);
  shared = allocate_zeroed_longs(words, "queues");
  stamps = shared + headers;
  blocks = stamps + stamp_words;
  for (phase = 0; phase < queue_phases; phase++) {
    long *header = shared + (long)phase * queue_most * header_words, totals[queue_most] = {0};
    int served = queue_roles(phase, serving);
    long capacity = Tmk_nprocs == 1 ? ring : queue_plan[phase].capacity;
    for (p = 0; p < Tmk_nprocs; p++) {
      if (serving[p] >= 0) continue;
      queue_draws(phase, p, served, draws);
      for (item = 0; item < queue_items(phase); item++) totals[draws[item]]++;
    }
    if (serving[Tmk_proc_id] < 0) {
      queue_draws(phase, Tmk_proc_id, served, draws);
      queue_produce(header, blocks, phase, draws, capacity, &choices);
      if (Tmk_nprocs == 1)
        for (q = 0; q < served; q++) queue_consume(header, blocks, stamps, phase, q, totals[q], &choices);
    } else {
      queue_consume(header, blocks, stamps, phase, serving[Tmk_proc_id], totals[serving[Tmk_proc_id]], &choices);
    }
    Tmk_barrier(1);
    for (q = 0; q < queue_plan[phase].queues; q++) {
      long *h = header + q * header_words;
      check(h[0] == totals[q] && h[1] == totals[q], "the items a queue passed on, after the barrier", h[1], totals[q]);
    }
    for (p = 0; p < Tmk_nprocs; p++) {
      if (serving[p] >= 0) continue;
      queue_draws(phase, p, served, draws);
      for (item = 0; item < queue_items(phase); item++) {
        long stamp = stamps[item * Tmk_nprocs + p];
        unsigned consumer = (unsigned)(stamp & 0xffffffffL) - 1;
        int by_server = stamp >> 32 == phase + 1 && consumer < Tmk_nprocs &&
                        (Tmk_nprocs == 1 ? consumer == 0 : serving[consumer] == draws[item]);
        check(by_server, "an item's stamp, a consumer of its queue's this phase", stamp, ((long)(phase + 1) << 32) + 1);
        queue_check_block(blocks, phase, p, item, "a block's word after the barrier");
      }
    }
    Tmk_barrier(2);
  }
  free(serving);
  free(draws);
  if (Tmk_proc_id == 0) printf("queues: process 0 took part in %lu garbage collections\n", Tmk_stat.gc_runs);
  finish("queues");
}

/* How many transfers process p makes in the lock-only scenarios: the
 * last process a quarter as many, so that it waits while the others work. */
static int transfers_of(unsigned p) {
  return Tmk_nprocs > 1 && p == Tmk_nprocs - 1 ? iterations / 4 : iterations;
}

/* Random transfers under locks, one in eight nested inside an outer lock
 * that the other processes queue for, with no barrier (run with a small
 * TMK_GC_THRESHOLD, garbage is collected all the while).  A pause of 20 us
 * after each transfer keeps the processes' transfers going at the same
 * time, so that the locks go from one to another: garbage grows with those
 * hand-offs (a lock taken again where it was released adds no interval).
 * Without it, on 2 processes, the first to start made most of its
 * transfers before the other began: 6-40 hand-offs, 0-28 collections. */
static void transfer_under_locks(long *counter, int counters, int groups) {
  unsigned state = seed * 31 + Tmk_proc_id, nesting = seed * 7 + Tmk_proc_id;
  int step;
  for (step = 0; step < transfers_of(Tmk_proc_id); step++) {
    int nested = next_random(&nesting) % 8 == 0;
    if (nested) Tmk_lock_acquire(groups);
    random_transfer(counter, 1, counters, groups, &state);
    if (nested) Tmk_lock_release(groups);
    usleep(20);
  }
}

static void check_transfers(const long *counter, int counters, int groups, unsigned processes) {
  long *expected = calloc(counters, sizeof *expected);
  unsigned p;
  int i;
  for (p = 0; p < processes; p++) replay_transfers(expected, counters, groups, seed * 31 + p, transfers_of(p));
  for (i = 0; i < counters; i++) check(counter[i] == expected[i], "a counter at the end", counter[i], expected[i]);
  free(expected);
}

/* Garbage collected in a program that synchronises with locks only:
 * random transfers under locks; the last process, done early, waits at a
 * barrier (garbage-locks) or in Tmk_exit (garbage-exit, which ends with no
 * barrier), and process 0 waits on a condition until every other process
 * is done.  Collections go on through those waits and through processes
 * queued for a lock whose holder takes part, and every result is exact:
 * process 0 sees every transfer through the group locks. */
static void garbage_locks(const char *scenario, int last_exits) {
  enum { counters = 2048, groups = 8, done_lock = groups + 1 };
  long *done, collected;
  int group;
  allocate_zeroed_longs(counters + groups + 2 * PAGE_WORDS, scenario);
  done = shared_longs + counters + groups + PAGE_WORDS; /* a page of its own */
  transfer_under_locks(shared_longs, counters, groups);
  Tmk_lock_acquire(done_lock);
  if (Tmk_proc_id == 0) {
    while (*done < (long)Tmk_nprocs - 1) Tmk_lock_cond_wait(done_lock, 0);
  } else {
    ++*done;
    Tmk_lock_cond_signal(done_lock, 0);
  }
  Tmk_lock_release(done_lock);
  collected = (long)Tmk_stat.gc_runs;
  if (Tmk_proc_id == 0 && Tmk_nprocs > 1)
    check(collected >= 2, "garbage collections with locks only", collected, 2);
  if (last_exits) {
    if (Tmk_proc_id == 0) {
      for (group = 0; group < groups; group++) Tmk_lock_acquire(group);
      check_transfers(shared_longs, counters, groups, Tmk_nprocs);
      for (group = 0; group < groups; group++) Tmk_lock_release(group);
      printf("%s: %s on %u processes\n", scenario, failures ? "FAILED" : "passed", Tmk_nprocs);
    }
    Tmk_exit(failures ? 1 : 0);
  }
  Tmk_barrier(1);
  check_transfers(shared_longs, counters, groups, Tmk_nprocs);
  finish(scenario);
}

/* Steps in a fixed order across processes through a flag outside the
 * shared region (an anonymous mapping made before Tmk_startup, shared by
 * the processes it forks), so that the order tells no process anything
 * about the others' intervals. */
static volatile int *step_flag;

static void wait_for_step(int wanted) {
  int waited_ms = 0;
  while (__atomic_load_n(step_flag, __ATOMIC_ACQUIRE) < wanted) {
    if (waited_ms++ > 30000) {
      fprintf(stderr, "process %u: step %d never came\n", Tmk_proc_id, wanted);
      Tmk_exit(4);
    }
    usleep(1000);
  }
}

static void start_step(int next) { __atomic_store_n(step_flag, next, __ATOMIC_RELEASE); }

/* The ordering scenarios play their steps on processes 0 to 3. */
static void need_four_processes(const char *scenario) {
  if (Tmk_nprocs < 4) {
    if (Tmk_proc_id == 0) fprintf(stderr, "%s needs 4 processes or more\n", scenario);
    Tmk_exit(2);
  }
}

/* Process 1 closes intervals of its own (lock 1 is managed there: no
 * messages), so that its next interval's vector time sums higher than
 * the others'. */
static void intervals_of_process_1(int *scratch) {
  int i;
  for (i = 0; i < 12; i++) {
    Tmk_lock_acquire(1);
    scratch[i]++;
    Tmk_lock_release(1);
  }
}

/* A page copied whole from process 0 holds writes of intervals its
 * receiver has not heard of; after hearing of them (a lock grant), the
 * receiver's writes to that page must come after them everywhere.
 * Process 1 writes x under lock 0 in an interval with a high vector time
 * (many intervals before it); process 0 reads it; process 2 copies the
 * page from process 0, writes another word, then increments x under the
 * lock; process 3, holding an old copy, then reads x: it applies both
 * writers' diffs and must see the increment.  Needs 4 processes. */
static void copy_order(void) {
  int *x, *scratch;
  need_four_processes("copy-order");
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(4 * PAGE_WORDS * sizeof(int));
    memset(shared_ints, 0, 4 * PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  x = shared_ints + PAGE_WORDS / 2; /* x[0] = x, x[4] read by process 2, x[8] written by it */
  scratch = shared_ints + 3 * PAGE_WORDS;
  if (Tmk_proc_id == 3) {
    check(x[0] == 0, "x in the first copy", x[0], 0);
    start_step(1);
  }
  if (Tmk_proc_id == 1) {
    wait_for_step(1);
    intervals_of_process_1(scratch);
    Tmk_lock_acquire(0);
    x[0] = 10;
    Tmk_lock_release(0);
    start_step(2);
  }
  if (Tmk_proc_id == 0) {
    wait_for_step(2);
    Tmk_lock_acquire(0);
    check(x[0] == 10, "x after process 1's write", x[0], 10);
    Tmk_lock_release(0);
    start_step(3);
  }
  if (Tmk_proc_id == 2) {
    wait_for_step(3);
    check(x[4] == 0, "a word never written", x[4], 0); /* a whole copy from process 0 */
    x[8] = 5;
    Tmk_lock_acquire(0);
    check(x[0] == 10, "x before the increment", x[0], 10);
    x[0] += 1;
    Tmk_lock_release(0);
    start_step(4);
  }
  if (Tmk_proc_id == 3) {
    wait_for_step(4);
    Tmk_lock_acquire(0);
    check(x[0] == 11, "x after the increment", x[0], 11);
    Tmk_lock_release(0);
  }
  Tmk_barrier(1);
  check(x[0] == 11, "x after the barrier", x[0], 11);
  check(x[8] == 5, "the other word after the barrier", x[8], 5);
  finish("copy-order");
}

/* A block freed by one process and allocated by another: the second
 * owner's write wins everywhere.  Process 1 writes the block in an
 * interval with a high vector time and frees it; process 2 gets the same
 * block from Tmk_malloc and writes it; process 3 hears of both writes (a
 * lock from each) and reads.  Only Tmk_free and Tmk_malloc order the two
 * writes (the steps go through the flag outside the shared region).  Needs
 * 4 processes. */
static volatile long *handed_block;

static void free_reuse(void) {
  int *scratch;
  need_four_processes("free-reuse");
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(PAGE_WORDS * sizeof(int));
    memset(shared_ints, 0, PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  scratch = shared_ints;
  if (Tmk_proc_id == 1) {
    int *block;
    intervals_of_process_1(scratch);
    block = Tmk_malloc(64);
    block[0] = 1;
    Tmk_lock_acquire(1);
    Tmk_lock_release(1);
    *handed_block = (long)(uintptr_t)block;
    Tmk_free(block);
    start_step(1);
  }
  if (Tmk_proc_id == 2) {
    int *block;
    wait_for_step(1);
    block = Tmk_malloc(64);
    check((long)(uintptr_t)block == *handed_block, "the same block again", (long)(uintptr_t)block, *handed_block);
    block[0] = 2;
    Tmk_lock_acquire(2);
    Tmk_lock_release(2);
    start_step(2);
  }
  if (Tmk_proc_id == 3) {
    int *block;
    wait_for_step(2);
    block = (int *)(uintptr_t)*handed_block;
    Tmk_lock_acquire(1);
    Tmk_lock_release(1);
    Tmk_lock_acquire(2);
    check(block[0] == 2, "the block's word after the second owner's write", block[0], 2);
    Tmk_lock_release(2);
  }
  Tmk_barrier(1);
  finish("free-reuse");
}

/* A process lost in the middle of the job: the others must report it and
 * stop.  "die-holding-lock": process 1 dies holding a lock process 2 waits
 * for; "die-in-barrier": the last process dies while the others wait at a
 * barrier; "die-before-fetch": process 1 dies after writing pages the
 * others then read; "stop-in-barrier": the last process stops (SIGSTOP)
 * while the others wait; "die-rank0": process 0 dies while the others wait;
 * "die-in-cond-wait": process 2 dies instead of signalling the condition
 * process 0 waits on (at process 1, the lock's manager). */
/* Stops this process with a signal, saying when (for the figures of how
 * long the others take to notice). */
static void inject(int signal_number) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  fprintf(stderr, "process %u: injecting signal %d at %.6f\n", Tmk_proc_id, signal_number,
          (double)now.tv_sec + now.tv_nsec * 1e-9);
  fflush(stderr);
  kill(getpid(), signal_number);
}

static void lost_process(const char *what) {
  unsigned last = Tmk_nprocs - 1;
  int i;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(16 * PAGE_WORDS * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  if (strcmp(what, "die-holding-lock") == 0) {
    if (Tmk_proc_id == 1) Tmk_lock_acquire(7);
    Tmk_barrier(1);
    if (Tmk_proc_id == 1) {
      usleep(300000);
      inject(SIGKILL);
    }
    if (Tmk_proc_id == 2) Tmk_lock_acquire(7);
    Tmk_barrier(2);
  } else if (strcmp(what, "die-in-barrier") == 0 || strcmp(what, "stop-in-barrier") == 0 ||
             strcmp(what, "die-rank0") == 0) {
    unsigned victim = strcmp(what, "die-rank0") == 0 ? 0 : last;
    if (Tmk_proc_id == victim) {
      usleep(300000);
      inject(strcmp(what, "stop-in-barrier") == 0 ? SIGSTOP : SIGKILL);
    }
    Tmk_barrier(1);
  } else if (strcmp(what, "die-in-cond-wait") == 0) {
    if (Tmk_proc_id == 0) {
      Tmk_lock_acquire(7);
      Tmk_lock_cond_wait(7, 0);
    }
    if (Tmk_proc_id == 2) {
      usleep(300000);
      inject(SIGKILL);
    }
    Tmk_barrier(1);
  } else if (strcmp(what, "die-before-fetch") == 0) {
    if (Tmk_proc_id == 1)
      for (i = 0; i < 16 * PAGE_WORDS; i++) shared_ints[i] = i;
    Tmk_barrier(1);
    if (Tmk_proc_id == 1) inject(SIGKILL);
    usleep(100000);
    for (i = 0; i < 16 * PAGE_WORDS; i += PAGE_WORDS) check(shared_ints[i] == i, "a word", shared_ints[i], i);
    Tmk_barrier(2);
  }
  fprintf(stderr, "process %u: %s went on after the loss\n", Tmk_proc_id, what);
  Tmk_exit(4);
}

/* Resident memory stays flat over thousands of intervals: in each round
 * every process rewrites a page of a shared array under that page's lock
 * (a whole page, so that garbage builds up quickly without collections),
 * with a barrier every few rounds or (memory-locks) none until the end. */
static void memory(const char *scenario, int with_barriers) {
  enum { words = PAGE_WORDS };  /* updated per round */
  int round, i, n = 32 * PAGE_WORDS;
  long early = 0, late = 0;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc(n * sizeof(int));
    memset(shared_ints, 0, n * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  for (round = 1; round <= iterations; round++) {
    int slot = (int)((round * 7919u + Tmk_proc_id * 104729u) % (unsigned)(n / words)) * words;
    Tmk_lock_acquire(slot / words % 32);
    for (i = 0; i < words; i++) shared_ints[slot + i] += 1;
    Tmk_lock_release(slot / words % 32);
    if (with_barriers && round % 8 == 0) Tmk_barrier(1);
    if (round == iterations / 2 || round == iterations) {
      long pages = 0, resident = 0;
      FILE *statm = fopen("/proc/self/statm", "r");
      if (statm && fscanf(statm, "%ld %ld", &pages, &resident) == 2) {
        if (round == iterations) late = resident * (sysconf(_SC_PAGESIZE) / 1024);
        else early = resident * (sysconf(_SC_PAGESIZE) / 1024);
      }
      if (statm) fclose(statm);
    }
  }
  Tmk_barrier(2);
  {
    long total = 0;
    for (i = 0; i < n; i++) total += shared_ints[i];
    check(total == (long)words * iterations * Tmk_nprocs, "the sum of all updates", total,
          (long)words * iterations * Tmk_nprocs);
  }
  if (Tmk_proc_id == 0) printf("resident: %ld kB half-way, %ld kB at the end\n", early, late);
  check(early > 0 && late > 0, "resident kB read from /proc/self/statm", late, early);
  check(late <= early + 2048, "resident kB at the end against half-way (+2 MB)", late, early);
  finish(scenario);
}

static double seconds_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Long waits that are no deadlock, each longer than the second after
 * which process 0 starts asking every process what it waits for: the job
 * must not be stopped.  First process 0 waits at a barrier while the
 * others pass a lock and take turns through a condition as fast as they
 * can (with three or more processes, moments when every process waits
 * and a grant or wake-up is on its way come thousands of times); then the
 * others wait for a lock that the last process holds while it sleeps; then
 * process 0 waits on a condition that the last process signals after a
 * sleep. */
static void long_waits(void) {
  const double phase = 2.2;
  /* shared_ints: [0] turn, [1] the condition's flag, [2 + p] process p's passes */
  int *passes;
  unsigned p;
  if (Tmk_proc_id == 0) {
    shared_ints = Tmk_malloc((2 + Tmk_nprocs) * sizeof(int));
    memset(shared_ints, 0, (2 + Tmk_nprocs) * sizeof(int));
    Tmk_distribute(&shared_ints, sizeof shared_ints);
  }
  Tmk_barrier(0);
  passes = shared_ints + 2;
  if (Tmk_proc_id != 0 && Tmk_nprocs >= 3) {
    double end = seconds_now() + phase;
    unsigned others = Tmk_nprocs - 1, me = Tmk_proc_id - 1;
    int mine = 0;
    for (;;) {
      int leave;
      Tmk_lock_acquire(0);
      passes[Tmk_proc_id]++;
      mine++;
      Tmk_lock_release(0);
      /* Turns in order through a condition, each process waiting for its
       * own; the first to find its time up at its turn ends them all. */
      Tmk_lock_acquire(6);
      while (shared_ints[0] >= 0 && shared_ints[0] % (int)others != (int)me) Tmk_lock_cond_wait(6, 0);
      if (shared_ints[0] >= 0) shared_ints[0] = seconds_now() >= end ? -1 : shared_ints[0] + 1;
      leave = shared_ints[0] < 0;
      Tmk_lock_cond_broadcast(6, 0);
      Tmk_lock_release(6);
      if (leave) break;
    }
    Tmk_lock_acquire(0);
    check(passes[Tmk_proc_id] == mine, "this process's passes under the lock", passes[Tmk_proc_id], mine);
    Tmk_lock_release(0);
  }
  Tmk_barrier(1);
  if (Tmk_proc_id == Tmk_nprocs - 1) {
    Tmk_lock_acquire(5);
    shared_ints[1] = 0;
  }
  Tmk_barrier(2);
  if (Tmk_proc_id == Tmk_nprocs - 1) {
    usleep((useconds_t)(phase * 1e6));
    shared_ints[1] = 7;
    Tmk_lock_release(5);
  } else {
    Tmk_lock_acquire(5);
    check(shared_ints[1] == 7, "what the holder wrote before its release", shared_ints[1], 7);
    Tmk_lock_release(5);
  }
  Tmk_barrier(3);
  if (Tmk_proc_id == 0) {
    Tmk_lock_acquire(7);
    while (shared_ints[1] != 8 && Tmk_nprocs > 1) Tmk_lock_cond_wait(7, 1);
    Tmk_lock_release(7);
  } else if (Tmk_proc_id == Tmk_nprocs - 1) {
    usleep((useconds_t)(phase * 1e6));
    Tmk_lock_acquire(7);
    shared_ints[1] = 8;
    Tmk_lock_cond_signal(7, 1);
    Tmk_lock_release(7);
  }
  Tmk_barrier(4);
  if (Tmk_proc_id == 0) {
    long total = 0;
    for (p = 1; p < Tmk_nprocs; p++) total += passes[p];
    printf("lock passes while process 0 waited: %ld\n", total);
    check(Tmk_nprocs < 3 || total > 0, "lock passes while process 0 waited", total, 1);
  }
  finish("long-waits");
}

/* Misuse: each stops the whole job with a message naming the call. */
/* Registered after Tmk_startup: runs after Tmk_exit has ended the job. */
static void barrier_after_exit(void) { Tmk_barrier(5); }

static void misuse(const char *what) {
  static int private_variable;
  static const int constant_variable = 5;
  /* Pointers the loader relocates, then protects (.data.rel.ro): inside the
   * program's writable segment, read-only once it runs. */
  static const char *const relocated_constants[] = {"north", "south"};
  if (strcmp(what, "bad-lock") == 0) Tmk_lock_acquire(70000);
  if (strcmp(what, "bad-barrier") == 0) Tmk_barrier(70000);
  if (strcmp(what, "release-unheld") == 0) Tmk_lock_release(4);
  if (strcmp(what, "double-acquire") == 0) {
    Tmk_lock_acquire(4);
    Tmk_lock_acquire(4);
  }
  if (strcmp(what, "bad-free") == 0) {
    char *block = Tmk_malloc(100);
    Tmk_free(block + 8);
  }
  if (strcmp(what, "distribute-size") == 0) Tmk_distribute(&private_variable, 0);
  if (strcmp(what, "distribute-shared") == 0) {
    int *in_shared = Tmk_malloc(64);
    Tmk_distribute(in_shared, 4);
  }
  if (strcmp(what, "distribute-overrun") == 0) Tmk_distribute(&private_variable, 1 << 30);
  if (strcmp(what, "distribute-constant") == 0) Tmk_distribute(&constant_variable, sizeof constant_variable);
  if (strcmp(what, "distribute-relocated-constant") == 0)
    Tmk_distribute(relocated_constants, sizeof relocated_constants);
  if (strcmp(what, "distribute-made-later") == 0 && Tmk_proc_id == 0) {
    void *made = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Tmk_distribute(made, 64);
  }
  if (strcmp(what, "cond-unheld") == 0) Tmk_lock_cond_wait(2, 1);
  if (strcmp(what, "bad-condition") == 0) {
    Tmk_lock_acquire(1);
    Tmk_lock_cond_signal(1, 70000);
  }
  if (strcmp(what, "after-exit") == 0) {
    atexit(barrier_after_exit);
    Tmk_exit(0);
  }
  if (strcmp(what, "errexit") == 0) Tmk_errexit("giving up after %d tries", 3);
  if (strcmp(what, "mismatched-barriers") == 0) Tmk_barrier(Tmk_proc_id == 0 ? 1 : 2);
  if (strcmp(what, "exit-in-barrier") == 0) {
    if (Tmk_proc_id == 0) Tmk_exit(0);
    Tmk_barrier(1);
  }
  /* Deadlocks: every process waits, and none of the waits can end. */
  if (strcmp(what, "deadlock-locks") == 0) {
    if (Tmk_proc_id == 0) Tmk_lock_acquire(1);
    if (Tmk_proc_id == 1) Tmk_lock_acquire(2);
    Tmk_barrier(0);
    if (Tmk_proc_id == 0) Tmk_lock_acquire(2);
    if (Tmk_proc_id == 1) Tmk_lock_acquire(1);
    Tmk_barrier(1);
  }
  if (strcmp(what, "deadlock-exit-holding") == 0) {
    if (Tmk_proc_id == Tmk_nprocs - 1) {
      Tmk_lock_acquire(3);
      Tmk_barrier(0);
      Tmk_exit(0);
    }
    Tmk_barrier(0);
    Tmk_lock_acquire(3);
  }
  if (strcmp(what, "deadlock-barrier-holding") == 0) {
    if (Tmk_proc_id == 1) Tmk_lock_acquire(4);
    Tmk_barrier(0);
    if (Tmk_proc_id != 1) Tmk_lock_acquire(4);
    Tmk_barrier(1);
  }
  if (strcmp(what, "deadlock-cond") == 0) {
    if (Tmk_proc_id == 0) {
      Tmk_lock_acquire(2);
      Tmk_lock_cond_wait(2, 1);
    }
    Tmk_exit(0);
  }
  if (strcmp(what, "segv") == 0) {
    volatile int *nowhere = (volatile int *)(uintptr_t)atoi("16");
    *nowhere = 1;
  }
  if (strcmp(what, "heap-exhausted") == 0) {
    void *huge = Tmk_malloc(64u << 20);
    void *small = Tmk_malloc(100);
    if (Tmk_proc_id == 0) printf("huge %s, small %s\n", huge ? "allocated" : "NULL", small ? "allocated" : "NULL");
    Tmk_exit(huge == NULL && small != NULL ? 0 : 1);
  }
  if (strcmp(what, "return-from-main") == 0) {
    /* Locks and barriers first: their handlers keep memory per thread, and
     * what the main thread keeps must outlive exit()'s destruction of its
     * thread-locals, as the collective end runs after that. */
    for (int round = 0; round < 200; round++) {
      Tmk_lock_acquire(0);
      Tmk_lock_release(0);
      Tmk_barrier(0);
    }
    return;
  }
  fprintf(stderr, "process %u: misuse %s was not stopped\n", Tmk_proc_id, what);
  Tmk_exit(3);
}

/* What a C program leaves for its end: a stream it never closed and a
 * handler it registered before Tmk_startup.  Each process writes a line
 * into a file of its own in $API_WORKER_OUT and leaves the file open;
 * with -i 0 it ends with Tmk_exit(0), with -i 1 by returning from main,
 * with -i 2 by exit(0).  The test reads the files. */
static FILE *left_open;

static void out_path(char *path, size_t size, const char *what) {
  const char *dir = getenv("API_WORKER_OUT");
  snprintf(path, size, "%s/%s.%u", dir != NULL ? dir : ".", what, Tmk_proc_id);
}

static void handler_before_startup(void) {
  char path[4096];
  out_path(path, sizeof path, "handler");
  FILE *file = fopen(path, "w");
  if (file == NULL) return;
  fprintf(file, "process %u: handler ran\n", Tmk_proc_id);
  fclose(file);
}

static int exit_streams(void) {
  char path[4096];
  out_path(path, sizeof path, "stream");
  left_open = fopen(path, "w");
  if (left_open == NULL) {
    perror(path);
    Tmk_exit(1);
  }
  fprintf(left_open, "process %u: left open\n", Tmk_proc_id);
  Tmk_barrier(0);
  if (iterations == 0) Tmk_exit(0);
  if (iterations == 2) exit(0);
  return 0;
}

int main(int argc, char **argv) {
  const char *scenario = NULL;
  int c;
  while ((c = getopt(argc, argv, "t:i:x:")) != -1) {
    switch (c) {
      case 't': scenario = optarg; break;
      case 'i': iterations = atoi(optarg); break;
      case 'x': seed = (unsigned)atoi(optarg); break;
      default: fprintf(stderr, "usage: api_worker -t SCENARIO [-i N] [-x SEED] -- -n NPROCS\n"); return 2;
    }
  }
  if (!scenario) {
    fprintf(stderr, "usage: api_worker -t SCENARIO [-i N] [-x SEED] -- -n NPROCS\n");
    return 2;
  }
  if (strcmp(scenario, "before-startup") == 0) Tmk_barrier(0);
  if (strcmp(scenario, "copy-order") == 0 || strcmp(scenario, "free-reuse") == 0) {
    void *flags = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (flags == MAP_FAILED) return 2;
    step_flag = flags;
    handed_block = (volatile long *)((char *)flags + 64);
  }
  if (strcmp(scenario, "exit-streams") == 0) atexit(handler_before_startup);
  if (strcmp(scenario, "own-fault-handler") == 0) install_own_fault_handler();
  Tmk_startup(argc, argv);
  if (strcmp(scenario, "exit-streams") == 0) return exit_streams();
  if (strcmp(scenario, "release-acquire") == 0) release_acquire();
  else if (strcmp(scenario, "false-sharing") == 0) false_sharing();
  else if (strcmp(scenario, "byte-sharing") == 0) byte_sharing();
  else if (strcmp(scenario, "barriers") == 0) barriers();
  else if (strcmp(scenario, "top-pages") == 0) top_pages();
  else if (strcmp(scenario, "threads") == 0) threads();
  else if (strcmp(scenario, "thread-calls") == 0) thread_calls();
  else if (strcmp(scenario, "sealed-twice") == 0) sealed_twice();
  else if (strcmp(scenario, "program-signals") == 0) program_signals();
  else if (strcmp(scenario, "handler-touches") == 0) handler_reentry(1);
  else if (strcmp(scenario, "own-fault-handler") == 0) own_fault_handler();
  else if (strcmp(scenario, "forked-child") == 0) forked_child();
  else if (strcmp(scenario, "sparse-first-writes") == 0) sparse_first_writes();
  else if (strcmp(scenario, "suspend-resume") == 0) suspend_resume();
  else if (strcmp(scenario, "handler-calls") == 0) handler_reentry(0);
  else if (strcmp(scenario, "traffic-counts") == 0) traffic_counts(scenario, 0);
  else if (strcmp(scenario, "traffic-counts-late") == 0) traffic_counts(scenario, 1);
  else if (strcmp(scenario, "boundary-rows") == 0) boundary_rows();
  else if (strcmp(scenario, "notices-once") == 0) notices_once();
  else if (strcmp(scenario, "fresh-zeros") == 0) fresh_zeros();
  else if (strcmp(scenario, "fresh-before-written") == 0) fresh_before_written();
  else if (strcmp(scenario, "merged-diffs") == 0) merged_diffs();
  else if (strcmp(scenario, "lock-pushes") == 0) lock_pushes();
  else if (strcmp(scenario, "lock-round") == 0) lock_round();
  else if (strcmp(scenario, "lock-ids") == 0) lock_ids();
  else if (strcmp(scenario, "lock-again") == 0) lock_again();
  else if (strcmp(scenario, "many-intervals") == 0) many_intervals();
  else if (strcmp(scenario, "whole-and-diffs") == 0) whole_and_diffs();
  else if (strcmp(scenario, "twins-kept") == 0) twins_kept();
  else if (strcmp(scenario, "working-set") == 0) working_set();
  else if (strcmp(scenario, "shrunk-diffs") == 0) shrunk_diffs();
  else if (strcmp(scenario, "pushes-stop") == 0) pushes_stop();
  else if (strcmp(scenario, "read-once") == 0) read_once();
  else if (strcmp(scenario, "whole-then-pushed") == 0) whole_then_pushed();
  else if (strcmp(scenario, "strided-first-writes") == 0) strided_first_writes();
  else if (strcmp(scenario, "heap-end-writes") == 0) heap_end_writes();
  else if (strcmp(scenario, "read-past-own") == 0) read_past_own();
  else if (strcmp(scenario, "read-passed-over") == 0) read_passed_over();
  else if (strcmp(scenario, "conditions") == 0) conditions();
  else if (strcmp(scenario, "cond-order") == 0) cond_order();
  else if (strcmp(scenario, "long-waits") == 0) long_waits();
  else if (strcmp(scenario, "distribution") == 0) distribution();
  else if (strcmp(scenario, "allocation") == 0) allocation();
  else if (strcmp(scenario, "garbage") == 0) garbage();
  else if (strcmp(scenario, "stress") == 0) stress();
  else if (strcmp(scenario, "thread-stress") == 0) thread_stress();
  else if (strcmp(scenario, "causal") == 0) causal();
  else if (strcmp(scenario, "heap-churn") == 0) heap_churn();
  else if (strcmp(scenario, "queues") == 0) queues();
  else if (strcmp(scenario, "garbage-locks") == 0) garbage_locks(scenario, 0);
  else if (strcmp(scenario, "garbage-exit") == 0) garbage_locks(scenario, 1);
  else if (strcmp(scenario, "copy-order") == 0) copy_order();
  else if (strcmp(scenario, "free-reuse") == 0) free_reuse();
  else if (strcmp(scenario, "memory") == 0) memory(scenario, 1);
  else if (strcmp(scenario, "memory-locks") == 0) memory(scenario, 0);
  else if (strncmp(scenario, "die-", 4) == 0 || strncmp(scenario, "stop-", 5) == 0) lost_process(scenario);
  else misuse(scenario);
  /* The end is collective: process 0 exits with the status another process
   * returned from main. */
  if (strcmp(scenario, "return-from-main") == 0 && Tmk_nprocs > 1 && Tmk_proc_id == Tmk_nprocs - 1)
    return 7;
  return 0;
}
