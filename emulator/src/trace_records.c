/* Binary blktrace files read record by record for trace_stats (trace_records.h). */
#include "trace_records.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* include/uapi/linux/blktrace_api.h */
#define TRACE_MAGIC 0x65617400u
#define TRACE_VERSION 0x07u
#define NOTIFY_BIT ((1u << 10) << 16)

/* each file is read this much at a time (a mapping of the files kept their pages resident here, MADV_DONTNEED
 * or not: a tenth of the trace's size) */
#define READ_BYTES ((size_t)4 << 20)

static int fail(struct reader *r, const char *format, ...)
{
	va_list args;

	va_start(args, format);
	vsnprintf(r->err, r->err_len, format, args);
	va_end(args);
	return RECORD_SYSTEM;
}

static uint32_t load32(const unsigned char *at, int big)
{
	uint32_t v;

	memcpy(&v, at, 4);
	return big ? __builtin_bswap32(v) : v;
}

static uint64_t load64(const unsigned char *at, int big)
{
	uint64_t v;

	memcpy(&v, at, 8);
	return big ? __builtin_bswap64(v) : v;
}

static uint16_t load16(const unsigned char *at, int big)
{
	uint16_t v;

	memcpy(&v, at, 2);
	return big ? __builtin_bswap16(v) : v;
}

/* A record at offset that cannot be decoded: an error, or with tolerate counted and the rest of its file skipped. */
static int bad_record(struct reader *r, uint64_t offset, const char *format, ...)
{
	va_list args;

	r->live = 0;
	r->pos = r->size;
	if (r->tolerate) {
		r->bad_records += 1;
		r->bad_bytes += r->size - offset;
		return RECORD_OK;
	}
	va_start(args, format);
	vsnprintf(r->err, r->err_len, format, args);
	va_end(args);
	r->error_offset = offset;
	return RECORD_BAD;
}

/* The record header at r->pos, read into the buffer if it is not there; NULL if the file ends sooner than its
 * size said (it shrank while read) or cannot be read. */
static const unsigned char *header(struct reader *r)
{
	if (r->pos < r->buffer_at || r->pos + HEADER_BYTES > r->buffer_at + r->buffered) {
		r->buffer_at = r->pos;
		r->buffered = 0;
		while (r->buffered < READ_BYTES) {
			ssize_t got = pread(r->fd, r->buffer + r->buffered, READ_BYTES - r->buffered,
					    (off_t)(r->pos + r->buffered));

			if (got < 0) {
				fail(r, "%s: %s", r->path, strerror(errno));
				return NULL;
			}
			if (got == 0)
				break;
			r->buffered += (uint64_t)got;
		}
		if (r->buffered < HEADER_BYTES) {
			fail(r, "%s: ends at byte %" PRIu64 " of %" PRIu64 " (it shrank while read)", r->path,
			     r->pos + r->buffered, r->size);
			return NULL;
		}
	}
	return r->buffer + (r->pos - r->buffer_at);
}

int open_reader(struct reader *r, const char *path, int tolerate, char *err, size_t err_len)
{
	struct stat st;
	unsigned char first[4];
	uint32_t magic;

	memset(r, 0, sizeof(*r));
	r->path = path, r->tolerate = tolerate, r->err = err, r->err_len = err_len;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0 || fstat(r->fd, &st) < 0)
		return fail(r, "%s: %s", path, strerror(errno));
	r->size = (uint64_t)st.st_size;
	r->buffer = malloc(READ_BYTES);
	if (!r->buffer)
		return fail(r, "out of memory for reading %s", path);
	posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (r->size == 0)
		return RECORD_OK;
	if (r->size < 4)
		return bad_record(r, 0, "record header is truncated: %" PRIu64 " of %d bytes", r->size,
				  HEADER_BYTES);
	if (pread(r->fd, first, 4, 0) != 4)
		return fail(r, "%s: %s", path, strerror(errno));
	magic = load32(first, 0);
	if ((magic & 0xFFFFFF00u) != TRACE_MAGIC) {
		if ((load32(first, 1) & 0xFFFFFF00u) != TRACE_MAGIC)
			return bad_record(r, 0, "bad magic 0x%08x (not a blktrace file)", magic);
		r->big = 1;
	}
	r->live = 1;
	return RECORD_OK;
}

void close_reader(struct reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->buffer);
	r->fd = -1;
	r->buffer = NULL;
}

/* The file's next dispatch or completion into r (r->live 0 at its end); other records are skipped. */
int next_event(struct reader *r)
{
	while (r->pos < r->size) {
		uint64_t left = r->size - r->pos, stride;
		const unsigned char *at;
		uint32_t magic, action, code;

		if (left < HEADER_BYTES)
			return bad_record(r, r->pos, "record header is truncated: %" PRIu64 " of %d bytes", left,
					  HEADER_BYTES);
		at = header(r);
		if (!at)
			return RECORD_SYSTEM;
		magic = load32(at, r->big);
		if ((magic & 0xFFFFFF00u) != TRACE_MAGIC)
			return bad_record(r, r->pos, "bad magic 0x%08x", magic);
		if ((magic & 0xFFu) != TRACE_VERSION)
			return bad_record(r, r->pos, "unsupported blktrace version %u (only %u)", magic & 0xFFu,
					  TRACE_VERSION);
		stride = HEADER_BYTES + load16(at + 46, r->big);
		if (left < stride)
			return bad_record(r, r->pos, "payload runs past the end of the file (pdu_len %u, %" PRIu64
					  " bytes left)", (unsigned)(stride - HEADER_BYTES), left - HEADER_BYTES);
		r->pos += stride;
		action = load32(at + 28, r->big);
		code = action & (CODE_MASK | NOTIFY_BIT);
		if (code != TA_ISSUE && code != TA_COMPLETE)
			continue;
		r->time = load64(at + 8, r->big);
		if ((int64_t)r->time < (int64_t)r->last_time)
			return RECORD_UNORDERED;
		r->last_time = r->time;
		r->sector = load64(at + 16, r->big);
		r->bytes = load32(at + 24, r->big);
		r->action = action;
		r->device = load32(at + 36, r->big);
		r->live = 1;
		return RECORD_OK;
	}
	r->live = 0;
	return RECORD_OK;
}
