// LD_PRELOAD library for the CLI suite: the moment the process maps the file named by ALLOCSCOPE_TEST_TRUNCATE (an
// absolute, canonical path), it truncates that file to its first 4 KB, as a training job that dumps its snapshot
// again to the same path does to a reader that has it mapped. A real truncation of a real file at a known moment:
// what follows (the kernel's SIGBUS on the next read past the new end, and the CLI's answer to it) is not faked.
#include <dlfcn.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  using Mmap = void* (*)(void*, size_t, int, int, int, off_t);
  static const Mmap real = reinterpret_cast<Mmap>(dlsym(RTLD_NEXT, "mmap"));
  void* p = real(addr, len, prot, flags, fd, off);
  const char* target = std::getenv("ALLOCSCOPE_TEST_TRUNCATE");
  if (p == MAP_FAILED || fd < 0 || !target) return p;
  char link[64], path[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return p;
  path[n] = '\0';
  if (std::strcmp(path, target) == 0 && truncate(target, 4096) != 0) std::perror("truncate_on_map");
  return p;
}
