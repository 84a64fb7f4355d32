// Per-file, per-device timeline state built on first use: the stacked layout, the time axis and a reusable draw
// buffer, so each pan/zoom query only fills arrays.
#pragma once

#include <map>

#include "allocscope/timeline.h"
#include "lifetimes_cache.h"
#include "methods.h"

namespace allocscope::wasm {

struct DeviceTimeline {
  const DeviceLifetimes* lifetimes = nullptr;
  StackedTimeline layout;
  TimeAxis time;
  DrawResult scratch;
};

// nullptr when the file has no such device.
DeviceTimeline* timeline_of(Loaded& f, int64_t device);

// Allocation details for hover, pin and the side panels: size, address, steps and times, origin, stream, frames.
json allocation_json(const Loaded& f, const DeviceTimeline& t, uint32_t row);

// Frames of a stack, innermost first: [name, filename, line, shown] where shown = PyTorch's frame filter keeps it.
json frames_json(const Snapshot& s, StackId stack);

}  // namespace allocscope::wasm
