/*
 * Tmk.h — the public API of tmk, a TreadMarks-compatible software
 * distributed shared memory.
 *
 * A program written against TreadMarks compiles unchanged with this header.
 * N processes share one region of memory, kept coherent by lazy release
 * consistency: writes made before a Tmk_lock_release or a Tmk_barrier are
 * seen by a process after its matching Tmk_lock_acquire or Tmk_barrier.
 *
 * Every call either succeeds or stops the whole job with a message naming
 * the process, the call and the reason (TreadMarks's contract); none returns
 * an error code except Tmk_malloc and Tmk_sbrk, which return NULL when the
 * shared region is exhausted.  Calling anything but Tmk_startup first is an
 * error.
 */
#ifndef TMK_H
#define TMK_H

#ifdef __cplusplus
extern "C" {
#endif

/* This process's number, 0 .. Tmk_nprocs-1.  Valid after Tmk_startup. */
extern unsigned Tmk_proc_id;
/* The number of processes in the job.  Valid after Tmk_startup. */
extern unsigned Tmk_nprocs;
/* The coherence unit in bytes (4096 unless TMK_PAGE_SIZE says otherwise). */
extern unsigned Tmk_page_size;
/* The number of pages in the shared region. */
extern unsigned Tmk_npages;

/*
 * Starts the job.  Call it once, after the program's own getopt loop.
 * tmk's options follow "--" on the command line:
 *   -n NPROCS   number of processes (default TMK_NPROCS, else 1); on one
 *               host process 0 forks the others
 *   -s          print each process's statistics at exit
 * Under mpirun (or another PMI launcher) the rank and size come from the
 * launcher and -n must be absent or agree.  A bad option stops the job.
 */
void Tmk_startup(int argc, char **argv);

/*
 * Ends this process's part of the job.  Collective: the process keeps
 * serving the others until every process has called Tmk_exit (returning
 * from main counts as Tmk_exit(status)).  The job's exit status is
 * non-zero if any process's is.  Does not return.
 */
void Tmk_exit(int status);

/* Prints a printf-style message naming this process and stops the whole
 * job with a non-zero status.  Does not return. */
void Tmk_errexit(const char *format, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/*
 * Allocates size bytes of shared memory; any process may call it.  The
 * block's address is the same in every process.  Blocks of a page or more
 * are page-aligned, smaller ones 16-byte aligned.  Returns NULL when the
 * shared region is exhausted.  The memory is not cleared.
 */
void *Tmk_malloc(unsigned size);

/* Returns a block obtained from Tmk_malloc.  Freeing anything else stops
 * the job.  Tmk_free(NULL) does nothing. */
void Tmk_free(void *ptr);

/* Extends the shared heap by increment bytes and returns the start of the
 * new space (page-aligned), or NULL when the region is exhausted. */
void *Tmk_sbrk(unsigned increment);

/*
 * Copies size bytes at ptr, a private (non-shared) global variable, into
 * the same variable of every other process.  Works when the processes load
 * the program at different addresses.  Typically process 0 distributes the
 * pointers it got from Tmk_malloc, then all meet at a barrier.  Processes
 * forked by Tmk_startup may also distribute other private memory that
 * existed before Tmk_startup (a variable of main, say).
 */
void Tmk_distribute(const void *ptr, int size);

/* Waits until every process has reached barrier id; all writes made
 * before it by any process are visible after it. */
void Tmk_barrier(unsigned id);

/* Acquires lock id, waiting for its current holder.  Writes made by the
 * previous holders before their releases are visible afterwards. */
void Tmk_lock_acquire(unsigned id);
/* Releases lock id, which this process must hold. */
void Tmk_lock_release(unsigned id);

/*
 * Condition variables attached to a lock.  The caller must hold lock_id.
 * Tmk_lock_cond_wait releases the lock, waits until another process signals
 * (lock_id, cond_id), and acquires the lock again before returning.  Signal
 * wakes the longest waiter, broadcast every waiter; with no waiter they do
 * nothing.  Condition ids range as lock ids do (TMK_MAX_LOCKS).
 */
void Tmk_lock_cond_wait(unsigned lock_id, unsigned cond_id);
void Tmk_lock_cond_signal(unsigned lock_id, unsigned cond_id);
void Tmk_lock_cond_broadcast(unsigned lock_id, unsigned cond_id);

/* This process's counters since Tmk_startup, brought up to date by every
 * Tmk_barrier, Tmk_lock_acquire and Tmk_lock_release.  Printed at exit
 * with "-s"; written as JSON to the file named by TMK_STATS. */
struct Tmk_stat {
  unsigned long acquires;          /* Tmk_lock_acquire calls */
  unsigned long remote_acquires;   /* acquires that needed a message */
  unsigned long barriers;          /* Tmk_barrier calls */
  unsigned long messages;          /* messages sent */
  unsigned long bytes;             /* bytes sent */
  unsigned long messages_received; /* messages received */
  unsigned long bytes_received;    /* bytes received */
  unsigned long diffs_created;
  unsigned long diffs_applied;
  unsigned long twins;
  unsigned long read_faults;
  unsigned long write_faults;
  unsigned long page_fetches;      /* whole pages fetched */
  unsigned long diff_requests;     /* requests sent for diffs */
  unsigned long intervals;         /* intervals this process created */
  unsigned long write_notices;     /* write notices received */
  unsigned long gc_runs;           /* garbage collections */
};
extern struct Tmk_stat Tmk_stat;

#ifdef __cplusplus
}
#endif

#endif /* TMK_H */
