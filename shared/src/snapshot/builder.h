// The snapshot builder: the Consumer that turns streamed trace entries, frames and frame lists into model rows and
// ids, and then reads the rest of the tree (private to shared/src/snapshot).
#pragma once

#include <map>
#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "allocscope/loader.h"
#include "allocscope/peer_mappings.h"
#include "pickle/opcodes.h"
#include "snapshot/keys.h"
#include "snapshot/trace_window.h"
#include "util/hash.h"

namespace allocscope {

using pickle::Tag;
using pickle::Value;

namespace detail {

enum HandleKind : uint32_t { kFrameHandle = 1, kStackHandle = 2, kRowHandle = 3 };
constexpr size_t kMaxEntryKeys = 32;
// allocator_settings is a few dozen small values; a crafted file could share big ones through the memo, so both the
// number of values and the bytes copied are bounded.
constexpr size_t kMaxSettingNodes = 10000;
constexpr size_t kMaxSettingBytes = 1 << 20;

struct FrameHash {
  size_t operator()(const Frame& f) const {
    return detail::mix64((static_cast<uint64_t>(f.name) << 32 | f.filename) ^
                         detail::mix64(static_cast<uint64_t>(f.line) + f.line_unsigned + (uint64_t{f.fx} << 33)));
  }
};

// Identity of a container value (node index + generation), to notice one object shared through the memo.
inline uint64_t identity(const Value& v) { return v.payload << 32 ^ v.aux; }

// A float time (some tools write them) as whole microseconds, or false when it is not a number in range.
inline bool float_time(double d, int64_t* out) {
  if (!(d > -9.2e18 && d < 9.2e18)) return false;  // NaN fails both comparisons
  *out = static_cast<int64_t>(d);
  return true;
}

// The Python type name of a value for messages; handles name what the loader made of a container.
inline std::string type_of(const Value& v) {
  if (v.tag != Tag::kHandle) return pickle::tag_name(v.tag);
  return v.aux == kFrameHandle ? "frame" : v.aux == kStackHandle ? "frame list" : "trace entry";
}

class Builder : public pickle::Consumer {
 public:
  explicit Builder(Snapshot* s) : s_(s), keys_(&s->strings) {
    const std::pair<StringId, Field> fields[] = {
        {keys_.action, kAction},   {keys_.addr, kAddr},       {keys_.device_free, kAddr},
        {keys_.size, kSize},       {keys_.stream, kStream},   {keys_.time_us, kTime},
        {keys_.frames, kFrames},   {keys_.compile_context, kCompileContext},
        {keys_.user_metadata, kUserMetadata}, {keys_.forward_frames, kForwardFrames},
        // Keys of segments, blocks, history entries and annotations, never of a trace entry: a dict holding one is
        // not an entry even if a writer added an 'action' key to it (an audit: such a segment became a row, and the
        // file read "0 segments").
        {keys_.address, kNotEntry}, {keys_.total_size, kNotEntry}, {keys_.blocks, kNotEntry},
        {keys_.state, kNotEntry},   {keys_.real_size, kNotEntry},  {keys_.stage, kNotEntry}};
    for (auto [id, f] : fields)
      if (id < kFieldTable) field_[id] = f;
  }

  Result<bool> consume(const pickle::Reader& r, const Value& c, const Value* key, Value* out) override {
    if (c.tag == Tag::kDict) {
      EntryShape shape;  // not last_: that is the last consume_items call's
      return consume_dict(r, r.items(c), r.offset_of(c), key, out, &shape);
    }
    const bool sequence = c.tag == Tag::kList || c.tag == Tag::kTuple;  // a tuple from other writers reads as a list
    if (sequence && key && key->tag == Tag::kStr && key->payload == keys_.frames) {
      auto items = r.items(c);
      frame_buf_.resize(items.size());
      FrameId* ids = frame_buf_.data();
      for (size_t i = 0; i < items.size(); ++i) {
        const Value& v = items[i];
        if (v.tag != Tag::kHandle || v.aux != kFrameHandle)
          return Error{"'frames' holds a " + type_of(v) + "; expected dicts with keys name, filename, line",
                       r.offset_of(c)};
        ids[i] = static_cast<FrameId>(v.payload);
      }
      *out = Value::handle(kStackHandle, s_->stacks.intern(frame_buf_));
      return true;
    }
    return false;
  }

