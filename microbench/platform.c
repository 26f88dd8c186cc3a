/*
 * platform — what this machine charges for the system operations the
 * runtime is made of, measured without the runtime: the floor under every
 * other figure.
 *
 *   syscall          the cheapest system call (getppid)
 *   eventfd-empty    a read of an empty event fd (EAGAIN), as a look for a
 *                    wake-up that did not come
 *   epoll-ctl        one EPOLL_CTL_MOD, as muting or listening to a channel
 *   unix-datagram    a 1-byte datagram sent and received on a socket pair,
 *                    as UCX's shared memory transport wakes a sleeping peer
 *   mprotect-1       PROT_NONE on 1 page of a shared memfd mapping whose
 *   mprotect-32      pages are mapped (and back), as an invalidation: the
 *                    time of the PROT_NONE call, with no other thread
 *   mprotect-1-busy  the same while a second thread of the process runs on
 *   mprotect-32-busy another CPU (it must be interrupted to flush its TLB)
 *   first-touch      the first write to a page of a fresh memfd mapping
 *   signal           a signal sent to the calling thread and handled, as a
 *                    page fault reaches tmk, without the fault
 *   fault-fetch      a read of a page its mapping has PROT_NONE, whose
 *                    SIGSEGV handler writes the page, never made before,
 *                    through the file (pwrite) and opens it read-only
 *                    (mprotect): a page fetched for the first time, as
 *                    tmk's fault handler takes one in, without the message
 *   fault-update     the same for a page made and mapped before, the
 *                    handler writing one word of it through a second
 *                    mapping: a page brought up to date by a diff of one
 *                    word, without the message
 *
 * The fault cases are the floor under the Page and Diff microbenchmarks
 * with a fault per page (TMK_PREFETCH_PAGES=1): whatever carries the
 * message, a page costs at least this much more than its round trip.
 *
 * Each case is timed in RUNS runs of ITERATIONS operations; the figure is
 * the median of the runs' means.  With --csv, rows under the header that
 * the other microbenchmarks print (nprocs 1, substrate and notify "none").
 *
 * Usage: platform [-c CASE] [-i ITERATIONS] [-r RUNS] [--csv]
 */
#define _GNU_SOURCE

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "measure.h"

#define MAX_RUNS 1000
#define MAX_ITERATIONS 100000  /* first-touch maps that many fresh pages: 400 MB */
#define PAGE 4096
#define SLOTS 64  /* distinct page runs the mprotect cases cycle through */

static int iterations = 2000, runs = 7;
static bool csv = false;

static void fail(const char *what)
{
  perror(what);
  exit(1);
}

static void report(const char *name, double *means)
{
  microbench_sort(means, runs);
  double median = means[runs / 2];
  if (csv)
    printf("platform,%s,1,none,none,%.3f\n", name, median);
  else
    printf("%-17s %9.3f us per operation (median of %d runs of %d; fastest %.3f, slowest %.3f)\n",
           name, median, runs, iterations, means[0], means[runs - 1]);
}

static void time_syscall(const char *name)
{
  double means[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    double start = microbench_now_us();
    for (int i = 0; i < iterations; i++)
      syscall(SYS_getppid);
    means[r] = (microbench_now_us() - start) / iterations;
  }
  report(name, means);
}

static void time_eventfd_empty(const char *name)
{
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0)
    fail("eventfd");
  double means[MAX_RUNS];
  uint64_t value;
  for (int r = 0; r < runs; r++) {
    double start = microbench_now_us();
    for (int i = 0; i < iterations; i++)
      if (read(fd, &value, sizeof value) >= 0)
        fail("read of an empty eventfd succeeded");
    means[r] = (microbench_now_us() - start) / iterations;
  }
  close(fd);
  report(name, means);
}

static void time_epoll_ctl(const char *name)
{
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), ep = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0 || ep < 0)
    fail("eventfd or epoll_create1");
  struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event) != 0)
    fail("epoll_ctl");
  double means[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    double start = microbench_now_us();
    for (int i = 0; i < iterations; i++) {
      event.events = (i & 1) ? EPOLLIN | EPOLLONESHOT : 0;
      if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &event) != 0)
        fail("epoll_ctl");
    }
    means[r] = (microbench_now_us() - start) / iterations;
  }
  close(ep);
  close(fd);
  report(name, means);
}

static void time_unix_datagram(const char *name)
{
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
    fail("socketpair");
  double means[MAX_RUNS];
  char byte = 0;
  for (int r = 0; r < runs; r++) {
    double start = microbench_now_us();
    for (int i = 0; i < iterations; i++)
      if (send(pair[0], &byte, 1, 0) != 1 || recv(pair[1], &byte, 1, 0) != 1)
        fail("send or recv");
    means[r] = (microbench_now_us() - start) / iterations;
  }
  close(pair[0]);
  close(pair[1]);
  report(name, means);
}

