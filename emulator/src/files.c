/* tierlab-emu's file system (files.h): `device`, served by the model, `stats` and `control`. */
#define _GNU_SOURCE

#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <string.h>
#include <sys/stat.h>

#include "device.h"

enum { INO_ROOT = 1, INO_DEVICE, INO_STATS, INO_CONTROL };

static const char *const file_names[] = {NULL, NULL, "device", "stats", "control"};

static void fill_attr(uint64_t ino, struct fuse_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->ino = ino;
	attr->nlink = 1;
	attr->blksize = 4096;
	if (ino == INO_ROOT) {
		attr->mode = S_IFDIR | 0755;
		attr->nlink = 2;
	} else if (ino == INO_DEVICE) {
		attr->mode = S_IFREG | 0600;
		attr->size = emu.size;
		attr->blocks = emu.size / 512;
	} else if (ino == INO_STATS) {
		attr->mode = S_IFREG | 0444;
	} else {
		attr->mode = S_IFREG | 0200;
	}
}

/* names and attributes never change while the emulator serves */
enum { VALID_S = 3600 };

static void op_lookup(const struct fuse_request *req)
{
	struct fuse_entry_out out = {.entry_valid = VALID_S, .attr_valid = VALID_S};
	uint64_t ino;

	if (req->nodeid != INO_ROOT || req->payload_size == 0 || ((const char *)req->payload)[req->payload_size - 1]) {
		session_reply(&req->to, ENOENT, NULL, 0);
		return;
	}
	for (ino = INO_DEVICE; ino <= INO_CONTROL; ino++)
		if (strcmp(req->payload, file_names[ino]) == 0)
			break;
	if (ino > INO_CONTROL) {
		session_reply(&req->to, ENOENT, NULL, 0);
		return;
	}
	out.nodeid = ino;
	fill_attr(ino, &out.attr);
	session_reply(&req->to, 0, &out, sizeof(out));
}

static void op_getattr(const struct fuse_request *req)
{
	struct fuse_attr_out out = {.attr_valid = VALID_S};

	if (req->nodeid < INO_ROOT || req->nodeid > INO_CONTROL) {
		session_reply(&req->to, ENOENT, NULL, 0);
		return;
	}
	fill_attr(req->nodeid, &out.attr);
	session_reply(&req->to, 0, &out, sizeof(out));
}

static void op_readdir(const struct fuse_request *req)
{
	const struct fuse_read_in *in = req->arg;
	char buf[1024];
	size_t used = 0;
	uint64_t i;

	if (req->nodeid != INO_ROOT) {
		session_reply(&req->to, ENOTDIR, NULL, 0);
		return;
	}
	for (i = INO_DEVICE + in->offset; i <= INO_CONTROL; i++) {
		size_t namelen = strlen(file_names[i]), need = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + namelen);
		struct fuse_dirent *d = (struct fuse_dirent *)(buf + used);

		if (used + need > in->size || used + need > sizeof(buf))
			break;
		memset(d, 0, need);
		d->ino = i;
		d->off = i - INO_DEVICE + 1;
		d->namelen = (uint32_t)namelen;
		d->type = S_IFREG >> 12;
		memcpy(d->name, file_names[i], namelen);
		used += need;
	}
	session_reply(&req->to, 0, buf, used);
}

static void op_open(const struct fuse_request *req)
{
	/* every request must reach the model: no page cache in front of it */
	struct fuse_open_out out = {.open_flags = FOPEN_DIRECT_IO};

	if (req->nodeid == INO_ROOT) {
		session_reply(&req->to, EISDIR, NULL, 0);
		return;
	}
	session_reply(&req->to, 0, &out, sizeof(out));
}

