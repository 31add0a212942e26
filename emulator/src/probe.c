/* tierlab-probe: one timed, read-only job on a block device or a file, as fio
 * would run it (O_DIRECT, Linux native AIO, a closed loop of a fixed queue
 * depth), with its IOPS and latency percentiles as one JSON object.
 *
 * The tiers' calibration and self-check measure dozens of short jobs in
 * interleaved rounds. fio 3.33 spends about 0.3 s of wall time on each job
 * (its main thread polls its jobs every 100 ms), more than the jobs' own
 * time; this spends a millisecond. The self-check's integration test holds
 * its figures against fio's on the same device. */
#define _GNU_SOURCE

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { MAX_IODEPTH = 256, ALIGN_BYTES = 4096 };

/* fio's --percentile_list of the self-check, and the names its JSON gives them */
static const double percentiles[] = {50.0, 90.0, 99.0, 99.9};
static const char *const percentile_names[] = {"p50", "p90", "p99", "p99.9"};

struct job {
	int fd;
	int random;
	uint64_t block_bytes;
	uint64_t blocks;       /* in the span */
	uint64_t next_block;   /* of a sequential job */
	uint64_t rng;          /* xorshift64 state of a random one */
	uint64_t *latencies_ns;
	size_t count, capacity;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t next_offset(struct job *j)
{
	uint64_t block;
	if (j->random) {
		j->rng ^= j->rng << 13;
		j->rng ^= j->rng >> 7;
		j->rng ^= j->rng << 17;
		block = j->rng % j->blocks;
	} else {
		block = j->next_block;
		j->next_block = (j->next_block + 1) % j->blocks;
	}
	return block * j->block_bytes;
}

static void keep(struct job *j, uint64_t latency_ns)
{
	if (j->count == j->capacity) {
		j->capacity = j->capacity ? 2 * j->capacity : 65536;
		j->latencies_ns = realloc(j->latencies_ns, j->capacity * sizeof *j->latencies_ns);
		if (!j->latencies_ns) {
			fprintf(stderr, "tierlab-probe: out of memory for %zu latencies\n", j->capacity);
			exit(1);
		}
	}
	j->latencies_ns[j->count++] = latency_ns;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void fail(const char *what)
{
	fprintf(stderr, "tierlab-probe: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Submit one read of the job's next block into slot's buffer, stamped with its start. */
static void submit(aio_context_t ctx, struct job *j, struct iocb *cb, uint64_t *started_ns)
{
	struct iocb *list[1] = {cb};
	cb->aio_offset = (int64_t)next_offset(j);
	*started_ns = now_ns();
	if (syscall(SYS_io_submit, ctx, 1, list) != 1)
		fail("io_submit");
}

static void run(struct job *j, unsigned iodepth, uint64_t runtime_ns, double *elapsed_s)
{
	aio_context_t ctx = 0;
	struct iocb cbs[MAX_IODEPTH];
	uint64_t started_ns[MAX_IODEPTH];
	struct io_event events[MAX_IODEPTH];
	if (syscall(SYS_io_setup, iodepth, &ctx) != 0)
		fail("io_setup");
	memset(cbs, 0, sizeof cbs);
	for (unsigned i = 0; i < iodepth; i++) {
		void *buffer;
		int err = posix_memalign(&buffer, ALIGN_BYTES, j->block_bytes);
		if (err != 0) {
			/* it returns its error, and leaves errno, which fail() reports, as it was */
			errno = err;
			fail("posix_memalign");
		}
		cbs[i].aio_fildes = (uint32_t)j->fd;
		cbs[i].aio_lio_opcode = IOCB_CMD_PREAD;
		cbs[i].aio_buf = (uint64_t)(uintptr_t)buffer;
		cbs[i].aio_nbytes = j->block_bytes;
		cbs[i].aio_data = i;
	}
	uint64_t start_ns = now_ns(), end_ns = start_ns + runtime_ns, last_ns = start_ns;
	for (unsigned i = 0; i < iodepth; i++)
		submit(ctx, j, &cbs[i], &started_ns[i]);
	unsigned in_flight = iodepth;
	while (in_flight > 0) {
		long got = syscall(SYS_io_getevents, ctx, 1, (long)in_flight, events, NULL);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			fail("io_getevents");
		}
		last_ns = now_ns();
		for (long e = 0; e < got; e++) {
			unsigned slot = (unsigned)events[e].data;
			if (events[e].res != (int64_t)j->block_bytes) {
				errno = events[e].res < 0 ? (int)-events[e].res : EIO;
				fail("a read came back short or failed");
			}
			keep(j, last_ns - started_ns[slot]);
			in_flight--;
			/* time-based, as fio's --time_based: no new request once the runtime is up */
			if (last_ns < end_ns) {
				submit(ctx, j, &cbs[slot], &started_ns[slot]);
				in_flight++;
			}
		}
	}
	syscall(SYS_io_destroy, ctx);
	*elapsed_s = (double)(last_ns - start_ns) / 1e9;
}

static void report(struct job *j, const char *rw, unsigned iodepth, double elapsed_s)
{
	qsort(j->latencies_ns, j->count, sizeof *j->latencies_ns, by_value);
	double sum_ns = 0;
	for (size_t i = 0; i < j->count; i++)
		sum_ns += (double)j->latencies_ns[i];
	printf("{\"rw\": \"%s\", \"block_bytes\": %" PRIu64 ", \"iodepth\": %u, \"requests\": %zu, "
	       "\"runtime_s\": %.6f, \"iops\": %.1f, \"mean_us\": %.2f, \"lat_us\": {",
	       rw, j->block_bytes, iodepth, j->count, elapsed_s, (double)j->count / elapsed_s,
	       sum_ns / (double)j->count / 1000.0);
	for (size_t p = 0; p < sizeof percentiles / sizeof *percentiles; p++) {
		/* nearest rank */
		size_t rank = (size_t)(percentiles[p] / 100.0 * (double)j->count + 0.999999);
		size_t index = rank == 0 ? 0 : rank - 1;
		printf("%s\"%s\": %.2f", p ? ", " : "", percentile_names[p], (double)j->latencies_ns[index] / 1000.0);
	}
	printf("}}\n");
}

static int usage(void)
{
	fprintf(stderr, "usage: tierlab-probe TARGET read|randread BLOCK_BYTES IODEPTH RUNTIME_S SPAN_BYTES\n"
			"  BLOCK_BYTES a multiple of 512; IODEPTH 1 to %d; SPAN_BYTES at least one block\n",
		MAX_IODEPTH);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc != 7)
		return usage();
	const char *target = argv[1], *rw = argv[2];
	char *ends[4];
	uint64_t block_bytes = strtoull(argv[3], &ends[0], 10);
	unsigned long iodepth = strtoul(argv[4], &ends[1], 10);
	double runtime_s = strtod(argv[5], &ends[2]);
	uint64_t span_bytes = strtoull(argv[6], &ends[3], 10);
	/* a number followed by anything ("0.2s", "16M") is not taken for its prefix, nor a sign or a space
	 * before it (strtoull takes "-1" as its largest value) */
	for (int i = 0; i < 4; i++)
		if (ends[i] == argv[3 + i] || *ends[i] != '\0' || !(isdigit((unsigned char)argv[3 + i][0]) ||
								    argv[3 + i][0] == '.'))
			return usage();
	int random = strcmp(rw, "randread") == 0;
	if ((!random && strcmp(rw, "read") != 0) || block_bytes == 0 || block_bytes % 512 != 0 || iodepth < 1 ||
	    iodepth > MAX_IODEPTH || !(runtime_s > 0 && runtime_s <= 3600) || span_bytes < block_bytes)
		return usage();
	int fd = open(target, O_RDONLY | O_DIRECT);
	if (fd < 0)
		fail(target);
	struct job j = {.fd = fd, .random = random, .block_bytes = block_bytes, .blocks = span_bytes / block_bytes,
			.rng = 0x9e3779b97f4a7c15u ^ (uint64_t)now_ns()};
	double elapsed_s;
	run(&j, (unsigned)iodepth, (uint64_t)(runtime_s * 1e9), &elapsed_s);
	report(&j, rw, (unsigned)iodepth, elapsed_s);
	free(j.latencies_ns);
	close(fd);
	return 0;
}
