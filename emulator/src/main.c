/* tierlab-emu: an emulated block device for tierlab's tiers.
 *
 * Serves one file, `device`, from a FUSE file system with direct I/O. A loop
 * device on that file gives the database an ordinary block device, and every
 * request to it waits until the device model says the modelled device would
 * have completed it. Two more files: `stats` (JSON counters) and `control`
 * (calibration commands). `--simulate` runs the model alone on requests read
 * from standard input, for tests; `--job` runs it alone under a closed loop
 * of a fixed queue depth, as fio would drive the device, for the self-check's
 * targets. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "model.h"
#include "profile.h"
#include "session.h"

enum { INO_ROOT = 1, INO_DEVICE, INO_STATS, INO_CONTROL };

static const char *const file_names[] = {NULL, NULL, "device", "stats", "control"};

struct class_stats {
	uint64_t count;
	uint64_t bytes;
	uint64_t modelled_ns;
};

struct emulator {
	const char *profile_path;
	int backing_fd;
	char *map;
	uint64_t size;
	pthread_mutex_t lock; /* guards everything below */
	struct model model;
	int model_enabled;
	double dilation;              /* modelled time runs this many times slower than the model's */
	uint64_t epoch_ns;            /* when the model's clock started */
	uint64_t overhead_fixed_ns;   /* the host's own cost of one request ... */
	uint64_t overhead_per_kib_ns; /* ... and per KiB, measured and subtracted */
	/* what a reply still misses its modelled time by, measured at a short and a
	 * long modelled latency (a long wait lets the host's CPUs halt, and waking
	 * them costs more): interpolated by latency and added to the host's cost */
	double miss_short_at_ns, miss_short_ns, miss_long_at_ns, miss_long_ns;
	uint64_t timer_overshoot_ns;  /* how late a timed sleep wakes, measured at start: the reply thread polls that long */
	struct class_stats classes[CLASS_COUNT];
	uint64_t interfered_reads;
	uint64_t late;                /* replies that could not wait: the host was slower than the model */
	uint64_t flushes;
	uint64_t discards;
	uint64_t started_ns;
	/* a hybrid device: a cache of its pages on a faster device (cache.h), whose
	 * hits that device's model serves; set by the `cache` control command */
	const char *cache_profile_path;
	struct model cache_model;
	struct cache cache;
	int cache_on;
};

static struct emulator emu = {.lock = PTHREAD_MUTEX_INITIALIZER, .model_enabled = 1, .dilation = 1.0};

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

static void fill_attr(uint64_t ino, struct fuse_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->ino = ino;
	attr->nlink = 1;
	attr->blksize = 4096;
	if (ino == INO_ROOT) {
		attr->mode = S_IFDIR | 0755;
		attr->nlink = 2;
	} else if (ino == INO_DEVICE) {
		attr->mode = S_IFREG | 0600;
		attr->size = emu.size;
		attr->blocks = emu.size / 512;
	} else if (ino == INO_STATS) {
		attr->mode = S_IFREG | 0444;
	} else {
		attr->mode = S_IFREG | 0200;
	}
}

/* names and attributes never change while the emulator serves */
enum { VALID_S = 3600 };

static void op_lookup(const struct fuse_request *req)
{
	struct fuse_entry_out out = {.entry_valid = VALID_S, .attr_valid = VALID_S};
	uint64_t ino;

	if (req->nodeid != INO_ROOT || req->payload_size == 0 || ((const char *)req->payload)[req->payload_size - 1]) {
		session_reply(&req->to, ENOENT, NULL, 0);
		return;
	}
	for (ino = INO_DEVICE; ino <= INO_CONTROL; ino++)
		if (strcmp(req->payload, file_names[ino]) == 0)
			break;
	if (ino > INO_CONTROL) {
		session_reply(&req->to, ENOENT, NULL, 0);
		return;
	}
	out.nodeid = ino;
	fill_attr(ino, &out.attr);
	session_reply(&req->to, 0, &out, sizeof(out));
}

