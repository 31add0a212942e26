/* tierlab-emu: an emulated block device for tierlab's tiers.
 *
 * Serves one file, `device`, from a FUSE file system with direct I/O
 * (files.c, through its own FUSE session: session.c, ring.c). A loop device
 * on that file gives the database an ordinary block device, and every
 * request to it waits until the device model says the modelled device would
 * have completed it (device.c). Two more files: `stats` (JSON counters) and
 * `control` (calibration commands). `--simulate` runs the model alone on requests read
 * from standard input, for tests; `--job` runs it alone under a closed loop
 * of a fixed queue depth, as fio would drive the device, for the self-check's
 * targets. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>

#include "cache.h"
#include "device.h"
#include "files.h"
#include "model.h"
#include "profile.h"
#include "session.h"

static void sleep_until(uint64_t due_ns)
{
	struct timespec ts = {.tv_sec = due_ns / 1000000000u, .tv_nsec = due_ns % 1000000000u};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* The median lateness of timed sleeps long enough for an idle CPU to halt
 * (a halted vCPU is woken late by its timer); the reply thread polls for that
 * long before a reply is due instead of sleeping through it. */
static uint64_t measure_timer_overshoot(void)
{
	enum { ROUNDS = 101, SLEEP_NS = 500000 };
	uint64_t late[ROUNDS], key;
	int i, j;

	for (i = 0; i < ROUNDS; i++) {
		uint64_t due = mono_ns() + SLEEP_NS;
		sleep_until(due);
		late[i] = mono_ns() - due;
	}
	for (i = 1; i < ROUNDS; i++) {
		key = late[i];
		for (j = i - 1; j >= 0 && late[j] > key; j--)
			late[j + 1] = late[j];
		late[j + 1] = key;
	}
	return late[ROUNDS / 2];
}

/* Lines `AT_US r|w OFFSET LENGTH` in; the model's decision for each out. */
struct sim_request {
	double at_us;
	char op;
	uint64_t offset, length;
};

/* Every request on standard input (a cache is sized by the device, here the
 * furthest byte asked for); NULL after saying which line was wrong. */
static struct sim_request *read_requests(size_t *count, uint64_t *end)
{
	struct sim_request *all = NULL, *grown, r;
	size_t capacity = 0;
	char line[256];
	int lineno = 0;

	*count = 0;
	*end = 0;
	while (fgets(line, sizeof(line), stdin)) {
		lineno++;
		if (line[0] == '\n' || line[0] == '#')
			continue;
		if (sscanf(line, "%lf %c %" SCNu64 " %" SCNu64, &r.at_us, &r.op, &r.offset, &r.length) != 4 ||
		    (r.op != 'r' && r.op != 'w') || r.at_us < 0 || r.length == 0) {
			fprintf(stderr, "tierlab-emu: stdin:%d: expected `AT_US r|w OFFSET LENGTH`, got %s", lineno,
				line);
			free(all);
			return NULL;
		}
		if (*count == capacity) {
			capacity = capacity ? 2 * capacity : 1024;
			grown = realloc(all, capacity * sizeof(*all));
			if (!grown) {
				fprintf(stderr, "tierlab-emu: no memory for %zu requests\n", capacity);
				free(all);
				return NULL;
			}
			all = grown;
		}
		all[(*count)++] = r;
		if (r.offset + r.length > *end)
			*end = r.offset + r.length;
	}
	if (!all)
		all = malloc(sizeof(*all));
	return all;
}

/* The requests through the same path as a served device's (submit), with the
 * cache given as `CAPACITY_BYTES PAGE_BYTES POLICY` in front of it or NULL. */
static int simulate(const struct model_params *p, const char *cache)
{
	struct model_decision d;
	struct sim_request *all;
	size_t count, i;
	char err[256];

	all = read_requests(&count, &emu.size);
	if (!all)
		return 2;
	model_init(&emu.model, p);
	if (cache) {
		if (cache_from(cache, &emu.cache, err, sizeof(err)) != 0) {
			fprintf(stderr, "tierlab-emu: --cache %s: %s\n", cache, err);
			free(all);
			return 2;
		}
		emu.cache_on = 1;
	}
	printf("at_us op offset length class interfered start_us done_us latency_us cache\n");
	for (i = 0; i < count; i++) {
		const struct sim_request *r = &all[i];
		uint64_t at_ns = (uint64_t)(r->at_us * 1000.0), hits = emu.cache.read_hits;

		submit(at_ns, r->op == 'r' ? MODEL_READ : MODEL_WRITE, r->offset, r->length, &d);
		printf("%.3f %c %" PRIu64 " %" PRIu64 " %s %d %.3f %.3f %.3f %s\n", r->at_us, r->op, r->offset,
		       r->length, model_class_names[d.cls], d.interfered, d.start_ns / 1000.0, d.done_ns / 1000.0,
		       (d.done_ns - at_ns) / 1000.0,
		       !emu.cache_on || r->op == 'w' ? "-" : emu.cache.read_hits > hits ? "hit" : "miss");
	}
	free(all);
	return 0;
}

