/* tierlab-emu's FUSE session (session.h). */
#define _GNU_SOURCE

#include "session_i.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* FUSE_OVER_IO_URING in INIT's flags2 (Linux 6.14), which Debian 12's kernel headers predate */
#define OVER_IO_URING_FLAGS2 (1u << (41 - 32))

/* The protocol version this session speaks: 7.42 offers io_uring. */
enum { MINOR = 42 };

const char *const session_transport_names[] = {"dev", "io_uring"};

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void heap_swap(struct reply_heap *h, size_t a, size_t b)
{
	struct pending t = h->items[a];

	h->items[a] = h->items[b];
	h->items[b] = t;
}

int heap_push(struct reply_heap *h, const struct pending *p)
{
	size_t i;

	if (h->count == h->capacity) {
		size_t capacity = h->capacity ? 2 * h->capacity : 256;
		struct pending *grown = realloc(h->items, capacity * sizeof(*grown));

		if (!grown)
			return -1;
		h->items = grown;
		h->capacity = capacity;
	}
	i = h->count++;
	h->items[i] = *p;
	while (i > 0 && h->items[(i - 1) / 2].due_ns > h->items[i].due_ns) {
		heap_swap(h, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	return 0;
}

struct pending heap_pop(struct reply_heap *h)
{
	struct pending top = h->items[0];
	size_t i = 0;

	h->items[0] = h->items[--h->count];
	for (;;) {
		size_t least = i, l = 2 * i + 1, r = 2 * i + 2;

		if (l < h->count && h->items[l].due_ns < h->items[least].due_ns)
			least = l;
		if (r < h->count && h->items[r].due_ns < h->items[least].due_ns)
			least = r;
		if (least == i)
			return top;
		heap_swap(h, i, least);
		i = least;
	}
}


struct session_state se = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

enum session_transport session_transport(void)
{
	return (enum session_transport)atomic_load(&se.transport);
}

void stop_from_inside(void)
{
	atomic_store(&se.stopping, 1);
	pthread_kill(se.main_thread, SIGTERM);
}

static void dev_send(uint64_t unique, int error, const void *data, size_t size)
{
	struct fuse_out_header out = {.len = (uint32_t)(sizeof(out) + (error ? 0 : size)), .error = -error,
				      .unique = unique};
	struct iovec iov[2] = {{.iov_base = &out, .iov_len = sizeof(out)}, {.iov_base = (void *)data, .iov_len = size}};

	/* ENOENT: the request was interrupted and is gone; nothing waits for this reply */
	if (writev(se.fd, iov, error || size == 0 ? 1 : 2) < 0 && errno != ENOENT && !atomic_load(&se.stopping))
		fprintf(stderr, "tierlab-emu: a reply to /dev/fuse failed: %s\n", strerror(errno));
}

void session_reply(const struct reply_to *to, int error, const void *data, size_t size)
{
	if (to->entry)
		ring_commit(to->entry, to->unique, error, data, size);
	else
		dev_send(to->unique, error, data, size);
}

void session_reply_at(const struct reply_to *to, uint64_t due_ns, int error, const void *data, size_t size)
{
	struct pending p = {.due_ns = due_ns, .to = *to, .error = error, .data = data, .size = size};
	int queued;

	if (due_ns <= mono_ns()) {
		session_reply(to, error, data, size);
		return;
	}
	if (data && size <= sizeof(p.copy)) {
		memcpy(p.copy, data, size);
		p.data = NULL;
	}
	if (to->entry) {
		/* the handler runs on the entry's queue thread, which sends it */
		if (ring_defer(&p) != 0)
			session_reply(to, error, data, size); /* out of memory for the heap: late rather than lost */
		return;
	}
	pthread_mutex_lock(&se.lock);
	queued = heap_push(&se.heap, &p) == 0;
	if (queued && se.heap.items[0].to.unique == to->unique)
		pthread_cond_signal(&se.wake);
	pthread_mutex_unlock(&se.lock);
	if (!queued)
		session_reply(to, error, data, size);
}

/* Sleeps until shortly before the next reply to /dev/fuse is due, then polls
 * (yielding the CPU to anything runnable) so that it leaves on time even when
 * the sleep let the CPU halt. */
static void *completer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&se.lock);
	while (!atomic_load(&se.stopping) || se.heap.count > 0) {
		struct pending p;
		uint64_t due, now;

		if (se.heap.count == 0) {
			pthread_cond_wait(&se.wake, &se.lock);
			continue;
		}
		due = se.heap.items[0].due_ns;
		now = mono_ns();
		if (!atomic_load(&se.stopping) && due > now + se.poll_ns) {
			struct timespec ts = {.tv_sec = (due - se.poll_ns) / 1000000000u,
					      .tv_nsec = (due - se.poll_ns) % 1000000000u};
			pthread_cond_timedwait(&se.wake, &se.lock, &ts);
			continue;
		}
		if (!atomic_load(&se.stopping) && due > now) {
			pthread_mutex_unlock(&se.lock);
			sched_yield();
			pthread_mutex_lock(&se.lock);
			continue;
		}
		p = heap_pop(&se.heap);
		pthread_mutex_unlock(&se.lock);
		dev_send(p.to.unique, p.error, p.data ? p.data : p.copy, p.size);
		pthread_mutex_lock(&se.lock);
	}
	pthread_mutex_unlock(&se.lock);
	return NULL;
}

