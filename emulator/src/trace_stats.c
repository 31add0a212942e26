/* trace_stats: binary blktrace files measured in one pass (trace_stats.h).
 *
 * The per-CPU files are read and merged by time; a completion closes the
 * oldest open dispatch of its device and sector (a hash table of first-in
 * first-out lists, as analysis/tierlab/traces/open_dispatches.py keeps it).
 * Each data request is measured as it is dispatched (its pages, whether it
 * continues a sequential stream) and as it completes (its latency); the
 * page unions, the busy time and the requests in flight are finished after
 * the last record, from 32 bytes kept per request. */
#include "trace_stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_records.h"

#define EMPTY (-1)
#define NO_ROW (-1)
#define MIX 0x9E3779B97F4A7C15ull
#define MAX_DEVICES 1024
/* page ranges sorted at a time, then merged as walked: the sort's scratch stays small beside them */
#define SORT_CHUNK ((size_t)1 << 22)

struct range {			/* a data request's pages; first becomes its sort key */
	uint64_t first;
	uint32_t pages;
	uint16_t device;
	uint8_t read;
};

struct pass {
	const struct trace_stats_rules *rules;
	uint64_t page_bytes;
	int64_t *result, *match_counts;
	char *err;
	size_t err_len;
	/* open dispatches: slots keyed by (device, sector), entries in a pool */
	uint64_t *s_sector;
	int64_t *s_dev, *s_head, *s_tail;
	size_t slots, keys;
	int64_t *e_time, *e_row, *e_next, free_entry;
	size_t entries, live;
	/* per data request, by row */
	struct range *ranges;
	double *row_ts;		/* dispatch, s (the trace clock's ns / 1e9, as the Python path has it) */
	double *latency;	/* us, NaN until completed */
	size_t rows, row_room;
	uint64_t last_page_max;
	/* devices with data requests, and each one's last stream_window request ends not yet continued */
	uint32_t devices[MAX_DEVICES];
	unsigned device_count, last_code;
	int64_t *stream_ends;
	unsigned *stream_length;
};

static int fail(struct pass *p, const char *format, ...)
{
	va_list args;

	va_start(args, format);
	vsnprintf(p->err, p->err_len, format, args);
	va_end(args);
	return -1;
}

static int64_t home(uint64_t sector, int64_t dev, size_t mask)
{
	uint64_t mixed = (sector ^ ((uint64_t)dev << 48)) * MIX;

	return (int64_t)(mixed >> 32) & (int64_t)mask;
}

static size_t find_slot(const uint64_t *s_sector, const int64_t *s_dev, size_t slots, uint64_t sector, int64_t dev)
{
	size_t mask = slots - 1, slot = (size_t)home(sector, dev, mask);

	while (s_dev[slot] != EMPTY && (s_dev[slot] != dev || s_sector[slot] != sector))
		slot = (slot + 1) & mask;
	return slot;
}

/* Empty a slot, moving later keys of its probe run back so that every key stays reachable. */
static void delete_slot(struct pass *p, size_t slot)
{
	size_t mask = p->slots - 1, hole = slot, probe = slot;

	for (;;) {
		size_t at_home;

		probe = (probe + 1) & mask;
		if (p->s_dev[probe] == EMPTY)
			break;
		at_home = (size_t)home(p->s_sector[probe], p->s_dev[probe], mask);
		if ((probe > hole && (at_home <= hole || at_home > probe)) ||
		    (probe < hole && at_home <= hole && at_home > probe)) {
			p->s_sector[hole] = p->s_sector[probe];
			p->s_dev[hole] = p->s_dev[probe];
			p->s_head[hole] = p->s_head[probe];
			p->s_tail[hole] = p->s_tail[probe];
			hole = probe;
		}
	}
	p->s_dev[hole] = EMPTY;
}

static void *grown(void *array, size_t bytes, struct pass *p)
{
	void *bigger = realloc(array, bytes);

	if (!bigger)
		fail(p, "out of memory for %zu bytes", bytes);
	return bigger;
}

