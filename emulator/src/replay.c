#include "replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "model.h"
#include "profile.h"

unsigned model_replay_abi(void)
{
	return REPLAY_ABI;
}

int model_replay(const char *const *profile_paths, unsigned roles, size_t n, const uint64_t *at_ns,
		 const uint8_t *write, const uint64_t *offset, const uint64_t *length, const uint8_t *role,
		 const float *share, double *io_ns, char *err, size_t err_len)
{
	struct model *models;
	struct model_params p;
	struct model_decision d;
	unsigned r;
	size_t i;

	if (roles == 0 || roles > REPLAY_MAX_ROLES) {
		snprintf(err, err_len, "between 1 and %d roles, got %u", REPLAY_MAX_ROLES, roles);
		return -1;
	}
	/* a struct model holds every channel's and stream's state: too big for the stack eight times */
	models = calloc(roles, sizeof(*models));
	if (!models) {
		snprintf(err, err_len, "out of memory for %u device models", roles);
		return -1;
	}
	for (r = 0; r < roles; r++) {
		if (profile_load(profile_paths[r], &p, err, err_len) != 0) {
			free(models);
			return -1;
		}
		model_init(&models[r], &p);
		io_ns[r] = 0;
	}
	for (i = 0; i < n; i++) {
		if (role[i] >= roles || length[i] == 0) {
			snprintf(err, err_len, "request %zu: role %u of %u, length %" PRIu64 " (must be above 0)", i,
				 role[i], roles, length[i]);
			free(models);
			return -1;
		}
		model_submit(&models[role[i]], at_ns[i], write[i] ? MODEL_WRITE : MODEL_READ, offset[i], length[i], &d);
		io_ns[role[i]] += (double)(d.done_ns - at_ns[i]) * share[i];
	}
	free(models);
	return 0;
}
