// The per-thread-default-stream entry points: this file is compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (what
// `nvcc --default-stream per-thread` defines), so the runtime calls cuMemAllocAsync_ptsz, cuMemAllocFromPoolAsync_ptsz
// and cuMemFreeAsync_ptsz; a pool's allocation, its release threshold and cuMemPoolTrimTo are exercised here too.
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "compile with -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1"
#endif
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace gpu_ptsz {

using Facts = std::map<std::string, uint64_t>;

#define PCK(x)                                                                             \
  do {                                                                                     \
    auto _e = (x);                                                                         \
    if (_e != 0) {                                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, int(_e));     \
      std::exit(3);                                                                        \
    }                                                                                      \
  } while (0)

// Stream 0 here is the calling thread's default stream; an explicit stream and a created pool are used as well.
__attribute__((noinline)) void gpu_scenario_ptsz(Facts& f) {
  int dev = 0;
  PCK(cudaGetDevice(&dev));
  cudaStream_t s;
  PCK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  // `pool` keeps an allocation alive to the end; `trim_pool` keeps what is freed (release threshold: all) until the
  // trim gives it back.
  cudaMemPool_t pool, trim_pool;
  PCK(cudaMemPoolCreate(&pool, &props));
  PCK(cudaMemPoolCreate(&trim_pool, &props));
  uint64_t keep_all = UINT64_MAX;
  PCK(cudaMemPoolSetAttribute(trim_pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  void *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
  PCK(cudaMallocAsync(&a, 768u << 10, 0));                // -> cuMemAllocAsync_ptsz, per-thread stream
  PCK(cudaMallocAsync(&b, 640u << 10, s));                // -> cuMemAllocAsync_ptsz, explicit stream
  PCK(cudaMallocFromPoolAsync(&c, 1536u << 10, trim_pool, 0));  // -> cuMemAllocFromPoolAsync_ptsz
  PCK(cudaMallocFromPoolAsync(&d, 2560u << 10, pool, s));  // stays alive (in `segments`)
  f["ptsz_a"] = reinterpret_cast<uint64_t>(a);
  f["ptsz_b"] = reinterpret_cast<uint64_t>(b);
  f["ptsz_c"] = reinterpret_cast<uint64_t>(c);
  f["ptsz_d"] = reinterpret_cast<uint64_t>(d);
  f["ptsz_stream"] = reinterpret_cast<uint64_t>(s);
  f["pool"] = reinterpret_cast<uint64_t>(pool);
  f["trim_pool"] = reinterpret_cast<uint64_t>(trim_pool);
  PCK(cudaFreeAsync(a, 0));  // -> cuMemFreeAsync_ptsz
  PCK(cudaFreeAsync(b, s));
  PCK(cudaFreeAsync(c, 0));
  PCK(cudaStreamSynchronize(0));
  PCK(cudaStreamSynchronize(s));
  uint64_t before = 0, after = 0;
  PCK(cudaMemPoolGetAttribute(trim_pool, cudaMemPoolAttrReservedMemCurrent, &before));
  PCK(cudaMemPoolTrimTo(trim_pool, 0));  // -> cuMemPoolTrimTo: gives back what c left reserved
  PCK(cudaMemPoolGetAttribute(trim_pool, cudaMemPoolAttrReservedMemCurrent, &after));
  f["pool_reserved_before_trim"] = before;
  f["pool_reserved_after_trim"] = after;
  asm volatile("");
}

}  // namespace gpu_ptsz
