/* What `tierlab trace-stats` measures of binary blktrace files, in one
 * compiled pass (libtierlab-trace.so), which tierlab loads in-process.
 *
 * The reference is tierlab's Python path (analysis/tierlab/traces/stats.py
 * over blktrace.py, matcher.py and metrics/patterns.py): this pass gives the
 * same counts and, up to the order of floating-point sums, the same figures,
 * and tierlab's tests hold it to the reference on random traces. */
#ifndef TIERLAB_TRACE_STATS_H
#define TIERLAB_TRACE_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Raised whenever trace_stats' arguments or results change. */
#define TRACE_STATS_ABI 1

enum trace_stats_status {
	TRACE_STATS_OK = 0,
	TRACE_STATS_BAD_TRACE = 1,	/* a corrupt or truncated file: err says what, result[TS_ERROR_*] where */
	TRACE_STATS_UNORDERED = 2,	/* a file's records are not in time order */
	TRACE_STATS_UNSUPPORTED = 3,	/* more devices or pages than the pass numbers */
	TRACE_STATS_SYSTEM = 4,		/* a file that does not open or map, memory: err says which */
};

/* result[] by position */
enum trace_stats_result {
	TS_REQUESTS, TS_READ_REQUESTS, TS_WRITE_REQUESTS, TS_READ_BYTES, TS_WRITE_BYTES, TS_PAGES,
	TS_DISTINCT_PAGES, TS_READ_PAGES, TS_DISTINCT_READ_PAGES, TS_SEQUENTIAL_PAGES, TS_TINY, TS_MISALIGNED,
	TS_INFLIGHT_MAX, TS_LATENCIES, TS_DEVICES, TS_DISPATCH_WITHOUT_COMPLETION, TS_BAD_RECORDS, TS_BAD_BYTES,
	TS_ERROR_FILE, TS_ERROR_OFFSET, TS_RESULTS
};

/* How the matcher classifies a dispatch, as tierlab's Python tables have it
 * (analysis/tierlab/traces/blk.py): the RWBS code of a record by its
 * category word (action >> 16), with bytes and without; per RWBS code,
 * whether a dispatch of it is a data request, a read, and what one that is
 * no data row counts as (a position in match_counts). */
struct trace_stats_rules {
	const uint16_t *rwbs_with_bytes;	/* [65536] */
	const uint16_t *rwbs_no_bytes;		/* [65536] */
	const uint8_t *is_data;
	const uint8_t *is_read;
	const int64_t *counted_as;
	int64_t beyond_bounds, time_jumps, completion_without_dispatch;	/* positions in match_counts */
	uint64_t max_end_sector, max_request_sectors;
	double max_latency_us;
	unsigned stream_window;
};

unsigned trace_stats_abi(void);

/* The files, merged by time (equal times in the order given), measured
 * with pages of page_bytes aligned to the device: result[TS_*] and
 * match_counts[] (positions as the rules name them) are added to; figures
 * gets the busy time (s) and the sum of the latencies (us); devices the
 * dev_t of each device with data requests, in the order first seen (at most
 * devices_room); *latencies the completed requests' latencies in us
 * (result[TS_LATENCIES] of them), for trace_stats_free. A corrupt record
 * is TRACE_STATS_BAD_TRACE, or, with tolerate, counted (TS_BAD_RECORDS,
 * TS_BAD_BYTES) and the rest of its file skipped. */
int trace_stats(const char *const *paths, unsigned files, uint64_t page_bytes, int tolerate,
		const struct trace_stats_rules *rules, int64_t *result, int64_t *match_counts, double *figures,
		uint32_t *devices, unsigned devices_room, double **latencies, char *err, size_t err_len);

void trace_stats_free(double *latencies);

#endif
