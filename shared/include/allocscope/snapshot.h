// The snapshot model: a PyTorch CUDA memory snapshot as columnar tables with interned strings, frames and stacks.
//
// Everything a view or analysis needs is here, in struct-of-arrays form: a 1M-event trace costs ~45 bytes per event
// (see tests/bench/RESULTS.md). Ids are 32-bit indices into the tables below; id 0 of strings is "" and stack 0 is
// the empty stack, so "no frames" needs no special case.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace allocscope {

using StringId = uint32_t;
using FrameId = uint32_t;
using StackId = uint32_t;

// Trace actions as PyTorch names them (c10/cuda/CUDACachingAllocator.h TraceEntry::Action).
enum class Action : uint8_t {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kOom,
  kSnapshot,
  kAnnotate,
  kUnknown,  // an action string we do not know; the original string is kept in `unknown_action_names`
};
constexpr int kActionCount = static_cast<int>(Action::kUnknown) + 1;
std::string_view action_name(Action a);            // "alloc", "free_requested", ...
Action action_from_name(std::string_view name);    // kUnknown when not recognised

enum class BlockState : uint8_t { kActiveAllocated, kActivePendingFree, kInactive, kUnknown };
std::string_view block_state_name(BlockState s);

// Interned strings: id -> bytes (valid UTF-8; invalid input bytes were replaced by U+FFFD when loading).
class StringTable {
 public:
  StringTable();
  StringId intern(std::string_view s);
  std::string_view get(StringId id) const { return {data_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]}; }
  uint32_t size() const { return static_cast<uint32_t>(offsets_.size() - 1); }
  // Finds without inserting; returns false when absent.
  bool find(std::string_view s, StringId* id) const;
  size_t memory_bytes() const;

 private:
  void rehash(size_t buckets);
  std::string data_;               // all strings back to back
  std::vector<uint32_t> offsets_;  // size()+1 entries
  std::vector<uint32_t> buckets_;  // open addressing: id+1, 0 = empty
};

struct Frame {
  StringId name = 0;
  StringId filename = 0;
  int64_t line = 0;
  // Python ints are unbounded: torch.compile's fake-tensor frames carry line 2^64-1. Such a line is kept as its
  // 64 bits with this flag set, so it prints as Python would.
  bool line_unsigned = false;
  // No int line: None, a float, or no 'line' key (other writers; PyTorch's own tools read such a frame only to print
  // it). Kept as a frame whose line prints "None", rather than the file refused.
  bool line_none = false;
  // A frame of torch.compile'd code (PyTorch 2.13+): its FX node ("node=addmm, op=call_function,
  // target=aten.addmm.default", from fx_node_name/op/target) and the model code it came from (fx_original_trace), as
  // one text, lines apart; 0 for any other frame.
  StringId fx = 0;
  bool operator==(const Frame&) const = default;
};
// A frame's line as Python prints it ("None" for line_none).
std::string line_text(const Frame& f);

// PyTorch 2.13+ records, on an allocation made during backward, `forward_frames`: where the tensor's forward op ran.
// The loader appends them to the entry's stack (innermost first, as its own frames) behind one marker frame of this
// file name, so that every answer reads them through the stack; Snapshot::recorded_stack gives the frames PyTorch
// recorded in 'frames' alone, and FrameFilter::site takes a gradient's site from the forward part.
constexpr std::string_view kForwardPassFile = "<forward pass>";

