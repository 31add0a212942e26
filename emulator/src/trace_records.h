/* Binary blktrace files read record by record, for trace_stats: each file's
 * dispatches and completions in file order, its other records skipped
 * (include/uapi/linux/blktrace_api.h has the 48-byte record). */
#ifndef TIERLAB_TRACE_RECORDS_H
#define TIERLAB_TRACE_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#define HEADER_BYTES 48
#define TA_ISSUE 7u
#define TA_COMPLETE 8u
#define TA_CGROUP (1u << 8)
/* the action's code, less the cgroup flag */
#define CODE_MASK (0xFFFFu & ~TA_CGROUP)

enum {
	RECORD_OK,
	RECORD_BAD,		/* a corrupt or truncated record, not tolerated: err says what, error_offset where */
	RECORD_UNORDERED,	/* a dispatch or completion earlier than the one before it */
	RECORD_SYSTEM,		/* the file does not open or read, or no memory: err says what */
};

struct reader {
	const char *path;
	int tolerate;
	char *err;		/* what was wrong, for RECORD_BAD and RECORD_SYSTEM */
	size_t err_len;
	uint64_t error_offset;	/* where, for RECORD_BAD */
	uint64_t bad_records, bad_bytes;	/* what was tolerated */
	int fd;
	unsigned char *buffer;	/* READ_BYTES of the file from buffer_at, buffered of them */
	uint64_t buffer_at, buffered;
	uint64_t size, pos, last_time;
	int big;
	int live;		/* the event below is the file's next */
	uint64_t time, sector;
	uint32_t bytes, action, device;
};

/* Opens the file and reads its byte order; r->live says whether records follow. With tolerate, a corrupt
 * record is counted (bad_records; bad_bytes, the rest of the file) and the file ends there. */
int open_reader(struct reader *r, const char *path, int tolerate, char *err, size_t err_len);
/* The file's next dispatch or completion into r; r->live 0 at the file's end. */
int next_event(struct reader *r);
void close_reader(struct reader *r);

#endif
