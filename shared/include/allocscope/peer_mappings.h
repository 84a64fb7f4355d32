// What the loader knows of a capture snapshot (written by our capture library, native/capture): that it is one, and
// which of its mappings hold memory another process allocated (NCCL's peer buffers), which it leaves out.
#pragma once

#include <cstdint>
#include <string_view>

#include "allocscope/snapshot.h"

namespace allocscope {

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

// Whether `s` was written by our capture library (its allocator_settings carry "allocscope_capture"): only then is
// each allocation a driver-level reservation whose owner the stack tells.
bool is_capture(const Snapshot& s);

}  // namespace allocscope
