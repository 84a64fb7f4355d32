// Snapshot loader: drives the pickle machine with a consumer that turns trace entries into column rows and frames
// into interned ids as they stream by, then reads the (small) rest of the tree: segments, settings, annotations.
#include "allocscope/loader.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <unordered_map>

#include "pickle/opcodes.h"
#include "snapshot/keys.h"
#include "util/hash.h"

#include <unordered_set>

namespace allocscope {

using pickle::Tag;
using pickle::Value;

namespace {

enum HandleKind : uint32_t { kFrameHandle = 1, kStackHandle = 2, kRowHandle = 3 };
constexpr size_t kMaxEntryKeys = 32;
constexpr size_t kMaxSettingNodes = 10000;  // allocator_settings is a few dozen values; shared sub-objects are not

struct FrameHash {
  size_t operator()(const Frame& f) const {
    return detail::mix64((static_cast<uint64_t>(f.name) << 32 | f.filename) ^ detail::mix64(static_cast<uint64_t>(f.line)));
  }
};

// Identity of a container value (node index + generation), to notice one object shared through the memo.
uint64_t identity(const Value& v) { return v.payload << 32 ^ v.aux; }

// A float time (some tools write them) as whole microseconds, or false when it is not a number in range.
bool float_time(double d, int64_t* out) {
  if (!(d > -9.2e18 && d < 9.2e18)) return false;  // NaN fails both comparisons
  *out = static_cast<int64_t>(d);
  return true;
}

// The Python type name of a value for messages; handles name what the loader made of a container.
std::string type_of(const Value& v) {
  if (v.tag != Tag::kHandle) return pickle::tag_name(v.tag);
  return v.aux == kFrameHandle ? "frame" : v.aux == kStackHandle ? "frame list" : "trace entry";
}

class Builder : public pickle::Consumer {
 public:
  explicit Builder(Snapshot* s) : s_(s), keys_(&s->strings) {}

  Result<bool> consume(const pickle::Reader& r, const Value& c, const Value* key, Value* out) override {
    if (c.tag == Tag::kDict) {
      auto items = r.items(c);
      // Frames have 3 keys and trace entries about 8; anything large is something else (and must stay cheap to
      // offer again when a crafted file references it many times).
      if (items.size() > 2 * kMaxEntryKeys) return false;
      if (items.size() == 6) {
        FrameId f;
        if (as_frame(items, &f)) {
          *out = Value::handle(kFrameHandle, f);
          return true;
        }
      }
      if (!key && r.find(c, keys_.action)) {
        auto row = add_row(r, c);
        if (!row.ok()) return row.error();
        *out = Value::handle(kRowHandle, row.value());
        return true;
      }
      return false;
    }
    if (c.tag == Tag::kList && key && key->tag == Tag::kStr && key->payload == keys_.frames) {
      auto items = r.items(c);
      frame_buf_.clear();
      for (const Value& v : items) {
        if (v.tag != Tag::kHandle || v.aux != kFrameHandle)
          return Error{"'frames' holds a " + type_of(v) + "; expected dicts with keys name, filename, line",
                       r.offset_of(c)};
        frame_buf_.push_back(static_cast<FrameId>(v.payload));
      }
      *out = Value::handle(kStackHandle, s_->stacks.intern(frame_buf_));
      return true;
    }
    return false;
  }

  Status finish(const pickle::Reader& r, const Value& root);

 private:
  bool as_frame(std::span<const Value> it, FrameId* out) {
    Frame f;
    int seen = 0;
    for (size_t i = 0; i < 6; i += 2) {
      const Value& k = it[i];
      const Value& v = it[i + 1];
      if (k.tag != Tag::kStr) return false;
      if (k.payload == keys_.name && v.tag == Tag::kStr) f.name = static_cast<StringId>(v.payload), seen |= 1;
      else if (k.payload == keys_.filename && v.tag == Tag::kStr) f.filename = static_cast<StringId>(v.payload), seen |= 2;
      else if (k.payload == keys_.line && v.tag == Tag::kInt) f.line = v.as_int(), seen |= 4;
      else return false;
    }
    if (seen != 7) return false;
    auto [it2, inserted] = frame_index_.try_emplace(f, static_cast<FrameId>(s_->frames.size()));
    if (inserted) s_->frames.push_back(f);
    *out = it2->second;
    return true;
  }

