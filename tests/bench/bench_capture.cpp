// GPU benchmark of the capture library's cost: a cudaMallocAsync/cudaFreeAsync loop timed per API call (run it bare
// and under `allocscope record --stacks none|native`), then, when injected, the time to dump what was recorded.
//   bench_capture [--iters N] [--depth D] [--label TEXT] [--dump PATH]
// With --ab ROUNDS it instead alternates, inside one process: bare, a do-nothing CUPTI subscriber, and the linked
// capture library started with stacks none, then native, ROUNDS times, and prints medians (cross-process noise on a
// shared host is larger than the effect measured).
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "allocscope_capture.h"

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

void CUPTIAPI noop(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run_ab(int rounds, int depth) {
  std::vector<double> bare, cupti, none, native;
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.dump_at_exit = 0;
  o.max_entries = 100000;
  o.max_frames = 32;
  double dump_ms = 0;
  for (int r = 0; r < rounds; ++r) {
    bare.push_back(at_depth(depth, g_iters) / (2.0 * g_iters));
    CUpti_SubscriberHandle sub;
    if (cuptiSubscribe(&sub, noop, nullptr) != CUPTI_SUCCESS) return 1;
    for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync})
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
    cupti.push_back(at_depth(depth, g_iters) / (2.0 * g_iters));
    cuptiUnsubscribe(sub);
    o.stacks = ALLOCSCOPE_STACKS_NONE;
    if (allocscope_capture_start(&o) != 0) return 1;
    none.push_back(at_depth(depth, g_iters) / (2.0 * g_iters));
    allocscope_capture_stop();
    o.stacks = ALLOCSCOPE_STACKS_NATIVE;
    if (allocscope_capture_start(&o) != 0) return 1;
    native.push_back(at_depth(depth, g_iters) / (2.0 * g_iters));
    allocscope_capture_stop();
    const auto t0 = std::chrono::steady_clock::now();
    allocscope_capture_dump("/tmp/allocscope_bench_ab.pickle");  // the last 100k events, native stacks
    dump_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  const double b = median(bare);
  std::printf("in-process A/B, %d rounds of %d pairs, depth %d, medians per API call:\n", rounds, g_iters, depth);
  std::printf("  bare %.1f ns | cupti-noop +%.1f ns | stacks none +%.1f ns | stacks native(32) +%.1f ns\n", b,
              median(cupti) - b, median(none) - b, median(native) - b);
  std::printf("  last dump of 100k native-stack events: %.1f ms\n", dump_ms);
  std::remove("/tmp/allocscope_bench_ab.pickle");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int depth = 0, ab = 0;
  std::string label = "bare", dump;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) g_iters = std::atoi(argv[++i]);
    else if (a == "--depth" && i + 1 < argc) depth = std::atoi(argv[++i]);
    else if (a == "--label" && i + 1 < argc) label = argv[++i];
    else if (a == "--dump" && i + 1 < argc) dump = argv[++i];
    else if (a == "--ab" && i + 1 < argc) ab = std::atoi(argv[++i]);
  }
  if (cudaFree(nullptr) != cudaSuccess) {
    std::printf("no CUDA device: skipped\n");
    return 0;
  }
  cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
  at_depth(depth, 2000);  // warm-up: pool growth, caches
  if (ab > 0) return run_ab(ab, depth);
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
