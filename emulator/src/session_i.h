/* The parts of tierlab-emu's FUSE session (session.h) its two transports
 * share: session.c (the mount, INIT, /dev/fuse and the replies' API) and
 * ring.c (FUSE over io_uring). */
#ifndef TIERLAB_SESSION_I_H
#define TIERLAB_SESSION_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "session.h"

/* A request's payload holds a whole write; the kernel splits larger ones. */
enum { MAX_WRITE = 1 << 20, MAX_PAGES = MAX_WRITE / 4096 };
/* a read of /dev/fuse must have room for a whole write and its headers */
enum { DEV_BUFFER_BYTES = MAX_WRITE + 4096 };

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

struct session_state {
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
};

extern struct session_state se;

int heap_push(struct reply_heap *h, const struct pending *p);
struct pending heap_pop(struct reply_heap *h);

/* Answers the requests the session answers itself, hands the rest to the handler. */
void dispatch(const struct fuse_request *req);

/* Wakes the main thread to stop the session (the file system went away under a serving thread). */
void stop_from_inside(void);

/* FUSE over io_uring (ring.c): start one queue per possible CPU, each with its
 * thread (0, or -1 after saying what failed: the session stops); stop them,
 * their timed replies sent first. */
int ring_start(void);
void ring_stop(void);

/* A reply into its entry, back to the kernel with the queue's next submission (on the entry's queue's thread). */
void ring_commit(struct ring_entry *entry, uint64_t unique, int error, const void *data, size_t size);

/* A timed reply kept by the entry's queue (on that queue's thread): 0, or -1 without memory for it. */
int ring_defer(const struct pending *p);

#endif