  Result<uint64_t> want_int(const pickle::Reader& r, const Value& entry, const Value& k, const Value& v) {
    if (v.tag == Tag::kInt || v.tag == Tag::kUInt) return v.payload;
    if (v.tag == Tag::kBool) return v.payload;
    return Error{"trace entry field '" + std::string(r.str(k)) + "' is a " + type_of(v) + "; expected an int",
                 r.offset_of(entry)};
  }

  StringId text_of(const pickle::Reader& r, const Value& v) {
    if (v.tag == Tag::kNone) return 0;
    if (v.tag == Tag::kStr) return static_cast<StringId>(v.payload);
    return s_->strings.intern(pickle::repr(r, v));
  }

  Result<uint32_t> add_row(const pickle::Reader& r, const Value& entry) {
    EventColumns& e = s_->events;
    if (e.action.size() >= UINT32_MAX - 1) return Error{"more than 4 billion trace entries", r.offset_of(entry)};
    Action action = Action::kUnknown;
    uint64_t addr = 0, size = 0;
    int64_t stream = 0, time_us = 0;
    StackId stack = 0;
    StringId cc = 0, um = 0;
    auto items = r.items(entry);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& k = items[i];
      const Value& v = items[i + 1];
      if (k.tag != Tag::kStr) return Error{"trace entry has a non-string key", r.offset_of(entry)};
      const StringId key = static_cast<StringId>(k.payload);
      if (key == keys_.action) {
        if (v.tag != Tag::kStr)
          return Error{"trace entry 'action' is a " + type_of(v) + "; expected a str", r.offset_of(entry)};
        action = action_from_name(r.str(v));
        if (action == Action::kUnknown) note_unknown_action(r.str(v));
      } else if (key == keys_.addr || key == keys_.device_free) {
        auto x = want_int(r, entry, k, v);
        if (!x.ok()) return x.error();
        addr = x.value();
      } else if (key == keys_.size) {
        auto x = want_int(r, entry, k, v);
        if (!x.ok()) return x.error();
        size = x.value();
        if (v.tag == Tag::kInt && v.as_int() < 0) ++negative_sizes_;
      } else if (key == keys_.stream) {
        auto x = want_int(r, entry, k, v);
        if (!x.ok()) return x.error();
        stream = static_cast<int64_t>(x.value());
      } else if (key == keys_.time_us) {
        if (v.tag == Tag::kFloat) {
          if (!float_time(v.as_double(), &time_us))
            return Error{"trace entry 'time_us' is not a finite number of microseconds", r.offset_of(entry)};
        } else {
          auto x = want_int(r, entry, k, v);
          if (!x.ok()) return x.error();
          time_us = static_cast<int64_t>(x.value());
        }
      } else if (key == keys_.frames) {
        if (v.tag == Tag::kHandle && v.aux == kStackHandle) stack = static_cast<StackId>(v.payload);
        else if (v.tag != Tag::kNone)
          return Error{"trace entry 'frames' is a " + type_of(v) + "; expected a list of frames", r.offset_of(entry)};
      } else if (key == keys_.compile_context) {
        cc = text_of(r, v);
      } else if (key == keys_.user_metadata) {
        um = text_of(r, v);
      } else {
        ++unknown_[key];
      }
    }
    e.action.push_back(action);
    e.addr.push_back(addr);
    e.size.push_back(size);
    e.stream.push_back(stream);
    e.time_us.push_back(time_us);
    e.stack.push_back(stack);
    e.compile_context.push_back(cc);
    e.user_metadata.push_back(um);
    return static_cast<uint32_t>(e.action.size() - 1);
  }

  void note_unknown_action(std::string_view name) {
    for (const auto& n : s_->unknown_action_names)
      if (n == name) return;
    if (s_->unknown_action_names.size() < 64) s_->unknown_action_names.emplace_back(name);
  }

  // Where to point an error about `v`: its own offset when it is a container, else its parent's.
  static uint64_t where(const pickle::Reader& r, const Value& v, const Value& parent) {
    uint64_t o = r.offset_of(v);
    return o != Error::kNoOffset ? o : r.offset_of(parent);
  }
  Value root_;