static void op_getattr(const struct fuse_request *req)
{
	struct fuse_attr_out out = {.attr_valid = VALID_S};

	if (req->nodeid < INO_ROOT || req->nodeid > INO_CONTROL) {
		session_reply(&req->to, ENOENT, NULL, 0);
		return;
	}
	fill_attr(req->nodeid, &out.attr);
	session_reply(&req->to, 0, &out, sizeof(out));
}

static void op_readdir(const struct fuse_request *req)
{
	const struct fuse_read_in *in = req->arg;
	char buf[1024];
	size_t used = 0;
	uint64_t i;

	if (req->nodeid != INO_ROOT) {
		session_reply(&req->to, ENOTDIR, NULL, 0);
		return;
	}
	for (i = INO_DEVICE + in->offset; i <= INO_CONTROL; i++) {
		size_t namelen = strlen(file_names[i]), need = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + namelen);
		struct fuse_dirent *d = (struct fuse_dirent *)(buf + used);

		if (used + need > in->size || used + need > sizeof(buf))
			break;
		memset(d, 0, need);
		d->ino = i;
		d->off = i - INO_DEVICE + 1;
		d->namelen = (uint32_t)namelen;
		d->type = S_IFREG >> 12;
		memcpy(d->name, file_names[i], namelen);
		used += need;
	}
	session_reply(&req->to, 0, buf, used);
}

static void op_open(const struct fuse_request *req)
{
	/* every request must reach the model: no page cache in front of it */
	struct fuse_open_out out = {.open_flags = FOPEN_DIRECT_IO};

	if (req->nodeid == INO_ROOT) {
		session_reply(&req->to, EISDIR, NULL, 0);
		return;
	}
	session_reply(&req->to, 0, &out, sizeof(out));
}

/* The host's own cost of a request of this modelled latency and size. */
static uint64_t host_cost_ns(uint64_t latency_ns, size_t size)
{
	double share = 0, miss, cost;

	if (emu.miss_long_at_ns > emu.miss_short_at_ns)
		share = ((double)latency_ns - emu.miss_short_at_ns) / (emu.miss_long_at_ns - emu.miss_short_at_ns);
	share = share < 0 ? 0 : share > 1 ? 1 : share;
	miss = emu.miss_short_ns + share * (emu.miss_long_ns - emu.miss_short_ns);
	cost = (double)emu.overhead_fixed_ns + (double)(emu.overhead_per_kib_ns * size / 1024) + miss;
	return cost > 0 ? (uint64_t)cost : 0;
}

/* One request to the model that serves it: with a cache on, a read it holds
 * whole goes to the cache's device (counted as a hit, not in the classes),
 * everything else to the device's own model; then the cache takes the access. */
static void submit(uint64_t model_now, enum model_op op, uint64_t off, uint64_t size, struct model_decision *d)
{
	int hit = emu.cache_on && op == MODEL_READ && cache_holds(&emu.cache, off, size);

	if (hit) {
		model_submit(&emu.cache_model, model_now, op, off, size, d);
		emu.cache.read_hits++;
	} else {
		model_submit(&emu.model, model_now, op, off, size, d);
		emu.classes[d->cls].count++;
		emu.classes[d->cls].bytes += size;
		emu.classes[d->cls].modelled_ns += d->done_ns - model_now;
		emu.interfered_reads += (uint64_t)d->interfered;
		emu.cache.read_misses += emu.cache_on && op == MODEL_READ;
	}
	if (emu.cache_on)
		cache_access(&emu.cache, off, size, op == MODEL_WRITE, !hit && d->cls == CLASS_READ_SEQUENTIAL);
}

/* Decide the request's completion; returns when to reply (0: at once), less the host's own cost.
 * The model runs on its own clock, the host's divided by the dilation, so that
 * every latency, queue and buffer of the model stretches alike and each ratio
 * between them holds. */