// Stacks as flat frame lists, innermost frame first (the order PyTorch stores `frames`).
class StackTable {
 public:
  StackTable();                                   // stack 0 = empty
  StackId intern(std::span<const FrameId> frames);
  std::span<const FrameId> get(StackId id) const {
    return {frames_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
  }
  uint32_t size() const { return static_cast<uint32_t>(offsets_.size() - 1); }
  size_t memory_bytes() const;

 private:
  void rehash(size_t buckets);
  std::vector<FrameId> frames_;
  std::vector<uint32_t> offsets_;
  std::vector<uint64_t> hashes_;
  std::vector<uint32_t> buckets_;  // id+1, 0 = empty
};

// Trace events of all devices, one column per field; device d owns rows [devices[d].begin, devices[d].end).
// The keys a trace entry had, in file order. PyTorch prints the entries it does not format (segment_map, snapshot,
// ...) as their dict, so which keys were there, and in what order, is part of the data (PyTorch 2.0 entries have no
// time_us; `snapshot` and some frees have no frames).
enum class EntryKey : uint8_t {
  kAction, kAddr, kDeviceFree, kSize, kStream, kTimeUs, kFrames, kCompileContext, kUserMetadata, kOther
};
using EntryLayout = std::vector<EntryKey>;

// A column of string ids that costs nothing while every row holds the same one (PyTorch 2.11 writes
// compile_context 'N/A' and user_metadata '' on every trace entry: two 4-byte columns were 80 MB of a 10M-event
// model), and becomes an array at the first row that differs. Reads and appends like the vector it replaces.
class SameOrColumn {
 public:
  uint32_t operator[](size_t row) const { return values_.empty() ? same_ : values_[row]; }
  void push_back(uint32_t v) {
    if (values_.empty()) {
      if (rows_ == 0) same_ = v;
      if (v == same_) {
        ++rows_;
        return;
      }
      values_.reserve(std::max(reserved_, rows_ + 1));
      values_.assign(rows_, same_);
    }
    values_.push_back(v);
    ++rows_;
  }
  // `count` rows of `v` before row `at`.
  void insert(size_t at, size_t count, uint32_t v) {
    if (values_.empty() && (rows_ == 0 || v == same_)) {
      same_ = v;
      rows_ += count;
      return;
    }
    if (values_.empty()) values_.assign(rows_, same_);
    values_.insert(values_.begin() + static_cast<std::ptrdiff_t>(at), count, v);
    rows_ += count;
  }
  size_t size() const { return rows_; }
  void truncate(size_t rows) {
    if (rows >= rows_) return;
    if (!values_.empty()) values_.resize(rows);
    rows_ = rows;
  }
  // Kept for the day the column stops being uniform; nothing is allocated while it is.
  void reserve(size_t rows) {
    if (values_.empty()) reserved_ = rows;
    else values_.reserve(rows);
  }
  size_t capacity() const { return values_.capacity(); }
  void shrink_to_fit() { values_.shrink_to_fit(); }
  bool uniform() const { return values_.empty(); }

