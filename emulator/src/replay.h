/* The device model over arrays of requests, for tierlab's cost model, which
 * loads it in-process (libtierlab-model.so) instead of feeding
 * `tierlab-emu --simulate` text. */
#ifndef TIERLAB_REPLAY_H
#define TIERLAB_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#define REPLAY_MAX_ROLES 8
/* Raised whenever model_replay's arguments change, so that a caller can
 * refuse a library built from older sources instead of passing it arrays it
 * reads otherwise. */
#define REPLAY_ABI 2

unsigned model_replay_abi(void);

/* Submits requests 0..n-1 in order, each to the model of its role (a fresh
 * model per role, on the profile file of that index), and adds each
 * request's latency (completion minus submission) times its share[i] to
 * io_ns[role]: with share[i] the part of the request's traced time in
 * flight that was its own (1 alone, 1/k beside k - 1 others), io_ns is the
 * time the device was busy, as far as the requests' overlap stays as traced.
 * write[i] is 0 for a read. Returns 0, or -1 with what was wrong in err
 * (a profile that does not load, a role out of range, a zero length). */
int model_replay(const char *const *profile_paths, unsigned roles, size_t n, const uint64_t *at_ns,
		 const uint8_t *write, const uint64_t *offset, const uint64_t *length, const uint8_t *role,
		 const float *share, double *io_ns, char *err, size_t err_len);

#endif