/* Twice the slots, the keys placed again. */
static int grow_slots(struct pass *p)
{
	size_t slots = p->slots ? 2 * p->slots : 1024, i;
	uint64_t *s_sector = calloc(slots, sizeof(*s_sector));
	int64_t *s_dev = malloc(slots * sizeof(*s_dev)), *s_head = malloc(slots * sizeof(*s_head));
	int64_t *s_tail = malloc(slots * sizeof(*s_tail));

	if (!s_sector || !s_dev || !s_head || !s_tail) {
		free(s_sector), free(s_dev), free(s_head), free(s_tail);
		return fail(p, "out of memory for %zu open requests", slots);
	}
	for (i = 0; i < slots; i++)
		s_dev[i] = EMPTY;
	for (i = 0; i < p->slots; i++) {
		if (p->s_dev[i] != EMPTY) {
			size_t slot = find_slot(s_sector, s_dev, slots, p->s_sector[i], p->s_dev[i]);

			s_sector[slot] = p->s_sector[i];
			s_dev[slot] = p->s_dev[i];
			s_head[slot] = p->s_head[i];
			s_tail[slot] = p->s_tail[i];
		}
	}
	free(p->s_sector), free(p->s_dev), free(p->s_head), free(p->s_tail);
	p->s_sector = s_sector, p->s_dev = s_dev, p->s_head = s_head, p->s_tail = s_tail;
	p->slots = slots;
	return 0;
}

/* Twice the entries, the new ones on the free list. */
static int grow_entries(struct pass *p)
{
	size_t entries = p->entries ? 2 * p->entries : 1024, i;
	int64_t *e_time = grown(p->e_time, entries * sizeof(int64_t), p);

	if (!e_time)
		return -1;
	p->e_time = e_time;
	if (!(p->e_row = grown(p->e_row, entries * sizeof(int64_t), p)) ||
	    !(p->e_next = grown(p->e_next, entries * sizeof(int64_t), p)))
		return -1;
	for (i = p->entries; i < entries; i++)
		p->e_next[i] = i + 1 < entries ? (int64_t)(i + 1) : p->free_entry;
	p->free_entry = (int64_t)p->entries;
	p->entries = entries;
	return 0;
}

/* The device's number among those with data requests (MAX_DEVICES at most); -1 beyond. */
static int device_code(struct pass *p, uint32_t device)
{
	unsigned i;

	if (p->device_count && p->devices[p->last_code] == device)
		return (int)p->last_code;
	for (i = 0; i < p->device_count; i++) {
		if (p->devices[i] == device)
			return (int)(p->last_code = i);
	}
	if (p->device_count == MAX_DEVICES)
		return -1;
	p->devices[p->device_count] = device;
	p->stream_length[p->device_count] = 0;
	return (int)(p->last_code = p->device_count++);
}

/* Whether a read starting at start continues one of its device's remembered request ends (oldest first); a
 * matched end leaves the queue, a full queue drops its oldest, and the read's end joins it. */
static int continued(struct pass *p, unsigned code, int64_t start, int64_t end)
{
	unsigned window = p->rules->stream_window, length = p->stream_length[code], j;
	int64_t *queue = p->stream_ends + (size_t)code * window;
	int found = 0;

	for (j = 0; j < length; j++) {
		if (queue[j] == start) {
			memmove(queue + j, queue + j + 1, (length - j - 1) * sizeof(*queue));
			length--;
			found = 1;
			break;
		}
	}
	if (length == window) {
		memmove(queue, queue + 1, (length - 1) * sizeof(*queue));
		length--;
	}
	queue[length] = end;
	p->stream_length[code] = length + 1;
	return found;
}