/* The size of each opcode's own header in a request read from /dev/fuse
 * (io_uring hands it apart); what follows it is the payload. */
static size_t arg_size(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_GETATTR:
		return sizeof(struct fuse_getattr_in);
	case FUSE_OPEN:
	case FUSE_OPENDIR:
		return sizeof(struct fuse_open_in);
	case FUSE_READ:
	case FUSE_READDIR:
		return sizeof(struct fuse_read_in);
	case FUSE_WRITE:
		return sizeof(struct fuse_write_in);
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
		return sizeof(struct fuse_release_in);
	case FUSE_FLUSH:
		return sizeof(struct fuse_flush_in);
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
		return sizeof(struct fuse_fsync_in);
	case FUSE_FALLOCATE:
		return sizeof(struct fuse_fallocate_in);
	default:
		return 0;
	}
}

void dispatch(const struct fuse_request *req)
{
	switch (req->opcode) {
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT: /* every request is answered in microseconds: none is interrupted */
		return;
	case FUSE_INIT:
		session_reply(&req->to, EPROTO, NULL, 0);
		return;
	default:
		se.handle(req);
	}
}

static void *dev_reader(void *arg)
{
	char *buf = arg;

	while (!atomic_load(&se.stopping)) {
		ssize_t n = read(se.fd, buf, DEV_BUFFER_BYTES);
		const struct fuse_in_header *in = (const struct fuse_in_header *)buf;
		struct fuse_request req;
		size_t own;

		if (n < 0) {
			/* ENOENT: a request interrupted before it was read; EINTR: asked to stop */
			if (errno == ENOENT || errno == EINTR || errno == EAGAIN)
				continue;
			if (errno != ENODEV && !atomic_load(&se.stopping))
				fprintf(stderr, "tierlab-emu: reading /dev/fuse failed: %s\n", strerror(errno));
			stop_from_inside();
			break;
		}
		if ((size_t)n < sizeof(*in) || in->len != (uint32_t)n)
			continue;
		own = arg_size(in->opcode);
		if ((size_t)n < sizeof(*in) + own) {
			dev_send(in->unique, EINVAL, NULL, 0);
			continue;
		}
		req = (struct fuse_request){.opcode = in->opcode, .nodeid = in->nodeid, .arg = buf + sizeof(*in),
					    .payload = buf + sizeof(*in) + own,
					    .payload_size = (size_t)n - sizeof(*in) - own,
					    .to = {.unique = in->unique, .entry = NULL}};
		dispatch(&req);
	}
	free(buf);
	return NULL;
}