 private:
  std::vector<uint32_t> values_;  // empty while uniform
  size_t rows_ = 0;
  size_t reserved_ = 0;
  uint32_t same_ = 0;
};

struct EventColumns {
  std::vector<Action> action;
  std::vector<uint64_t> addr;     // for `oom`: device_free (PyTorch stores it instead of addr)
  std::vector<uint64_t> size;
  std::vector<int64_t> stream;
  std::vector<int64_t> time_us;
  std::vector<StackId> stack;
  SameOrColumn compile_context;  // StringId, 0 when absent
  SameOrColumn user_metadata;    // StringId, 0 when absent
  // Index into Snapshot::entry_layouts per row. Empty when the snapshot was built in memory (capture): every row
  // then has PyTorch 2.11's keys.
  std::vector<uint8_t> layout;
  // Rows whose action is Action::kUnknown, in row order, each with its action string's index in
  // Snapshot::unknown_action_names (kUnnamedAction past the names kept): few rows, so not a column.
  static constexpr uint8_t kUnnamedAction = 255;
  std::vector<std::pair<uint32_t, uint8_t>> unknown_action;
  uint8_t unknown_action_of(size_t row) const;  // kUnnamedAction when the row has none
  size_t size_rows() const { return action.size(); }
  size_t memory_bytes() const;
  // Appends row `row` of `from` (which may be this very table) to the end: every column, the layout when `from` has
  // one.
  void append_row(const EventColumns& from, size_t row);
  // Keeps the first `rows` rows.
  void truncate(size_t rows);
};

struct DeviceTrace {
  int64_t device = 0;  // the ordinal: index in `device_traces`
  uint32_t begin = 0;  // first row in EventColumns
  uint32_t end = 0;    // one past the last row
  uint32_t count() const { return end - begin; }
  // A window of the trace (LoadOptions::window) loads `before` rows kept from before it (the allocations alive at
  // its start), then rows [window_begin(), window_end()) as the file's entries first_step on, then `after` rows
  // kept from past it (the releases of what was alive at its end, the allocations alive at the trace's end), so
  // that the rows stay consistent with the final segments (trace_window.h). Without a window: all 0.
  uint64_t first_step = 0;
  uint32_t before = 0;
  uint32_t after = 0;
  uint64_t file_events = 0;  // entries the file's list held, when a window was loaded (0 otherwise)
  int64_t file_first_time_us = 0;  // and the time of its first entry (answers count time from it)
  uint32_t window_begin() const { return begin + before; }
  uint32_t window_end() const { return end - after; }
  uint64_t events_in_file() const { return file_events ? file_events : count(); }
};

// A range of a trace's steps or times, both ends included: the part of a huge file to load (LoadOptions::window,
// trace_window.h). Steps as every answer numbers them (step s: the state after the device's first s entries), so
// steps from..to load entries from..to-1; times (microseconds since the device's first entry) load the entries of
// those times.
struct TraceWindow {
  enum class Unit : uint8_t { kStep, kTimeUs };
  Unit unit = Unit::kStep;
  int64_t from = 0;
  int64_t to = std::numeric_limits<int64_t>::max();
  bool whole() const { return from <= 0 && to == std::numeric_limits<int64_t>::max(); }
};

// The highest CUDA device ordinal a process has: PyTorch's c10::DeviceIndex is an int8_t. A file naming a higher
// one is refused by the loader: every per-device answer would otherwise cost devices x segments (an audit's
// 100,000 one-segment devices made `summary` run for minutes).
constexpr int64_t kMaxDeviceOrdinal = 127;

// Whether the trace rows [begin, end) record times: PyTorch 2.0's and 2.1's files write time_us 0 on every event,
// and a time read from them would look measured. The one rule for "no times recorded", wherever it is said.
inline bool records_times(const EventColumns& events, uint64_t begin, uint64_t end) {
  for (uint64_t row = begin; row < end; ++row)  // a timed trace answers at its first row
    if (events.time_us[row] != 0) return true;
  return false;
}

// One entry of a PyTorch 2.0 block's `history` (the allocations that block held, newest first).
struct BlockHistory {
  uint64_t addr = 0;
  uint64_t real_size = 0;
  StackId stack = 0;
  bool has_frames = false;  // the entry had a 'frames' key
};

constexpr StringId kNoStateText = std::numeric_limits<StringId>::max();

struct Block {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t requested_size = 0;  // the block's size when the file has neither requested_size nor history
  BlockState state = BlockState::kUnknown;
  StackId stack = 0;            // a 2.0 block without 'frames': its first history entry's frames
  bool has_frames = true;       // the block dict had a 'frames' key (2.0 blocks have 'history' instead)
  bool has_history = false;     // the block dict had a 'history' key
  uint32_t first_history = 0;   // rows in Snapshot::block_history
  uint32_t num_history = 0;
  // kUnknown from a 'state' string we do not know: that string, since PyTorch's flame graphs print it as written.
  StringId state_text = kNoStateText;
};

struct Segment {
  int64_t device = 0;
  uint64_t address = 0;
  uint64_t total_size = 0;
  uint64_t allocated_size = 0;
  uint64_t active_size = 0;
  uint64_t requested_size = 0;
  int64_t stream = 0;
  StringId segment_type = 0;  // "large" | "small"
  int64_t pool_id[2] = {0, 0};
  bool is_expandable = false;
  StackId stack = 0;
  uint32_t first_block = 0;  // rows in Snapshot::blocks, in file order
  uint32_t num_blocks = 0;
};

struct Annotation {
  bool start = true;  // stage 'START' (true) or 'END'
  StringId name = 0;
  int64_t device = 0;
  int64_t time_us = 0;
};

// A value from a generic part of the file kept verbatim (allocator_settings): scalars, or nested dicts/lists.
struct Setting {
  enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kStr, kDict, kList, kOther };
  std::string key;           // "" for list items
  Kind kind = Kind::kNone;
  int64_t i = 0;             // kBool (0/1), kInt
  double f = 0;              // kFloat
  std::string s;             // kStr; kOther: Python-like text of what we could not model
  std::vector<Setting> children;  // kDict, kList
  std::string repr() const;  // Python-like text: 'x', 3, True, {'a': 1}
  bool operator==(const Setting&) const = default;
};

// A time span in which allocations on threads that run no Python were made for a Python call waiting on them: a
// backward() (PyTorch's autograd engine threads) or a torch.distributed collective (NCCL's threads). The capture
// records one per loan of frames (native/capture/src/python_frames.h) and writes them under the key
// 'allocscope_lent'; lent_frames.h gives PyTorch's frameless entries in a span the waiting call's frames.
struct LentWindow {
  int64_t start_us = 0, end_us = 0;  // wall-clock microseconds, as trace entries' time_us
  StringId kind = 0;                 // the call: "backward", "all_reduce", ...
  StackId stack = 0;                 // the waiting thread's Python frames at the call, innermost first
};

struct Snapshot {
  StringTable strings;
  std::vector<Frame> frames;
  StackTable stacks;