static volatile sig_atomic_t signals_handled;

static void count_signal(int signal_number)
{
  (void)signal_number;
  signals_handled++;
}

static void time_signal(const char *name)
{
  struct sigaction action = {.sa_handler = count_signal};
  struct sigaction before;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGUSR1, &action, &before) != 0)
    fail("sigaction");
  pid_t process = getpid();
  pid_t thread = (pid_t)syscall(SYS_gettid);
  double means[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    signals_handled = 0;
    double start = microbench_now_us();
    for (int i = 0; i < iterations; i++)
      if (syscall(SYS_tgkill, process, thread, SIGUSR1) != 0)
        fail("tgkill");
    means[r] = (microbench_now_us() - start) / iterations;
    if (signals_handled != iterations) {
      fprintf(stderr, "platform: %s handled %d of %d signals\n", name, (int)signals_handled,
              iterations);
      exit(1);
    }
  }
  sigaction(SIGUSR1, &before, NULL);
  report(name, means);
}

static atomic_bool stop_spinning;

static void *spin(void *unused)
{
  (void)unused;
  while (!atomic_load_explicit(&stop_spinning, memory_order_relaxed)) {
  }
  return NULL;
}

/* A shared memfd mapping of bytes, its pages written (mapped) when touch. */
static char *shared_mapping(size_t bytes, bool touch)
{
  int fd = memfd_create("platform", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
    fail("memfd_create");
  char *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED)
    fail("mmap");
  close(fd);
  if (touch)
    memset(memory, 1, bytes);
  return memory;
}

/* PROT_NONE on runs of pages (timed), then read-write again and written,
 * so that the next time they are mapped pages again. */
static void time_mprotect(const char *name, int pages, bool busy)
{
  size_t run = (size_t)pages * PAGE, bytes = run * 2 * SLOTS;
  char *memory = shared_mapping(bytes, true);
  pthread_t sibling;
  atomic_store(&stop_spinning, false);
  if (busy && pthread_create(&sibling, NULL, spin, NULL) != 0)
    fail("pthread_create");
  usleep(10000);  /* the sibling is running */
  double means[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    double total = 0;
    for (int i = 0; i < iterations; i++) {
      char *at = memory + (size_t)(i % SLOTS) * run * 2;  /* runs apart: never merged */
      double start = microbench_now_us();
      if (mprotect(at, run, PROT_NONE) != 0)
        fail("mprotect");
      total += microbench_now_us() - start;
      if (mprotect(at, run, PROT_READ | PROT_WRITE) != 0)
        fail("mprotect");
      for (int p = 0; p < pages; p++)
        at[(size_t)p * PAGE] = 1;
    }
    means[r] = total / iterations;
  }
  if (busy) {
    atomic_store(&stop_spinning, true);
    pthread_join(sibling, NULL);
  }
  munmap(memory, bytes);
  report(name, means);
}

static void time_first_touch(const char *name)
{
  double means[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    size_t bytes = (size_t)iterations * PAGE;
    char *memory = shared_mapping(bytes, false);
    double start = microbench_now_us();
    for (int i = 0; i < iterations; i++)
      memory[(size_t)i * PAGE] = 1;
    means[r] = (microbench_now_us() - start) / iterations;
    munmap(memory, bytes);
  }
  report(name, means);
}

/* The fault cases' region: its memfd, the view the reads fault in and a
 * second view that is always read-write, as tmk's application and runtime
 * views; what a fetched page holds. */
static int fault_fd = -1;
static char *fault_view, *fault_writable;
static size_t fault_bytes;
static bool fault_fresh;
static char fault_contents[PAGE];

static void fill_and_open(int signal_number, siginfo_t *info, void *context)
{
  (void)context;
  char *address = info->si_addr;
  if (address < fault_view || address >= fault_view + fault_bytes) {
    /* Not ours: the default action on the next try. */
    signal(signal_number, SIG_DFL);
    return;
  }
  size_t offset = (size_t)(address - fault_view) & ~(size_t)(PAGE - 1);
  if (fault_fresh) {
    if (pwrite(fault_fd, fault_contents, PAGE, (off_t)offset) != PAGE)
      abort();
  } else {
    ((uint32_t *)(fault_writable + offset))[0]++;
  }
  if (mprotect(fault_view + offset, PAGE, PROT_READ) != 0)
    abort();
}

/* Each run reads one byte of every page of a new region whose view is
 * PROT_NONE; for fault-update the pages are made and mapped in both views
 * first (not timed). */
