// `trace` from `_memory_viz.py`: each device's events as pseudo-Python, with PyTorch's naming and segment lookup.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "allocscope/memviz.h"
#include "memviz/first_cover.h"
#include "memviz/frames.h"

namespace allocscope::memviz {
namespace {

// `_name()`: a, b, ..., z, a1, ..., z1, a2, ... PyTorch's free-name recycling never triggers (it looks names up
// in dicts keyed by address), so names are simply sequential.
std::string seq_name(uint64_t k) {
  std::string n(1, static_cast<char>('a' + k % 26));
  if (k / 26) n += std::to_string(k / 26);
  return n;
}

void append_frames_repr(const Snapshot& s, StackId stack, std::string* out) {
  *out += "[";
  bool first = true;
  for (FrameId fid : s.recorded_stack(stack)) {  // 'frames' as recorded, without forward_frames
    if (!first) *out += ", ";
    first = false;
    const Frame& f = s.frames[fid];
    *out += "{'name': " + py_repr(s.str(f.name)) + ", 'filename': " + py_repr(s.str(f.filename)) +
            ", 'line': " + line_text(f) + "}";
  }
  *out += "]";
}

// PyTorch 2.11's keys, for rows built in memory (no layout): `snapshot` markers never have frames.
const EntryLayout& default_layout(Action a) {
  using K = EntryKey;
  static const EntryLayout with_frames = {K::kAction, K::kAddr,           K::kSize,         K::kStream,
                                          K::kTimeUs, K::kCompileContext, K::kUserMetadata, K::kFrames};
  static const EntryLayout without_frames(with_frames.begin(), with_frames.end() - 1);
  return a == Action::kSnapshot ? without_frames : with_frames;
}

// Python's repr() of a trace entry dict: the keys the file had, in its order. Values of keys we do not model were
// not kept (they are counted in Snapshot::unknown_keys), so such keys are left out.
void append_entry_repr(const Snapshot& s, size_t row, std::string* out) {
  const EventColumns& ev = s.events;
  const Action a = ev.action[row];
  const EntryLayout* layout = s.layout_of(row);
  if (!layout) layout = &default_layout(a);
  const std::string_view name = s.action_text(row);
  *out += '{';
  bool first = true;
  for (EntryKey k : *layout) {
    if (k == EntryKey::kOther) continue;
    if (!first) *out += ", ";
    first = false;
    switch (k) {
      case EntryKey::kAction: *out += "'action': " + py_repr(name); break;
      case EntryKey::kAddr: *out += "'addr': " + py_int(ev.addr[row]); break;
      case EntryKey::kDeviceFree: *out += "'device_free': " + py_int(ev.addr[row]); break;
      case EntryKey::kSize: *out += "'size': " + py_int(ev.size[row]); break;
      case EntryKey::kStream: *out += "'stream': " + py_int(ev.stream[row]); break;
      case EntryKey::kTimeUs: *out += "'time_us': " + py_int(ev.time_us[row]); break;
      case EntryKey::kCompileContext: *out += "'compile_context': " + py_repr(s.str(ev.compile_context[row])); break;
      case EntryKey::kUserMetadata: *out += "'user_metadata': " + py_repr(s.str(ev.user_metadata[row])); break;
      case EntryKey::kFrames: *out += "'frames': "; append_frames_repr(s, ev.stack[row], out); break;
      case EntryKey::kOther: break;
    }
  }
  *out += '}';
}

void format_device(const Snapshot& s, const DeviceTrace& d, const FirstCover& final_segments,
                   const TraceOptions& options, std::string* out) {
  const EventColumns& ev = s.events;
  FirstCover segment_intervals;                        // this trace's cudaMallocs, by name number
  std::unordered_map<uint64_t, uint64_t> seg_names;    // segment address -> name number
  std::unordered_map<uint64_t, uint64_t> alloc_names;  // allocation address -> name number (never removed)
  uint64_t next_name = 0;
  int64_t pytorch_count = 0;

  *out += std::to_string(d.count()) + " entries\n";
  for (uint32_t row = d.begin; row < d.end; ++row) {
    pytorch_count = row - d.begin;  // `for count, e in enumerate(entries)` resets the "byte counter" each event
    const uint64_t addr = ev.addr[row];
    const uint64_t size = ev.size[row];
    switch (ev.action[row]) {
      case Action::kAlloc: {
        const uint64_t n = next_name++;
        // PyTorch scans the intervals of this trace's cudaMallocs first, then the file's final segments (by
        // allocated_size, not total_size); the first hit in each list wins.
        std::string seg_name = "MEM";
        uint64_t offset = addr;
        FirstCover::Hit hit;
        if (segment_intervals.find(addr, &hit)) {
          seg_name = seq_name(hit.id);
          offset = addr - hit.start;
        } else if (final_segments.find(addr, &hit)) {
          seg_name = "seg_" + std::to_string(hit.id);
          offset = addr - hit.start;
        }
        *out += seq_name(n) + " = " + seg_name + "[" + py_int(offset) + ":" + format_size(size) + "]\n";
        alloc_names[addr] = n;
        pytorch_count += static_cast<int64_t>(size);
        break;
      }
      case Action::kFreeRequested:
      case Action::kFreeCompleted: {
        auto it = alloc_names.find(addr);
        const std::string name = it == alloc_names.end() ? py_int(addr) : seq_name(it->second);
        if (ev.action[row] == Action::kFreeRequested) {
          *out += "del " + name + " # " + format_size(size) + "\n";
        } else {
          pytorch_count -= static_cast<int64_t>(size);
          *out += "# free completed for " + name + " " + format_size(size) + "\n";
        }
        break;
      }
      case Action::kSegmentAlloc: {
        const uint64_t n = next_name++;
        *out += seq_name(n) + " = cudaMalloc(" + py_int(addr) + ", " + format_size(size) + ")\n";
        segment_intervals.add(addr, size, n);
        seg_names[addr] = n;
        break;
      }
      case Action::kSegmentFree: {
        auto it = seg_names.find(addr);
        const std::string name = it == seg_names.end() ? py_int(addr) : seq_name(it->second);
        *out += "cudaFree(" + name + ") # " + format_size(size) + "\n";
        break;
      }
      case Action::kOom:
        // The loader keeps `device_free` in the addr column for oom entries.
        *out += "raise OutOfMemoryError # " + format_size(size) + " requested, " + format_size(addr) +
                " free in CUDA\n";
        break;
      default:
        append_entry_repr(s, row, out);
        *out += '\n';
        break;
    }
  }
  if (options.pytorch_total) {
    *out += "TOTAL MEM: " + format_size(pytorch_count);  // sic: no newline, as in PyTorch
  } else {
    *out += "TOTAL MEM: " + format_size(trace_net_bytes(s, d)) + "\n";
  }
}

}  // namespace

int64_t trace_net_bytes(const Snapshot& s, const DeviceTrace& d) {
  int64_t net = 0;
  for (uint32_t row = d.begin; row < d.end; ++row) {
    if (s.events.action[row] == Action::kAlloc) net += static_cast<int64_t>(s.events.size[row]);
    if (s.events.action[row] == Action::kFreeCompleted) net -= static_cast<int64_t>(s.events.size[row]);
  }
  return net;
}

std::string trace(const Snapshot& s, const TraceOptions& options) {
  FirstCover final_segments;  // seg_N: the file's segments in order
  for (size_t i = 0; i < s.segments.size(); ++i)
    final_segments.add(s.segments[i].address, s.segments[i].allocated_size, i);
  std::string out;
  for (size_t i = 0; i < s.devices.size(); ++i) {
    const DeviceTrace& d = s.devices[i];
    if (d.count() == 0) continue;
    out += "Device " + std::to_string(i) + " ----------------\n";
    format_device(s, d, final_segments, options, &out);
  }
  return out;
}

}  // namespace allocscope::memviz

