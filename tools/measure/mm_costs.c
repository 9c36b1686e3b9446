/*
 * Workloads for measuring the mm cost-model constants on the live kernel (docs/costs.md).
 * tools/measure/mm_costs.py runs them under `perf record` and attributes kernel time to the
 * allocator, compaction and reclaim functions; some subcommands also report their own timings.
 *
 *   mm_costs faults MIB [R]    R rounds (default 1) of: 4 KiB first-touch faults of MIB MiB
 *                              (MADV_NOHUGEPAGE), each timed, then MADV_DONTNEED of it (timed);
 *                              then 2 MiB THP faults
 *                              (MADV_HUGEPAGE) of MIB MiB, each timed. Prints p10/p50/p90 and the
 *                              free-page-reporting delta (reported_kib) of each phase; then the
 *                              THP range is freed and faulted again at once (host-backed memory).
 *   mm_costs frag MIB N K      touch MIB MiB of 4 KiB anonymous pages, free K of every N pages
 *                              (MADV_DONTNEED), then write 1 to /proc/sys/vm/compact_memory (timed).
 *   mm_costs mkfile FILE MIB   write FILE (MIB MiB), fsync it, drop it from the page cache.
 *   mm_costs read FILE MODE [PROCS]
 *                              join the cgroup whose cgroup.procs file is PROCS (if given), drop
 *                              FILE from the page cache, read it: MODE seq = 1 MiB reads (large
 *                              folios), MODE rand4k = POSIX_FADV_RANDOM + 4 KiB reads in order
 *                              (no readahead: order-0 folios).
 *   mm_costs wio FILE N        N 4 KiB O_DIRECT pwrite+fdatasync at random offsets of a 64 MiB FILE
 *                              (created, written and synced first), each timed; then N O_DIRECT
 *                              pwrites without sync; then buffered write of 256 MiB + fsync.
 * Keeps anonymous memory to MIB MiB (the callers use <= 1 GiB). Build: gcc -O2 -o mm_costs mm_costs.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "timing.h"
#include <unistd.h>

static void pct(const char *what, double *v, size_t n) {
	qsort(v, n, sizeof *v, cmp);
	printf("%s n=%zu p10=%.0f p50=%.0f p90=%.0f ns\n", what, n, v[n / 10], v[n / 2], v[n * 9 / 10]);
}

static int faults(size_t mib, size_t rounds) {
	size_t size = mib << 20, page = 4096, n = size / page;
	double ovh = timer_overhead();
	printf("timer_overhead_ns %.0f (subtracted)\n", ovh);
	double *v = malloc(n * rounds * sizeof *v);
	char *p = map_aligned(size);
	madvise(p, size, MADV_NOHUGEPAGE);
	long r0 = reported_kib();
	double t0 = now_ns(), tf = 0;
	for (size_t r = 0; r < rounds; r++) {
		for (size_t i = 0; i < n; i++) {
			double a = now_ns();
			p[i * page] = 1;
			v[r * n + i] = now_ns() - a - ovh;
		}
		double f0 = now_ns();
		madvise(p, size, MADV_DONTNEED);
		tf += now_ns() - f0;
	}
	double t1 = now_ns();
	long r1 = reported_kib();
	printf("fault4k_total_ns_per_page %.0f reported_kib_delta %ld rounds %zu\n",
	       (t1 - t0 - tf) / (n * rounds), r1 - r0, rounds);
	pct("fault4k", v, n * rounds);
	printf("dontneed4k_ns_per_page %.0f\n", tf / (n * rounds));

	/* THP faults. */
	size_t nh = size >> 21;
	char *h = map_aligned(size);
	if (madvise(h, size, MADV_HUGEPAGE))
		perror("MADV_HUGEPAGE");
	r0 = reported_kib();
	for (size_t i = 0; i < nh; i++) {
		double a = now_ns();
		h[i << 21] = 1;
		v[i] = now_ns() - a - ovh;
	}
	r1 = reported_kib();
	long thp = smaps_kib("AnonHugePages:");
	printf("thp AnonHugePages_kib %ld of %zu reported_kib_delta %ld\n", thp, size >> 10, r1 - r0);
	pct("fault2m", v, nh);
	double d0 = now_ns();
	madvise(h, size, MADV_DONTNEED);
	printf("dontneed2m_ns_per_thp %.0f\n", (now_ns() - d0) / nh);
	/* Second pass: fault the same range again at once, so the THPs mostly come from the blocks
	 * just freed (not yet reported to the host: reporting runs about 2 s after a free). */
	r0 = reported_kib();
	for (size_t i = 0; i < nh; i++) {
		double a = now_ns();
		h[i << 21] = 1;
		v[i] = now_ns() - a - ovh;
	}
	r1 = reported_kib();
	printf("thp2 AnonHugePages_kib %ld reported_kib_delta %ld\n", smaps_kib("AnonHugePages:"), r1 - r0);
	pct("fault2m_again", v, nh);
	madvise(h, size, MADV_DONTNEED);
	return 0;
}

