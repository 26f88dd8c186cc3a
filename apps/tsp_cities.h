/*
 * tsp_cities.h — the city file and distance tables of tsp.c and its MPI
 * version, mpi/tsp_mpi.c: both read the same files the same way.
 *
 * A city file holds the number of cities, then one "x y" line per city;
 * '#' starts a comment.  Distances are Euclidean, rounded to the nearest
 * integer (TSPLIB's EUC_2D).  Each program includes this once.
 */
#ifndef TSP_CITIES_H
#define TSP_CITIES_H

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_CITIES 20      /* Held-Karp of 20 cities needs 40 MB */
#define DEFAULT_CITY_FILE "cities-18.txt"

static int ncities;
static int distance[MAX_CITIES][MAX_CITIES];
static int nearest[MAX_CITIES][MAX_CITIES - 1];  /* other cities, closest first */
static int cheapest_exit[MAX_CITIES];            /* shortest edge leaving each city */

/* Reads the city file and derives the distance tables; on a bad file
 * prints why and returns false.  The file is text: the number of cities,
 * then an "x y" pair of integers per city; '#' starts a comment. */
static bool read_cities(const char *name)
{
  enum { most = 64 * 1024 };
  FILE *file = fopen(name, "r");
  if (file == NULL) {
    perror(name[0] != '\0' ? name : "the city file name (empty)");
    return false;
  }
  static char text[most + 1];
  size_t length = fread(text, 1, most + 1, file);
  int error = ferror(file) ? errno : 0;
  fclose(file);
  if (error != 0) {
    fprintf(stderr, "%s: %s\n", name, strerror(error));
    return false;
  }
  if (memchr(text, '\0', length) != NULL) {
    fprintf(stderr, "%s: holds a NUL byte; a city file is text\n", name);
    return false;
  }
  if (length > most) {
    fprintf(stderr, "%s: longer than %d bytes; a city file is a few hundred\n", name, most);
    return false;
  }
  text[length] = '\0';
  long numbers[1 + 2 * MAX_CITIES];
  int count = 0, wanted = 1;
  for (char *at = text; *at != '\0';) {
    if (*at == '#') {
      at += strcspn(at, "\n");
      continue;
    }
    if (isspace((unsigned char)*at)) {
      at++;
      continue;
    }
    char *end;
    errno = 0;
    long value = strtol(at, &end, 10);
    bool ended = *end == '\0' || *end == '#' || isspace((unsigned char)*end);
    if (end == at || errno == ERANGE || !ended) {
      fprintf(stderr, "%s: \"%.*s\" is not an integer; expected the number of cities, "
              "then an \"x y\" line per city\n", name, (int)strcspn(at, " \t\r\n#"), at);
      return false;
    }
    if (count == wanted) {
      fprintf(stderr, "%s: more numbers than the %ld cities it declares need\n", name,
              numbers[0]);
      return false;
    }
    numbers[count++] = value;
    if (count == 1) {
      if (value < 2 || value > MAX_CITIES) {
        fprintf(stderr, "%s: %ld cities; between 2 and %d are supported\n", name, value,
                MAX_CITIES);
        return false;
      }
      wanted = 1 + 2 * (int)value;
    }
    at = end;
  }
  if (count < wanted) {
    fprintf(stderr, "%s: expected the number of cities, then an \"x y\" line per city\n",
            name);
    return false;
  }

  ncities = (int)numbers[0];
  for (int a = 0; a < ncities; a++) {
    for (int b = 0; b < ncities; b++) {
      double dx = (double)(numbers[1 + 2 * a] - numbers[1 + 2 * b]);
      double dy = (double)(numbers[2 + 2 * a] - numbers[2 + 2 * b]);
      double d = sqrt(dx * dx + dy * dy) + 0.5;
      if (d > INT_MAX / (MAX_CITIES + 1)) {
        fprintf(stderr, "%s: coordinates too far apart\n", name);
        return false;
      }
      distance[a][b] = (int)d;
    }
  }
  for (int a = 0; a < ncities; a++) {
    int count_other = 0;
    for (int b = 0; b < ncities; b++) {
      if (b == a)
        continue;
      /* Insertion sort by distance, ties by city number. */
      int at = count_other++;
      while (at > 0 && distance[a][nearest[a][at - 1]] > distance[a][b]) {
        nearest[a][at] = nearest[a][at - 1];
        at--;
      }
      nearest[a][at] = b;
    }
    cheapest_exit[a] = distance[a][nearest[a][0]];
  }
  return true;
}

/* Finds the default city file: next to the executable first, then in the
 * source tree the program was built from; program names it in the error. */
static bool find_default_cities(const char *program, char *name, size_t size)
{
  char exe[4096];
  ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (length > 0) {
    exe[length] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
      *slash = '\0';
      snprintf(name, size, "%s/tsp-cities/%s", exe, DEFAULT_CITY_FILE);
      if (access(name, R_OK) == 0)
        return true;
    }
  }
#ifdef TSP_CITIES_DIR
  snprintf(name, size, "%s/%s", TSP_CITIES_DIR, DEFAULT_CITY_FILE);
  if (access(name, R_OK) == 0)
    return true;
#endif
  fprintf(stderr, "%s: cannot find %s; name a city file with -f\n", program, DEFAULT_CITY_FILE);
  return false;
}

#endif