  // The reader's fast path offers an entry or a frame it never built as a container: the same answer as above.
  // With the keys of the last offer, and that offer an entry, what its keys made it is known already.
  Result<bool> consume_items(const pickle::Reader& r, std::span<const Value> items, uint64_t offset, Value* out,
                             bool same_keys) override {
    if (same_keys && last_.entry) return read_entry(r, items, offset, &last_, out);
    return consume_dict(r, items, offset, nullptr, out, &last_);
  }

  // Trace entries become row handles in stream order: the trace list counts them instead of holding them.
  bool absorbs(const Value& v) const override { return v.aux == kRowHandle; }
  void list_began(uint64_t first_payload) override {
    if (window_) window_->list_began(s_->events, first_payload);
  }

  // Loads only `w` of each list of trace entries (trace_window.h); a whole window changes nothing.
  void set_window(const TraceWindow& w) {
    if (w.whole()) return;
    window_ = std::make_unique<WindowFilter>(w);
    s_->window = w;
  }
  bool windowed() const { return window_ != nullptr; }

  Status finish(const pickle::Reader& r, const Value& root);
  // The pickle comes from a JSON snapshot (json_snapshot.h): errors about the whole file name it "JSON".
  void reading_json() { source_ = "JSON"; }

 private:
  const char* source_ = "a pickle";
  // Trace entry keys are interned first, so their ids are small: a table maps id -> field without comparisons.
  enum Field : uint8_t {
    kOther, kAction, kAddr, kSize, kStream, kTime, kFrames, kCompileContext, kUserMetadata, kNotEntry, kBadKey,
    kForwardFrames
  };
  static constexpr uint32_t kNotARow = UINT32_MAX;  // add_row: the dict has a key no trace entry has
  static constexpr EntryKey kEntryKeyOf[] = {EntryKey::kOther,  EntryKey::kAction, EntryKey::kAddr,
                                             EntryKey::kSize,   EntryKey::kStream, EntryKey::kTimeUs,
                                             EntryKey::kFrames, EntryKey::kCompileContext, EntryKey::kUserMetadata,
                                             EntryKey::kOther,  EntryKey::kOther,  EntryKey::kOther};
  static constexpr uint32_t kFieldTable = 64;
  Field field_[kFieldTable] = {};
  Field field_of(StringId key) const { return key < kFieldTable ? field_[key] : kOther; }

  // What a dict's keys alone make of it, position by position: its fields as a trace entry, its key order, its
  // unknown keys. A trace repeats one or two key orders a million times, so the last one is kept (last_).
  struct EntryShape {
    bool entry = false;  // the keys pass consume_dict's checks of an entry ('action', not a frame): add_row reads it
    size_t n_keys = 0;
    Field field[kMaxEntryKeys];  // kBadKey: a key that is not a string
    EntryKey order[kMaxEntryKeys];
    bool has_layout = false;  // layout: layout_id(order), registered by the first row of this shape
    uint8_t layout = 0;
    StringId unknown[kMaxEntryKeys];  // counted per row
    size_t n_unknown = 0;
  };

  EntryShape last_;  // the keys of the last consume_items call

  void shape_of(std::span<const Value> items, EntryShape* shape) const {
    shape->n_keys = items.size() / 2;
    shape->n_unknown = 0;
    shape->has_layout = false;
    for (size_t j = 0; j < shape->n_keys; ++j) {
      const Value& k = items[2 * j];
      const StringId key = static_cast<StringId>(k.payload);
      const Field field = k.tag != Tag::kStr ? kBadKey : field_of(key);
      shape->field[j] = field;
      shape->order[j] = field == kAddr && key == keys_.device_free ? EntryKey::kDeviceFree : kEntryKeyOf[field];
      if (field == kOther) shape->unknown[shape->n_unknown++] = key;
    }
    shape->entry = true;
  }

