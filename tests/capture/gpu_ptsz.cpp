// The per-thread-default-stream entry points: this file is compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM (what
// `nvcc --default-stream per-thread` defines), so the runtime calls cuMemAllocAsync_ptsz, cuMemAllocFromPoolAsync_ptsz
// and cuMemFreeAsync_ptsz; a pool's allocation, its release threshold and cuMemPoolTrimTo are exercised here too.
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "compile with -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1"
#endif
#include <cuda_runtime.h>

#include "gpu_check.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace gpu_ptsz {

// Stream 0 here is the calling thread's default stream; an explicit stream and a created pool are used as well.
__attribute__((noinline)) void gpu_scenario_ptsz(Facts& f) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  // `pool` keeps an allocation alive to the end; `trim_pool` keeps what is freed (release threshold: all) until the
  // trim gives it back.
  cudaMemPool_t pool, trim_pool;
  CK(cudaMemPoolCreate(&pool, &props));
  CK(cudaMemPoolCreate(&trim_pool, &props));
  uint64_t keep_all = UINT64_MAX;
  CK(cudaMemPoolSetAttribute(trim_pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  void *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
  CK(cudaMallocAsync(&a, 768u << 10, 0));                // -> cuMemAllocAsync_ptsz, per-thread stream
  CK(cudaMallocAsync(&b, 640u << 10, s));                // -> cuMemAllocAsync_ptsz, explicit stream
  CK(cudaMallocFromPoolAsync(&c, 1536u << 10, trim_pool, 0));  // -> cuMemAllocFromPoolAsync_ptsz
  CK(cudaMallocFromPoolAsync(&d, 2560u << 10, pool, s));  // stays alive (in `segments`)
  f["ptsz_a"] = reinterpret_cast<uint64_t>(a);
  f["ptsz_b"] = reinterpret_cast<uint64_t>(b);
  f["ptsz_c"] = reinterpret_cast<uint64_t>(c);
  f["ptsz_d"] = reinterpret_cast<uint64_t>(d);
  f["ptsz_stream"] = reinterpret_cast<uint64_t>(s);
  f["pool"] = reinterpret_cast<uint64_t>(pool);
  f["trim_pool"] = reinterpret_cast<uint64_t>(trim_pool);
  CK(cudaFreeAsync(a, 0));  // -> cuMemFreeAsync_ptsz
  CK(cudaFreeAsync(b, s));
  CK(cudaFreeAsync(c, 0));
  CK(cudaStreamSynchronize(0));
  CK(cudaStreamSynchronize(s));
  uint64_t before = 0, after = 0;
  CK(cudaMemPoolGetAttribute(trim_pool, cudaMemPoolAttrReservedMemCurrent, &before));
  CK(cudaMemPoolTrimTo(trim_pool, 0));  // -> cuMemPoolTrimTo: gives back what c left reserved
  CK(cudaMemPoolGetAttribute(trim_pool, cudaMemPoolAttrReservedMemCurrent, &after));
  f["pool_reserved_before_trim"] = before;
  f["pool_reserved_after_trim"] = after;
  asm volatile("");
}

}  // namespace gpu_ptsz