/* A data request dispatched: its row, and what it adds to the tallies. */
static int add_row(struct pass *p, const struct reader *r, uint64_t sectors, int read)
{
	int64_t *result = p->result;
	uint64_t start = r->sector * 512, first = start / p->page_bytes, last = (start + sectors * 512 - 1) / p->page_bytes;
	int code = device_code(p, r->device);
	struct range *range;

	if (code < 0)
		return TRACE_STATS_UNSUPPORTED;
	if (p->rows == p->row_room)
		return fail(p, "more data requests than the files' records"), TRACE_STATS_SYSTEM;
	range = p->ranges + p->rows;
	range->first = first;
	range->pages = (uint32_t)(last - first + 1);
	range->device = (uint16_t)code;
	range->read = (uint8_t)read;
	p->row_ts[p->rows] = (double)(int64_t)r->time / 1e9;
	p->latency[p->rows] = NAN;
	p->rows++;
	if (last > p->last_page_max)
		p->last_page_max = last;
	result[TS_REQUESTS]++;
	result[TS_PAGES] += range->pages;
	if (read) {
		result[TS_READ_REQUESTS]++;
		result[TS_READ_BYTES] += (int64_t)sectors * 512;
		result[TS_READ_PAGES] += range->pages;
		if (continued(p, (unsigned)code, (int64_t)r->sector, (int64_t)(r->sector + sectors)) ||
		    sectors > p->page_bytes / 512)
			result[TS_SEQUENTIAL_PAGES] += range->pages;
	} else {
		result[TS_WRITE_REQUESTS]++;
		result[TS_WRITE_BYTES] += (int64_t)sectors * 512;
	}
	result[TS_TINY] += sectors < 8;
	result[TS_MISALIGNED] += r->sector % 8 != 0;
	return TRACE_STATS_OK;
}

static int dispatch(struct pass *p, const struct reader *r)
{
	const struct trace_stats_rules *rules = p->rules;
	uint32_t category = r->action >> 16;
	unsigned rwbs = r->bytes ? rules->rwbs_with_bytes[category] : rules->rwbs_no_bytes[category];
	int64_t row = NO_ROW, entry;
	size_t slot;

	if (p->free_entry == EMPTY && grow_entries(p) < 0)
		return TRACE_STATS_SYSTEM;
	if (2 * (p->keys + 1) > p->slots && grow_slots(p) < 0)
		return TRACE_STATS_SYSTEM;
	if (rules->is_data[rwbs] && r->bytes >= 512) {
		uint64_t sectors = r->bytes >> 9;

		if (r->sector > rules->max_end_sector - sectors || sectors > rules->max_request_sectors) {
			p->match_counts[rules->beyond_bounds]++;
		} else {
			int status;

			row = (int64_t)p->rows;
			status = add_row(p, r, sectors, rules->is_read[rwbs]);
			if (status != TRACE_STATS_OK)
				return status;
		}
	} else {
		p->match_counts[rules->counted_as[rwbs]]++;
	}
	entry = p->free_entry;
	p->free_entry = p->e_next[entry];
	p->e_time[entry] = (int64_t)r->time;
	p->e_row[entry] = row;
	p->e_next[entry] = EMPTY;
	p->live++;
	slot = find_slot(p->s_sector, p->s_dev, p->slots, r->sector, r->device);
	if (p->s_dev[slot] == EMPTY) {
		p->s_sector[slot] = r->sector;
		p->s_dev[slot] = r->device;
		p->s_head[slot] = entry;
		p->keys++;
	} else {
		p->e_next[p->s_tail[slot]] = entry;
	}
	p->s_tail[slot] = entry;
	return TRACE_STATS_OK;
}

static void complete(struct pass *p, const struct reader *r)
{
	size_t slot = p->slots ? find_slot(p->s_sector, p->s_dev, p->slots, r->sector, r->device) : 0;
	int64_t entry, closed;
	double waited_us;

	if (!p->slots || p->s_dev[slot] == EMPTY) {
		p->match_counts[p->rules->completion_without_dispatch]++;
		return;
	}
	entry = p->s_head[slot];
	closed = p->e_row[entry];
	if (p->e_next[entry] == EMPTY) {
		delete_slot(p, slot);
		p->keys--;
	} else {
		p->s_head[slot] = p->e_next[entry];
	}
	waited_us = (double)((int64_t)r->time - p->e_time[entry]) / 1e3;
	p->e_next[entry] = p->free_entry;
	p->free_entry = entry;
	p->live--;
	if (closed == NO_ROW)
		return;
	if (waited_us < 0 || waited_us > p->rules->max_latency_us)
		p->match_counts[p->rules->time_jumps]++;
	else
		p->latency[closed] = waited_us;
}

