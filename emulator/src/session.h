/* tierlab-emu's own FUSE session: the mount, the kernel's INIT, and each
 * request in and its reply out, through /dev/fuse (read and write, as every
 * FUSE kernel has) or through io_uring (FUSE over io_uring, Linux 6.14 and
 * later with fuse's enable_uring on): one queue per CPU, each served by a
 * thread of its own, where a reply and the fetch of the next request are one
 * system call and the kernel hands requests over without a read. libfuse 3.14 does its own
 * INIT without io_uring, hence a session of tierlab's own. */
#ifndef TIERLAB_SESSION_H
#define TIERLAB_SESSION_H

#include <stddef.h>
#include <stdint.h>

enum session_transport { TRANSPORT_DEV, TRANSPORT_URING };

extern const char *const session_transport_names[];

struct ring_entry;

/* Where a reply goes: valid until it is sent, whatever the handler's buffers do. */
struct reply_to {
	uint64_t unique;
	struct ring_entry *entry; /* the io_uring entry holding the request; NULL on /dev/fuse */
};

/* One request, valid while its handler runs. */
struct fuse_request {
	uint32_t opcode;
	uint64_t nodeid;
	const void *arg;     /* the opcode's own header (struct fuse_read_in, ...) */
	const void *payload; /* what follows it: a name, a write's data */
	size_t payload_size;
	struct reply_to to;
};

typedef void (*request_handler)(const struct fuse_request *req);

/* Mounts the file system at mountpoint, serves every request with handle
 * until SIGTERM, SIGINT or SIGHUP (or the file system is unmounted), then
 * unmounts it. `want` is the transport asked for; io_uring falls back to
 * /dev/fuse where the kernel refuses it, and session_transport() says which
 * one serves. poll_ns: how long before a timed reply is due its thread stops
 * sleeping and polls. Returns 0, or 1 after saying what failed. */
int session_serve(const char *mountpoint, enum session_transport want, uint64_t poll_ns, request_handler handle);

enum session_transport session_transport(void);

/* The reply to a request, now: an error (a positive errno), or 0 and size bytes of data. */
void session_reply(const struct reply_to *to, int error, const void *data, size_t size);

/* The same reply, sent when the monotonic clock reaches due_ns. Data of up to
 * SESSION_COPIED_BYTES is copied; larger data must stay valid until then. */
#define SESSION_COPIED_BYTES 16

void session_reply_at(const struct reply_to *to, uint64_t due_ns, int error, const void *data, size_t size);

uint64_t mono_ns(void);

#endif
