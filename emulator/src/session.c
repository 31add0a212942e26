/* tierlab-emu's FUSE session (session.h). */
#define _GNU_SOURCE

#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* FUSE over io_uring's part of the kernel's ABI (7.42, Linux 6.14), which
 * Debian 12's kernel headers predate; named apart from the kernel's own names
 * so that newer headers do not clash. */
#define OVER_IO_URING_FLAGS2 (1u << (41 - 32)) /* FUSE_OVER_IO_URING, in init's flags2 */
#define URING_IN_OUT_HEADER_BYTES 128
#define URING_OP_IN_OUT_BYTES 128
enum { URING_CMD_REGISTER = 1, URING_CMD_COMMIT_AND_FETCH = 2 };

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;   /* the request's unique, set by the kernel */
	uint32_t payload_sz;  /* the payload's bytes in use, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[URING_IN_OUT_HEADER_BYTES]; /* struct fuse_in_header in, struct fuse_out_header out */
	char op_in[URING_OP_IN_OUT_BYTES];      /* the opcode's own header */
	struct uring_ent_in_out ring_ent_in_out;
};

struct uring_cmd_req { /* in the SQE's 80-byte command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

/* The protocol version this session speaks: 7.42 offers io_uring. */
enum { MINOR = 42 };

/* A request's payload holds a whole write; the kernel splits larger ones. */
enum { MAX_WRITE = 1 << 20, MAX_PAGES = MAX_WRITE / 4096 };
/* a read of /dev/fuse must have room for a whole write and its headers */
enum { DEV_BUFFER_BYTES = MAX_WRITE + 4096 };
/* each io_uring queue's requests in flight at once; the loop device's queue is 128 deep */
enum { QUEUE_DEPTH = 128 };

const char *const session_transport_names[] = {"dev", "io_uring"};

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Replies that wait for their time, ordered by it. */
struct pending {
	uint64_t due_ns;
	struct reply_to to;
	int error;
	const void *data;
	size_t size;
	char copy[SESSION_COPIED_BYTES];
};

struct reply_heap {
	struct pending *items;
	size_t count, capacity;
};

static void heap_swap(struct reply_heap *h, size_t a, size_t b)
{
	struct pending t = h->items[a];

	h->items[a] = h->items[b];
	h->items[b] = t;
}

static int heap_push(struct reply_heap *h, const struct pending *p)
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

static struct pending heap_pop(struct reply_heap *h)
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

struct ring_queue;

struct ring_entry {
	struct ring_queue *queue;
	struct uring_req_header *header;
	char *payload;
	struct iovec iov[2];
};

/* One io_uring queue: the kernel hands it the requests issued on its CPU. Only its own thread touches it. */
struct ring_queue {
	unsigned qid;
	struct io_uring ring;
	struct ring_entry entries[QUEUE_DEPTH];
	char *payloads;
	struct uring_req_header *headers;
	struct reply_heap heap;
	int ring_up;
	pthread_t thread;
};

static struct {
	int fd;
	request_handler handle;
	uint64_t poll_ns;
	atomic_int transport;
	atomic_int stopping;
	pthread_t main_thread;
	/* replies to requests read from /dev/fuse that wait for their time: one thread sends them */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct reply_heap heap;
	struct ring_queue *queues;
	unsigned queue_count;
} se = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

enum session_transport session_transport(void)
{
	return (enum session_transport)atomic_load(&se.transport);
}

/* Wakes the main thread to stop the session (the file system went away under a serving thread). */
static void stop_from_inside(void)
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

/* A cleared SQE of the queue's ring: 128 bytes, the command's 80 in the second half. */
static struct io_uring_sqe *ring_sqe(struct ring_queue *q)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&q->ring)))
		io_uring_submit(&q->ring);
	memset((char *)sqe, 0, 2 * sizeof(*sqe));
	return sqe;
}

/* The reply goes into the entry's buffers and back with a fetch of the next
 * request; it leaves with the queue's next submission. */
