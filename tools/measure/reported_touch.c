/*
 * First writes to memory the host discarded (free page reporting, §32.3 item 6),
 * against first writes to memory the host backs: the measurement behind `host_fault_ns`
 * (docs/costs.md). tools/measure/reported_touch.py builds and runs it; it changes nothing on the
 * machine (no sysctl, no sysfs write) and uses MIB MiB of anonymous memory at a time.
 *
 *   reported_touch thp MIB   MADV_HUGEPAGE mapping of MIB MiB, one write per 2 MiB, each timed
 *                            ("fresh": the THPs come from free memory, much of it reported to
 *                            the host after an idle wait); then MADV_DONTNEED of the whole
 *                            range and the same writes again at once ("refault": the THPs just
 *                            freed come back from the per-CPU lists and the buddy lists before a
 *                            reporting pass, which runs 2 s after a free, can report them).
 *   reported_touch 4k MIB    the same with MADV_NOHUGEPAGE and one write per 4 KiB page.
 *
 * For each phase it prints one line:
 *   PHASE n=N p10=.. p25=.. p50=.. p75=.. p90=.. p99=.. mean=.. ns anon_huge_kib=K
 *         reported_kib_delta=D
 * (times minus the timer's own overhead; anon_huge_kib from /proc/self/smaps_rollup after the
 * phase, reported_kib_delta -1 when the kernel has no `reported_kib` parameter).
 * Build: gcc -O2 -Wall -o reported_touch reported_touch.c
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "timing.h"

static void report(const char *phase, double *v, size_t n, long r0) {
	long r1 = reported_kib();
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	qsort(v, n, sizeof *v, cmp);
	printf("%s n=%zu p10=%.0f p25=%.0f p50=%.0f p75=%.0f p90=%.0f p99=%.0f mean=%.0f ns "
	       "anon_huge_kib=%ld reported_kib_delta=%ld\n",
	       phase, n, v[n / 10], v[n / 4], v[n / 2], v[n * 3 / 4], v[n * 9 / 10], v[n * 99 / 100],
	       sum / n, smaps_kib("AnonHugePages:"), (r0 < 0 || r1 < 0) ? -1 : r1 - r0);
	fflush(stdout);
}

/* Writes one byte every `stride` bytes of [p, p + size), each write timed into v. */
static void touch(char *p, size_t size, size_t stride, double *v, double ovh) {
	for (size_t i = 0; i < size / stride; i++) {
		double a = now_ns();
		p[i * stride] = 1;
		v[i] = now_ns() - a - ovh;
	}
}

int main(int argc, char **argv) {
	if (argc != 3 || (strcmp(argv[1], "thp") && strcmp(argv[1], "4k"))) {
		fprintf(stderr, "usage: %s thp|4k MIB\n", argv[0]);
		return 2;
	}
	int thp = !strcmp(argv[1], "thp");
	size_t size = (size_t)atol(argv[2]) << 20;
	size_t stride = thp ? 2UL << 20 : 4096;
	size_t n = size / stride;
	if (n == 0) {
		fprintf(stderr, "MIB too small\n");
		return 2;
	}
	double ovh = timer_overhead();
	printf("timer_overhead_ns %.0f (subtracted)\n", ovh);
	double *v = malloc(n * sizeof *v);
	char *p = map_aligned(size);
	if (madvise(p, size, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
		perror("madvise");
	const char *fresh = thp ? "thp_fresh" : "4k_fresh";
	const char *again = thp ? "thp_refault" : "4k_refault";
	long r0 = reported_kib();
	touch(p, size, stride, v, ovh);
	report(fresh, v, n, r0);
	if (madvise(p, size, MADV_DONTNEED))
		perror("MADV_DONTNEED");
	r0 = reported_kib();
	touch(p, size, stride, v, ovh);
	report(again, v, n, r0);
	madvise(p, size, MADV_DONTNEED);
	return 0;
}