static int frag(size_t mib, size_t every, size_t k) {
	size_t size = mib << 20, page = 4096, n = size / page;
	char *p = map_aligned(size);
	madvise(p, size, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < n; i++)
		p[i * page] = (char)i;
	for (size_t i = 0; i < n; i++)
		if (i % every < k)
			madvise(p + i * page, page, MADV_DONTNEED);
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);
	if (fd < 0) {
		perror("compact_memory");
		return 1;
	}
	double t0 = now_ns();
	if (write(fd, "1", 1) != 1)
		perror("write compact_memory");
	double t1 = now_ns();
	close(fd);
	printf("compact_memory_ns %.0f pages_kept %zu\n", t1 - t0, n - n / every * k);
	munmap(p, size);
	return 0;
}

static int mkfile(const char *path, size_t mib) {
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	char *buf = malloc(1 << 20);
	for (size_t i = 0; i < mib; i++) {
		memset(buf, (int)i, 1 << 20);
		if (write(fd, buf, 1 << 20) != 1 << 20)
			return 1;
	}
	fsync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

static int readf(const char *path, const char *mode, const char *procs) {
	if (procs) {
		FILE *f = fopen(procs, "w");
		if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f)) {
			perror(procs);
			return 1;
		}
	}
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	int rand4k = !strcmp(mode, "rand4k");
	if (rand4k)
		posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	size_t bs = rand4k ? 4096 : 1 << 20, total = 0;
	char *buf = malloc(bs);
	ssize_t r;
	double t0 = now_ns();
	while ((r = read(fd, buf, bs)) > 0)
		total += r;
	printf("read_bytes %zu ns %.0f\n", total, now_ns() - t0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

static int wio(const char *path, int n) {
	size_t size = 64UL << 20;
	if (mkfile(path, 64))
		return 1;
	int fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	char *buf;
	if (posix_memalign((void **)&buf, 4096, 4096))
		return 1;
	memset(buf, 0xa5, 4096);
	double *v = malloc(n * sizeof *v);
	srand(1);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++) {
			off_t off = (off_t)(rand() % (size / 4096)) * 4096;
			double a = now_ns();
			if (pwrite(fd, buf, 4096, off) != 4096) {
				perror("pwrite");
				return 1;
			}
			if (pass == 0)
				fdatasync(fd);
			v[i] = now_ns() - a;
		}
		pct(pass == 0 ? "odirect_pwrite_fdatasync" : "odirect_pwrite", v, n);
	}
	close(fd);
	/* Buffered writeback throughput. */
	size_t wmib = 256;
	fd = open(path, O_RDWR | O_TRUNC);
	char *mb = malloc(1 << 20);
	memset(mb, 0x3c, 1 << 20);
	double t0 = now_ns();
	for (size_t i = 0; i < wmib; i++)
		if (write(fd, mb, 1 << 20) != 1 << 20)
			return 1;
	double t1 = now_ns();
	fsync(fd);
	double t2 = now_ns();
	printf("buffered_write_256MiB dirty_ns %.0f fsync_ns %.0f fsync_ns_per_4k_page %.0f MB_per_s %.0f\n",
	       t1 - t0, t2 - t1, (t2 - t1) / (wmib * 256), wmib * 1048576.0 / (t2 - t1) * 1e3);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	unlink(path);
	return 0;
}

int main(int argc, char **argv) {
	if (argc >= 3 && !strcmp(argv[1], "faults"))
		return faults(atol(argv[2]), argc >= 4 ? atol(argv[3]) : 1);
	if (argc >= 5 && !strcmp(argv[1], "frag"))
		return frag(atol(argv[2]), atol(argv[3]), atol(argv[4]));
	if (argc >= 4 && !strcmp(argv[1], "mkfile"))
		return mkfile(argv[2], atol(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "read"))
		return readf(argv[2], argv[3], argc >= 5 ? argv[4] : NULL);
	if (argc >= 4 && !strcmp(argv[1], "wio"))
		return wio(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
	return 2;
}