  // A dict is a frame, a trace entry, or something the tree walk reads later (false). `offset`: where errors point.
  // `shape` becomes what the keys make of it.
  Result<bool> consume_dict(const pickle::Reader& r, std::span<const Value> items, uint64_t offset, const Value* key,
                            Value* out, EntryShape* shape) {
    shape->entry = false;
    // Frames have 3 keys and trace entries about 8; anything large is something else (and must stay cheap to
    // offer again when a crafted file references it many times).
    if (items.size() > 2 * kMaxEntryKeys) return false;
    // A frame is {name, filename, line}; a writer may add keys (counted as unknown), but never 'action'.
    if (items.size() >= 4) {  // name and filename; a line too, from PyTorch
      FrameId f;
      if (as_frame(items, &f)) {
        *out = Value::handle(kFrameHandle, f);
        return true;
      }
    }
    // PyTorch writes 'action' first; other writers may not, so fall back to a lookup.
    if (key || items.empty() || !has_key(items, keys_.action)) return false;
    shape_of(items, shape);
    return read_entry(r, items, offset, shape, out);
  }
  Result<bool> read_entry(const pickle::Reader& r, std::span<const Value> items, uint64_t offset, EntryShape* shape,
                          Value* out) {
    auto row = add_row(r, items, shape, offset);
    if (!row.ok()) return row.error();
    if (row.value() == kNotARow) return false;  // the tree walk reads it as what its keys say
    *out = Value::handle(kRowHandle, row.value());
    return true;
  }
  static bool has_key(std::span<const Value> items, StringId key) {
    for (size_t i = 0; i + 1 < items.size(); i += 2)
      if (items[i].tag == Tag::kStr && items[i].payload == key) return true;
    return false;
  }

  bool as_frame(std::span<const Value> it, FrameId* out) {
    Frame f;
    int seen = 0;
    size_t extra = 0;
    for (size_t i = 0; i + 1 < it.size(); i += 2) {
      const Value& k = it[i];
      const Value& v = it[i + 1];
      if (k.tag != Tag::kStr || k.payload == keys_.action) return false;
      if (k.payload == keys_.name && v.tag == Tag::kStr) f.name = static_cast<StringId>(v.payload), seen |= 1;
      else if (k.payload == keys_.filename && v.tag == Tag::kStr) f.filename = static_cast<StringId>(v.payload), seen |= 2;
      else if (k.payload == keys_.line && v.tag == Tag::kInt) f.line = v.as_int(), seen |= 4;
      else if (k.payload == keys_.line && v.tag == Tag::kUInt)  // above 2^63-1: torch.compile writes 2^64-1
        f.line = static_cast<int64_t>(v.payload), f.line_unsigned = true, seen |= 4;
      else if (k.payload == keys_.line && v.tag == Tag::kBool)  // Python's True is 1
        f.line = static_cast<int64_t>(v.payload), seen |= 4;
      else if (k.payload == keys_.line && (v.tag == Tag::kNone || v.tag == Tag::kFloat)) continue;  // no int line
      else if (k.payload == keys_.name || k.payload == keys_.filename || k.payload == keys_.line) return false;
      else ++extra;
    }
    if ((seen & 3) != 3) return false;
    if (!(seen & 4)) {
      // A frame without an int line (None, a float, no key: other writers): still a frame, its line "None". The
      // file was refused whole, where PyTorch's tools read it and print the line as None (an audit).
      f.line = 0, f.line_none = true;
      ++frames_without_line_;
    }
    if (extra > 0) {
      // torch.compile'd frames' FX keys (PyTorch 2.13+) become the frame's fx text; any other key is counted.
      std::string part[3], trace;  // node, op, target: said in that order, whatever the keys' order
      for (size_t i = 0; i + 1 < it.size(); i += 2) {
        const uint64_t k = it[i].payload;
        if (k == keys_.name || k == keys_.filename || k == keys_.line) continue;
        const Value& v = it[i + 1];
        const int slot = k == keys_.fx_node_name ? 0 : k == keys_.fx_node_op ? 1 : k == keys_.fx_node_target ? 2 : -1;
        if (slot >= 0 && v.tag == Tag::kStr) part[slot] = s_->str(static_cast<StringId>(v.payload));
        else if (k == keys_.fx_original_trace && v.tag == Tag::kStr) trace = s_->str(static_cast<StringId>(v.payload));
        else ++unknown_[static_cast<StringId>(k)];
      }
      std::string node;
      static constexpr const char* kLabel[3] = {"node=", "op=", "target="};
      for (int j = 0; j < 3; ++j)
        if (!part[j].empty()) node += (node.empty() ? "" : ", ") + std::string(kLabel[j]) + part[j];
      if (!node.empty() || !trace.empty())
        f.fx = s_->strings.intern(node.empty() ? trace : trace.empty() ? node : node + "\n" + trace);
    }
    auto [it2, inserted] = frame_index_.try_emplace(f, static_cast<FrameId>(s_->frames.size()));
    if (inserted) s_->frames.push_back(f);
    *out = it2->second;
    return true;
  }

