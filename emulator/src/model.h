/* The device model: given a request's arrival time, operation, offset and
 * length, decide its class and when the modelled device completes it.
 * Pure computation over the model's state; the caller serialises calls. */
#ifndef TIERLAB_MODEL_H
#define TIERLAB_MODEL_H

#include <stdint.h>

#define MODEL_MAX_CHANNELS 256
#define MODEL_MAX_STREAMS 64

struct model_params {
	char name[32];
	unsigned channels;          /* parallel units; 0 = unlimited */
	double read_random_us;      /* media read latency, before the transfer */
	double read_sequential_us;  /* read served from the device read-ahead buffer */
	double write_us;            /* write accepted into the write buffer */
	double read_bandwidth_mb_s; /* 0 = unlimited */
	double write_bandwidth_mb_s;
	unsigned streams;           /* sequential streams the device tracks */
	double readahead_kb;        /* how far ahead a detected stream is prefetched */
	double write_buffer_mb;     /* writes absorbed before garbage collection; 0 = never */
	double sustained_write_mb_s;
	double gc_pause_us;         /* extra latency of one write in the GC regime ... */
	double gc_pause_every_kb;   /* ... once per this many KiB written in that regime */
	double read_during_write_us; /* added to a read that starts while a write is in flight */
};

enum model_op { MODEL_READ, MODEL_WRITE };

enum model_class {
	CLASS_READ_RANDOM,
	CLASS_READ_SEQUENTIAL,
	CLASS_WRITE_BUFFERED,
	CLASS_WRITE_GC,
	CLASS_COUNT
};

extern const char *const model_class_names[CLASS_COUNT];

struct model_stream {
	uint64_t next;   /* where the stream's last read ended */
	uint64_t ahead;  /* prefetched up to here */
	uint64_t hits;   /* sequential continuations seen */
	uint64_t used;   /* for least-recently-used replacement */
};

struct model {
	struct model_params p;
	uint64_t channel_free_ns[MODEL_MAX_CHANNELS];
	uint64_t read_bus_free_ns;
	uint64_t write_bus_free_ns;
	uint64_t writes_until_ns;  /* the latest completion of a write */
	struct model_stream streams[MODEL_MAX_STREAMS];
	unsigned streams_used;
	uint64_t clock;            /* request counter, for LRU */
	double buffer_bytes;       /* write-buffer fill at buffer_at_ns */
	uint64_t buffer_at_ns;
	double gc_bytes;           /* written in the GC regime since the last pause */
};

struct model_decision {
	enum model_class cls;
	int interfered;     /* a read slowed by an in-flight write */
	uint64_t start_ns;  /* when a channel took the request */
	uint64_t done_ns;   /* when the modelled device completes it */
};

/* Returns NULL when the parameters are valid, else what is wrong. */
const char *model_check(const struct model_params *p);
void model_init(struct model *m, const struct model_params *p);
void model_submit(struct model *m, uint64_t now_ns, enum model_op op, uint64_t offset,
		  uint64_t length, struct model_decision *out);

#endif
