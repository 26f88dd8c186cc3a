/*
 * measure.h — what every microbenchmark needs whether or not it runs on
 * tmk (platform.c does not): its number options, the clock, and the
 * ordering of run times for their median.
 */
#ifndef MICROBENCH_MEASURE_H
#define MICROBENCH_MEASURE_H

#include <stdlib.h>
#include <time.h>

/* Parses a decimal number in [1, max], or returns -1. */
static inline int microbench_count(const char *text, long max)
{
  char *end;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > max)
    return -1;
  return (int)value;
}

static inline double microbench_now_us(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec * 1e6 + (double)now.tv_nsec * 1e-3;
}

/* Sorts values in place (insertion sort: a handful of runs). */
static inline void microbench_sort(double *values, int count)
{
  for (int i = 1; i < count; i++) {
    double value = values[i];
    int j = i;
    for (; j > 0 && values[j - 1] > value; j--)
      values[j] = values[j - 1];
    values[j] = value;
  }
}

#endif
