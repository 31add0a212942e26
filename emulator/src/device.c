/* tierlab-emu's served device (device.h). */
#define _GNU_SOURCE

#include "device.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "session.h"

struct emulator emu = {.lock = PTHREAD_MUTEX_INITIALIZER, .model_enabled = 1, .dilation = 1.0};

/* The host's own cost of a request of this modelled latency and size. */
static uint64_t host_cost_ns(uint64_t latency_ns, size_t size)
{
	double share = 0, miss, cost;

	if (emu.miss_long_at_ns > emu.miss_short_at_ns)
		share = ((double)latency_ns - emu.miss_short_at_ns) / (emu.miss_long_at_ns - emu.miss_short_at_ns);
	share = share < 0 ? 0 : share > 1 ? 1 : share;
	miss = emu.miss_short_ns + share * (emu.miss_long_ns - emu.miss_short_ns);
	cost = (double)emu.overhead_fixed_ns + (double)(emu.overhead_per_kib_ns * size / 1024) + miss;
	return cost > 0 ? (uint64_t)cost : 0;
}

/* One request to the model that serves it: with a cache on, a read it holds
 * whole goes to the cache's device (counted as a hit, not in the classes),
 * everything else to the device's own model; then the cache takes the access. */
void submit(uint64_t model_now, enum model_op op, uint64_t off, uint64_t size, struct model_decision *d)
{
	int hit = emu.cache_on && op == MODEL_READ && cache_holds(&emu.cache, off, size);

	if (hit) {
		model_submit(&emu.cache_model, model_now, op, off, size, d);
		emu.cache.read_hits++;
	} else {
		model_submit(&emu.model, model_now, op, off, size, d);
		emu.classes[d->cls].count++;
		emu.classes[d->cls].bytes += size;
		emu.classes[d->cls].modelled_ns += d->done_ns - model_now;
		emu.interfered_reads += (uint64_t)d->interfered;
		emu.cache.read_misses += emu.cache_on && op == MODEL_READ;
	}
	if (emu.cache_on)
		cache_access(&emu.cache, off, size, op == MODEL_WRITE, !hit && d->cls == CLASS_READ_SEQUENTIAL);
}

/* Decide the request's completion; returns when to reply (0: at once), less the host's own cost.
 * The model runs on its own clock, the host's divided by the dilation, so that
 * every latency, queue and buffer of the model stretches alike and each ratio
 * between them holds. */