  Status read_segments(const pickle::Reader& r, const Value& list);
  Status read_traces(const pickle::Reader& r, const Value& list);
  Status read_annotations(const pickle::Reader& r, const Value& list);
  Setting to_setting(const pickle::Reader& r, const Value& v, int depth);

  Snapshot* s_;
  detail::Keys keys_;
  std::vector<FrameId> frame_buf_;
  std::unordered_map<Frame, FrameId, FrameHash> frame_index_;
  std::unordered_set<uint64_t> seen_;  // segments, block lists and blocks already read (sharing is refused)
  size_t setting_nodes_ = 0;
  std::unordered_map<StringId, uint64_t> unknown_;
  uint64_t negative_sizes_ = 0;
};

// Field readers for the generic part of the tree; each error names the object's byte offset.
struct Fields {
  const pickle::Reader& r;
  const Value& obj;
  const char* what;

  Error bad(const Value& k, const Value& v, const char* expected) const {
    return Error{std::string(what) + " field '" + std::string(r.str(k)) + "' is a " + type_of(v) + "; expected " +
                     expected,
                 r.offset_of(obj)};
  }
  Status u64(const Value& k, const Value& v, uint64_t* out) const {
    if (v.tag != Tag::kInt && v.tag != Tag::kUInt && v.tag != Tag::kBool) return bad(k, v, "an int");
    *out = v.payload;
    return {};
  }
  Status i64(const Value& k, const Value& v, int64_t* out) const {
    if (v.tag != Tag::kInt && v.tag != Tag::kUInt && v.tag != Tag::kBool) return bad(k, v, "an int");
    *out = static_cast<int64_t>(v.payload);
    return {};
  }
};

Status Builder::read_segments(const pickle::Reader& r, const Value& list) {
  if (list.tag != Tag::kList) return Error{"'segments' is a " + type_of(list) + "; expected a list", where(r, list, root_)};
  for (const Value& sv : r.items(list)) {
    if (sv.tag != Tag::kDict) return Error{"a segment is a " + type_of(sv) + "; expected a dict", r.offset_of(list)};
    if (!seen_.insert(identity(sv)).second)
      return Error{"one segment dict is listed twice (shared through the memo); expected distinct segments",
                   r.offset_of(sv)};
    Segment seg;
    Fields f{r, sv, "segment"};
    auto items = r.items(sv);
    Value blocks_v;
    bool has_blocks = false;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& k = items[i];
      const Value& v = items[i + 1];
      if (k.tag != Tag::kStr) return Error{"segment has a non-string key", r.offset_of(sv)};
      const StringId key = static_cast<StringId>(k.payload);
      if (key == keys_.device) ALLOCSCOPE_RETURN_IF_ERROR(f.i64(k, v, &seg.device));
      else if (key == keys_.address) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.address));
      else if (key == keys_.total_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.total_size));
      else if (key == keys_.allocated_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.allocated_size));
      else if (key == keys_.active_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.active_size));
      else if (key == keys_.requested_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.requested_size));
      else if (key == keys_.stream) ALLOCSCOPE_RETURN_IF_ERROR(f.i64(k, v, &seg.stream));
      else if (key == keys_.segment_type) {
        if (v.tag != Tag::kStr) return f.bad(k, v, "a str");
        seg.segment_type = static_cast<StringId>(v.payload);
      } else if (key == keys_.segment_pool_id) {
        auto p = r.items(v);
        if (v.tag != Tag::kTuple && v.tag != Tag::kList) return f.bad(k, v, "a tuple of two ints");
        for (size_t j = 0; j < 2 && j < p.size(); ++j) ALLOCSCOPE_RETURN_IF_ERROR(f.i64(k, p[j], &seg.pool_id[j]));
      } else if (key == keys_.is_expandable) {
        if (v.tag != Tag::kBool && v.tag != Tag::kInt) return f.bad(k, v, "a bool");
        seg.is_expandable = v.payload != 0;
      } else if (key == keys_.frames) {
        if (v.tag == Tag::kHandle && v.aux == kStackHandle) seg.stack = static_cast<StackId>(v.payload);
        else if (v.tag != Tag::kNone) return f.bad(k, v, "a list of frames");
      } else if (key == keys_.blocks) {
        if (v.tag != Tag::kList) return f.bad(k, v, "a list");
        blocks_v = v;
        has_blocks = true;
      } else {
        ++unknown_[key];
      }
    }
    seg.first_block = static_cast<uint32_t>(s_->blocks.size());
    if (has_blocks) {
      if (!seen_.insert(identity(blocks_v)).second)
        return Error{"one 'blocks' list belongs to two segments (shared through the memo); expected distinct lists",
                     r.offset_of(blocks_v)};
      for (const Value& bv : r.items(blocks_v)) {
        if (bv.tag != Tag::kDict) return Error{"a block is a " + type_of(bv) + "; expected a dict", r.offset_of(blocks_v)};
        if (!seen_.insert(identity(bv)).second)
          return Error{"one block dict is listed twice (shared through the memo); expected distinct blocks",
                       r.offset_of(bv)};
        Block b;
        Fields g{r, bv, "block"};
        auto bi = r.items(bv);
        for (size_t i = 0; i + 1 < bi.size(); i += 2) {
          const Value& k = bi[i];
          const Value& v = bi[i + 1];
          if (k.tag != Tag::kStr) return Error{"block has a non-string key", r.offset_of(bv)};
          const StringId key = static_cast<StringId>(k.payload);
          if (key == keys_.address) ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &b.address));
          else if (key == keys_.size) ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &b.size));
          else if (key == keys_.requested_size) ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &b.requested_size));
          else if (key == keys_.state) {
            if (v.tag != Tag::kStr) return g.bad(k, v, "a str");
            std::string_view st = r.str(v);
            b.state = st == "active_allocated"      ? BlockState::kActiveAllocated
                      : st == "active_pending_free" ? BlockState::kActivePendingFree
                      : st == "inactive"            ? BlockState::kInactive
                                                    : BlockState::kUnknown;
          } else if (key == keys_.frames) {
            if (v.tag == Tag::kHandle && v.aux == kStackHandle) b.stack = static_cast<StackId>(v.payload);
            else if (v.tag != Tag::kNone) return g.bad(k, v, "a list of frames");
          } else {
            ++unknown_[key];
          }
        }
        s_->blocks.push_back(b);
      }
    }
    seg.num_blocks = static_cast<uint32_t>(s_->blocks.size() - seg.first_block);
    s_->segments.push_back(seg);
  }
  return {};
}

