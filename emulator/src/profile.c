#include "profile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct profile_key {
	const char *name;
	size_t offset;
	int is_count; /* a whole number (unsigned) rather than a double */
};

static const struct profile_key keys[] = {
	{"channels", offsetof(struct model_params, channels), 1},
	{"read_random_us", offsetof(struct model_params, read_random_us), 0},
	{"read_sequential_us", offsetof(struct model_params, read_sequential_us), 0},
	{"write_us", offsetof(struct model_params, write_us), 0},
	{"read_bandwidth_mb_s", offsetof(struct model_params, read_bandwidth_mb_s), 0},
	{"write_bandwidth_mb_s", offsetof(struct model_params, write_bandwidth_mb_s), 0},
	{"streams", offsetof(struct model_params, streams), 1},
	{"readahead_kb", offsetof(struct model_params, readahead_kb), 0},
	{"write_buffer_mb", offsetof(struct model_params, write_buffer_mb), 0},
	{"sustained_write_mb_s", offsetof(struct model_params, sustained_write_mb_s), 0},
	{"gc_pause_us", offsetof(struct model_params, gc_pause_us), 0},
	{"gc_pause_every_kb", offsetof(struct model_params, gc_pause_every_kb), 0},
	{"read_during_write_us", offsetof(struct model_params, read_during_write_us), 0},
};
#define KEY_COUNT (sizeof(keys) / sizeof(keys[0]))

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/* A quoted string; a `#` inside the quotes is text, after them a comment. */
static int parse_string(char *value, char *out, size_t out_len)
{
	char *close;

	if (*value != '"')
		return -1;
	close = strchr(value + 1, '"');
	if (!close || (size_t)(close - value - 1) >= out_len)
		return -1;
	*close = '\0';
	if (*trim(close + 1) != '\0' && *trim(close + 1) != '#')
		return -1;
	strcpy(out, value + 1);
	return 0;
}

static int parse_number(char *value, const struct profile_key *key, struct model_params *out)
{
	char *hash = strchr(value, '#');
	char *end;
	double number;

	if (hash)
		*hash = '\0';
	value = trim(value);
	errno = 0;
	number = strtod(value, &end);
	if (end == value || *end != '\0' || errno != 0 || number < 0)
		return -1;
	if (key->is_count) {
		if (number != (double)(unsigned)number)
			return -1;
		*(unsigned *)((char *)out + key->offset) = (unsigned)number;
	} else {
		*(double *)((char *)out + key->offset) = number;
	}
	return 0;
}

int profile_load(const char *path, struct model_params *out, char *err, size_t err_len)
{
	FILE *f = fopen(path, "r");
	char line[512], description[256];
	int seen[KEY_COUNT] = {0}, have_name = 0, lineno = 0;
	size_t i;
	const char *problem;

	if (!f) {
		snprintf(err, err_len, "%s: cannot open the profile: %s", path, strerror(errno));
		return -1;
	}
	memset(out, 0, sizeof(*out));
	while (fgets(line, sizeof(line), f)) {
		char *text = trim(line), *eq, *name, *value;

		lineno++;
		if (*text == '\0' || *text == '#')
			continue;
		eq = strchr(text, '=');
		if (!eq) {
			snprintf(err, err_len, "%s:%d: expected `key = value`, got %s", path, lineno, text);
			goto fail;
		}
		*eq = '\0';
		name = trim(text);
		value = trim(eq + 1);
		if (strcmp(name, "model") == 0 || strcmp(name, "description") == 0) {
			int is_model = name[0] == 'm';
			if (parse_string(value, is_model ? out->name : description,
					 is_model ? sizeof(out->name) : sizeof(description)) != 0) {
				snprintf(err, err_len, "%s:%d: %s must be a quoted string", path, lineno, name);
				goto fail;
			}
			have_name |= is_model;
			continue;
		}
		for (i = 0; i < KEY_COUNT && strcmp(keys[i].name, name) != 0; i++)
			;
		if (i == KEY_COUNT) {
			snprintf(err, err_len, "%s:%d: unknown key %s", path, lineno, name);
			goto fail;
		}
		if (seen[i]++) {
			snprintf(err, err_len, "%s:%d: %s is given twice", path, lineno, name);
			goto fail;
		}
		if (parse_number(value, &keys[i], out) != 0) {
			snprintf(err, err_len, "%s:%d: %s must be a %s, got %s", path, lineno, name,
				 keys[i].is_count ? "whole number >= 0" : "number >= 0", value);
			goto fail;
		}
	}
	fclose(f);
	if (!have_name) {
		snprintf(err, err_len, "%s: the profile has no `model = \"...\"` line", path);
		return -1;
	}
	for (i = 0; i < KEY_COUNT; i++) {
		if (!seen[i]) {
			snprintf(err, err_len, "%s: missing key %s", path, keys[i].name);
			return -1;
		}
	}
	problem = model_check(out);
	if (problem) {
		snprintf(err, err_len, "%s: %s", path, problem);
		return -1;
	}
	return 0;
fail:
	fclose(f);
	return -1;
}