/* The model alone under a closed loop: `iodepth` requests always outstanding,
 * each one issued when one completes, as fio drives a device. Prints the
 * IOPS and latency percentiles the modelled device would give. */
enum { JOB_REQUESTS = 20000, JOB_SPAN_BYTES = 1 << 30 };

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double percentile_us(const uint64_t *sorted, size_t n, double pct)
{
	size_t i = (size_t)(pct / 100.0 * (double)(n - 1) + 0.5);

	return sorted[i] / 1000.0;
}

static int job(const struct model_params *p, const char *rw, uint64_t block_bytes, unsigned iodepth)
{
	struct model m;
	struct model_decision d;
	uint64_t *latency_ns, done_ns[256], issued_ns[256], next_offset = 0, random_state = 88172645463325252ull;
	uint64_t blocks = JOB_SPAN_BYTES / block_bytes, now = 0;
	int sequential = strcmp(rw, "read") == 0 || strcmp(rw, "write") == 0;
	enum model_op op = strcmp(rw, "read") == 0 || strcmp(rw, "randread") == 0 ? MODEL_READ : MODEL_WRITE;
	size_t issued = 0, completed = 0;
	unsigned slot, i;

	if (!sequential && strcmp(rw, "randread") != 0 && strcmp(rw, "randwrite") != 0) {
		fprintf(stderr, "tierlab-emu: --job RW must be read, randread, write or randwrite, got %s\n", rw);
		return 2;
	}
	if (block_bytes == 0 || block_bytes % 512 != 0 || block_bytes > JOB_SPAN_BYTES / 2 || iodepth < 1 ||
	    iodepth > 256) {
		fprintf(stderr, "tierlab-emu: --job needs a block size that is a multiple of 512 up to 512 MiB "
				"and a queue depth of 1 to 256\n");
		return 2;
	}
	latency_ns = malloc(JOB_REQUESTS * sizeof(*latency_ns));
	if (!latency_ns)
		return 1;
	for (i = 0; i < iodepth; i++)
		done_ns[i] = UINT64_MAX;
	model_init(&m, p);
	while (completed < JOB_REQUESTS) {
		/* keep the queue full at `now`, then move on to the earliest completion */
		for (slot = 0; slot < iodepth && issued < JOB_REQUESTS; slot++) {
			uint64_t offset;

			if (done_ns[slot] != UINT64_MAX)
				continue;
			if (sequential) {
				offset = next_offset;
				next_offset = (next_offset + block_bytes) % (blocks * block_bytes);
			} else {
				random_state ^= random_state << 13;
				random_state ^= random_state >> 7;
				random_state ^= random_state << 17;
				offset = random_state % blocks * block_bytes;
			}
			model_submit(&m, now, op, offset, block_bytes, &d);
			done_ns[slot] = d.done_ns;
			issued_ns[slot] = now;
			issued++;
		}
		slot = 0;
		for (i = 1; i < iodepth; i++)
			if (done_ns[i] < done_ns[slot])
				slot = i;
		now = done_ns[slot];
		latency_ns[completed++] = done_ns[slot] - issued_ns[slot];
		done_ns[slot] = UINT64_MAX;
	}
	qsort(latency_ns, completed, sizeof(*latency_ns), compare_u64);
	printf("{\"model\": \"%s\", \"rw\": \"%s\", \"block_bytes\": %" PRIu64 ", \"iodepth\": %u, \"requests\": %zu"
	       ", \"iops\": %.1f, \"lat_us\": {\"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f, \"p99.9\": %.2f}}\n",
	       p->name, rw, block_bytes, iodepth, completed, now ? completed * 1e9 / (double)now : 0.0,
	       percentile_us(latency_ns, completed, 50), percentile_us(latency_ns, completed, 90),
	       percentile_us(latency_ns, completed, 99), percentile_us(latency_ns, completed, 99.9));
	free(latency_ns);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: tierlab-emu --profile FILE [--cache-profile FILE] [--transport dev|io_uring] --backing FILE "
			"MOUNTPOINT\n"
			"       tierlab-emu --profile FILE [--cache-profile FILE --cache CAPACITY_BYTES PAGE_BYTES "
			"lru|admitting] --simulate < requests\n"
			"       tierlab-emu --profile FILE --job read|randread|write|randwrite BLOCK_BYTES IODEPTH\n");
}