static void time_fault(const char *name, bool fresh)
{
  struct sigaction action = {.sa_sigaction = fill_and_open, .sa_flags = SA_SIGINFO};
  struct sigaction before;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGSEGV, &action, &before) != 0)
    fail("sigaction");
  memset(fault_contents, 7, sizeof fault_contents);
  fault_fresh = fresh;
  fault_bytes = (size_t)iterations * PAGE;
  double means[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    fault_fd = memfd_create("platform", MFD_CLOEXEC);
    if (fault_fd < 0 || ftruncate(fault_fd, (off_t)fault_bytes) != 0)
      fail("memfd_create");
    fault_view = mmap(NULL, fault_bytes, PROT_READ, MAP_SHARED, fault_fd, 0);
    fault_writable = mmap(NULL, fault_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fault_fd, 0);
    if (fault_view == MAP_FAILED || fault_writable == MAP_FAILED)
      fail("mmap");
    if (!fresh) {
      memset(fault_writable, 1, fault_bytes);
      for (size_t at = 0; at < fault_bytes; at += PAGE)
        (void)*(volatile char *)(fault_view + at);
    }
    if (mprotect(fault_view, fault_bytes, PROT_NONE) != 0)
      fail("mprotect");
    unsigned sum = 0;
    double start = microbench_now_us();
    for (size_t at = 0; at < fault_bytes; at += PAGE)
      sum += (unsigned char)*(volatile char *)(fault_view + at);
    means[r] = (microbench_now_us() - start) / iterations;
    /* A byte the handler wrote: a page of 7s, or the low byte of its word
     * of 1s, made 2. */
    unsigned expected = (unsigned)iterations * (fresh ? 7u : 2u);
    if (sum != expected) {
      fprintf(stderr, "platform: %s read %u over %d pages, expected %u\n", name, sum, iterations,
              expected);
      exit(1);
    }
    munmap(fault_view, fault_bytes);
    munmap(fault_writable, fault_bytes);
    close(fault_fd);
  }
  sigaction(SIGSEGV, &before, NULL);
  report(name, means);
}

static void usage(const char *why)
{
  fprintf(stderr,
          "platform: %s\n"
          "usage: platform [-c CASE] [-i ITERATIONS] [-r RUNS] [--csv]\n"
          "  cases: syscall eventfd-empty epoll-ctl unix-datagram mprotect-1 mprotect-32\n"
          "         mprotect-1-busy mprotect-32-busy first-touch signal fault-fetch\n"
          "         fault-update (default: all)\n",
          why);
  exit(2);
}

int main(int argc, char **argv)
{
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--csv") == 0) {
      csv = true;
    } else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
      if ((iterations = microbench_count(argv[++i], MAX_ITERATIONS)) < 0)
        usage("-i takes a number of operations from 1 to 100000");
    } else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
      if ((runs = microbench_count(argv[++i], MAX_RUNS)) < 0)
        usage("-r takes a number of runs from 1 to 1000");
    } else {
      usage("unknown option");
    }
  }
  struct {
    const char *name;
    void (*time)(const char *);
  } plain[] = {{"syscall", time_syscall},
               {"eventfd-empty", time_eventfd_empty},
               {"epoll-ctl", time_epoll_ctl},
               {"unix-datagram", time_unix_datagram},
               {"first-touch", time_first_touch},
               {"signal", time_signal}};
  struct {
    const char *name;
    int pages;
    bool busy;
  } protect[] = {{"mprotect-1", 1, false},
                 {"mprotect-32", 32, false},
                 {"mprotect-1-busy", 1, true},
                 {"mprotect-32-busy", 32, true}};
  struct {
    const char *name;
    bool fresh;
  } fault[] = {{"fault-fetch", true}, {"fault-update", false}};
  bool known = only == NULL;
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    known = known || strcmp(only, plain[i].name) == 0;
  for (size_t i = 0; i < sizeof protect / sizeof protect[0]; i++)
    known = known || strcmp(only, protect[i].name) == 0;
  for (size_t i = 0; i < sizeof fault / sizeof fault[0]; i++)
    known = known || strcmp(only, fault[i].name) == 0;
  if (!known)
    usage("unknown case");
  if (csv)
    printf("benchmark,case,nprocs,substrate,notify,us_per_op\n");
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (only == NULL || strcmp(only, plain[i].name) == 0)
      plain[i].time(plain[i].name);
  for (size_t i = 0; i < sizeof protect / sizeof protect[0]; i++)
    if (only == NULL || strcmp(only, protect[i].name) == 0)
      time_mprotect(protect[i].name, protect[i].pages, protect[i].busy);
  for (size_t i = 0; i < sizeof fault / sizeof fault[0]; i++)
    if (only == NULL || strcmp(only, fault[i].name) == 0)
      time_fault(fault[i].name, fault[i].fresh);
  return 0;
}