static void ring_commit(struct ring_entry *entry, uint64_t unique, int error, const void *data, size_t size)
{
	struct ring_queue *q = entry->queue;
	struct fuse_out_header out = {.len = (uint32_t)(sizeof(out) + (error ? 0 : size)), .error = -error,
				      .unique = unique};
	struct uring_cmd_req cmd = {.commit_id = unique, .qid = (uint16_t)q->qid};
	struct io_uring_sqe *sqe;

	memcpy(entry->header->in_out, &out, sizeof(out));
	if (!error && size)
		memcpy(entry->payload, data, size);
	entry->header->ring_ent_in_out.payload_sz = error ? 0 : (uint32_t)size;
	sqe = ring_sqe(q);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = se.fd;
	sqe->cmd_op = URING_CMD_COMMIT_AND_FETCH;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	io_uring_sqe_set_data(sqe, entry);
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
		if (heap_push(&to->entry->queue->heap, &p) != 0)
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

/* The requests the session answers itself; the rest go to the handler. */
static void dispatch(const struct fuse_request *req)
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

/* Hands the kernel an entry to fill with a request: its header and payload buffers. */
static void ring_register(struct ring_entry *entry)
{
	struct ring_queue *q = entry->queue;
	struct uring_cmd_req cmd = {.qid = (uint16_t)q->qid};
	struct io_uring_sqe *sqe = ring_sqe(q);

	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = se.fd;
	sqe->addr = (uint64_t)(uintptr_t)entry->iov;
	sqe->len = 2;
	sqe->cmd_op = URING_CMD_REGISTER;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	io_uring_sqe_set_data(sqe, entry);
}

static void ring_serve(struct ring_entry *entry)
{
	const struct fuse_in_header *in = (const struct fuse_in_header *)entry->header->in_out;
	struct fuse_request req = {.opcode = in->opcode, .nodeid = in->nodeid, .arg = entry->header->op_in,
				   .payload = entry->payload,
				   .payload_size = entry->header->ring_ent_in_out.payload_sz,
				   .to = {.unique = in->unique, .entry = entry}};

	dispatch(&req);
}

/* Takes what the kernel completed: a request in an entry, or an entry it gave back (an error). */
static int ring_take(struct ring_queue *q)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int refused = 0;

	io_uring_for_each_cqe(&q->ring, head, cqe) {
		struct ring_entry *entry = io_uring_cqe_get_data(cqe);

		seen++;
		if (cqe->res == 0) {
			ring_serve(entry);
			continue;
		}
		if (!atomic_load(&se.stopping) && cqe->res != -ENOTCONN && cqe->res != -ECANCELED)
			refused = cqe->res;
	}
	io_uring_cq_advance(&q->ring, seen);
	return refused;
}

/* Sends the replies whose time has come (all of them when stopping). */
static void ring_send_due(struct ring_queue *q)
{
	uint64_t now = mono_ns();

	while (q->heap.count > 0 && (q->heap.items[0].due_ns <= now || atomic_load(&se.stopping))) {
		struct pending p = heap_pop(&q->heap);

		ring_commit(p.to.entry, p.to.unique, p.error, p.data ? p.data : p.copy, p.size);
	}
}

/* One queue's thread (not pinned to the queue's CPU: where the loop device's
 * worker issues a deep queue from one CPU, the thread then serves it from the
 * other; pinned, the two shared one CPU and carried a third fewer requests at
 * queue depth 32): registers the entries, then takes
 * requests, serves them and sends their replies when due, sleeping in the
 * ring until the next request or shortly before the next reply is due. */
