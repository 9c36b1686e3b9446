/*
 * Measures two cost-model constants on the live kernel (docs/costs.md):
 *  - context_switch_ns: two processes pinned to CPU 0 ping-pong one byte through two pipes;
 *    one round trip = 2 switches (plus the pipe syscalls, as lmbench's lat_ctx reports).
 *  - read_io_ns: a 4 KiB pread of a page-cache miss: a 256 MiB file is written, fsynced and
 *    dropped from the page cache with posix_fadvise(POSIX_FADV_DONTNEED), then random pages are
 *    read with readahead disabled (POSIX_FADV_RANDOM); the median per read is reported.
 * Usage: costs FILE   (FILE is created and removed; needs 256 MiB of disk)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

static void pin0(void) {
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	sched_setaffinity(0, sizeof s, &s);
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE\n", argv[0]);
		return 2;
	}
	/* Context switches. */
	int a[2], b[2];
	if (pipe(a) || pipe(b))
		return 1;
	const int rounds = 200000;
	pid_t pid = fork();
	char c = 0;
	if (pid == 0) {
		pin0();
		for (int i = 0; i < rounds; i++) {
			if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	pin0();
	double t0 = now_ns();
	for (int i = 0; i < rounds; i++) {
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			return 1;
	}
	double t1 = now_ns();
	waitpid(pid, NULL, 0);
	printf("context_switch_ns %.0f (round trip %.0f ns / 2, %d rounds)\n", (t1 - t0) / rounds / 2,
	       (t1 - t0) / rounds, rounds);

	/* Page-cache read misses. */
	const size_t size = 256UL << 20, page = 4096;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 1;
	char *buf = malloc(1 << 20);
	memset(buf, 0x5a, 1 << 20);
	for (size_t off = 0; off < size; off += 1 << 20)
		if (write(fd, buf, 1 << 20) != 1 << 20)
			return 1;
	fsync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	const int n = 2000;
	double *lat = malloc(n * sizeof *lat);
	srand(1);
	for (int i = 0; i < n; i++) {
		off_t off = (off_t)(rand() % (size / page)) * page;
		double s = now_ns();
		if (pread(fd, buf, page, off) != (ssize_t)page)
			return 1;
		lat[i] = now_ns() - s;
	}
	qsort(lat, n, sizeof *lat, cmp);
	printf("read_io_ns %.0f (median of %d random 4 KiB misses; p10 %.0f p90 %.0f)\n", lat[n / 2], n,
	       lat[n / 10], lat[9 * n / 10]);
	close(fd);
	unlink(argv[1]);
	return 0;
}
