/* FUSE over io_uring for tierlab-emu's session (session_i.h). */
#define _GNU_SOURCE

#include <errno.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <time.h>

#include "session_i.h"

/* FUSE over io_uring's part of the kernel's ABI (7.42, Linux 6.14), which
 * Debian 12's kernel headers predate; named apart from the kernel's own names
 * so that newer headers do not clash. */
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

/* each io_uring queue's requests in flight at once; the loop device's queue is 128 deep */
enum { QUEUE_DEPTH = 128 };

struct ring_queue;

struct ring_entry {
	struct ring_queue *queue;
	struct uring_req_header *header;
	char *payload;
	struct iovec iov[2];
	unsigned sent; /* the command the kernel holds it by: REGISTER, or COMMIT_AND_FETCH */
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

static struct ring_queue *queues;
static unsigned queue_count;

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
void ring_commit(struct ring_entry *entry, uint64_t unique, int error, const void *data, size_t size)
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
	entry->sent = URING_CMD_COMMIT_AND_FETCH;
}

int ring_defer(const struct pending *p)
{
	return heap_push(&p->to.entry->queue->heap, p);
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
	entry->sent = URING_CMD_REGISTER;
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

/* Takes what the kernel completed: a request in an entry, or an entry it gave back with an error. A refused
 * registration is the kernel refusing io_uring (the error, returned); an entry whose reply it refused is
 * registered again, so that the queue keeps its depth; on a connection going away, entries are let go. */
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
		} else if (atomic_load(&se.stopping) || cqe->res == -ENOTCONN || cqe->res == -ECANCELED ||
			   cqe->res == -ECONNABORTED) {
			continue;
		} else if (entry->sent == URING_CMD_REGISTER) {
			refused = cqe->res;
		} else {
			fprintf(stderr, "tierlab-emu: io_uring queue %u: the kernel refused a reply (%s)\n", q->qid,
				strerror(-cqe->res));
			ring_register(entry);
		}
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


int ring_start(void)
{
	unsigned i;

	/* the kernel has a queue for every possible CPU and waits until each has an entry */
	queue_count = (unsigned)get_nprocs_conf();
	queues = calloc(queue_count, sizeof(*queues));
	for (i = 0; queues && i < queue_count; i++)
		if (queue_init(&queues[i], i) != 0 || pthread_create(&queues[i].thread, NULL, queue_main, &queues[i]) != 0)
			break;
	if (i == queue_count)
		return 0;
	fprintf(stderr, "tierlab-emu: cannot start io_uring queue %u\n", i);
	queue_count = queues ? i : 0;
	return -1;
}

void ring_stop(void)
{
	unsigned i;

	for (i = 0; i < queue_count; i++) {
		/* a signal ends the thread's wait in the ring; one sent before it waits is missed, hence again */
		struct timespec ts;

		do {
			pthread_kill(queues[i].thread, SIGUSR1);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10000000;
			ts.tv_sec += ts.tv_nsec / 1000000000;
			ts.tv_nsec %= 1000000000;
		} while (pthread_timedjoin_np(queues[i].thread, NULL, &ts) == ETIMEDOUT);
		queue_free(&queues[i]);
	}
	free(queues);
}