  // An int field's value (a bool counts, as in Python); on the hot path, so no Result is built.
  static bool int_of(const Value& v, uint64_t* out) {
    if (v.tag != Tag::kInt && v.tag != Tag::kUInt && v.tag != Tag::kBool) return false;
    *out = v.payload;
    return true;
  }
  [[gnu::cold]] static Error not_int(const pickle::Reader& r, uint64_t where, const Value& k, const Value& v) {
    return Error{"trace entry field '" + std::string(r.str(k)) + "' is a " + type_of(v) + "; expected an int", where};
  }

  StringId text_of(const pickle::Reader& r, const Value& v) {
    if (v.tag == Tag::kNone) return 0;
    if (v.tag == Tag::kStr) return static_cast<StringId>(v.payload);
    return s_->strings.intern(pickle::repr(r, v));
  }

  // A row from an entry's values; its keys are `shape`'s (items' keys, already classified).
  Result<uint32_t> add_row(const pickle::Reader& r, std::span<const Value> items, EntryShape* shape, uint64_t where) {
    EventColumns& e = s_->events;
    if (e.action.size() >= UINT32_MAX - 1 || (window_ && window_->entries_seen() >= UINT32_MAX - 1))
      return Error{"more than 4 billion trace entries", where};
    Action action = Action::kUnknown;
    uint8_t unknown_name = EventColumns::kUnnamedAction;
    uint64_t addr = 0, size = 0;
    int64_t stream = 0, time_us = 0;
    StackId stack = 0;
    StringId cc = 0, um = 0;
    const Value* forward = nullptr;  // forward_frames: a list of traceback strings
    for (size_t j = 0; j < shape->n_keys; ++j) {
      const Value& k = items[2 * j];
      const Value& v = items[2 * j + 1];
      switch (shape->field[j]) {
        case kBadKey: return Error{"trace entry has a non-string key", where};
        case kAction:
          if (v.tag != Tag::kStr)
            return Error{"trace entry 'action' is a " + type_of(v) + "; expected a str", where};
          action = action_of(r, v, &unknown_name);
          break;
        case kAddr:
          if (!int_of(v, &addr)) return not_int(r, where, k, v);
          break;
        case kSize:
          if (!int_of(v, &size)) return not_int(r, where, k, v);
          if (v.tag == Tag::kInt && v.as_int() < 0) ++negative_sizes_;
          break;
        case kStream: {
          uint64_t x;
          if (!int_of(v, &x)) return not_int(r, where, k, v);
          stream = static_cast<int64_t>(x);
          break;
        }
        case kTime:
          if (v.tag == Tag::kFloat) {
            if (!float_time(v.as_double(), &time_us))
              return Error{"trace entry 'time_us' is not a finite number of microseconds", where};
          } else {
            uint64_t x;
            if (!int_of(v, &x)) return not_int(r, where, k, v);
            time_us = static_cast<int64_t>(x);
          }
          break;
        case kFrames:
          if (v.tag == Tag::kHandle && v.aux == kStackHandle) stack = static_cast<StackId>(v.payload);
          else if (v.tag != Tag::kNone)
            return Error{"trace entry 'frames' is a " + type_of(v) + "; expected a list of frames", where};
          break;
        case kCompileContext: cc = text_of(r, v); break;
        case kUserMetadata: um = text_of(r, v); break;
        case kForwardFrames:
          if (v.tag == Tag::kList || v.tag == Tag::kTuple) forward = &v;
          else if (v.tag != Tag::kNone) ++odd_fields_["trace entry 'forward_frames' not a list (left out)"];
          break;
        case kOther: break;  // counted below, once the dict is known to be an entry
        case kNotEntry: return kNotARow;
      }
    }
    for (size_t u = 0; u < shape->n_unknown; ++u) ++unknown_[shape->unknown[u]];
    if (!shape->has_layout) shape->layout = layout_id(shape->order, shape->n_keys), shape->has_layout = true;
    if (window_) window_->before_row(e);
    if (action == Action::kUnknown && unknown_name != EventColumns::kUnnamedAction)  // printed as written
      e.unknown_action.emplace_back(static_cast<uint32_t>(e.action.size()), unknown_name);
    e.action.push_back(action);
    e.addr.push_back(addr);
    e.size.push_back(size);
    e.stream.push_back(stream);
    e.time_us.push_back(time_us);
    if (forward) stack = with_forward_frames(r, stack, *forward);
    e.stack.push_back(stack);
    e.compile_context.push_back(cc);
    e.user_metadata.push_back(um);
    e.layout.push_back(shape->layout);
    // Windowed, the handle is the entry's ordinal in the file, since the rows before it may be gone: the reader's
    // lists count ordinals, and rows_of() finds their rows.
    if (window_) return static_cast<uint32_t>(window_->row_added());
    return static_cast<uint32_t>(e.action.size() - 1);
  }