static uint64_t model_due(enum model_op op, off_t off, size_t size)
{
	struct model_decision d;
	uint64_t now = mono_ns(), model_now, done, due, overhead;

	pthread_mutex_lock(&emu.lock);
	if (!emu.model_enabled) {
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	model_now = (uint64_t)((double)(now - emu.epoch_ns) / emu.dilation);
	submit(model_now, op, (uint64_t)off, size, &d);
	done = emu.epoch_ns + (uint64_t)((double)d.done_ns * emu.dilation);
	overhead = host_cost_ns(done - now, size);
	due = done > now + overhead ? done - overhead : 0;
	if (due == 0 && done > now)
		emu.late++;
	pthread_mutex_unlock(&emu.lock);
	return due;
}

static int in_device(off_t off, size_t size)
{
	return off >= 0 && (uint64_t)off <= emu.size && size <= emu.size - (uint64_t)off;
}

static int stats_json(char *buf, size_t len)
{
	int n, c;

	pthread_mutex_lock(&emu.lock);
	n = snprintf(buf, len,
		     "{\"model\": \"%s\", \"profile\": \"%s\", \"transport\": \"%s\", \"device_bytes\": %" PRIu64
		     ", \"model_enabled\": %s, \"dilation\": %.3f, \"overhead_fixed_us\": %.3f, \"overhead_per_kib_us\": %.4f"
		     ", \"miss_us\": [[%.1f, %.3f], [%.1f, %.3f]]"
		     ", \"timer_overshoot_us\": %.3f, \"uptime_s\": %.3f, \"late\": %" PRIu64
		     ", \"interfered_reads\": %" PRIu64 ", \"flushes\": %" PRIu64 ", \"discards\": %" PRIu64
		     ", \"classes\": {",
		     emu.model.p.name, emu.profile_path, session_transport_names[session_transport()], emu.size, emu.model_enabled ? "true" : "false", emu.dilation,
		     emu.overhead_fixed_ns / 1000.0, emu.overhead_per_kib_ns / 1000.0,
		     emu.miss_short_at_ns / 1000.0, emu.miss_short_ns / 1000.0, emu.miss_long_at_ns / 1000.0,
		     emu.miss_long_ns / 1000.0,
		     emu.timer_overshoot_ns / 1000.0, (mono_ns() - emu.started_ns) / 1e9, emu.late,
		     emu.interfered_reads, emu.flushes, emu.discards);
	for (c = 0; c < CLASS_COUNT && n < (int)len; c++)
		n += snprintf(buf + n, len - (size_t)n,
			      "%s\"%s\": {\"requests\": %" PRIu64 ", \"bytes\": %" PRIu64
			      ", \"modelled_us\": %.1f}",
			      c ? ", " : "", model_class_names[c], emu.classes[c].count, emu.classes[c].bytes,
			      emu.classes[c].modelled_ns / 1000.0);
	if (n < (int)len && emu.cache_on)
		n += snprintf(buf + n, len - (size_t)n,
			      "}, \"cache\": {\"model\": \"%s\", \"policy\": \"%s\", \"capacity_bytes\": %" PRIu64
			      ", \"page_bytes\": %" PRIu64 ", \"cached_bytes\": %" PRIu64 ", \"read_hits\": %" PRIu64
			      ", \"read_misses\": %" PRIu64 ", \"admitted\": %" PRIu64 ", \"evicted\": %" PRIu64 "}}\n",
			      emu.cache_model.p.name, emu.cache.policy, emu.cache.capacity_pages * emu.cache.page_bytes,
			      emu.cache.page_bytes, emu.cache.used * emu.cache.page_bytes, emu.cache.read_hits,
			      emu.cache.read_misses, emu.cache.admitted, emu.cache.evicted);
	else if (n < (int)len)
		n += snprintf(buf + n, len - (size_t)n, "}, \"cache\": null}\n");
	pthread_mutex_unlock(&emu.lock);
	return n < (int)len ? n : -1;
}

static void op_read(const struct fuse_request *req)
{
	const struct fuse_read_in *in = req->arg;
	uint64_t off = in->offset, size = in->size;

	if (req->nodeid == INO_STATS) {
		char buf[4096];
		int n = stats_json(buf, sizeof(buf));

		if (n < 0 || off >= (uint64_t)n)
			session_reply(&req->to, 0, NULL, 0);
		else
			session_reply(&req->to, 0, buf + off, (uint64_t)n - off < size ? (uint64_t)n - off : size);
		return;
	}
	if (req->nodeid != INO_DEVICE) {
		session_reply(&req->to, EBADF, NULL, 0);
		return;
	}
	if (off >= emu.size) {
		session_reply(&req->to, 0, NULL, 0);
		return;
	}
	if (size > emu.size - off)
		size = emu.size - off;
	session_reply_at(&req->to, model_due(MODEL_READ, (off_t)off, size), 0, emu.map + off, size);
}

/* A cache of this device, empty, as `CAPACITY_BYTES PAGE_BYTES POLICY` says;
 * 0, or -1 with what was wrong in err. */
static int cache_from(const char *spec, struct cache *c, char *err, size_t err_len)
{
	unsigned long long capacity_bytes, page_bytes;
	char policy[16];

	if (sscanf(spec, "%llu %llu %15s", &capacity_bytes, &page_bytes, policy) != 3) {
		snprintf(err, err_len, "expected CAPACITY_BYTES PAGE_BYTES lru|admitting");
		return -1;
	}
	return cache_init(c, emu.size, capacity_bytes, page_bytes, policy, err, err_len);
}

/* `overhead FIXED_US PER_KIB_US` sets the subtracted host cost; `miss SHORT_AT_US
 * SHORT_US LONG_AT_US LONG_US` what replies still miss by at two modelled
 * latencies (added to that cost); `model on|off` switches the model (off
 * while calibrating); `dilation K` stretches modelled
 * time K times (1 <= K <= 1000) and starts the model afresh on its new clock;
 * `cache CAPACITY_BYTES PAGE_BYTES lru|admitting` puts an empty cache of the
 * --cache-profile device in front of this one, `cache reset` empties it (its
 * counters stay) and `cache off` removes it. */
static int control(const char *buf, size_t size)
{
	char line[128], word[16], err[256];
	struct cache fresh;
	double fixed_us, per_kib_us, dilation, short_at_us, short_us, long_at_us, long_us;
	struct model_params params;

	if (size >= sizeof(line))
		return EINVAL;
	memcpy(line, buf, size);
	line[size] = '\0';
	if (sscanf(line, "overhead %lf %lf", &fixed_us, &per_kib_us) == 2 && fixed_us >= 0 && per_kib_us >= 0) {
		pthread_mutex_lock(&emu.lock);
		emu.overhead_fixed_ns = (uint64_t)(fixed_us * 1000.0);
		emu.overhead_per_kib_ns = (uint64_t)(per_kib_us * 1000.0);
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "miss %lf %lf %lf %lf", &short_at_us, &short_us, &long_at_us, &long_us) == 4 &&
	    short_at_us >= 0 && long_at_us >= short_at_us) {
		pthread_mutex_lock(&emu.lock);
		emu.miss_short_at_ns = short_at_us * 1000.0;
		emu.miss_short_ns = short_us * 1000.0;
		emu.miss_long_at_ns = long_at_us * 1000.0;
		emu.miss_long_ns = long_us * 1000.0;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "model %15s", word) == 1 && (strcmp(word, "on") == 0 || strcmp(word, "off") == 0)) {
		pthread_mutex_lock(&emu.lock);
		emu.model_enabled = strcmp(word, "on") == 0;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "dilation %lf", &dilation) == 1 && dilation >= 1.0 && dilation <= 1000.0) {
		pthread_mutex_lock(&emu.lock);
		emu.dilation = dilation;
		emu.epoch_ns = mono_ns();
		params = emu.model.p;
		model_init(&emu.model, &params);
		params = emu.cache_model.p;
		model_init(&emu.cache_model, &params);
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "cache %15s", word) == 1 && (strcmp(word, "reset") == 0 || strcmp(word, "off") == 0)) {
		pthread_mutex_lock(&emu.lock);
		if (emu.cache_on && strcmp(word, "reset") == 0)
			cache_reset(&emu.cache);
		else if (emu.cache_on)
			cache_free(&emu.cache);
		emu.cache_on = emu.cache_on && strcmp(word, "reset") == 0;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (strncmp(line, "cache ", 6) == 0) {
		/* the writer sees only EINVAL: the reason goes to the emulator's log */
		if (!emu.cache_profile_path) {
			fprintf(stderr, "tierlab-emu: `cache` needs --cache-profile (the faster device's profile)\n");
			return EINVAL;
		}
		if (cache_from(line + 6, &fresh, err, sizeof(err)) != 0) {
			fprintf(stderr, "tierlab-emu: cache: %s\n", err);
			return EINVAL;
		}
		pthread_mutex_lock(&emu.lock);
		if (emu.cache_on)
			cache_free(&emu.cache);
		emu.cache = fresh;
		emu.cache_on = 1;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	return EINVAL;
}

static void op_write(const struct fuse_request *req)
{
	const struct fuse_write_in *in = req->arg;
	struct fuse_write_out out = {.size = in->size};
	int err;

	if (req->payload_size < in->size) {
		session_reply(&req->to, EINVAL, NULL, 0);
		return;
	}
	if (req->nodeid == INO_CONTROL) {
		err = control(req->payload, in->size);
		session_reply(&req->to, err, &out, sizeof(out));
		return;
	}
	if (req->nodeid != INO_DEVICE) {
		session_reply(&req->to, EBADF, NULL, 0);
		return;
	}
	if (!in_device((off_t)in->offset, in->size)) {
		session_reply(&req->to, ENOSPC, NULL, 0);
		return;
	}
	memcpy(emu.map + in->offset, req->payload, in->size);
	session_reply_at(&req->to, model_due(MODEL_WRITE, (off_t)in->offset, in->size), 0, &out, sizeof(out));
}
/* The modelled devices have power-loss-protected caches: a flush costs nothing. */
static void op_fsync(const struct fuse_request *req)
{
	pthread_mutex_lock(&emu.lock);
	emu.flushes++;
	pthread_mutex_unlock(&emu.lock);
	session_reply(&req->to, 0, NULL, 0);
}

/* Discards (mkfs, fstrim) free the backing blocks. */
static void op_fallocate(const struct fuse_request *req)
{
	const struct fuse_fallocate_in *in = req->arg;

	if (req->nodeid != INO_DEVICE || !(in->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		session_reply(&req->to, EOPNOTSUPP, NULL, 0);
		return;
	}
	if (!in_device((off_t)in->offset, in->length)) {
		session_reply(&req->to, EINVAL, NULL, 0);
		return;
	}
	if (fallocate(emu.backing_fd, (int)in->mode | FALLOC_FL_KEEP_SIZE, (off_t)in->offset, (off_t)in->length) != 0) {
		session_reply(&req->to, errno, NULL, 0);
		return;
	}
	pthread_mutex_lock(&emu.lock);
	emu.discards++;
	pthread_mutex_unlock(&emu.lock);
	session_reply(&req->to, 0, NULL, 0);
}

static void op_statfs(const struct fuse_request *req)
{
	struct fuse_statfs_out out = {.st = {.blocks = emu.size / 4096, .bsize = 4096, .frsize = 4096, .namelen = 255}};

	session_reply(&req->to, 0, &out, sizeof(out));
}

static void handle(const struct fuse_request *req)
{
	struct fuse_open_out opened = {0};

	switch (req->opcode) {
	case FUSE_LOOKUP:
		op_lookup(req);
		return;
	case FUSE_GETATTR:
		op_getattr(req);
		return;
	case FUSE_OPEN:
		op_open(req);
		return;
	case FUSE_OPENDIR:
		session_reply(&req->to, 0, &opened, sizeof(opened));
		return;
	case FUSE_READDIR:
		op_readdir(req);
		return;
	case FUSE_READ:
		op_read(req);
		return;
	case FUSE_WRITE:
		op_write(req);
		return;
	case FUSE_FSYNC:
		op_fsync(req);
		return;
	case FUSE_FALLOCATE:
		op_fallocate(req);
		return;
	case FUSE_STATFS:
		op_statfs(req);
		return;
	case FUSE_FLUSH:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FSYNCDIR:
		session_reply(&req->to, 0, NULL, 0);
		return;
	default:
		session_reply(&req->to, ENOSYS, NULL, 0);
	}
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
	ret = session_serve(mountpoint, transport, emu.timer_overshoot_ns + 5000, handle);
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