/* Elements of `words` 64-bit words sorted by their first word, least significant byte first (a stable
 * radix sort through tmp, of the same size; a byte that all keys share costs no pass). */
static void radix_sort(uint64_t *a, uint64_t *tmp, size_t n, unsigned words)
{
	size_t count[8][256] = { { 0 } }, i;
	uint64_t *from = a, *to = tmp;
	unsigned digit;

	for (i = 0; i < n; i++) {
		uint64_t key = a[i * words];

		for (digit = 0; digit < 8; digit++)
			count[digit][(key >> (8 * digit)) & 0xFF]++;
	}
	for (digit = 0; digit < 8; digit++) {
		size_t next[256], start = 0;
		unsigned b;

		if (n == 0 || count[digit][(a[0] >> (8 * digit)) & 0xFF] == n)
			continue;
		for (b = 0; b < 256; b++) {
			next[b] = start;
			start += count[digit][b];
		}
		for (i = 0; i < n; i++) {
			const uint64_t *element = from + i * words;

			memcpy(to + next[(element[0] >> (8 * digit)) & 0xFF]++ * words, element, words * sizeof(uint64_t));
		}
		from = to;
		to = from == a ? tmp : a;
	}
	if (from != a)
		memcpy(a, from, n * words * sizeof(uint64_t));
}

/* A run of pages open in a union: a range that touches or overlaps it joins it, another closes it. */
struct run {
	int open;
	uint64_t first, last;
	int64_t pages;
};

static void join(struct run *run, uint64_t first, uint64_t last)
{
	if (run->open && first <= run->last + 1) {
		run->last = last > run->last ? last : run->last;
		return;
	}
	run->pages += run->open ? (int64_t)(run->last - run->first + 1) : 0;
	run->open = 1, run->first = first, run->last = last;
}

static int64_t closed(const struct run *run)
{
	return run->pages + (run->open ? (int64_t)(run->last - run->first + 1) : 0);
}

/* The distinct pages of every request and of the reads: the ranges keyed by device and first page, sorted
 * SORT_CHUNK at a time, then walked in key order across the chunks with a run open for each union. */
static int page_unions(struct pass *p)
{
	const unsigned words = sizeof(struct range) / sizeof(uint64_t);
	unsigned code_bits = 0, page_bits, chunks = (unsigned)((p->rows + SORT_CHUNK - 1) / SORT_CHUNK), c;
	struct run all = { 0 }, reads = { 0 };
	size_t *at, *end;
	uint64_t *tmp;
	size_t i;

	while ((1u << code_bits) < p->device_count)
		code_bits++;
	page_bits = 64 - code_bits;
	/* a device's pages end below the next device's key, so that no run joins across devices */
	if (page_bits < 64 && p->last_page_max + 1 >= (1ull << page_bits))
		return TRACE_STATS_UNSUPPORTED;
	for (i = 0; code_bits && i < p->rows; i++)
		p->ranges[i].first |= (uint64_t)p->ranges[i].device << page_bits;
	tmp = malloc((p->rows < SORT_CHUNK ? p->rows + 1 : SORT_CHUNK) * sizeof(struct range));
	at = calloc(chunks + 1, sizeof(*at));
	end = calloc(chunks + 1, sizeof(*end));
	if (!tmp || !at || !end) {
		free(tmp), free(at), free(end);
		return fail(p, "out of memory for sorting %zu page ranges", p->rows), TRACE_STATS_SYSTEM;
	}
	for (c = 0; c < chunks; c++) {
		at[c] = c * SORT_CHUNK;
		end[c] = at[c] + SORT_CHUNK < p->rows ? at[c] + SORT_CHUNK : p->rows;
		radix_sort((uint64_t *)(p->ranges + at[c]), tmp, end[c] - at[c], words);
	}
	free(tmp);
	for (;;) {
		const struct range *range = NULL;
		unsigned next = 0;

		for (c = 0; c < chunks; c++) {
			if (at[c] < end[c] && (!range || p->ranges[at[c]].first < range->first))
				range = p->ranges + at[c], next = c;
		}
		if (!range)
			break;
		at[next]++;
		join(&all, range->first, range->first + range->pages - 1);
		if (range->read)
			join(&reads, range->first, range->first + range->pages - 1);
	}
	free(at), free(end);
	p->result[TS_DISTINCT_PAGES] += closed(&all);
	p->result[TS_DISTINCT_READ_PAGES] += closed(&reads);
	return TRACE_STATS_OK;
}

