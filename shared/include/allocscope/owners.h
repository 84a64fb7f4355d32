// Who owns a device allocation: the allocator or library whose code made it, read from its stack. Meaningful for
// snapshots written by our capture library (every cudaMalloc, cuMemCreate, ... of the process, with native stacks):
// PyTorch's caching allocator, XLA's BFC allocator and CuPy's pool reserve memory for their own tensors; NCCL, cuBLAS
// and cuDNN keep buffers of their own; CUDA graphs allocate for their memory nodes; the rest is the user's own calls.
// One rule (owner_of_frame) for the CLI, the viewer and the capture alike.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "allocscope/lifetimes.h"
#include "allocscope/peer_mappings.h"  // is_capture and the capture rules the loader applies
#include "allocscope/snapshot.h"

namespace allocscope {

enum class Owner : uint8_t {
  kUnknown,      // no frames
  kUser,         // the user's own code calls the CUDA API (no library in between)
  kCudaRuntime,  // only the runtime's and the driver's frames
  kPyTorch,      // c10's CUDA caching allocator (libc10_cuda) and the rest of libtorch
  kXla,          // XLA / JAX (jaxlib, xla_extension, the BFC allocator)
  kCuPy,         // CuPy's memory pool and runtime bindings
  kNccl,
  kCublas,       // cuBLAS and cuBLASLt workspaces
  kCudnn,
  kCudaGraphs,   // graph instantiation and memory nodes
  kCudaLibrary,  // another CUDA library (cuRAND, cuFFT, cuSPARSE, cuSOLVER, NVRTC, ...)
};
constexpr int kOwnerCount = static_cast<int>(Owner::kCudaLibrary) + 1;
std::string_view owner_name(Owner o);  // "pytorch", "nccl", ...
std::string_view owner_label(Owner o);  // "PyTorch caching allocator", "NCCL", ...
// A library that manages its own memory: what it reserves and keeps is how it works, never the user's leak.
bool is_library_owner(Owner o);

// What one frame says about the owner: a library, kCudaRuntime for the runtime's and driver's own frames (which say
// nothing about who called), kUser for any other code, kUnknown for frames to skip (the capture's own).
Owner owner_of_frame(std::string_view name, std::string_view filename);

// The owner of every stack of a snapshot, computed once: the innermost frame that names a library decides; else the
// innermost user frame means the user's own call; a stack of runtime and driver frames only is kCudaRuntime.
class OwnerMap {
 public:
  OwnerMap() = default;
  explicit OwnerMap(const Snapshot& s);
  Owner owner(StackId id) const { return id < owner_.size() ? static_cast<Owner>(owner_[id]) : Owner::kUnknown; }

 private:
  std::vector<uint8_t> owner_;
};

// Bytes alive at `step` (lifetimes' step numbering) by owner, largest first, owners with no bytes left out.
std::vector<std::pair<Owner, uint64_t>> bytes_by_owner(const DeviceLifetimes& lt, const OwnerMap& owners, uint32_t step);

}  // namespace allocscope
