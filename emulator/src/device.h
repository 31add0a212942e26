/* The served device: its state, the model's decision of each request on the
 * model's clock (the host's divided by the dilation) with the host's own cost
 * subtracted, the counters `stats` shows and the commands `control` takes. */
#ifndef TIERLAB_DEVICE_H
#define TIERLAB_DEVICE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"
#include "model.h"

struct class_stats {
	uint64_t count;
	uint64_t bytes;
	uint64_t modelled_ns;
};

struct emulator {
	const char *profile_path;
	int backing_fd;
	char *map;
	uint64_t size;
	pthread_mutex_t lock; /* guards everything below */
	struct model model;
	int model_enabled;
	double dilation;              /* modelled time runs this many times slower than the model's */
	uint64_t epoch_ns;            /* when the model's clock started */
	uint64_t overhead_fixed_ns;   /* the host's own cost of one request ... */
	uint64_t overhead_per_kib_ns; /* ... and per KiB, measured and subtracted */
	/* what a reply still misses its modelled time by, measured at a short and a
	 * long modelled latency (a long wait lets the host's CPUs halt, and waking
	 * them costs more): interpolated by latency and added to the host's cost */
	double miss_short_at_ns, miss_short_ns, miss_long_at_ns, miss_long_ns;
	uint64_t timer_overshoot_ns;  /* how late a timed sleep wakes, measured at start: the reply thread polls that long */
	struct class_stats classes[CLASS_COUNT];
	uint64_t interfered_reads;
	uint64_t late;                /* replies that could not wait: the host was slower than the model */
	uint64_t flushes;
	uint64_t discards;
	uint64_t started_ns;
	/* a hybrid device: a cache of its pages on a faster device (cache.h), whose
	 * hits that device's model serves; set by the `cache` control command */
	const char *cache_profile_path;
	struct model cache_model;
	struct cache cache;
	int cache_on;
};

extern struct emulator emu;

/* One request to the model that serves it (the cache's device's or the device's own). */
void submit(uint64_t model_now, enum model_op op, uint64_t off, uint64_t size, struct model_decision *d);

/* When to reply to a request (0: at once), less the host's own cost. */
uint64_t model_due(enum model_op op, off_t off, size_t size);

int in_device(off_t off, size_t size);

/* The counters as JSON, or -1 when they do not fit. */
int stats_json(char *buf, size_t len);

int cache_from(const char *spec, struct cache *c, char *err, size_t err_len);

/* One command to the `control` file: 0 or an errno. */
int control(const char *buf, size_t size);

#endif
