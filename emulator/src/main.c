/* tierlab-emu: an emulated block device for tierlab's tiers.
 *
 * Serves one file, `device`, from a FUSE file system with direct I/O. A loop
 * device on that file gives the database an ordinary block device, and every
 * request to it waits until the device model says the modelled device would
 * have completed it. Two more files: `stats` (JSON counters) and `control`
 * (calibration commands). `--simulate` runs the model alone on requests read
 * from standard input, for tests. */
#define FUSE_USE_VERSION 312
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "profile.h"

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
	uint64_t overhead_fixed_ns;   /* the host's own cost of one request ... */
	uint64_t overhead_per_kib_ns; /* ... and per KiB, measured and subtracted */
	uint64_t timer_overshoot_ns;  /* how late a timed sleep wakes, measured at start */
	struct class_stats classes[CLASS_COUNT];
	uint64_t interfered_reads;
	uint64_t late;                /* replies that could not wait: the host was slower than the model */
	uint64_t flushes;
	uint64_t discards;
	uint64_t started_ns;
};

static struct emulator emu = {.lock = PTHREAD_MUTEX_INITIALIZER, .model_enabled = 1};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t due_ns)
{
	struct timespec ts = {.tv_sec = due_ns / 1000000000u, .tv_nsec = due_ns % 1000000000u};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* The median lateness of short timed sleeps; waits end that much early. */
static uint64_t measure_timer_overshoot(void)
{
	enum { ROUNDS = 201 };
	uint64_t late[ROUNDS], key;
	int i, j;

	for (i = 0; i < ROUNDS; i++) {
		uint64_t due = mono_ns() + 20000;
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

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_nlink = 1;
	if (ino == INO_ROOT) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else if (ino == INO_DEVICE) {
		st->st_mode = S_IFREG | 0600;
		st->st_size = (off_t)emu.size;
		st->st_blocks = (blkcnt_t)(emu.size / 512);
	} else if (ino == INO_STATS) {
		st->st_mode = S_IFREG | 0444;
	} else {
		st->st_mode = S_IFREG | 0200;
	}
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = 1u << 20;
	/* loop's direct I/O is asynchronous: FUSE lets only max_background such
	 * requests reach the daemon at once, and the model's queues need depth */
	conn->max_background = 256;
	conn->congestion_threshold = 192;
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	fuse_ino_t ino;

	if (parent != INO_ROOT) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	for (ino = INO_DEVICE; ino <= INO_CONTROL; ino++)
		if (strcmp(name, file_names[ino]) == 0)
			break;
	if (ino > INO_CONTROL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.attr_timeout = 3600;
	e.entry_timeout = 3600;
	fill_attr(ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino < INO_ROOT || ino > INO_CONTROL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	char buf[1024];
	size_t used = 0;
	fuse_ino_t i;
	struct stat st;

	(void)fi;
	if (ino != INO_ROOT) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (i = INO_DEVICE + (fuse_ino_t)off; i <= INO_CONTROL; i++) {
		size_t need;

		fill_attr(i, &st);
		need = fuse_add_direntry(req, buf + used, sizeof(buf) - used, file_names[i], &st,
					 (off_t)(i - INO_DEVICE + 1));
		if (used + need > size || used + need > sizeof(buf))
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino == INO_ROOT) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	/* every request must reach the model: no page cache in front of it */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

/* Decide the request's completion; returns when to reply (0: at once), less the host's own cost. */
static uint64_t model_due(enum model_op op, off_t off, size_t size)
{
	struct model_decision d;
	uint64_t now = mono_ns(), due, overhead;

	pthread_mutex_lock(&emu.lock);
	if (!emu.model_enabled) {
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	model_submit(&emu.model, now, op, (uint64_t)off, size, &d);
	emu.classes[d.cls].count++;
	emu.classes[d.cls].bytes += size;
	emu.classes[d.cls].modelled_ns += d.done_ns - now;
	emu.interfered_reads += (uint64_t)d.interfered;
	overhead = emu.overhead_fixed_ns + emu.overhead_per_kib_ns * size / 1024 + emu.timer_overshoot_ns;
	due = d.done_ns > now + overhead ? d.done_ns - overhead : 0;
	if (due == 0 && d.done_ns > now)
		emu.late++;
	pthread_mutex_unlock(&emu.lock);
	return due;
}

/* Replies wait in a heap ordered by due time; one thread sends them when due,
 * so a worker never sleeps and requests due together cost one wake-up. */
struct pending {
	uint64_t due_ns;
	fuse_req_t req;
	const char *data; /* a read's data; NULL for a write */
	size_t size;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct pending *heap;
	size_t count, capacity;
	int stop;
} replies = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void send_reply(const struct pending *p)
{
	if (p->data)
		fuse_reply_buf(p->req, p->data, p->size);
	else
		fuse_reply_write(p->req, p->size);
}

static void heap_swap(size_t a, size_t b)
{
	struct pending t = replies.heap[a];

	replies.heap[a] = replies.heap[b];
	replies.heap[b] = t;
}

static int heap_push(const struct pending *p)
{
	size_t i;

	if (replies.count == replies.capacity) {
		size_t capacity = replies.capacity ? 2 * replies.capacity : 256;
		struct pending *grown = realloc(replies.heap, capacity * sizeof(*grown));

		if (!grown)
			return -1;
		replies.heap = grown;
		replies.capacity = capacity;
	}
	i = replies.count++;
	replies.heap[i] = *p;
	while (i > 0 && replies.heap[(i - 1) / 2].due_ns > replies.heap[i].due_ns) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	return 0;
}

static struct pending heap_pop(void)
{
	struct pending top = replies.heap[0];
	size_t i = 0;

	replies.heap[0] = replies.heap[--replies.count];
	for (;;) {
		size_t least = i, l = 2 * i + 1, r = 2 * i + 2;

		if (l < replies.count && replies.heap[l].due_ns < replies.heap[least].due_ns)
			least = l;
		if (r < replies.count && replies.heap[r].due_ns < replies.heap[least].due_ns)
			least = r;
		if (least == i)
			return top;
		heap_swap(i, least);
		i = least;
	}
}

static void reply_when_due(fuse_req_t req, uint64_t due_ns, const char *data, size_t size)
{
	struct pending p = {.due_ns = due_ns, .req = req, .data = data, .size = size};
	int queued;

	if (due_ns <= mono_ns()) {
		send_reply(&p);
		return;
	}
	pthread_mutex_lock(&replies.lock);
	queued = heap_push(&p) == 0;
	if (queued && replies.heap[0].req == req)
		pthread_cond_signal(&replies.wake);
	pthread_mutex_unlock(&replies.lock);
	if (!queued)
		send_reply(&p); /* out of memory for the heap: late rather than lost */
}

static void *completer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&replies.lock);
	while (!replies.stop || replies.count > 0) {
		struct pending p;

		if (replies.count == 0) {
			pthread_cond_wait(&replies.wake, &replies.lock);
			continue;
		}
		if (!replies.stop && replies.heap[0].due_ns > mono_ns()) {
			struct timespec ts = {.tv_sec = replies.heap[0].due_ns / 1000000000u,
					      .tv_nsec = replies.heap[0].due_ns % 1000000000u};
			pthread_cond_timedwait(&replies.wake, &replies.lock, &ts);
			continue;
		}
		p = heap_pop();
		pthread_mutex_unlock(&replies.lock);
		send_reply(&p);
		pthread_mutex_lock(&replies.lock);
	}
	pthread_mutex_unlock(&replies.lock);
	return NULL;
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
		     "{\"model\": \"%s\", \"profile\": \"%s\", \"device_bytes\": %" PRIu64
		     ", \"model_enabled\": %s, \"overhead_fixed_us\": %.3f, \"overhead_per_kib_us\": %.4f"
		     ", \"timer_overshoot_us\": %.3f, \"uptime_s\": %.3f, \"late\": %" PRIu64
		     ", \"interfered_reads\": %" PRIu64 ", \"flushes\": %" PRIu64 ", \"discards\": %" PRIu64
		     ", \"classes\": {",
		     emu.model.p.name, emu.profile_path, emu.size, emu.model_enabled ? "true" : "false",
		     emu.overhead_fixed_ns / 1000.0, emu.overhead_per_kib_ns / 1000.0,
		     emu.timer_overshoot_ns / 1000.0, (mono_ns() - emu.started_ns) / 1e9, emu.late,
		     emu.interfered_reads, emu.flushes, emu.discards);
	for (c = 0; c < CLASS_COUNT && n < (int)len; c++)
		n += snprintf(buf + n, len - (size_t)n,
			      "%s\"%s\": {\"requests\": %" PRIu64 ", \"bytes\": %" PRIu64
			      ", \"modelled_us\": %.1f}",
			      c ? ", " : "", model_class_names[c], emu.classes[c].count, emu.classes[c].bytes,
			      emu.classes[c].modelled_ns / 1000.0);
	if (n < (int)len)
		n += snprintf(buf + n, len - (size_t)n, "}}\n");
	pthread_mutex_unlock(&emu.lock);
	return n < (int)len ? n : -1;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	if (ino == INO_STATS) {
		char buf[2048];
		int n = stats_json(buf, sizeof(buf));

		if (n < 0 || off >= n)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_buf(req, buf + off, (size_t)n - (size_t)off < size ? (size_t)n - (size_t)off : size);
		return;
	}
	if (ino != INO_DEVICE) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if ((uint64_t)off >= emu.size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > emu.size - (uint64_t)off)
		size = emu.size - (uint64_t)off;
	reply_when_due(req, model_due(MODEL_READ, off, size), emu.map + off, size);
}

/* `overhead FIXED_US PER_KIB_US` sets the subtracted host cost; `model on|off`
 * switches the model (off while calibrating). */
static int control(const char *buf, size_t size)
{
	char line[128], word[16];
	double fixed_us, per_kib_us;

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
	if (sscanf(line, "model %15s", word) == 1 && (strcmp(word, "on") == 0 || strcmp(word, "off") == 0)) {
		pthread_mutex_lock(&emu.lock);
		emu.model_enabled = strcmp(word, "on") == 0;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	return EINVAL;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	int err;

	(void)fi;
	if (ino == INO_CONTROL) {
		err = control(buf, size);
		if (err)
			fuse_reply_err(req, err);
		else
			fuse_reply_write(req, size);
		return;
	}
	if (ino != INO_DEVICE) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (!in_device(off, size)) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	memcpy(emu.map + off, buf, size);
	reply_when_due(req, model_due(MODEL_WRITE, off, size), NULL, size);
}

/* The modelled devices have power-loss-protected caches: a flush costs nothing. */
static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	pthread_mutex_lock(&emu.lock);
	emu.flushes++;
	pthread_mutex_unlock(&emu.lock);
	fuse_reply_err(req, 0);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Discards (mkfs, fstrim) free the backing blocks. */
static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)fi;
	if (ino != INO_DEVICE || !(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (!in_device(off, (size_t)len)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (fallocate(emu.backing_fd, mode | FALLOC_FL_KEEP_SIZE, off, len) != 0) {
		fuse_reply_err(req, errno);
		return;
	}
	pthread_mutex_lock(&emu.lock);
	emu.discards++;
	pthread_mutex_unlock(&emu.lock);
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.fsync = op_fsync,
	.flush = op_flush,
	.fallocate = op_fallocate,
};

/* Lines `AT_US r|w OFFSET LENGTH` in; the model's decision for each out. */
static int simulate(const struct model_params *p)
{
	struct model m;
	struct model_decision d;
	char line[256], op;
	double at_us;
	uint64_t offset, length;
	int lineno = 0;

	model_init(&m, p);
	printf("at_us op offset length class interfered start_us done_us latency_us\n");
	while (fgets(line, sizeof(line), stdin)) {
		uint64_t at_ns;

		lineno++;
		if (line[0] == '\n' || line[0] == '#')
			continue;
		if (sscanf(line, "%lf %c %" SCNu64 " %" SCNu64, &at_us, &op, &offset, &length) != 4 ||
		    (op != 'r' && op != 'w') || at_us < 0 || length == 0) {
			fprintf(stderr, "tierlab-emu: stdin:%d: expected `AT_US r|w OFFSET LENGTH`, got %s", lineno,
				line);
			return 2;
		}
		at_ns = (uint64_t)(at_us * 1000.0);
		model_submit(&m, at_ns, op == 'r' ? MODEL_READ : MODEL_WRITE, offset, length, &d);
		printf("%.3f %c %" PRIu64 " %" PRIu64 " %s %d %.3f %.3f %.3f\n", at_us, op, offset, length,
		       model_class_names[d.cls], d.interfered, d.start_ns / 1000.0, d.done_ns / 1000.0,
		       (d.done_ns - at_ns) / 1000.0);
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: tierlab-emu --profile FILE --backing FILE MOUNTPOINT\n"
			"       tierlab-emu --profile FILE --simulate < requests\n");
}

static int serve(const char *backing, const char *mountpoint, const struct model_params *p)
{
	char *argv[] = {"tierlab-emu", "-o", "allow_other,fsname=tierlab-emu,subtype=tierlab", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se;
	struct fuse_loop_config *cfg;
	pthread_condattr_t cond_attr;
	pthread_t completer_thread;
	struct stat st;
	int ret = 1;

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
	pthread_condattr_init(&cond_attr);
	pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
	pthread_cond_init(&replies.wake, &cond_attr);
	prctl(PR_SET_TIMERSLACK, 1UL);
	emu.timer_overshoot_ns = measure_timer_overshoot();
	emu.started_ns = mono_ns();

	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, mountpoint) != 0)
		goto out_signals;
	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(cfg, 1);
	fuse_loop_cfg_set_max_threads(cfg, 512);
	fuse_loop_cfg_set_idle_threads(cfg, 64);
	fprintf(stderr, "tierlab-emu: serving %s (%" PRIu64 " bytes) at %s/device with model %s; timer overshoot %.1f us\n",
		backing, emu.size, mountpoint, p->name, emu.timer_overshoot_ns / 1000.0);
	if (pthread_create(&completer_thread, NULL, completer, NULL) != 0) {
		fprintf(stderr, "tierlab-emu: cannot start the reply thread\n");
		fuse_loop_cfg_destroy(cfg);
		fuse_session_unmount(se);
		goto out_signals;
	}
	ret = fuse_session_loop_mt(se, cfg);
	pthread_mutex_lock(&replies.lock);
	replies.stop = 1;
	pthread_cond_signal(&replies.wake);
	pthread_mutex_unlock(&replies.lock);
	pthread_join(completer_thread, NULL);
	fuse_loop_cfg_destroy(cfg);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	msync(emu.map, emu.size, MS_SYNC);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *profile = NULL, *backing = NULL, *mountpoint = NULL;
	int simulate_mode = 0, i;
	struct model_params p;
	char err[512];

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc)
			profile = argv[++i];
		else if (strcmp(argv[i], "--backing") == 0 && i + 1 < argc)
			backing = argv[++i];
		else if (strcmp(argv[i], "--simulate") == 0)
			simulate_mode = 1;
		else if (argv[i][0] != '-' && !mountpoint)
			mountpoint = argv[i];
		else {
			usage();
			return 2;
		}
	}
	if (!profile || (simulate_mode ? (backing || mountpoint) : (!backing || !mountpoint))) {
		usage();
		return 2;
	}
	if (profile_load(profile, &p, err, sizeof(err)) != 0) {
		fprintf(stderr, "tierlab-emu: %s\n", err);
		return 2;
	}
	emu.profile_path = profile;
	return simulate_mode ? simulate(&p) : serve(backing, mountpoint, &p);
}