/* The time with a request in flight, the most in flight at a dispatch and the latencies' sum, over the
 * completed requests (as metrics/patterns.py's InFlight sweeps them); the completed requests' latencies are
 * left at the front of p->latency. */
static int in_flight(struct pass *p, double *figures)
{
	double *start = p->row_ts, *end, *tmp, busy = 0, swept_to = -INFINITY, sum = 0;
	size_t n = 0, i, gone = 0;
	int64_t peak = 0;

	for (i = 0; i < p->rows; i++) {
		if (isnan(p->latency[i]))
			continue;
		start[n] = p->row_ts[i];
		p->latency[n++] = p->latency[i];
	}
	end = malloc((n ? n : 1) * sizeof(*end));
	tmp = malloc((n ? n : 1) * sizeof(*tmp));
	if (!end || !tmp) {
		free(end), free(tmp);
		return fail(p, "out of memory for %zu completions", n);
	}
	for (i = 0; i < n; i++) {
		end[i] = start[i] + p->latency[i] / 1e6;
		sum += p->latency[i];
	}
	/* completions are never negative: their doubles sort as their bits do */
	radix_sort((uint64_t *)end, (uint64_t *)tmp, n, 1);
	free(tmp);
	for (i = 0; i < n; i++) {
		while (gone < n && end[gone] <= start[i]) {
			if ((int64_t)i - (int64_t)gone > 0)
				busy += end[gone] - swept_to;
			swept_to = end[gone++];
		}
		if ((int64_t)i - (int64_t)gone > 0)
			busy += start[i] - swept_to;
		swept_to = start[i];
		if ((int64_t)(i + 1 - gone) > peak)
			peak = (int64_t)(i + 1 - gone);
	}
	if (gone < n)
		busy += end[n - 1] - swept_to;
	free(end);
	figures[0] += busy;
	figures[1] += sum;
	p->result[TS_INFLIGHT_MAX] = peak;
	p->result[TS_LATENCIES] = (int64_t)n;
	return TRACE_STATS_OK;
}

unsigned trace_stats_abi(void)
{
	return TRACE_STATS_ABI;
}

/* What the result of file's reader makes of the pass; a corrupt record's file and byte go to the results. */
static int read_status(struct pass *p, unsigned file, const struct reader *r, int result)
{
	switch (result) {
	case RECORD_BAD:
		p->result[TS_ERROR_FILE] = file;
		p->result[TS_ERROR_OFFSET] = (int64_t)r->error_offset;
		return TRACE_STATS_BAD_TRACE;
	case RECORD_UNORDERED:
		return TRACE_STATS_UNORDERED;
	case RECORD_SYSTEM:
		return TRACE_STATS_SYSTEM;
	default:
		return TRACE_STATS_OK;
	}
}

