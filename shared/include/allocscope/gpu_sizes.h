// GPU memory sizes: what cudaMemGetInfo reports as total for the GPUs people train and serve on. A snapshot does
// not hold the GPU's size, so answers that need it (the OOM explainer, what-if) take it from the user or infer it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "allocscope/result.h"

namespace allocscope {

struct GpuClass {
  std::string_view label;   // "80 GB (A100 80GB, H100)"
  std::string_view names;   // lower-case names accepted by --gpu, comma-separated
  uint64_t total_bytes;     // cudaMemGetInfo total (the figure PyTorch's OOM message calls "total capacity")
  // The most threads its largest card runs at once (SMs x max threads per SM), which caps how many blocks a
  // reduction is split over (its staging buffers stop growing there); 0 where unknown (AMD: other launch rules).
  uint64_t resident_threads;
};

// The catalogue, smallest first.
std::span<const GpuClass> gpu_classes();

// The memory a CUDA context takes outside any allocator (driver, kernels' code, cuBLAS handles): at least this,
// usually 0.3-1 GiB. Used so that an inferred GPU leaves room for one.
constexpr uint64_t kMinContextBytes = 256ull << 20;
// What a prediction leaves for the CUDA context beside the allocator's segments. On an H100 with PyTorch 2.11 the
// context is 529 MiB after init, and grows as a training step loads cuBLAS's and cuDNN's kernels: 703 MiB after a
// matmul, a convolution, autocast and attention (tests/fixtures/generators/measure_context.py,
// tests/fixtures/whatif/context_h100.json). Leaving less would call a run that misses by a few hundred MiB a fit.
constexpr uint64_t kTypicalContextBytes = 704ull << 20;

struct GpuCapacity {
  uint64_t total_bytes = 0;
  std::string label;     // the class's label, or "as given" for a byte count
  bool inferred = true;  // false when the user named the GPU or gave its size
  uint64_t resident_threads = 0;  // GpuClass::resident_threads; 0 for a size given in bytes
};
// The bytes the allocator may reserve on a GPU once the context has its share.
inline uint64_t allocator_room(const GpuCapacity& gpu) {
  return gpu.total_bytes > kTypicalContextBytes ? gpu.total_bytes - kTypicalContextBytes : 0;
}

// The smallest class whose total holds `accounted_bytes` (what PyTorch reserved plus what the driver had free) and
// a CUDA context; nullopt above the largest class. It is a lower bound: the GPU may be larger, with the rest held
// outside the allocator, and the answer says so.
std::optional<GpuCapacity> infer_gpu_capacity(uint64_t accounted_bytes);

// "h100", "a100-40gb", "80gb", "24GiB", "85017493504": a class name, a size with GB/GiB, or bytes.
Result<GpuCapacity> parse_gpu_capacity(std::string_view text);

}  // namespace allocscope
