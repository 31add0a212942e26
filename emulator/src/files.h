/* tierlab-emu's file system: one request of the FUSE session (session.h) answered. */
#ifndef TIERLAB_FILES_H
#define TIERLAB_FILES_H

#include "session.h"

void files_handle(const struct fuse_request *req);

#endif