static int serve(const char *backing, const char *mountpoint, const struct model_params *p,
		 enum session_transport transport)
{
	struct stat st;
	int ret;

	emu.backing_fd = open(backing, O_RDWR);
	if (emu.backing_fd < 0 || fstat(emu.backing_fd, &st) != 0) {
		fprintf(stderr, "tierlab-emu: cannot open the backing file %s: %s\n", backing, strerror(errno));
		return 1;
	}
	if (st.st_size <= 0 || st.st_size % 4096 != 0) {
		fprintf(stderr, "tierlab-emu: the backing file %s must be a non-empty multiple of 4096 bytes\n",
			backing);
		return 1;
	}
	emu.size = (uint64_t)st.st_size;
	/* served through a mapping: mapped pages survive drop_caches, so the host's
	 * own disk stays out of the modelled latency */
	emu.map = mmap(NULL, emu.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, emu.backing_fd, 0);
	if (emu.map == MAP_FAILED) {
		fprintf(stderr, "tierlab-emu: cannot map %s: %s\n", backing, strerror(errno));
		return 1;
	}
	model_init(&emu.model, p);
	emu.epoch_ns = mono_ns();
	prctl(PR_SET_TIMERSLACK, 1UL);
	emu.timer_overshoot_ns = measure_timer_overshoot();
	emu.started_ns = mono_ns();
	fprintf(stderr, "tierlab-emu: serving %s (%" PRIu64 " bytes) at %s/device with model %s; timer overshoot %.1f us\n",
		backing, emu.size, mountpoint, p->name, emu.timer_overshoot_ns / 1000.0);
	/* a reply is polled for this long before it is due instead of slept through */
	ret = session_serve(mountpoint, transport, emu.timer_overshoot_ns + 5000, files_handle);
	msync(emu.map, emu.size, MS_SYNC);
	return ret;
}

int main(int argc, char **argv)
{
	const char *profile = NULL, *backing = NULL, *mountpoint = NULL, *job_rw = NULL, *cache_profile = NULL;
	char cache[128] = "";
	unsigned long long job_block_bytes = 0, job_iodepth = 0;
	int simulate_mode = 0, alone, i;
	enum session_transport transport = TRANSPORT_DEV;
	struct model_params p;
	char err[512];

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
			profile = argv[++i];
		else if (strcmp(argv[i], "--backing") == 0 && i + 1 < argc)
			backing = argv[++i];
		else if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc &&
			 (strcmp(argv[i + 1], "dev") == 0 || strcmp(argv[i + 1], "io_uring") == 0))
			transport = strcmp(argv[++i], "dev") == 0 ? TRANSPORT_DEV : TRANSPORT_URING;
		else if (strcmp(argv[i], "--simulate") == 0)
			simulate_mode = 1;
		else if (strcmp(argv[i], "--cache-profile") == 0 && i + 1 < argc)
			cache_profile = argv[++i];
		else if (strcmp(argv[i], "--cache") == 0 && i + 3 < argc) {
			snprintf(cache, sizeof(cache), "%s %s %s", argv[i + 1], argv[i + 2], argv[i + 3]);
			i += 3;
		}
		else if (strcmp(argv[i], "--job") == 0 && i + 3 < argc) {
			job_rw = argv[++i];
			job_block_bytes = strtoull(argv[++i], NULL, 10);
			job_iodepth = strtoull(argv[++i], NULL, 10);
		} else if (argv[i][0] != '-' && !mountpoint)
			mountpoint = argv[i];
		else {
			usage();
			return 2;
		}
	}
	alone = simulate_mode || job_rw;
	if (!profile || (simulate_mode && job_rw) || (alone ? (backing || mountpoint) : (!backing || !mountpoint)) ||
	    (cache[0] && (!simulate_mode || !cache_profile)) || (cache_profile && job_rw)) {
		usage();
		return 2;
	}
	if (profile_load(profile, &p, err, sizeof(err)) != 0) {
		fprintf(stderr, "tierlab-emu: %s\n", err);
		return 2;
	}
	emu.profile_path = profile;
	if (cache_profile) {
		struct model_params cache_params;

		if (profile_load(cache_profile, &cache_params, err, sizeof(err)) != 0) {
			fprintf(stderr, "tierlab-emu: --cache-profile: %s\n", err);
			return 2;
		}
		model_init(&emu.cache_model, &cache_params);
		emu.cache_profile_path = cache_profile;
	}
	if (job_rw)
		return job(&p, job_rw, job_block_bytes, job_iodepth > 256 ? 0 : (unsigned)job_iodepth);
	return simulate_mode ? simulate(&p, cache[0] ? cache : NULL) : serve(backing, mountpoint, &p, transport);
}
