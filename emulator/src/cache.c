#include "cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cache_init(struct cache *c, uint64_t device_bytes, uint64_t capacity_bytes, uint64_t page_bytes,
	       const char *policy, char *err, size_t err_len)
{
	memset(c, 0, sizeof(*c));
	if (strcmp(policy, "lru") != 0 && strcmp(policy, "admitting") != 0) {
		snprintf(err, err_len, "cache policy must be lru or admitting, got %s", policy);
		return -1;
	}
	if (page_bytes < 512 || (page_bytes & (page_bytes - 1)) != 0) {
		snprintf(err, err_len, "cache page size must be a power of two of at least 512 bytes, got %llu",
			 (unsigned long long)page_bytes);
		return -1;
	}
	c->pages = (device_bytes + page_bytes - 1) / page_bytes;
	if (c->pages >= (1ull << 31)) {
		snprintf(err, err_len, "a device of %llu pages of %llu bytes is too large to cache (under 2^31 pages)",
			 (unsigned long long)c->pages, (unsigned long long)page_bytes);
		return -1;
	}
	c->page_bytes = page_bytes;
	c->capacity_pages = capacity_bytes / page_bytes;
	c->admit_on = strcmp(policy, "lru") == 0 ? 1 : 2;
	c->sequential_bypass = c->admit_on == 2;
	snprintf(c->policy, sizeof(c->policy), "%s", policy);
	c->seen = calloc(c->pages, 1);
	c->cached = calloc(c->pages, 1);
	c->newer = malloc(c->pages * sizeof(*c->newer));
	c->older = malloc(c->pages * sizeof(*c->older));
	if (!c->seen || !c->cached || !c->newer || !c->older) {
		cache_free(c);
		snprintf(err, err_len, "no memory for a cache of a %llu-page device", (unsigned long long)c->pages);
		return -1;
	}
	cache_reset(c);
	return 0;
}

void cache_free(struct cache *c)
{
	free(c->seen);
	free(c->cached);
	free(c->newer);
	free(c->older);
	memset(c, 0, sizeof(*c));
}

void cache_reset(struct cache *c)
{
	memset(c->seen, 0, c->pages);
	memset(c->cached, 0, c->pages);
	c->newest = c->oldest = -1;
	c->used = 0;
}

static uint64_t last_page(const struct cache *c, uint64_t offset, uint64_t length)
{
	uint64_t last = (offset + length - 1) / c->page_bytes;

	return last < c->pages ? last : c->pages - 1;
}

int cache_holds(const struct cache *c, uint64_t offset, uint64_t length)
{
	uint64_t page;

	if (length == 0)
		return 0;
	for (page = offset / c->page_bytes; page <= last_page(c, offset, length); page++)
		if (!c->cached[page])
			return 0;
	return 1;
}

static void unlink_page(struct cache *c, int64_t page)
{
	if (c->older[page] >= 0)
		c->newer[c->older[page]] = c->newer[page];
	else
		c->oldest = c->newer[page];
	if (c->newer[page] >= 0)
		c->older[c->newer[page]] = c->older[page];
	else
		c->newest = c->older[page];
}

static void link_newest(struct cache *c, int64_t page)
{
	c->older[page] = (int32_t)c->newest;
	c->newer[page] = -1;
	if (c->newest >= 0)
		c->newer[c->newest] = (int32_t)page;
	else
		c->oldest = page;
	c->newest = page;
}

void cache_access(struct cache *c, uint64_t offset, uint64_t length, int write, int sequential)
{
	uint64_t page;

	if (length == 0)
		return;
	for (page = offset / c->page_bytes; page <= last_page(c, offset, length); page++) {
		if (c->seen[page] < c->admit_on)
			c->seen[page]++;
		if (c->cached[page]) {
			unlink_page(c, (int64_t)page);
			link_newest(c, (int64_t)page);
			continue;
		}
		if (write || (sequential && c->sequential_bypass) || c->seen[page] < c->admit_on ||
		    c->capacity_pages == 0)
			continue;
		if (c->used == c->capacity_pages) {
			int64_t victim = c->oldest;

			unlink_page(c, victim);
			c->cached[victim] = 0;
			c->used--;
			c->evicted++;
		}
		c->cached[page] = 1;
		link_newest(c, (int64_t)page);
		c->used++;
		c->admitted++;
	}
}
