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

// Whether a frame is NCCL mapping a buffer that a peer allocated and exported (ncclP2pImportShareableBuffer: the
// other rank's proxy thread made it with cuMemCreate on its own GPU). Such a mapping holds no memory of this device.
bool is_peer_import_frame(std::string_view name);

// Whether a capture event's user_metadata says it maps an imported handle (the capture saw
// cuMemImportFromShareableHandle return it): memory another process allocated, whatever library asked.
bool is_imported_mapping(std::string_view user_metadata);

// A capture's mappings of memory that other processes or GPUs allocated (is_imported_mapping, or, in captures made
// before that mark, a stack through is_peer_import_frame), with
// the unmaps and frees that release them and their live segments, taken out of `s`: counted on this device they
// doubled NCCL's peer buffers (each rank counted its peer's as well as its own). Returns what was taken out.
struct PeerMappings {
  uint64_t count = 0;  // allocations (mappings)
  uint64_t bytes = 0;
};
PeerMappings drop_peer_mappings(Snapshot* s);

// A capture's trace actions that take memory (alloc, segment_alloc, segment_map) and that give it back.
bool is_allocation(Action a);
bool is_release(Action a);

// The stack a live segment was allocated with: its first block's (the capture writes one block per allocation).
StackId segment_stack(const Snapshot& s, const Segment& seg);

// Copies into `out` the rows of `from`'s device traces whose allocation `keep_row` accepts, and the segments
// `keep_segment` accepts. An allocation (alloc, segment_alloc, segment_map) and any other event decide by
// `keep_row(row)`; a release goes with the allocation it releases, or decides by itself when the trace lost that
// allocation. Tables are not copied.
void keep_allocations(const Snapshot& from, const std::function<bool(uint32_t row)>& keep_row,
                      const std::function<bool(const Segment&)>& keep_segment, Snapshot* out);

// Whether `s` was written by our capture library (its allocator_settings carry "allocscope_capture"): only then is
// each allocation a driver-level reservation whose owner the stack tells.
bool is_capture(const Snapshot& s);

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