static void op_read(const struct fuse_request *req)
{
	const struct fuse_read_in *in = req->arg;
	uint64_t off = in->offset, size = in->size;

	if (req->nodeid == INO_STATS) {
		char buf[4096];
		int n = stats_json(buf, sizeof(buf));

		if (n < 0 || off >= (uint64_t)n)
			session_reply(&req->to, 0, NULL, 0);
		else
			session_reply(&req->to, 0, buf + off, (uint64_t)n - off < size ? (uint64_t)n - off : size);
		return;
	}
	if (req->nodeid != INO_DEVICE) {
		session_reply(&req->to, EBADF, NULL, 0);
		return;
	}
	if (off >= emu.size) {
		session_reply(&req->to, 0, NULL, 0);
		return;
	}
	if (size > emu.size - off)
		size = emu.size - off;
	session_reply_at(&req->to, model_due(MODEL_READ, (off_t)off, size), 0, emu.map + off, size);
}

static void op_write(const struct fuse_request *req)
{
	const struct fuse_write_in *in = req->arg;
	struct fuse_write_out out = {.size = in->size};
	int err;

	if (req->payload_size < in->size) {
		session_reply(&req->to, EINVAL, NULL, 0);
		return;
	}
	if (req->nodeid == INO_CONTROL) {
		err = control(req->payload, in->size);
		session_reply(&req->to, err, &out, sizeof(out));
		return;
	}
	if (req->nodeid != INO_DEVICE) {
		session_reply(&req->to, EBADF, NULL, 0);
		return;
	}
	if (!in_device((off_t)in->offset, in->size)) {
		session_reply(&req->to, ENOSPC, NULL, 0);
		return;
	}
	memcpy(emu.map + in->offset, req->payload, in->size);
	session_reply_at(&req->to, model_due(MODEL_WRITE, (off_t)in->offset, in->size), 0, &out, sizeof(out));
}
/* The modelled devices have power-loss-protected caches: a flush costs nothing. */
static void op_fsync(const struct fuse_request *req)
{
	pthread_mutex_lock(&emu.lock);
	emu.flushes++;
	pthread_mutex_unlock(&emu.lock);
	session_reply(&req->to, 0, NULL, 0);
}

/* Discards (mkfs, fstrim) free the backing blocks. */
static void op_fallocate(const struct fuse_request *req)
{
	const struct fuse_fallocate_in *in = req->arg;

	if (req->nodeid != INO_DEVICE || !(in->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		session_reply(&req->to, EOPNOTSUPP, NULL, 0);
		return;
	}
	if (!in_device((off_t)in->offset, in->length)) {
		session_reply(&req->to, EINVAL, NULL, 0);
		return;
	}
	if (fallocate(emu.backing_fd, (int)in->mode | FALLOC_FL_KEEP_SIZE, (off_t)in->offset, (off_t)in->length) != 0) {
		session_reply(&req->to, errno, NULL, 0);
		return;
	}
	pthread_mutex_lock(&emu.lock);
	emu.discards++;
	pthread_mutex_unlock(&emu.lock);
	session_reply(&req->to, 0, NULL, 0);
}

static void op_statfs(const struct fuse_request *req)
{
	struct fuse_statfs_out out = {.st = {.blocks = emu.size / 4096, .bsize = 4096, .frsize = 4096, .namelen = 255}};

	session_reply(&req->to, 0, &out, sizeof(out));
}

void files_handle(const struct fuse_request *req)
{
	struct fuse_open_out opened = {0};

	switch (req->opcode) {
	case FUSE_LOOKUP:
		op_lookup(req);
		return;
	case FUSE_GETATTR:
		op_getattr(req);
		return;
	case FUSE_OPEN:
		op_open(req);
		return;
	case FUSE_OPENDIR:
		session_reply(&req->to, 0, &opened, sizeof(opened));
		return;
	case FUSE_READDIR:
		op_readdir(req);
		return;
	case FUSE_READ:
		op_read(req);
		return;
	case FUSE_WRITE:
		op_write(req);
		return;
	case FUSE_FSYNC:
		op_fsync(req);
		return;
	case FUSE_FALLOCATE:
		op_fallocate(req);
		return;
	case FUSE_STATFS:
		op_statfs(req);
		return;
	case FUSE_FLUSH:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FSYNCDIR:
		session_reply(&req->to, 0, NULL, 0);
		return;
	default:
		session_reply(&req->to, ENOSYS, NULL, 0);
	}
}

