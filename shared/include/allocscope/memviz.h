// PyTorch's `torch/cuda/_memory_viz.py` text outputs (stats, trace, folded stacks, compare), byte for byte.
//
// Every function returns a string so the CLI and the wasm viewer share one implementation. Where PyTorch's output is
// wrong (the `TOTAL MEM` line of `trace`), ours says so in docs/cli.md and an option reproduces PyTorch's value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope::memviz {

// `_format_size`: "%3.1f" of the value scaled by powers of 1024 with "B", "KiB", ... "ZiB", else "%.1fYiB".
// Takes a double because Python converts the integer to float (round to nearest) before its first division.
std::string format_size(double num);
std::string format_size(int64_t num);
std::string format_size(uint64_t num);

// Python's "%.1f" (correctly rounded, like C's printf).
std::string format_1f(double v);

// Python's repr() of a str: single quotes unless the text has ' and no ", escapes for \\, \n, \r, \t and
// non-printable characters (\xNN, \uNNNN).
std::string py_repr(std::string_view s);

// `_frame_filter`: false for frames PyTorch hides from flame graphs (unwinder, CPython eval loop, dispatcher glue).
bool frame_filter(std::string_view name, std::string_view filename);
// `_frame_fmt`: "basename(filename):line:name" (full filename when asked).
std::string frame_fmt(const Snapshot& s, const Frame& f, bool full_filename = false);

// `segsum` (the `stats` verb): one bar per segment >= 20 MiB, then totals and the legend.
std::string stats(const Snapshot& s);
// Where PyTorch's segsum stops with an AssertionError (a segment whose blocks do not add up to its total_size, as
// in files not written by PyTorch), we print the bars anyway; this says which segments and how many bytes, one line
// each ("" when every segment adds up). The CLI writes it to stderr.
std::string stats_notes(const Snapshot& s);
// Where PyTorch's trace stops with KeyError 'device_traces' (a bare list of segments, what
// torch.cuda.memory_snapshot() returns), we print no events; this says why ("" otherwise).
std::string trace_notes(const Snapshot& s);

struct TraceOptions {
  // PyTorch reuses the loop index `count` as its byte counter, so its `TOTAL MEM` is garbage. By default we print
  // the intended value (bytes allocated minus bytes whose free completed, over the device's trace) followed by a
  // newline; true reproduces PyTorch's figure and its missing newline exactly.
  bool pytorch_total = false;
};
// `trace`: each device's events as pseudo-Python ("a = cudaMalloc(...)", "del a # 1.0MiB", ...).
std::string trace(const Snapshot& s, const TraceOptions& options = {});
// The intended `TOTAL MEM` of one device: sum of `alloc` sizes minus sum of `free_completed` sizes.
int64_t trace_net_bytes(const Snapshot& s, const DeviceTrace& d);

// Folded-stack lines ("a;b;c 123\n") of the `segments` and `memory` flame graphs.
std::string segments_folded(const Snapshot& s);
std::string memory_folded(const Snapshot& s);

// `compare`: segments (keyed by address and total size) present in only one snapshot.
struct CompareResult {
  std::vector<uint64_t> only_before;  // segment addresses, in file order, each once
  std::vector<uint64_t> only_after;
  std::string summary;  // "only_before = [..]\nonly_after = [..]\n", the two lines PyTorch prints
  std::string folded;   // "only_before;stream_S;seg_A;state;frames size" lines, then the only_after ones
};
CompareResult compare(const Snapshot& before, const Snapshot& after);

}  // namespace allocscope::memviz
