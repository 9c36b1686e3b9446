/* Per-file costs of fio's "many small files" pattern on a filesystem (docs/costs.md,
 * file_create_ns / file_unlink_ns): one process cycles through a ring of SLOTS files of
 * SIZE bytes in DIR; the first pass creates them, the second pass deletes each slot's old
 * file before creating the new one. Each open(O_CREAT) + close, write and unlink is timed
 * with CLOCK_MONOTONIC; medians and means of the second pass are printed. Removes its files.
 *
 *   gcc -O2 -o /tmp/smallfiles tools/measure/smallfiles.c && /tmp/smallfiles DIR [SLOTS] [SIZE]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

static void report(const char *what, long long *v, long n)
{
	long long sum = 0;
	for (long i = 0; i < n; i++)
		sum += v[i];
	qsort(v, n, sizeof(*v), cmp);
	printf("%-14s median %8lld ns  mean %8lld ns  p10 %8lld  p90 %8lld  (n=%ld)\n", what,
	       v[n / 2], sum / n, v[n / 10], v[n * 9 / 10], n);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR [SLOTS] [SIZE]\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	long slots = argc > 2 ? atol(argv[2]) : 100000;
	long size = argc > 3 ? atol(argv[3]) : 16384;
	char *buf = malloc(size), path[4096];
	memset(buf, 0x5a, size);
	long long *create = calloc(slots, 8), *wr = calloc(slots, 8), *unl = calloc(slots, 8);
	for (int pass = 0; pass < 2; pass++) {
		long long t0 = now_ns();
		for (long i = 0; i < slots; i++) {
			snprintf(path, sizeof(path), "%s/f%ld.%d", dir, i, pass);
			if (pass == 1) {
				char old[4096];
				snprintf(old, sizeof(old), "%s/f%ld.0", dir, i);
				long long a = now_ns();
				if (unlink(old)) {
					perror(old);
					return 1;
				}
				unl[i] = now_ns() - a;
			}
			long long a = now_ns();
			int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
			if (fd < 0) {
				perror(path);
				return 1;
			}
			long long b = now_ns();
			if (write(fd, buf, size) != size) {
				perror("write");
				return 1;
			}
			long long c = now_ns();
			close(fd);
			long long d = now_ns();
			create[i] = (b - a) + (d - c);
			wr[i] = c - b;
		}
		printf("pass %d: %ld files in %.2f s (%.0f files/s)\n", pass, slots,
		       (now_ns() - t0) / 1e9, slots / ((now_ns() - t0) / 1e9));
	}
	report("open+close", create, slots);
	report("write", wr, slots);
	report("unlink", unl, slots);
	for (long i = 0; i < slots; i++) {
		snprintf(path, sizeof(path), "%s/f%ld.1", dir, i);
		unlink(path);
	}
	return 0;
}
