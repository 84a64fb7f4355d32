// GPU benchmark of the capture library's cost: a cudaMallocAsync/cudaFreeAsync loop timed per API call (run it bare
// and under `allocscope record --stacks none|native`), then, when injected, the time to dump what was recorded.
//   bench_capture [--iters N] [--depth D] [--label TEXT] [--dump PATH]
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int g_iters = 200000;
cudaStream_t g_stream;

__attribute__((noinline)) double timed_loop(int iters) {
  void* p = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (cudaMallocAsync(&p, 1 << 20, g_stream) != cudaSuccess) std::abort();
    if (cudaFreeAsync(p, g_stream) != cudaSuccess) std::abort();
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

// Recurses `depth` frames before the loop so native stacks are as deep as a framework's.
__attribute__((noinline)) double at_depth(int depth, int iters) {
  if (depth <= 0) return timed_loop(iters);
  const double r = at_depth(depth - 1, iters);
  asm volatile("");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int depth = 0;
  std::string label = "bare", dump;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) g_iters = std::atoi(argv[++i]);
    else if (a == "--depth" && i + 1 < argc) depth = std::atoi(argv[++i]);
    else if (a == "--label" && i + 1 < argc) label = argv[++i];
    else if (a == "--dump" && i + 1 < argc) dump = argv[++i];
  }
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("no CUDA device: skipped\n");
    return 0;
  }
  cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
  at_depth(depth, 2000);  // warm-up: pool growth, caches
  // Best of 3 runs, so a scheduling hiccup does not count against the capture.
  double best = 1e300;
  for (int r = 0; r < 3; ++r) {
    const double ns = at_depth(depth, g_iters);
    if (ns < best) best = ns;
  }
  cudaStreamSynchronize(g_stream);
  std::printf("%s: %.1f ns per API call (%d cudaMallocAsync+cudaFreeAsync pairs, depth %d)\n", label.c_str(),
              best / (2.0 * g_iters), g_iters, depth);
  if (!dump.empty()) {
    const char* lib = std::getenv("CUDA_INJECTION64_PATH");
    void* h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    auto fn = h ? reinterpret_cast<int (*)(const char*)>(dlsym(h, "allocscope_capture_dump")) : nullptr;
    if (!fn) {
      std::printf("%s: not injected, no dump timed\n", label.c_str());
      return 0;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = fn(dump.c_str());
    const auto t1 = std::chrono::steady_clock::now();
    std::printf("%s: dump %s in %.1f ms (rc %d)\n", label.c_str(), dump.c_str(),
                std::chrono::duration<double, std::milli>(t1 - t0).count(), rc);
  }
  return 0;
}