  // `stack`'s frames, then the marker frame (kForwardPassFile), then the frames of `forward`'s traceback strings
  // ('  File "x.py", line 12, in forward\n    code\n', outermost first, as traceback.format_list writes them),
  // innermost first. A string that is not such a line is kept as a frame named by its text. (builder_tree.cpp)
  StackId with_forward_frames(const pickle::Reader& r, StackId stack, const Value& forward);

  // The id of this key order in Snapshot::entry_layouts; a file has a handful, and consecutive rows mostly share
  // one. Past 255 distinct orders (only a crafted file) rows get 255, which means "PyTorch 2.11's keys".
  uint8_t layout_id(const EntryKey* keys, size_t n) {
    auto same = [&](const EntryLayout& l) { return l.size() == n && std::equal(l.begin(), l.end(), keys); };
    auto& layouts = s_->entry_layouts;
    if (last_layout_ < layouts.size() && same(layouts[last_layout_])) return last_layout_;
    for (size_t i = 0; i < layouts.size(); ++i)
      if (same(layouts[i])) return last_layout_ = static_cast<uint8_t>(i);
    if (layouts.size() >= 255) return 255;
    layouts.emplace_back(keys, keys + n);
    return last_layout_ = static_cast<uint8_t>(layouts.size() - 1);
  }
  uint8_t last_layout_ = 0;

  // Action strings repeat a handful of interned ids: remember what each id means. For an unknown one, *name is
  // its index in Snapshot::unknown_action_names.
  Action action_of(const pickle::Reader& r, const Value& v, uint8_t* name) {
    const StringId id = static_cast<StringId>(v.payload);
    for (const auto& known : action_ids_)
      if (known.id == id) return *name = known.name, known.action;
    Action a = action_from_name(r.str(v));
    *name = a == Action::kUnknown ? note_unknown_action(r.str(v)) : EventColumns::kUnnamedAction;
    if (action_ids_.size() < 64) action_ids_.push_back({id, a, *name});
    return a;
  }