uint64_t model_due(enum model_op op, off_t off, size_t size)
{
	struct model_decision d;
	uint64_t now = mono_ns(), model_now, done, due, overhead;

	pthread_mutex_lock(&emu.lock);
	if (!emu.model_enabled) {
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	model_now = (uint64_t)((double)(now - emu.epoch_ns) / emu.dilation);
	submit(model_now, op, (uint64_t)off, size, &d);
	done = emu.epoch_ns + (uint64_t)((double)d.done_ns * emu.dilation);
	overhead = host_cost_ns(done - now, size);
	due = done > now + overhead ? done - overhead : 0;
	if (due == 0 && done > now)
		emu.late++;
	pthread_mutex_unlock(&emu.lock);
	return due;
}

int in_device(off_t off, size_t size)
{
	return off >= 0 && (uint64_t)off <= emu.size && size <= emu.size - (uint64_t)off;
}

int stats_json(char *buf, size_t len)
{
	int n, c;

	pthread_mutex_lock(&emu.lock);
	n = snprintf(buf, len,
		     "{\"model\": \"%s\", \"profile\": \"%s\", \"transport\": \"%s\", \"device_bytes\": %" PRIu64
		     ", \"model_enabled\": %s, \"dilation\": %.3f, \"overhead_fixed_us\": %.3f, \"overhead_per_kib_us\": %.4f"
		     ", \"miss_us\": [[%.1f, %.3f], [%.1f, %.3f]]"
		     ", \"timer_overshoot_us\": %.3f, \"uptime_s\": %.3f, \"late\": %" PRIu64
		     ", \"interfered_reads\": %" PRIu64 ", \"flushes\": %" PRIu64 ", \"discards\": %" PRIu64
		     ", \"classes\": {",
		     emu.model.p.name, emu.profile_path, session_transport_names[session_transport()], emu.size, emu.model_enabled ? "true" : "false", emu.dilation,
		     emu.overhead_fixed_ns / 1000.0, emu.overhead_per_kib_ns / 1000.0,
		     emu.miss_short_at_ns / 1000.0, emu.miss_short_ns / 1000.0, emu.miss_long_at_ns / 1000.0,
		     emu.miss_long_ns / 1000.0,
		     emu.timer_overshoot_ns / 1000.0, (mono_ns() - emu.started_ns) / 1e9, emu.late,
		     emu.interfered_reads, emu.flushes, emu.discards);
	for (c = 0; c < CLASS_COUNT && n < (int)len; c++)
		n += snprintf(buf + n, len - (size_t)n,
			      "%s\"%s\": {\"requests\": %" PRIu64 ", \"bytes\": %" PRIu64
			      ", \"modelled_us\": %.1f}",
			      c ? ", " : "", model_class_names[c], emu.classes[c].count, emu.classes[c].bytes,
			      emu.classes[c].modelled_ns / 1000.0);
	if (n < (int)len && emu.cache_on)
		n += snprintf(buf + n, len - (size_t)n,
			      "}, \"cache\": {\"model\": \"%s\", \"policy\": \"%s\", \"capacity_bytes\": %" PRIu64
			      ", \"page_bytes\": %" PRIu64 ", \"cached_bytes\": %" PRIu64 ", \"read_hits\": %" PRIu64
			      ", \"read_misses\": %" PRIu64 ", \"admitted\": %" PRIu64 ", \"evicted\": %" PRIu64 "}}\n",
			      emu.cache_model.p.name, emu.cache.policy, emu.cache.capacity_pages * emu.cache.page_bytes,
			      emu.cache.page_bytes, emu.cache.used * emu.cache.page_bytes, emu.cache.read_hits,
			      emu.cache.read_misses, emu.cache.admitted, emu.cache.evicted);
	else if (n < (int)len)
		n += snprintf(buf + n, len - (size_t)n, "}, \"cache\": null}\n");
	pthread_mutex_unlock(&emu.lock);
	return n < (int)len ? n : -1;
}

/* A cache of this device, empty, as `CAPACITY_BYTES PAGE_BYTES POLICY` says;
 * 0, or -1 with what was wrong in err. */
int cache_from(const char *spec, struct cache *c, char *err, size_t err_len)
{
	unsigned long long capacity_bytes, page_bytes;
	char policy[16];

	if (sscanf(spec, "%llu %llu %15s", &capacity_bytes, &page_bytes, policy) != 3) {
		snprintf(err, err_len, "expected CAPACITY_BYTES PAGE_BYTES lru|admitting");
		return -1;
	}
	return cache_init(c, emu.size, capacity_bytes, page_bytes, policy, err, err_len);
}

/* `overhead FIXED_US PER_KIB_US` sets the subtracted host cost; `miss SHORT_AT_US
 * SHORT_US LONG_AT_US LONG_US` what replies still miss by at two modelled
 * latencies (added to that cost); `model on|off` switches the model (off
 * while calibrating); `dilation K` stretches modelled
 * time K times (1 <= K <= 1000) and starts the model afresh on its new clock;
 * `cache CAPACITY_BYTES PAGE_BYTES lru|admitting` puts an empty cache of the
 * --cache-profile device in front of this one, `cache reset` empties it (its
 * counters stay) and `cache off` removes it. */
int control(const char *buf, size_t size)
{
	char line[128], word[16], err[256];
	struct cache fresh;
	double fixed_us, per_kib_us, dilation, short_at_us, short_us, long_at_us, long_us;
	struct model_params params;

	if (size >= sizeof(line))
		return EINVAL;
	memcpy(line, buf, size);
	line[size] = '\0';
	if (sscanf(line, "overhead %lf %lf", &fixed_us, &per_kib_us) == 2 && fixed_us >= 0 && per_kib_us >= 0) {
		pthread_mutex_lock(&emu.lock);
		emu.overhead_fixed_ns = (uint64_t)(fixed_us * 1000.0);
		emu.overhead_per_kib_ns = (uint64_t)(per_kib_us * 1000.0);
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "miss %lf %lf %lf %lf", &short_at_us, &short_us, &long_at_us, &long_us) == 4 &&
	    short_at_us >= 0 && long_at_us >= short_at_us) {
		pthread_mutex_lock(&emu.lock);
		emu.miss_short_at_ns = short_at_us * 1000.0;
		emu.miss_short_ns = short_us * 1000.0;
		emu.miss_long_at_ns = long_at_us * 1000.0;
		emu.miss_long_ns = long_us * 1000.0;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "model %15s", word) == 1 && (strcmp(word, "on") == 0 || strcmp(word, "off") == 0)) {
		pthread_mutex_lock(&emu.lock);
		emu.model_enabled = strcmp(word, "on") == 0;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "dilation %lf", &dilation) == 1 && dilation >= 1.0 && dilation <= 1000.0) {
		pthread_mutex_lock(&emu.lock);
		emu.dilation = dilation;
		emu.epoch_ns = mono_ns();
		params = emu.model.p;
		model_init(&emu.model, &params);
		params = emu.cache_model.p;
		model_init(&emu.cache_model, &params);
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (sscanf(line, "cache %15s", word) == 1 && (strcmp(word, "reset") == 0 || strcmp(word, "off") == 0)) {
		pthread_mutex_lock(&emu.lock);
		if (emu.cache_on && strcmp(word, "reset") == 0)
			cache_reset(&emu.cache);
		else if (emu.cache_on)
			cache_free(&emu.cache);
		emu.cache_on = emu.cache_on && strcmp(word, "reset") == 0;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	if (strncmp(line, "cache ", 6) == 0) {
		/* the writer sees only EINVAL: the reason goes to the emulator's log */
		if (!emu.cache_profile_path) {
			fprintf(stderr, "tierlab-emu: `cache` needs --cache-profile (the faster device's profile)\n");
			return EINVAL;
		}
		if (cache_from(line + 6, &fresh, err, sizeof(err)) != 0) {
			fprintf(stderr, "tierlab-emu: cache: %s\n", err);
			return EINVAL;
		}
		pthread_mutex_lock(&emu.lock);
		if (emu.cache_on)
			cache_free(&emu.cache);
		emu.cache = fresh;
		emu.cache_on = 1;
		pthread_mutex_unlock(&emu.lock);
		return 0;
	}
	return EINVAL;
}

