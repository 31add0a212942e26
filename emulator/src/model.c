#include "model.h"

#include <math.h>
#include <string.h>

const char *const model_class_names[CLASS_COUNT] = {
	"read_random", "read_sequential", "write_buffered", "write_gc",
};

static uint64_t us_to_ns(double us)
{
	return (uint64_t)llround(us * 1000.0);
}

/* 1 MB/s is one byte per microsecond; 0 means no transfer cost. */
static uint64_t transfer_ns(uint64_t bytes, double mb_s)
{
	return mb_s > 0 ? (uint64_t)llround((double)bytes * 1000.0 / mb_s) : 0;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

const char *model_check(const struct model_params *p)
{
	if (p->channels > MODEL_MAX_CHANNELS)
		return "channels must be at most 256 (0 means unlimited)";
	if (p->streams > MODEL_MAX_STREAMS)
		return "streams must be at most 64";
	if (p->read_random_us < 0 || p->read_sequential_us < 0 || p->write_us < 0 ||
	    p->read_bandwidth_mb_s < 0 || p->write_bandwidth_mb_s < 0 || p->readahead_kb < 0 ||
	    p->write_buffer_mb < 0 || p->sustained_write_mb_s < 0 || p->gc_pause_us < 0 ||
	    p->gc_pause_every_kb < 0 || p->read_during_write_us < 0)
		return "latencies, bandwidths and sizes must not be negative";
	if (p->write_buffer_mb > 0 && p->sustained_write_mb_s <= 0)
		return "a write buffer needs sustained_write_mb_s > 0 to drain";
	if (p->gc_pause_us > 0 && p->gc_pause_every_kb <= 0)
		return "gc_pause_us needs gc_pause_every_kb > 0";
	return NULL;
}

void model_init(struct model *m, const struct model_params *p)
{
	memset(m, 0, sizeof(*m));
	m->p = *p;
}

/* A read continues a stream when it starts where the stream ended, or, once
 * the stream is detected, when it falls inside the prefetched window (reads
 * of one scan may arrive slightly out of order). The first continuation only
 * detects the stream: it still pays the media latency. */
static enum model_class classify_read(struct model *m, uint64_t offset, uint64_t length)
{
	uint64_t end = offset + length;
	uint64_t window = (uint64_t)(m->p.readahead_kb * 1024.0);
	struct model_stream *hit = NULL;
	unsigned i;

	if (m->p.streams == 0)
		return CLASS_READ_RANDOM;
	m->clock++;
	for (i = 0; i < m->streams_used && !hit; i++) {
		struct model_stream *s = &m->streams[i];
		uint64_t behind = s->next > window ? s->next - window : 0;
		if (offset == s->next || (s->hits > 0 && offset >= behind && end <= s->ahead))
			hit = s;
	}
	if (hit) {
		enum model_class cls = hit->hits > 0 ? CLASS_READ_SEQUENTIAL : CLASS_READ_RANDOM;
		hit->hits++;
		hit->next = max_u64(hit->next, end);
		hit->ahead = max_u64(hit->ahead, hit->next + window);
		hit->used = m->clock;
		return cls;
	}
	if (m->streams_used < m->p.streams) {
		hit = &m->streams[m->streams_used++];
	} else {
		hit = &m->streams[0];
		for (i = 1; i < m->streams_used; i++)
			if (m->streams[i].used < hit->used)
				hit = &m->streams[i];
	}
	hit->next = end;
	hit->ahead = end;
	hit->hits = 0;
	hit->used = m->clock;
	return CLASS_READ_RANDOM;
}

/* The write buffer drains at the sustained rate. A write that does not fit
 * waits for the room it needs (the garbage-collection regime), and one write
 * in every gc_pause_every_kb of that regime pays a collection pause. */
static uint64_t write_delay_ns(struct model *m, uint64_t now_ns, uint64_t length, enum model_class *cls)
{
	double capacity = m->p.write_buffer_mb * 1e6;
	double drain_per_ns = m->p.sustained_write_mb_s / 1000.0;
	double wait_ns, room;
	uint64_t delay;

	*cls = CLASS_WRITE_BUFFERED;
	if (capacity <= 0)
		return 0;
	if (now_ns > m->buffer_at_ns) {
		m->buffer_bytes -= (double)(now_ns - m->buffer_at_ns) * drain_per_ns;
		if (m->buffer_bytes < 0)
			m->buffer_bytes = 0;
		m->buffer_at_ns = now_ns;
	}
	m->buffer_bytes += (double)length;
	room = m->buffer_bytes - capacity;
	if (room <= 0)
		return 0;
	*cls = CLASS_WRITE_GC;
	wait_ns = room / drain_per_ns;
	delay = (uint64_t)llround(wait_ns);
	if (m->p.gc_pause_us > 0) {
		m->gc_bytes += (double)length;
		if (m->gc_bytes >= m->p.gc_pause_every_kb * 1024.0) {
			m->gc_bytes -= m->p.gc_pause_every_kb * 1024.0;
			delay += us_to_ns(m->p.gc_pause_us);
		}
	}
	return delay;
}

void model_submit(struct model *m, uint64_t now_ns, enum model_op op, uint64_t offset,
		  uint64_t length, struct model_decision *out)
{
	uint64_t latency, transfer, *bus;
	unsigned channel = 0, i;

	memset(out, 0, sizeof(*out));
	if (op == MODEL_READ) {
		out->cls = classify_read(m, offset, length);
		latency = us_to_ns(out->cls == CLASS_READ_SEQUENTIAL ? m->p.read_sequential_us
								       : m->p.read_random_us);
		if (now_ns < m->writes_until_ns && m->p.read_during_write_us > 0) {
			out->interfered = 1;
			latency += us_to_ns(m->p.read_during_write_us);
		}
		transfer = transfer_ns(length, m->p.read_bandwidth_mb_s);
		bus = &m->read_bus_free_ns;
	} else {
		latency = us_to_ns(m->p.write_us) + write_delay_ns(m, now_ns, length, &out->cls);
		transfer = transfer_ns(length, m->p.write_bandwidth_mb_s);
		bus = &m->write_bus_free_ns;
	}

	out->start_ns = now_ns;
	if (m->p.channels > 0) {
		for (i = 1; i < m->p.channels; i++)
			if (m->channel_free_ns[i] < m->channel_free_ns[channel])
				channel = i;
		out->start_ns = max_u64(now_ns, m->channel_free_ns[channel]);
	}
	out->done_ns = out->start_ns + latency + transfer;
	/* the host link's bandwidth is shared in the order requests start, so
	 * large requests at depth are capped at it */
	if (transfer > 0) {
		*bus = max_u64(*bus, out->start_ns) + transfer;
		out->done_ns = max_u64(out->done_ns, *bus);
	}
	if (m->p.channels > 0)
		m->channel_free_ns[channel] = out->done_ns;
	if (op == MODEL_WRITE)
		m->writes_until_ns = max_u64(m->writes_until_ns, out->done_ns);
}