namespace allocscope::memviz {

std::string trace_notes(const Snapshot& s) {
  if (!s.has_device_traces)
    return "allocscope: note: no trace: the file is a bare list of segments (torch.cuda.memory_snapshot()), which "
           "records no events; PyTorch's trace stops with KeyError 'device_traces' on it\n";
  // What `trace` prints as a dict (segment_map, snapshot, an action it does not know) comes from the model, which
  // keeps no value of a key it does not model, whether the entry's or a frame's (PyTorch >= 2.10 adds fx_node_*
  // keys to frames with augment_with_fx_traces), and keeps the first 64 action strings it does not know: say what
  // differs from PyTorch's trace, only when such a line is printed.
  bool dict_lines = false, unknown_lines = false;
  for (const DeviceTrace& d : s.devices)
    for (uint32_t row = d.begin; row < d.end; ++row) {
      const Action a = s.events.action[row];
      const bool own_line = a == Action::kAlloc || a == Action::kFreeRequested || a == Action::kFreeCompleted ||
                            a == Action::kSegmentAlloc || a == Action::kSegmentFree || a == Action::kOom;
      dict_lines |= !own_line;
      unknown_lines |= a == Action::kUnknown && s.events.unknown_action_of(row) == EventColumns::kUnnamedAction;
    }
  std::string notes;
  // Keys the model reads but does not keep as the file wrote them (PyTorch 2.13+'s forward_frames, turned into frames
  // behind a marker, and the FX keys of compiled frames, turned into one text) are left out of printed dicts too.
  std::vector<std::string> read_not_kept;
  if (s.forward_marker != Snapshot::kNoForwardMarker) read_not_kept.push_back("forward_frames");
  {
    // Which FX keys there were, read back from the frames' fx text ("node=.., op=.., target=..", then the trace).
    bool seen[4] = {};
    static constexpr std::string_view kLabel[3] = {"node=", "op=", "target="};
    static constexpr const char* kKey[4] = {"fx_node_name", "fx_node_op", "fx_node_target", "fx_original_trace"};
    for (const Frame& f : s.frames) {
      if (!f.fx) continue;
      const std::string_view text = s.str(f.fx);
      const std::string_view first = text.substr(0, text.find('\n'));
      bool labelled = false;
      for (int j = 0; j < 3; ++j)
        if (first.rfind(kLabel[j], 0) == 0 || first.find(", " + std::string(kLabel[j])) != std::string_view::npos)
          seen[j] = labelled = true;
      if (!labelled || text.find('\n') != std::string_view::npos) seen[3] = true;
    }
    for (int j = 0; j < 4; ++j)
      if (seen[j]) read_not_kept.push_back(kKey[j]);
  }
  if (dict_lines && (!s.unknown_keys.empty() || !read_not_kept.empty())) {
    std::string names;
    for (const auto& [name, count] : s.unknown_keys) names += (names.empty() ? "" : ", ") + py_repr(name);
    for (const std::string& name : read_not_kept) names += (names.empty() ? "" : ", ") + py_repr(name);
    notes += "allocscope: note: the file has keys allocscope does not keep (" + names + ", in entries or frames); "
             "events printed as dicts leave them out, where PyTorch's trace prints them\n";
  }
  if (unknown_lines)  // past the 64 distinct unknown action strings allocscope keeps (a crafted file)
    notes += "allocscope: note: the file has more than 64 distinct action strings allocscope does not know; "
             "entries with the later ones print as 'unknown', where PyTorch's trace prints each one's name\n";
  return notes;
}

}  // namespace allocscope::memviz