Status Builder::read_traces(const pickle::Reader& r, const Value& list) {
  if (list.tag != Tag::kList)
    return Error{"'device_traces' is a " + type_of(list) + "; expected a list", where(r, list, root_)};
  s_->has_device_traces = true;
  // Rows were appended in stream order; each device's list normally names a contiguous ascending range.
  std::vector<uint32_t> order;
  std::vector<uint8_t> used(s_->events.size_rows(), 0);
  bool contiguous = true;
  uint32_t expect = 0;
  int64_t ordinal = 0;
  for (const Value& dv : r.items(list)) {
    if (dv.tag != Tag::kList)
      return Error{"device trace " + std::to_string(ordinal) + " is a " + type_of(dv) + "; expected a list",
                   r.offset_of(list)};
    DeviceTrace d;
    d.device = ordinal++;
    d.begin = static_cast<uint32_t>(order.size());
    for (const Value& ev : r.items(dv)) {
      if (ev.tag != Tag::kHandle || ev.aux != kRowHandle)
        return Error{"a trace entry is a " + type_of(ev) + "; expected a dict with an 'action'", r.offset_of(dv)};
      const uint32_t row = static_cast<uint32_t>(ev.payload);
      if (row >= used.size() || used[row])
        return Error{"one trace entry is listed twice (shared through the memo); expected distinct entries",
                     r.offset_of(dv)};
      used[row] = 1;
      if (row != expect) contiguous = false;
      expect = row + 1;
      order.push_back(row);
    }
    d.end = static_cast<uint32_t>(order.size());
    s_->devices.push_back(d);
  }
  EventColumns& e = s_->events;
  if (!contiguous || order.size() != e.action.size()) {
    // Unusual layout (rows shared, interleaved or orphaned): gather into device order.
    auto gather = [&](auto& col) {
      std::remove_reference_t<decltype(col)> out;
      out.reserve(order.size());
      for (uint32_t row : order) out.push_back(col[row]);
      col = std::move(out);
    };
    gather(e.action), gather(e.addr), gather(e.size), gather(e.stream), gather(e.time_us), gather(e.stack);
    gather(e.compile_context), gather(e.user_metadata);
  }
  return {};
}