  std::vector<Segment> segments;  // in file order
  std::vector<Block> blocks;
  std::vector<BlockHistory> block_history;  // PyTorch 2.0 files only
  std::vector<DeviceTrace> devices;  // one per entry of `device_traces`
  EventColumns events;
  std::vector<EntryLayout> entry_layouts;  // distinct key orders of trace entries (at most 256)
  std::vector<Annotation> annotations;
  std::vector<Setting> allocator_settings;
  bool has_device_traces = false;  // false for a bare list of segments (oldest format)

  // What we met but do not model, so nothing is silently dropped: key name -> how many times.
  std::vector<std::pair<std::string, uint64_t>> unknown_keys;
  std::vector<std::string> unknown_action_names;  // distinct unknown action strings (at most 64)
  // What row `row`'s action string was: its known name, or the unknown one as the file wrote it ("unknown" past the
  // 64 names kept).
  std::string_view action_text(size_t row) const;
  // Load-time findings that do not stop loading (e.g. a negative size); analyses add their own.
  std::vector<std::string> warnings;
  uint64_t source_bytes = 0;                      // size of the (inflated) pickle
  // The window the file was loaded with (whole() when it was loaded whole); each DeviceTrace says where it fell.
  TraceWindow window;
  // A merged snapshot (`allocscope record` of a PyTorch job, `allocscope merge`): PyTorch's own snapshot is this one,
  // and the capture's device memory that PyTorch's allocator does not own (NCCL, cuBLAS, the user's cudaMalloc ...)
  // is this capture-format snapshot, read from the top-level key `allocscope_outside` (outside.h). Its tables are
  // its own. Analyses of PyTorch's memory never see it; reserved-by-owner answers add it. Null otherwise.
  std::shared_ptr<const Snapshot> outside;
  // Pinned host memory (`_record_memory_history(record_pinned_host_memory=True)`, PyTorch 2.14): the top-level
  // `host_segments` and `host_traces`, as a snapshot of their own whose device 0 is the host. Its tables are its own.
  // Null when the file has neither.
  std::shared_ptr<const Snapshot> host;
  // The marker frame the loader put before a stack's forward_frames (kForwardPassFile); kNoForwardMarker when none.
  static constexpr FrameId kNoForwardMarker = std::numeric_limits<FrameId>::max();
  FrameId forward_marker = kNoForwardMarker;
  // The capture's lent windows as the file holds them (a capture's own key, or inside `allocscope_outside`).
  std::vector<LentWindow> lent_windows;
  // Stacks the loader made by lending a window's frames to an entry without Python frames (lent_frames.h), each
  // with the stack the entry had: sorted by the lent stack. The frames name the user's line (every answer's site);
  // the evidence of what made the allocation (categories, iteration markers) is the stack it had.
  std::vector<std::pair<StackId, StackId>> lent_stacks;
  // The stack an entry had before lending (itself when it was not lent).
  StackId unlent(StackId id) const {
    auto it = std::lower_bound(lent_stacks.begin(), lent_stacks.end(), std::make_pair(id, StackId{0}));
    return it != lent_stacks.end() && it->first == id ? it->second : id;
  }

  // Convenience views.
  std::string_view str(StringId id) const { return strings.get(id); }
  std::span<const FrameId> stack(StackId id) const { return stacks.get(id); }
  // The frames PyTorch recorded in the entry's 'frames': the stack up to its forward-pass marker, if it has one
  // (what PyTorch's own tools print; the drop-in verbs use it).
  std::span<const FrameId> recorded_stack(StackId id) const {
    auto all = stacks.get(id);
    if (forward_marker == kNoForwardMarker) return all;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] == forward_marker) return all.first(i);
    return all;
  }
  const DeviceTrace* device(int64_t ordinal) const;
  std::span<const Block> blocks_of(const Segment& s) const { return {blocks.data() + s.first_block, s.num_blocks}; }
  // A block's state as the file wrote it (block_state_name, or the unknown string itself; 'unknown' when absent).
  std::string_view state_text(const Block& b) const {
    return b.state_text == kNoStateText ? block_state_name(b.state) : strings.get(b.state_text);
  }
  std::span<const BlockHistory> history_of(const Block& b) const {
    return {block_history.data() + b.first_history, b.num_history};
  }
  // The keys of trace row `row` in file order; nullptr when the row has PyTorch 2.11's keys (built in memory).
  const EntryLayout* layout_of(size_t row) const {
    return row < events.layout.size() && events.layout[row] < entry_layouts.size()
               ? &entry_layouts[events.layout[row]]
               : nullptr;
  }
  size_t memory_bytes() const;
  // Whether the allocator ran with expandable_segments: its setting when the file records it, else whether any
  // segment is expandable (older files have no settings).
  bool expandable_segments() const;
};

}  // namespace allocscope
