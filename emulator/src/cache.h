/* A block cache of the device's pages on a faster device, as the cost model
 * simulates it (analysis/tierlab/devices/cost_model.py): empty when made or reset; a
 * read is a hit when every page it covers is cached; pages are evicted least
 * recently used first; a page is admitted on its admit_on-th access (1: lru,
 * 2: admitting, as dm-cache and bcache promote), unless its read continues a
 * sequential stream and the policy lets those bypass (admitting); writes admit
 * nothing and keep the cached pages they write current. Pure computation over
 * dense per-page arrays of the device; the caller serialises calls. */
#ifndef TIERLAB_CACHE_H
#define TIERLAB_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct cache {
	uint64_t page_bytes, capacity_pages, pages;
	unsigned admit_on;
	int sequential_bypass;
	char policy[16];
	uint8_t *seen;   /* accesses, saturating at admit_on */
	uint8_t *cached;
	int32_t *newer, *older; /* the recency list, -1 at its ends */
	int64_t newest, oldest;
	uint64_t used;
	uint64_t read_hits, read_misses, admitted, evicted;
};

/* Returns 0, or -1 with what was wrong in err (a policy other than lru and
 * admitting, a page size that is not a power of two of at least 512 bytes, a
 * device of 2^31 pages or more, no memory). */
int cache_init(struct cache *c, uint64_t device_bytes, uint64_t capacity_bytes, uint64_t page_bytes,
	       const char *policy, char *err, size_t err_len);
void cache_free(struct cache *c);
/* Empty again (the counters stay). */
void cache_reset(struct cache *c);
/* Whether every page of [offset, offset + length) is cached. */
int cache_holds(const struct cache *c, uint64_t offset, uint64_t length);
/* The access after it was served: each page is made the most recently used
 * when cached, else counted and admitted as the policy says. */
void cache_access(struct cache *c, uint64_t offset, uint64_t length, int write, int sequential);

#endif
