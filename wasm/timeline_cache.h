// Per-file, per-device timeline state built on first use: the stacked layout, the time axis and a reusable draw
// buffer, so each pan/zoom query only fills arrays.
#pragma once

#include <map>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/timeline.h"
#include "lifetimes_cache.h"
#include "methods.h"

namespace allocscope::wasm {

struct DeviceTimeline {
  const DeviceLifetimes* lifetimes = nullptr;
  StackedTimeline layout;
  TimeAxis time;
  DrawResult scratch;
  std::vector<uint8_t> mark;  // search hits per row (empty: no search), kept out of merged runs when drawing
};

// nullptr when the file has no such device.
DeviceTimeline* timeline_of(Loaded& f, int64_t device);

// The time the page's labels count from ("+1.2 s"): the axis's first time, or the file's first entry when only a
// window of it was loaded (its first row may be an allocation made long before the window), as the CLI counts.
inline int64_t time_origin_us(const Snapshot& s, const DeviceTimeline& t) {
  return t.lifetimes->windowed() ? t.lifetimes->origin_time_us(s) : t.time.first_us();
}

// Allocation details for hover, pin and the side panels: size, address, steps and times, origin, stream, frames,
// and the category with its evidence when `categories` is given.
json allocation_json(Loaded& f, const DeviceTimeline& t, uint32_t row, const Categories* categories = nullptr);

// Per-file and per-device analysis inputs, built on first use (methods_analyses.cpp, methods_segments.cpp).
const Lifetimes& all_lifetimes(Loaded& f);
const FrameFilter& frame_filter_of(Loaded& f);
const Iterations* iterations_of(Loaded& f, int64_t device);
const Categories* categories_of(Loaded& f, int64_t device);  // nullptr when the device has no trace
const SegmentTimeline* segment_bands_of(Loaded& f, int64_t device);

// Frames of a stack, innermost first: [name, filename, line, shown, id] where shown = PyTorch's frame filter keeps it
// and id indexes the `frames` method's list (the page marks search hits by it).
json frames_json(const Snapshot& s, StackId stack);

}  // namespace allocscope::wasm
