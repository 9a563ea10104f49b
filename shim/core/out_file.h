#pragma once
// Output files made safely, in one place: the shim's trace and statistics and the command's report
// outputs all go through here. A new file is created under a temporary name in the same directory
// (O_CREAT|O_EXCL|O_NOFOLLOW: nothing planted there is opened) and then moved to the path, only when
// the path is free or holds a regular file of the caller's: a symlink, a device, a FIFO, a socket or
// a directory there is never followed, written or replaced (docs: issue 28, /dev/null replaced by
// a 0600 file when run as root). No allocation, no stdio: it runs inside the preloaded shim.
#include <cstddef>

namespace gms {

// Why a path was refused or a write failed: `what` is fixed text ("a symlink is there"), `err` an
// errno value or 0. Both go into the one warning the caller prints.
struct OutFileError {
  const char* what = nullptr;
  int err = 0;
};

struct OutFile {
  int fd = -1;
  bool published = false;  // the path names the file now (the temporary name is gone)
  char path[1024] = {};
  char tmp[1100] = {};
};

// Checks `path` and creates its temporary file with `mode` (before the umask). On success f->fd is
// open for writing and nothing exists at `path` yet.
bool out_file_create(const char* path, unsigned mode, OutFile* f, OutFileError* e);

// Moves the temporary file to the path (checked again: a file of the caller's is replaced, anything
// else refused). The descriptor stays open; writes after this land in the published file.
bool out_file_publish(OutFile* f, OutFileError* e);

// Closes the descriptor, checking the close (NFS reports write errors there); then publishes the
// file if it was not yet. On failure the unpublished file is removed.
bool out_file_finish(OutFile* f, OutFileError* e);

// Gives up: an unpublished file is removed; the descriptor is closed.
void out_file_discard(OutFile* f);

// Writes all n bytes (EINTR retried; SIGXFSZ of a file-size limit kept from the program). Returns 0
// or the errno of the failure.
int out_file_write(int fd, const void* data, size_t n);

// Whether `path` may be written by out_file_create now (the same check, nothing created).
bool out_file_check(const char* path, OutFileError* e);

}  // namespace gms