static void *queue_main(void *arg)
{
	struct ring_queue *q = arg;
	struct io_uring_params params = {.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
						   IORING_SETUP_DEFER_TASKRUN};
	unsigned i;
	int refused, ret;

	/* the ring is the thread's own: it alone submits, and takes the kernel's work for it in its own wait */
	ret = io_uring_queue_init_params(2 * QUEUE_DEPTH, &q->ring, &params);
	if (ret < 0) {
		fprintf(stderr, "tierlab-emu: io_uring_setup for queue %u failed: %s\n", q->qid, strerror(-ret));
		stop_from_inside();
		return NULL;
	}
	q->ring_up = 1;
	for (i = 0; i < QUEUE_DEPTH; i++)
		ring_register(&q->entries[i]);
	while (!atomic_load(&se.stopping)) {
		struct io_uring_cqe *cqe;
		uint64_t now, due;

		ring_send_due(q);
		now = mono_ns();
		due = q->heap.count ? q->heap.items[0].due_ns : 0;
		if (due && due <= now + se.poll_ns) {
			/* polling: the kernel's work for the ring (requests come so) runs only when asked for */
			ret = io_uring_submit_and_get_events(&q->ring);
			sched_yield();
		} else if (due) {
			struct __kernel_timespec ts = {.tv_sec = (due - se.poll_ns - now) / 1000000000u,
						       .tv_nsec = (due - se.poll_ns - now) % 1000000000u};

			ret = io_uring_submit_and_wait_timeout(&q->ring, &cqe, 1, &ts, NULL);
		} else {
			ret = io_uring_submit_and_wait(&q->ring, 1);
		}
		if (ret < 0 && ret != -EINTR && ret != -ETIME && ret != -EAGAIN && ret != -EBUSY) {
			fprintf(stderr, "tierlab-emu: io_uring queue %u failed: %s\n", q->qid, strerror(-ret));
			stop_from_inside();
			break;
		}
		refused = ring_take(q);
		if (refused) {
			/* the kernel refused io_uring (it then serves through /dev/fuse): this queue is done */
			fprintf(stderr, "tierlab-emu: io_uring queue %u refused (%s): serving through /dev/fuse\n", q->qid,
				strerror(-refused));
			atomic_store(&se.transport, TRANSPORT_DEV);
			break;
		}
	}
	ring_send_due(q);
	io_uring_submit(&q->ring);
	return NULL;
}

static int queue_init(struct ring_queue *q, unsigned qid)
{
	size_t payload_bytes = (size_t)QUEUE_DEPTH * MAX_WRITE;
	unsigned i;

	q->qid = qid;
	/* reserved, not used: pages come as requests touch them */
	q->payloads = mmap(NULL, payload_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			   -1, 0);
	q->headers = calloc(QUEUE_DEPTH, sizeof(*q->headers));
	if (q->payloads == MAP_FAILED || !q->headers) {
		fprintf(stderr, "tierlab-emu: no memory for io_uring queue %u\n", qid);
		return -1;
	}
	for (i = 0; i < QUEUE_DEPTH; i++) {
		struct ring_entry *e = &q->entries[i];

		e->queue = q;
		e->header = &q->headers[i];
		e->payload = q->payloads + (size_t)i * MAX_WRITE;
		e->iov[0] = (struct iovec){.iov_base = e->header, .iov_len = sizeof(*e->header)};
		e->iov[1] = (struct iovec){.iov_base = e->payload, .iov_len = MAX_WRITE};
	}
	return 0;
}

static void queue_free(struct ring_queue *q)
{
	if (q->ring_up)
		io_uring_queue_exit(&q->ring);
	munmap(q->payloads, (size_t)QUEUE_DEPTH * MAX_WRITE);
	free(q->headers);
	free(q->heap.items);
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
			reader_count = i;
			stop_from_inside();
			break;
		}
	}
	if (uring) {
		se.queue_count = (unsigned)get_nprocs_conf();
		se.queues = calloc(se.queue_count, sizeof(*se.queues));
		for (i = 0; se.queues && i < se.queue_count; i++)
			if (queue_init(&se.queues[i], i) != 0 ||
			    pthread_create(&se.queues[i].thread, NULL, queue_main, &se.queues[i]) != 0)
				break;
		if (i < se.queue_count) {
			/* a queue the kernel waits for and never gets: nothing would be served */
			fprintf(stderr, "tierlab-emu: cannot start io_uring queue %u\n", i);
			se.queue_count = se.queues ? i : 0;
			stop_from_inside();
		}
	}
	fprintf(stderr, "tierlab-emu: serving through %s\n", session_transport_names[session_transport()]);
	do
		sig = 0;
	while (sigwait(&stop_signals, &sig) != 0 || !sig);
	atomic_store(&se.stopping, 1);
	for (i = 0; i < se.queue_count; i++) {
		/* a signal ends the thread's wait in the ring; one sent before it waits is missed, hence again */
		struct timespec ts;

		do {
			pthread_kill(se.queues[i].thread, SIGUSR1);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10000000;
			ts.tv_sec += ts.tv_nsec / 1000000000;
			ts.tv_nsec %= 1000000000;
		} while (pthread_timedjoin_np(se.queues[i].thread, NULL, &ts) == ETIMEDOUT);
		queue_free(&se.queues[i]);
	}
	free(se.queues);
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
