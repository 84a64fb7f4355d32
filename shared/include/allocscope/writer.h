// Writing a Snapshot back to a PyTorch-compatible pickle (protocol 2, memoized frames, like PyTorch's C++ pickler).
// PyTorch's `_memory_viz.py`, its web viewer and our loader all read the result.
#pragma once

#include <cstdint>
#include <vector>

#include "allocscope/pickle.h"
#include "allocscope/result.h"
#include "allocscope/snapshot.h"

namespace allocscope {

std::vector<uint8_t> write_snapshot(const Snapshot& snapshot);

// The snapshot's dict written into `w` (a Writer::Fragment to append to another pickle), then w->finish().
std::vector<uint8_t> write_snapshot_value(const Snapshot& snapshot, pickle::Writer* w);

// Writes bytes (a pickle) to `path`, gzipped when the path ends in ".gz", through a temporary name and a rename.
Status write_pickle_file(std::vector<uint8_t> bytes, const std::string& path);

// Writes `snapshot` to `path`; gzip when the path ends in ".gz". Writes to a temporary name and renames, so a
// partial file never looks complete.
Status write_snapshot_file(const Snapshot& snapshot, const std::string& path);

}  // namespace allocscope