Status Builder::read_annotations(const pickle::Reader& r, const Value& list) {
  if (list.tag != Tag::kList)
    return Error{"'external_annotations' is a " + type_of(list) + "; expected a list", where(r, list, root_)};
  for (const Value& av : r.items(list)) {
    if (av.tag != Tag::kDict) return Error{"an annotation is a " + type_of(av) + "; expected a dict", r.offset_of(list)};
    Annotation a;
    Fields f{r, av, "annotation"};
    auto items = r.items(av);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& k = items[i];
      const Value& v = items[i + 1];
      if (k.tag != Tag::kStr) continue;
      const StringId key = static_cast<StringId>(k.payload);
      if (key == keys_.stage) {
        if (v.tag != Tag::kStr) return f.bad(k, v, "a str");
        a.start = r.str(v) != "END";
      } else if (key == keys_.name) {
        a.name = text_of(r, v);
      } else if (key == keys_.device) {
        ALLOCSCOPE_RETURN_IF_ERROR(f.i64(k, v, &a.device));
      } else if (key == keys_.time_us) {
        if (v.tag == Tag::kFloat) {
          if (!float_time(v.as_double(), &a.time_us))
            return Error{"annotation 'time_us' is not a finite number of microseconds", r.offset_of(av)};
        } else {
          ALLOCSCOPE_RETURN_IF_ERROR(f.i64(k, v, &a.time_us));
        }
      } else {
        ++unknown_[key];
      }
    }
    s_->annotations.push_back(a);
  }
  return {};
}

Setting Builder::to_setting(const pickle::Reader& r, const Value& v, int depth) {
  Setting s;
  if (++setting_nodes_ > kMaxSettingNodes) {
    s.kind = Setting::Kind::kOther;
    s.s = "...";
    return s;
  }
  switch (v.tag) {
    case Tag::kNone: s.kind = Setting::Kind::kNone; break;
    case Tag::kBool: s.kind = Setting::Kind::kBool, s.i = v.payload ? 1 : 0; break;
    case Tag::kInt: s.kind = Setting::Kind::kInt, s.i = v.as_int(); break;
    case Tag::kFloat: s.kind = Setting::Kind::kFloat, s.f = v.as_double(); break;
    case Tag::kStr: s.kind = Setting::Kind::kStr, s.s = std::string(r.str(v)); break;
    case Tag::kDict:
    case Tag::kList:
    case Tag::kTuple:
      if (depth < 16) {
        auto items = r.items(v);
        if (v.tag == Tag::kDict) {
          s.kind = Setting::Kind::kDict;
          for (size_t i = 0; i + 1 < items.size(); i += 2) {
            Setting c = to_setting(r, items[i + 1], depth + 1);
            c.key = items[i].tag == Tag::kStr ? std::string(r.str(items[i])) : pickle::repr(r, items[i]);
            s.children.push_back(std::move(c));
          }
        } else {
          s.kind = Setting::Kind::kList;
          for (const Value& c : items) s.children.push_back(to_setting(r, c, depth + 1));
        }
        break;
      }
      [[fallthrough]];
    default: s.kind = Setting::Kind::kOther, s.s = pickle::repr(r, v); break;
  }
  return s;
}