/* Reads the kernel's INIT and answers it; whether io_uring was agreed on, or -1. */
static int init(enum session_transport want)
{
	char *buf = malloc(DEV_BUFFER_BYTES);
	const struct fuse_in_header *in = (const struct fuse_in_header *)buf;
	const struct fuse_init_in *arg = (const struct fuse_init_in *)(buf + sizeof(*in));
	struct fuse_init_out out = {.major = FUSE_KERNEL_VERSION, .max_background = 256, .congestion_threshold = 192,
				    .max_write = MAX_WRITE, .time_gran = 1, .max_pages = MAX_PAGES};
	ssize_t n;
	int uring;

	if (!buf)
		return -1;
	do
		n = read(se.fd, buf, DEV_BUFFER_BYTES);
	while (n < 0 && (errno == EINTR || errno == ENOENT));
	if (n < (ssize_t)(sizeof(*in) + sizeof(*arg)) || in->opcode != FUSE_INIT || arg->major != FUSE_KERNEL_VERSION ||
	    arg->minor < 31) {
		fprintf(stderr, "tierlab-emu: the kernel's FUSE did not start with INIT of protocol 7.31 or later\n");
		free(buf);
		return -1;
	}
	out.minor = arg->minor < MINOR ? arg->minor : MINOR;
	out.max_readahead = arg->max_readahead;
	/* loop's direct I/O is asynchronous: FUSE lets only max_background such
	 * requests reach the daemon at once, and the model's queues need depth;
	 * an open with O_TRUNC (a shell's `>` to the control file) truncates nothing here */
	out.flags = arg->flags & (FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO | FUSE_MAX_PAGES | FUSE_ATOMIC_O_TRUNC);
	uring = want == TRANSPORT_URING && (arg->flags & FUSE_INIT_EXT) && (arg->flags2 & OVER_IO_URING_FLAGS2);
	if (uring) {
		out.flags |= FUSE_INIT_EXT;
		out.flags2 = OVER_IO_URING_FLAGS2;
	} else if (want == TRANSPORT_URING) {
		fprintf(stderr, "tierlab-emu: the kernel does not offer FUSE over io_uring (fuse's enable_uring is off "
				"or the kernel predates it): serving through /dev/fuse\n");
	}
	dev_send(in->unique, 0, &out, sizeof(out));
	free(buf);
	return uring;
}

static void on_wake(int sig)
{
	(void)sig;
}

int session_serve(const char *mountpoint, enum session_transport want, uint64_t poll_ns, request_handler handle)
{
	char options[128];
	pthread_condattr_t cond_attr;
	pthread_t completer_thread, *readers;
	struct sigaction wake = {.sa_handler = on_wake};
	sigset_t stop_signals;
	unsigned i, reader_count = (unsigned)get_nprocs();
	int uring, sig, ret = 1;

	se.handle = handle;
	se.poll_ns = poll_ns;
	se.main_thread = pthread_self();
	/* the stop signals are taken by the main thread's sigwait alone; SIGUSR1 only ends a thread's wait */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	sigaction(SIGUSR1, &wake, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_condattr_init(&cond_attr);
	pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
	pthread_cond_init(&se.wake, &cond_attr);

	se.fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (se.fd < 0) {
		fprintf(stderr, "tierlab-emu: cannot open /dev/fuse: %s\n", strerror(errno));
		return 1;
	}
	snprintf(options, sizeof(options), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", se.fd);
	if (mount("tierlab-emu", mountpoint, "fuse.tierlab", MS_NOSUID | MS_NODEV, options) != 0) {
		fprintf(stderr, "tierlab-emu: cannot mount %s: %s\n", mountpoint, strerror(errno));
		close(se.fd);
		return 1;
	}
	uring = init(want);
	if (uring < 0)
		goto out_unmount;
	atomic_store(&se.transport, uring ? TRANSPORT_URING : TRANSPORT_DEV);
	readers = calloc(reader_count, sizeof(*readers));
	if (!readers || pthread_create(&completer_thread, NULL, completer, NULL) != 0) {
		fprintf(stderr, "tierlab-emu: cannot start the reply thread\n");
		goto out_unmount;
	}
	/* /dev/fuse is read in every transport: io_uring leaves forgets and interrupts to it */
	for (i = 0; i < reader_count; i++) {
		char *buf = malloc(DEV_BUFFER_BYTES);

		if (!buf || pthread_create(&readers[i], NULL, dev_reader, buf) != 0) {
			fprintf(stderr, "tierlab-emu: cannot start a reader of /dev/fuse\n");
			free(buf);
			stop_from_inside();
			break;
		}
	}
	if (uring && ring_start() != 0)
		stop_from_inside();
	fprintf(stderr, "tierlab-emu: serving through %s\n", session_transport_names[session_transport()]);
	do
		sig = 0;
	while (sigwait(&stop_signals, &sig) != 0 || !sig);
	atomic_store(&se.stopping, 1);
	if (uring)
		ring_stop();
	pthread_mutex_lock(&se.lock);
	pthread_cond_signal(&se.wake);
	pthread_mutex_unlock(&se.lock);
	pthread_join(completer_thread, NULL);
	/* the readers end with the process: one waiting in /dev/fuse holds nothing of ours */
	free(readers);
	ret = 0;
out_unmount:
	if (umount2(mountpoint, MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
		fprintf(stderr, "tierlab-emu: cannot unmount %s: %s\n", mountpoint, strerror(errno));
	close(se.fd);
	return ret;
}
