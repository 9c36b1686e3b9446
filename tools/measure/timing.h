/*
 * Helpers shared by the measurement programs (costs.c, mm_costs.c, reported_touch.c): a monotonic clock
 * in ns, the median overhead of one pair of clock reads, a double comparator for qsort, free
 * page reporting's `reported_kib`, a field of /proc/self/smaps_rollup, and a 2 MiB-aligned
 * anonymous mapping. Header-only (every function static inline, so a program that uses a few builds without warnings): `#include "timing.h"` next to the
 * program, no separate object to build.
 */
#ifndef FRAGLAB_TIMING_H
#define FRAGLAB_TIMING_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static inline double now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median cost of one pair of clock reads, subtracted from every timing. */
static inline double timer_overhead(void) {
	double v[1001];
	for (int i = 0; i < 1001; i++) {
		double a = now_ns();
		v[i] = now_ns() - a;
	}
	qsort(v, 1001, sizeof *v, cmp);
	return v[500];
}

/* /sys/module/page_reporting/parameters/reported_kib, or -1 without it. */
static inline long reported_kib(void) {
	long v = -1;
	FILE *f = fopen("/sys/module/page_reporting/parameters/reported_kib", "r");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* The kB value of `key` ("AnonHugePages:") in /proc/self/smaps_rollup, or -1. */
static inline long smaps_kib(const char *key) {
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, kl))
			v = atol(line + kl);
	fclose(f);
	return v;
}

/* A 2 MiB-aligned anonymous mapping of `size` bytes (the slack before it is left mapped). */
static inline char *map_aligned(size_t size) {
	size_t align = 2UL << 20;
	char *p = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return (char *)(((uintptr_t)p + align - 1) & ~(align - 1));
}

#endif