Status Builder::finish(const pickle::Reader& r, const Value& root) {
  root_ = root;
  if (root.tag == Tag::kList) {  // oldest format: a bare list of segments
    ALLOCSCOPE_RETURN_IF_ERROR(read_segments(r, root));
  } else if (root.tag == Tag::kDict) {
    auto items = r.items(root);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& k = items[i];
      if (k.tag != Tag::kStr) return Error{"top-level dict has a non-string key", r.offset_of(root)};
      const StringId key = static_cast<StringId>(k.payload);
      if (key != keys_.segments && key != keys_.device_traces && key != keys_.external_annotations &&
          key != keys_.allocator_settings)
        ++unknown_[key];
    }
    // A key assigned twice keeps its last value, as in Python.
    if (const Value* v = r.find(root, keys_.segments)) ALLOCSCOPE_RETURN_IF_ERROR(read_segments(r, *v));
    if (const Value* v = r.find(root, keys_.device_traces)) ALLOCSCOPE_RETURN_IF_ERROR(read_traces(r, *v));
    if (const Value* v = r.find(root, keys_.external_annotations))
      ALLOCSCOPE_RETURN_IF_ERROR(read_annotations(r, *v));
    if (const Value* v = r.find(root, keys_.allocator_settings); v && v->tag == Tag::kDict) {
      Setting all = to_setting(r, *v, 0);
      s_->allocator_settings = std::move(all.children);
    }
  } else {
    return Error{"the file holds a " + type_of(root) +
                     "; a memory snapshot is a dict with 'segments' and 'device_traces' (or a list of segments)",
                 0};
  }
  if (!s_->has_device_traces && s_->events.size_rows() > 0) {
    // Trace rows outside device_traces: keep them on device 0 rather than dropping them.
    s_->devices.push_back(DeviceTrace{0, 0, static_cast<uint32_t>(s_->events.size_rows())});
  }
  for (auto& [key, n] : unknown_) s_->unknown_keys.emplace_back(std::string(s_->strings.get(key)), n);
  std::sort(s_->unknown_keys.begin(), s_->unknown_keys.end());
  if (negative_sizes_)
    s_->warnings.push_back(std::to_string(negative_sizes_) + " trace entries have a negative size");
  return {};
}

}  // namespace

bool is_gzip(std::span<const uint8_t> b) { return b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

Result<Snapshot> load_snapshot(std::span<const uint8_t> bytes, const LoadOptions& options) {
  std::vector<uint8_t> inflated;
  if (is_gzip(bytes)) {
    std::function<void(uint64_t, uint64_t)> p;
    if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("inflate", d, t); };
    auto g = gunzip(bytes, options.max_inflated_bytes, p);
    if (!g.ok()) return g.error();
    inflated = std::move(g).value();
    bytes = inflated;
  }
  if (bytes.empty()) return Error{"the file is empty; expected a pickled memory snapshot", 0};
  Snapshot snap;
  snap.source_bytes = bytes.size();
  {
    // Real snapshots spend ~160 bytes of pickle per trace entry; reserving avoids regrowing the columns (page
    // faults dominated otherwise). Excess capacity is released after loading.
    const size_t guess = std::min<size_t>(bytes.size() / 128, UINT32_MAX);
    EventColumns& e = snap.events;
    e.action.reserve(guess), e.addr.reserve(guess), e.size.reserve(guess), e.stream.reserve(guess);
    e.time_us.reserve(guess), e.stack.reserve(guess), e.compile_context.reserve(guess);
    e.user_metadata.reserve(guess);
  }
  Builder builder(&snap);
  pickle::Reader reader(&snap.strings, options.limits);
  std::function<void(uint64_t, uint64_t)> p;
  if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("parse", d, t); };
  auto root = reader.run(bytes, &builder, p);
  if (!root.ok()) return root.error();
  ALLOCSCOPE_RETURN_IF_ERROR(builder.finish(reader, root.value()));
  EventColumns& e = snap.events;
  if (e.action.capacity() > e.action.size() + e.action.size() / 4 + 1024) {
    e.action.shrink_to_fit(), e.addr.shrink_to_fit(), e.size.shrink_to_fit(), e.stream.shrink_to_fit();
    e.time_us.shrink_to_fit(), e.stack.shrink_to_fit(), e.compile_context.shrink_to_fit();
    e.user_metadata.shrink_to_fit();
  }
  return snap;
}

Result<std::vector<uint8_t>> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return Error{"cannot open '" + path + "'"};
  const std::streamoff n = f.tellg();
  if (n < 0) return Error{"cannot read '" + path + "'"};
  std::vector<uint8_t> data(static_cast<size_t>(n));
  f.seekg(0);
  if (n && !f.read(reinterpret_cast<char*>(data.data()), n)) return Error{"cannot read '" + path + "'"};
  return data;
}

Result<Snapshot> load_snapshot_file(const std::string& path, const LoadOptions& options) {
  auto data = read_file(path);
  if (!data.ok()) return data.error();
  return load_snapshot(data.value(), options);
}

}  // namespace allocscope