  uint8_t note_unknown_action(std::string_view name) {
    auto& names = s_->unknown_action_names;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return static_cast<uint8_t>(i);
    if (names.size() >= 64) return EventColumns::kUnnamedAction;
    names.emplace_back(name);
    return static_cast<uint8_t>(names.size() - 1);
  }


  // Where to point an error about `v`: its own offset when it is a container, else its parent's.
  static uint64_t where(const pickle::Reader& r, const Value& v, const Value& parent) {
    uint64_t o = r.offset_of(v);
    return o != Error::kNoOffset ? o : r.offset_of(parent);
  }
  Value root_;

  Status read_segments(const pickle::Reader& r, const Value& list);
  // host_segments and host_traces (pinned host memory) into Snapshot::host.
  Status read_host(const pickle::Reader& r, const Value* segments, const Value* traces);
  Status read_traces(const pickle::Reader& r, const Value& list);
  // The rows of the entries list `list` absorbed (Reader::absorbed): where they are, or where the window put them
  // (first_step and the rest of a windowed list into *d when not null). A windowed load refuses entries a list holds
  // as items (shared through the memo: no writer does it), whose ordinals name no row.
  Result<pickle::Reader::Absorbed> rows_of(const pickle::Reader& r, const Value& list, DeviceTrace* d = nullptr) const;
  std::unique_ptr<WindowFilter> window_;
  Status read_history(const pickle::Reader& r, const Value& list, Block* b);
  Status read_annotations(const pickle::Reader& r, const Value& list);
  Status read_outside(const pickle::Reader& r, const Value& dict);
  // The capture's lent windows (key 'allocscope_lent'), into *out: what is not a window is counted in a warning and
  // left out, never an error (builder_lent.cpp).
  void read_lent(const pickle::Reader& r, const Value& list, std::vector<LentWindow>* out);
  void note_peer_mappings(const PeerMappings& m);
  // Dicts with an 'action' key that no device trace lists: not events, said once.
  size_t outside_rows_ = 0;  // trace rows read_outside copied into Snapshot::outside
  void note_rows_outside_traces(size_t n) {
    s_->warnings.push_back(std::to_string(n) + " dict(s) with an 'action' key outside device_traces were left out: "
                           "only device_traces holds trace entries");
  }
  // Reads a dict's segments, device_traces, external_annotations and allocator_settings into s_.
  Status read_top(const pickle::Reader& r, const Value& dict);
  Setting to_setting(const pickle::Reader& r, const Value& v, int depth);


  Snapshot* s_;
  detail::Keys keys_;
  std::vector<FrameId> frame_buf_;
  struct ActionId {
    StringId id;
    Action action;
    uint8_t name;  // for an unknown action: its index in Snapshot::unknown_action_names
  };
  std::vector<ActionId> action_ids_;
  std::unordered_map<Frame, FrameId, FrameHash> frame_index_;
  std::unordered_set<uint64_t> seen_;  // segments, block lists and blocks already read (sharing is refused)
  size_t setting_nodes_ = 0;
  size_t setting_bytes_ = 0;
  bool settings_full() const { return setting_nodes_ > kMaxSettingNodes || setting_bytes_ > kMaxSettingBytes; }
  // Copies a string into a setting, within the byte budget.
  std::string setting_text(std::string_view t) {
    if (setting_bytes_ + t.size() > kMaxSettingBytes) {
      setting_bytes_ = kMaxSettingBytes + 1;
      return "...";
    }
    setting_bytes_ += t.size();
    return std::string(t);
  }
  std::unordered_map<StringId, uint64_t> unknown_;
  uint64_t negative_sizes_ = 0;
  uint64_t frames_without_line_ = 0;  // frame dicts read whose line was None, a float, or missing
  // Fields PyTorch's tools never read, of another type than PyTorch writes (None above all): "segment 'segment_type'"
  // -> how many. Ignored (or read as their default) and said, rather than the file refused (an audit).
  std::map<std::string, uint64_t> odd_fields_;
};

}  // namespace detail
}  // namespace allocscope