static int merge(struct pass *p, struct reader *readers, unsigned files)
{
	for (;;) {
		struct reader *r = NULL;
		unsigned f, file = 0;
		int status;

		for (f = 0; f < files; f++) {
			if (readers[f].live && (!r || (int64_t)readers[f].time < (int64_t)r->time))
				r = readers + f, file = f;
		}
		if (!r)
			return TRACE_STATS_OK;
		if ((r->action & CODE_MASK) == TA_ISSUE) {
			status = dispatch(p, r);
			if (status != TRACE_STATS_OK)
				return status;
		} else {
			complete(p, r);
		}
		status = read_status(p, file, r, next_event(r));
		if (status != TRACE_STATS_OK)
			return status;
	}
}

int trace_stats(const char *const *paths, unsigned files, uint64_t page_bytes, int tolerate,
		const struct trace_stats_rules *rules, int64_t *result, int64_t *match_counts, double *figures,
		uint32_t *devices, unsigned devices_room, double **latencies, char *err, size_t err_len)
{
	struct pass p = { .rules = rules, .page_bytes = page_bytes, .result = result,
			  .match_counts = match_counts, .err = err, .err_len = err_len, .free_entry = EMPTY };
	struct reader *readers = calloc(files ? files : 1, sizeof(*readers));
	uint64_t records = 0;
	int status = TRACE_STATS_OK;
	unsigned f;

	*latencies = NULL;
	if (!readers)
		return fail(&p, "out of memory"), TRACE_STATS_SYSTEM;
	for (f = 0; f < files; f++)
		readers[f].fd = -1;
	for (f = 0; f < files && status == TRACE_STATS_OK; f++) {
		status = read_status(&p, f, readers + f, open_reader(readers + f, paths[f], tolerate, err, err_len));
		records += readers[f].size / HEADER_BYTES;
	}
	/* no more data requests than records: room for them all, of which only what is written is touched */
	p.row_room = records;
	p.ranges = malloc((records ? records : 1) * sizeof(*p.ranges));
	p.row_ts = malloc((records ? records : 1) * sizeof(*p.row_ts));
	p.latency = malloc((records ? records : 1) * sizeof(*p.latency));
	p.stream_ends = malloc((size_t)MAX_DEVICES * rules->stream_window * sizeof(*p.stream_ends));
	p.stream_length = malloc(MAX_DEVICES * sizeof(*p.stream_length));
	if (status == TRACE_STATS_OK && (!p.ranges || !p.row_ts || !p.latency || !p.stream_ends || !p.stream_length))
		status = (fail(&p, "out of memory for %" PRIu64 " records", records), TRACE_STATS_SYSTEM);
	for (f = 0; f < files && status == TRACE_STATS_OK; f++)
		status = readers[f].live ? read_status(&p, f, readers + f, next_event(readers + f)) : TRACE_STATS_OK;
	if (status == TRACE_STATS_OK)
		status = merge(&p, readers, files);
	for (f = 0; f < files; f++) {
		result[TS_BAD_RECORDS] += (int64_t)readers[f].bad_records;
		result[TS_BAD_BYTES] += (int64_t)readers[f].bad_bytes;
		close_reader(readers + f);
	}
	free(readers);
	free(p.s_sector), free(p.s_dev), free(p.s_head), free(p.s_tail);
	free(p.e_time), free(p.e_row), free(p.e_next), free(p.stream_ends), free(p.stream_length);
	result[TS_DISPATCH_WITHOUT_COMPLETION] += (int64_t)p.live;
	if (status == TRACE_STATS_OK && p.device_count > devices_room)
		status = TRACE_STATS_UNSUPPORTED;
	if (status == TRACE_STATS_OK)
		status = page_unions(&p);
	free(p.ranges);
	if (status == TRACE_STATS_OK && in_flight(&p, figures) < 0)
		status = TRACE_STATS_SYSTEM;
	free(p.row_ts);
	if (status != TRACE_STATS_OK) {
		free(p.latency);
		return status;
	}
	memcpy(devices, p.devices, p.device_count * sizeof(*devices));
	result[TS_DEVICES] = p.device_count;
	*latencies = p.latency;
	return TRACE_STATS_OK;
}

void trace_stats_free(double *latencies)
{
	free(latencies);
}
