// LD_PRELOAD library for the CLI suite: counts the threads the process starts (every std::thread is a
// pthread_create) and, as the process exits, writes the count to the file named by ALLOCSCOPE_TEST_THREADS. The
// real binary's real threads, counted where they start.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {
std::atomic<int> g_started{0};

struct WriteAtExit {
  ~WriteAtExit() {
    const char* path = std::getenv("ALLOCSCOPE_TEST_THREADS");
    if (!path) return;
    if (FILE* f = std::fopen(path, "w")) {
      std::fprintf(f, "%d\n", g_started.load());
      std::fclose(f);
    }
  }
} g_write_at_exit;
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Create real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  const int rc = real(thread, attr, start, arg);
  if (rc == 0) g_started.fetch_add(1);
  return rc;
}
