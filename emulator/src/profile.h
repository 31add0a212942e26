/* Device profiles: a TOML subset of `key = number` and `key = "text"` lines,
 * `#` comments and blank lines. Every numeric key of struct model_params must
 * be present exactly once; unknown keys are errors. */
#ifndef TIERLAB_PROFILE_H
#define TIERLAB_PROFILE_H

#include <stddef.h>

#include "model.h"

/* Returns 0, or -1 with a message naming the file and line in err. */
int profile_load(const char *path, struct model_params *out, char *err, size_t err_len);

#endif
