#include "out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "log.h"

namespace gms {
namespace {

enum class At { free, own_file, refused };

// What is at the path now. A refusal fills `e`.
At inspect(const char* path, OutFileError* e) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return At::free;
    *e = {"cannot look at the path", errno};
    return At::refused;
  }
  if (S_ISLNK(st.st_mode)) {
    *e = {"a symlink is there; it is neither followed nor replaced", 0};
  } else if (S_ISDIR(st.st_mode)) {
    *e = {"it names a directory", 0};
  } else if (!S_ISREG(st.st_mode)) {
    *e = {"a device, FIFO or socket is there; it is not written or replaced", 0};
  } else if (st.st_uid != geteuid()) {
    *e = {"a file of another user is there; it is not replaced", 0};
  } else {
    return At::own_file;
  }
  return At::refused;
}

// Moves tmp to path without replacing anything that appeared there meanwhile.
int move_no_replace(const char* tmp, const char* path) {
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A file system without RENAME_NOREPLACE: link() never replaces either.
  if (link(tmp, path) == 0) {
    unlink(tmp);
    return 0;
  }
  return errno;
}

}  // namespace

bool out_file_check(const char* path, OutFileError* e) {
  if (path[0] == '\0') {
    *e = {"the path is empty", 0};
    return false;
  }
  size_t n = std::strlen(path);
  if (n >= sizeof(OutFile::path)) {
    *e = {"the path is too long", 0};
    return false;
  }
  if (path[n - 1] == '/') {
    *e = {"it names a directory", 0};
    return false;
  }
  return inspect(path, e) != At::refused;
}

bool out_file_create(const char* path, unsigned mode, OutFile* f, OutFileError* e) {
  *f = OutFile{};
  if (!out_file_check(path, e)) return false;
  size_t n = std::strlen(path);
  std::memcpy(f->path, path, n + 1);
  const char* slash = std::strrchr(path, '/');
  size_t dir_len = slash ? static_cast<size_t>(slash - path) + 1 : 0;
  static std::atomic<unsigned> serial{0};
  int err = 0;
  for (int attempt = 0; attempt < 64; ++attempt) {
    Line l;
    l.str(path, dir_len).chr('.').str(path + dir_len).str(".tmp-").i64(getpid()).chr('-')
        .u64(serial.fetch_add(1, std::memory_order_relaxed));
    if (l.size() + 1 > sizeof(f->tmp)) {
      *e = {"the path is too long", 0};
      return false;
    }
    std::memcpy(f->tmp, l.data(), l.size());
    f->tmp[l.size()] = '\0';
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (f->fd >= 0) return true;
    err = errno;
    if (err != EEXIST) break;
  }
  *e = {"cannot create a file there", err};
  f->tmp[0] = '\0';
  return false;
}

bool out_file_publish(OutFile* f, OutFileError* e) {
  if (f->published) return true;
  for (int attempt = 0; attempt < 2; ++attempt) {
    At at = inspect(f->path, e);
    if (at == At::refused) break;
    int err = at == At::own_file ? (rename(f->tmp, f->path) == 0 ? 0 : errno) : move_no_replace(f->tmp, f->path);
    if (err == 0) {
      f->published = true;
      f->tmp[0] = '\0';
      return true;
    }
    *e = {"cannot put the file there", err};
    if (err != EEXIST) break;  // else something appeared meanwhile: look at it again
  }
  out_file_discard(f);
  return false;
}

bool out_file_finish(OutFile* f, OutFileError* e) {
  int fd = f->fd;
  f->fd = -1;
  if (fd >= 0 && close(fd) != 0 && errno != EINTR) {
    *e = {"cannot write the file", errno};
    out_file_discard(f);
    return false;
  }
  return out_file_publish(f, e);
}

void out_file_discard(OutFile* f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  if (!f->published && f->tmp[0]) unlink(f->tmp);
  f->tmp[0] = '\0';
}

int out_file_write(int fd, const void* data, size_t n) {
  if (fd < 0) return EBADF;
  // A file-size limit (RLIMIT_FSIZE) makes the kernel send SIGXFSZ, which kills by default: it is
  // blocked around the write on threads that have it unblocked, and the one our write raised is
  // taken back, so the program never sees it.
  sigset_t xfsz, old;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &xfsz, &old);
  const bool was_blocked = sigismember(&old, SIGXFSZ) == 1;
  const char* p = static_cast<const char*>(data);
  int err = 0;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  if (!was_blocked) {
    if (err == EFBIG) {
      timespec zero{0, 0};
      sigtimedwait(&xfsz, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  return err;
}

}  // namespace gms
