// Reading the non-streamed part of a snapshot: segments and blocks, device trace lists, annotations, settings.
#include "snapshot/builder.h"
#include "allocscope/lent_frames.h"
#include "allocscope/loader.h"
#include "snapshot/capture_notes.h"

namespace allocscope::detail {

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
  if (list.tag != Tag::kList && list.tag != Tag::kTuple)
    return Error{"'segments' is a " + type_of(list) + "; expected a list", where(r, list, root_)};
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
      if (key == keys_.device && v.tag == Tag::kNone) {
        ++odd_fields_["segment 'device' None (read as device 0)"];
      } else if (key == keys_.device) {
        ALLOCSCOPE_RETURN_IF_ERROR(f.i64(k, v, &seg.device));
        if (seg.device < 0 || seg.device > kMaxDeviceOrdinal)
          return Error{"segment 'device' is " + std::to_string(seg.device) + "; expected a CUDA device ordinal 0.." +
                       std::to_string(kMaxDeviceOrdinal), r.offset_of(sv)};
      }
      else if (key == keys_.address) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.address));
      else if (key == keys_.total_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.total_size));
      else if (key == keys_.allocated_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.allocated_size));
      else if (key == keys_.active_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.active_size));
      else if (key == keys_.requested_size) ALLOCSCOPE_RETURN_IF_ERROR(f.u64(k, v, &seg.requested_size));
      else if (key == keys_.stream) ALLOCSCOPE_RETURN_IF_ERROR(f.i64(k, v, &seg.stream));
      else if (key == keys_.segment_type) {
        if (v.tag == Tag::kStr) seg.segment_type = static_cast<StringId>(v.payload);
        else ++odd_fields_["segment 'segment_type' not a str (ignored)"];
      } else if (key == keys_.segment_pool_id) {
        auto p = r.items(v);
        bool ints = v.tag == Tag::kTuple || v.tag == Tag::kList;
        for (size_t j = 0; ints && j < p.size(); ++j) ints = p[j].tag == Tag::kInt || p[j].tag == Tag::kUInt;
        if (ints) {
          for (size_t j = 0; j < 2 && j < p.size(); ++j) seg.pool_id[j] = static_cast<int64_t>(p[j].payload);
        } else {
          ++odd_fields_["segment 'segment_pool_id' not a tuple of ints (read as the default pool)"];
        }
      } else if (key == keys_.is_expandable) {
        if (v.tag == Tag::kBool || v.tag == Tag::kInt) seg.is_expandable = v.payload != 0;
        else ++odd_fields_["segment 'is_expandable' not a bool (read as False)"];
      } else if (key == keys_.frames) {
        if (v.tag == Tag::kHandle && v.aux == kStackHandle) seg.stack = static_cast<StackId>(v.payload);
        else if (v.tag != Tag::kNone) return f.bad(k, v, "a list of frames");
      } else if (key == keys_.blocks) {
        if (v.tag != Tag::kList && v.tag != Tag::kTuple) return f.bad(k, v, "a list");
        blocks_v = v;
        has_blocks = true;
      } else {
        ++unknown_[key];
      }
    }
    seg.first_block = static_cast<uint32_t>(s_->blocks.size());
    uint64_t next_address = seg.address;
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
        b.has_frames = false;
        bool has_address = false, has_requested = false;
        Fields g{r, bv, "block"};
        auto bi = r.items(bv);
        for (size_t i = 0; i + 1 < bi.size(); i += 2) {
          const Value& k = bi[i];
          const Value& v = bi[i + 1];
          if (k.tag != Tag::kStr) return Error{"block has a non-string key", r.offset_of(bv)};
          const StringId key = static_cast<StringId>(k.payload);
          if (key == keys_.address) {
            ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &b.address));
            has_address = true;
          } else if (key == keys_.size) {
            ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &b.size));
          } else if (key == keys_.requested_size) {
            ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &b.requested_size));
            has_requested = true;
          } else if (key == keys_.state) {
            if (v.tag != Tag::kStr) return g.bad(k, v, "a str");
            std::string_view st = r.str(v);
            b.state = st == "active_allocated"      ? BlockState::kActiveAllocated
                      : st == "active_pending_free" ? BlockState::kActivePendingFree
                      : st == "inactive"            ? BlockState::kInactive
                                                    : BlockState::kUnknown;
            if (b.state == BlockState::kUnknown) b.state_text = static_cast<StringId>(v.payload);
          } else if (key == keys_.frames) {
            if (v.tag == Tag::kHandle && v.aux == kStackHandle) b.stack = static_cast<StackId>(v.payload);
            else if (v.tag != Tag::kNone) return g.bad(k, v, "a list of frames");
            b.has_frames = true;
          } else if (key == keys_.history) {
            ALLOCSCOPE_RETURN_IF_ERROR(read_history(r, v, &b));
          } else {
            ++unknown_[key];
          }
        }
        // PyTorch 2.0 blocks have no address: blocks tile their segment in order, so it is the segment's address
        // plus the sizes before it. Without requested_size, PyTorch counts the whole block (or history[0]).
        if (!has_address) b.address = next_address;
        if (!has_requested) b.requested_size = b.size;
        if (!b.has_frames && b.num_history > 0) {
          const BlockHistory& h0 = s_->block_history[b.first_history];
          b.stack = h0.stack;
          if (!has_requested) b.requested_size = h0.real_size;
        }
        next_address = b.address + b.size;
        s_->blocks.push_back(b);
      }
    }
    seg.num_blocks = static_cast<uint32_t>(s_->blocks.size() - seg.first_block);
    s_->segments.push_back(seg);
  }
  return {};
}

// A 2.0 block's `history`: [{addr, real_size, frames}, ...], newest first; entries may lack frames.
Status Builder::read_history(const pickle::Reader& r, const Value& list, Block* b) {
  if (list.tag != Tag::kList) return Error{"block 'history' is a " + type_of(list) + "; expected a list", r.offset_of(list)};
  if (!seen_.insert(identity(list)).second)
    return Error{"one 'history' list belongs to two blocks (shared through the memo); expected distinct lists",
                 r.offset_of(list)};
  b->has_history = true;
  b->first_history = static_cast<uint32_t>(s_->block_history.size());
  for (const Value& hv : r.items(list)) {
    if (hv.tag != Tag::kDict) return Error{"a history entry is a " + type_of(hv) + "; expected a dict", r.offset_of(list)};
    BlockHistory h;
    Fields g{r, hv, "history entry"};
    auto items = r.items(hv);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& k = items[i];
      const Value& v = items[i + 1];
      if (k.tag != Tag::kStr) return Error{"history entry has a non-string key", r.offset_of(hv)};
      const StringId key = static_cast<StringId>(k.payload);
      if (key == keys_.addr) ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &h.addr));
      else if (key == keys_.real_size) ALLOCSCOPE_RETURN_IF_ERROR(g.u64(k, v, &h.real_size));
      else if (key == keys_.frames) {
        if (v.tag == Tag::kHandle && v.aux == kStackHandle) h.stack = static_cast<StackId>(v.payload);
        else if (v.tag != Tag::kNone) return g.bad(k, v, "a list of frames");
        h.has_frames = true;
      } else {
        ++unknown_[key];
      }
    }
    s_->block_history.push_back(h);
  }
  b->num_history = static_cast<uint32_t>(s_->block_history.size() - b->first_history);
  return {};
}

Result<pickle::Reader::Absorbed> Builder::rows_of(const pickle::Reader& r, const Value& list, DeviceTrace* d) const {
  const pickle::Reader::Absorbed ab = r.absorbed(list);
  if (!window_) return ab;
  for (const Value& v : r.items(list))
    if (v.tag == Tag::kHandle && v.aux == kRowHandle)
      return Error{"a trace entry is shared through the memo, which no snapshot writer does; such a file loads "
                   "whole only (without a window)", r.offset_of(list)};
  if (!ab.count) return pickle::Reader::Absorbed{0, 0};
  const WindowFilter::ListRows* l = window_->list(ab.first);
  if (!l || l->entries != ab.count)
    return Error{"trace entries outside any list (or lists interleaved): this file loads whole only (without a "
                 "window)", r.offset_of(list)};
  if (d) d->first_step = l->first_step, d->before = l->before, d->after = l->after, d->file_events = l->entries, d->file_first_time_us = l->first_time_us;
  return pickle::Reader::Absorbed{l->begin, l->end - l->begin};
}

Status Builder::read_traces(const pickle::Reader& r, const Value& list) {
  if (list.tag != Tag::kList && list.tag != Tag::kTuple)
    return Error{"'device_traces' is a " + type_of(list) + "; expected a list", where(r, list, root_)};
  s_->has_device_traces = true;
  // The usual file: each device's list absorbed the next run of rows and nothing else, so the devices are ranges
  // of the columns as they are (no per-row bookkeeping: 5 bytes a row for a 10M-event file).
  {
    uint64_t next = 0;
    bool ranges = true;
    for (const Value& dv : r.items(list)) {
      if (dv.tag != Tag::kList || !r.items(dv).empty()) {
        ranges = false;
        break;
      }
      auto ab = rows_of(r, dv);
      if (!ab.ok()) return ab.error();
      if (ab.value().count && ab.value().first != next) {
        ranges = false;
        break;
      }
      next += ab.value().count;
    }
    if (ranges && next == s_->events.size_rows()) {
      int64_t ordinal = 0;
      for (const Value& dv : r.items(list)) {
        DeviceTrace d;
        auto ab = rows_of(r, dv, &d).value();  // checked above
        d.device = ordinal++;
        d.begin = static_cast<uint32_t>(ab.first);
        d.end = static_cast<uint32_t>(ab.first + ab.count);
        if (!ab.count) d.begin = d.end = static_cast<uint32_t>(s_->devices.empty() ? 0 : s_->devices.back().end);
        s_->devices.push_back(d);
      }
      return {};
    }
  }
  // Anything else (rows shared, interleaved or orphaned): checked and gathered row by row.
  std::vector<uint32_t> order;
  std::vector<uint8_t> used(s_->events.size_rows(), 0);
  bool contiguous = true;
  uint32_t expect = 0;
  int64_t ordinal = 0;
  for (const Value& dv : r.items(list)) {
    // None is a device without a trace (PyTorch's tools skip it: `if d:`); a tuple reads as a list.
    if (dv.tag == Tag::kNone) {
      s_->devices.push_back(DeviceTrace{ordinal++, static_cast<uint32_t>(order.size()),
                                        static_cast<uint32_t>(order.size())});
      continue;
    }
    if (dv.tag != Tag::kList && dv.tag != Tag::kTuple)
      return Error{"device trace " + std::to_string(ordinal) + " is a " + type_of(dv) + "; expected a list",
                   r.offset_of(list)};
    DeviceTrace d;
    // Entries the list absorbed (Builder::absorbs): rows first..first+count-1, in stream order.
    auto absorbed = rows_of(r, dv, &d);
    if (!absorbed.ok()) return absorbed.error();
    const pickle::Reader::Absorbed ab = absorbed.value();
    d.device = ordinal++;
    d.begin = static_cast<uint32_t>(order.size());
    // An item of the list that is not a row: a dict without 'action' is named as such (not as a shared entry).
    auto not_an_entry = [&](const Value& ev) {
      return Error{"a trace entry is a " +
                       (ev.tag == Tag::kDict ? std::string("dict with no 'action' key") : type_of(ev)) +
                       " (device trace " + std::to_string(d.device) + "); expected a dict with an 'action'",
                   r.offset_of(dv)};
    };
    if (ab.count && !r.items(dv).empty()) {
      for (const Value& ev : r.items(dv))
        if (ev.tag != Tag::kHandle || ev.aux != kRowHandle) return not_an_entry(ev);
      return Error{"device trace " + std::to_string(d.device) + " mixes new entries with entries shared through the "
                   "memo; expected distinct entries", r.offset_of(dv)};
    }
    for (uint64_t row = ab.first; row < ab.first + ab.count; ++row) {
      if (row >= used.size() || used[row])
        return Error{"one trace entry is listed twice (shared through the memo); expected distinct entries",
                     r.offset_of(dv)};
      used[row] = 1;
      if (row != expect) contiguous = false;
      expect = static_cast<uint32_t>(row + 1);
      order.push_back(static_cast<uint32_t>(row));
    }
    for (const Value& ev : r.items(dv)) {
      if (ev.tag != Tag::kHandle || ev.aux != kRowHandle) return not_an_entry(ev);
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
  // The merged file's outside rows were streamed here too, and copied out by read_outside: not left out.
  if (order.size() + outside_rows_ < e.action.size())
    note_rows_outside_traces(e.action.size() - order.size() - outside_rows_);
  if (!contiguous || order.size() != e.action.size()) {
    // Unusual layout (rows shared, interleaved or orphaned): gather into device order.
    auto gather = [&](auto& col) {
      std::remove_reference_t<decltype(col)> out;
      out.reserve(order.size());
      for (uint32_t row : order) out.push_back(col[row]);
      col = std::move(out);
    };
    gather(e.action), gather(e.addr), gather(e.size), gather(e.stream), gather(e.time_us), gather(e.stack);
    gather(e.compile_context), gather(e.user_metadata), gather(e.layout);
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
  if (++setting_nodes_ > kMaxSettingNodes || setting_bytes_ > kMaxSettingBytes) {
    s.kind = Setting::Kind::kOther;
    s.s = "...";
    return s;
  }
  switch (v.tag) {
    case Tag::kNone: s.kind = Setting::Kind::kNone; break;
    case Tag::kBool: s.kind = Setting::Kind::kBool, s.i = v.payload ? 1 : 0; break;
    case Tag::kInt: s.kind = Setting::Kind::kInt, s.i = v.as_int(); break;
    case Tag::kFloat: s.kind = Setting::Kind::kFloat, s.f = v.as_double(); break;
    case Tag::kStr: s.kind = Setting::Kind::kStr, s.s = setting_text(r.str(v)); break;
    case Tag::kDict:
    case Tag::kList:
    case Tag::kTuple:
      if (depth < 16) {
        auto items = r.items(v);
        if (v.tag == Tag::kDict) {
          s.kind = Setting::Kind::kDict;
          for (size_t i = 0; i + 1 < items.size() && !settings_full(); i += 2) {
            Setting c = to_setting(r, items[i + 1], depth + 1);
            c.key = items[i].tag == Tag::kStr ? setting_text(r.str(items[i])) : setting_text(pickle::repr(r, items[i]));
            s.children.push_back(std::move(c));
          }
        } else {
          s.kind = Setting::Kind::kList;
          for (size_t i = 0; i < items.size() && !settings_full(); ++i)
            s.children.push_back(to_setting(r, items[i], depth + 1));
        }
        break;
      }
      [[fallthrough]];
    default: s.kind = Setting::Kind::kOther, s.s = setting_text(pickle::repr(r, v)); break;
  }
  return s;
}

Status Builder::read_top(const pickle::Reader& r, const Value& dict) {
  // A key assigned twice keeps its last value, as in Python.
  if (const Value* v = r.find(dict, keys_.segments)) ALLOCSCOPE_RETURN_IF_ERROR(read_segments(r, *v));
  if (const Value* v = r.find(dict, keys_.device_traces)) {
    ALLOCSCOPE_RETURN_IF_ERROR(read_traces(r, *v));
    for (const DeviceTrace& d : s_->devices)
      if (d.count() && d.device > kMaxDeviceOrdinal)
        return Error{"'device_traces' holds entries for device " + std::to_string(d.device) +
                     "; expected CUDA device ordinals 0.." + std::to_string(kMaxDeviceOrdinal),
                     where(r, *v, root_)};
  }
  if (const Value* v = r.find(dict, keys_.external_annotations)) ALLOCSCOPE_RETURN_IF_ERROR(read_annotations(r, *v));
  if (const Value* v = r.find(dict, keys_.allocator_settings); v && v->tag == Tag::kDict) {
    Setting all = to_setting(r, *v, 0);
    s_->allocator_settings = std::move(all.children);
  }
  return {};
}

// The capture's memory outside PyTorch's allocator, nested in a merged snapshot (Snapshot::outside). Its trace
// entries were streamed into this snapshot's columns like PyTorch's: they are copied out here, before PyTorch's
// device_traces are read (which then drops them as rows no list of its own holds).
Status Builder::read_outside(const pickle::Reader& r, const Value& dict) {
  if (dict.tag != Tag::kDict)
    return Error{"'allocscope_outside' is a " + type_of(dict) + "; expected a dict (a capture snapshot)",
                 where(r, dict, root_)};
  // Its lent windows first, while this snapshot's tables are the ones to intern in: the copy below shares them.
  std::vector<LentWindow> lent;
  if (const Value* v = r.find(dict, keys_.allocscope_lent)) read_lent(r, *v, &lent);
  auto out = std::make_shared<Snapshot>();
  out->lent_windows = std::move(lent);
  // The tables were filled while streaming (frames, stacks and strings of both parts); ids stay valid in a copy.
  out->strings = s_->strings;
  out->frames = s_->frames;
  out->stacks = s_->stacks;
  out->entry_layouts = s_->entry_layouts;
  const EventColumns& from = s_->events;
  EventColumns& to = out->events;
  if (const Value* tl = r.find(dict, keys_.device_traces)) {
    if (tl->tag != Tag::kList)
      return Error{"'allocscope_outside' 'device_traces' is a " + type_of(*tl) + "; expected a list", where(r, *tl, dict)};
    out->has_device_traces = true;
    // Each row once, as in PyTorch's own lists: a list of memo references to one entry must not multiply it.
    std::vector<uint8_t> used(from.size_rows(), 0);
    auto take = [&](uint64_t row, const Value& dv) -> Status {
      if (row >= used.size() || used[row])
        return Error{"one outside trace entry is listed twice (shared through the memo); expected distinct entries",
                     r.offset_of(dv)};
      used[row] = 1;
      to.append_row(from, row);
      return {};
    };
    int64_t ordinal = 0;
    for (const Value& dv : r.items(*tl)) {
      if (dv.tag != Tag::kList)
        return Error{"outside device trace " + std::to_string(ordinal) + " is a " + type_of(dv) + "; expected a list",
                     r.offset_of(*tl)};
      DeviceTrace d;
      auto absorbed = rows_of(r, dv, &d);
      if (!absorbed.ok()) return absorbed.error();
      const pickle::Reader::Absorbed ab = absorbed.value();
      d.device = ordinal++;
      d.begin = static_cast<uint32_t>(to.size_rows());
      if (ab.first + ab.count > from.size_rows())
        return Error{"outside device trace " + std::to_string(d.device) + " holds rows past the trace", r.offset_of(dv)};
      for (uint64_t row = ab.first; row < ab.first + ab.count; ++row) ALLOCSCOPE_RETURN_IF_ERROR(take(row, dv));
      for (const Value& ev : r.items(dv)) {
        if (ev.tag != Tag::kHandle || ev.aux != kRowHandle)
          return Error{"an outside trace entry is a " + type_of(ev) + "; expected a dict with an 'action'",
                       r.offset_of(dv)};
        ALLOCSCOPE_RETURN_IF_ERROR(take(ev.payload, dv));
      }
      d.end = static_cast<uint32_t>(to.size_rows());
      out->devices.push_back(d);
    }
  }
  Snapshot* main = s_;
  s_ = out.get();
  Status st;
  if (const Value* v = r.find(dict, keys_.segments)) st = read_segments(r, *v);
  if (st.ok())
    if (const Value* v = r.find(dict, keys_.external_annotations)) st = read_annotations(r, *v);
  if (const Value* v = r.find(dict, keys_.allocator_settings); st.ok() && v && v->tag == Tag::kDict)
    s_->allocator_settings = std::move(to_setting(r, *v, 0).children);
  s_ = main;
  if (!st.ok()) return Error{"in 'allocscope_outside': " + st.error().message, st.error().offset};
  outside_rows_ = to.size_rows();
  note_peer_mappings(drop_peer_mappings(out.get()));
  s_->outside = std::move(out);
  return {};
}

Status Builder::read_host(const pickle::Reader& r, const Value* segments, const Value* traces) {
  auto host = std::make_shared<Snapshot>();
  // As for the outside part: the tables filled while streaming are shared, so the ids stay valid in a copy.
  host->strings = s_->strings;
  host->frames = s_->frames;
  host->stacks = s_->stacks;
  host->entry_layouts = s_->entry_layouts;
  host->forward_marker = s_->forward_marker;
  if (traces) {
    // One list of entries: the host is one "device" (PyTorch's own viewer does not draw these yet). A list of
    // lists, as device_traces is, is read as one trace too.
    std::vector<const Value*> lists;
    if (traces->tag != Tag::kList)
      return Error{"'host_traces' is a " + type_of(*traces) + "; expected a list", where(r, *traces, root_)};
    bool nested = false;
    for (const Value& v : r.items(*traces)) nested = nested || v.tag == Tag::kList;
    if (nested) {
      for (const Value& v : r.items(*traces))
        if (v.tag == Tag::kList) lists.push_back(&v);
    } else {
      lists.push_back(traces);
    }
    host->has_device_traces = true;
    DeviceTrace d;
    d.device = 0;
    std::vector<uint8_t> used(s_->events.size_rows(), 0);
    for (const Value* list : lists) {
      auto absorbed = rows_of(r, *list, lists.size() == 1 ? &d : nullptr);
      if (!absorbed.ok()) return absorbed.error();
      const pickle::Reader::Absorbed ab = absorbed.value();
      std::vector<uint64_t> rows;
      for (uint64_t row = ab.first; row < ab.first + ab.count && row < used.size(); ++row) rows.push_back(row);
      for (const Value& ev : r.items(*list))
        if (ev.tag == Tag::kHandle && ev.aux == kRowHandle) rows.push_back(ev.payload);
      for (uint64_t row : rows) {
        if (row >= used.size() || used[row])
          return Error{"one host trace entry is listed twice (shared through the memo); expected distinct entries",
                       r.offset_of(*list)};
        used[row] = 1;
        host->events.append_row(s_->events, row);
      }
    }
    d.end = static_cast<uint32_t>(host->events.size_rows());
    host->devices.push_back(d);
    outside_rows_ += host->events.size_rows();  // copied out, not left out of device_traces
  }
  Snapshot* main = s_;
  s_ = host.get();
  Status st;
  if (segments) st = read_segments(r, *segments);
  s_ = main;
  if (!st.ok()) return Error{"in 'host_segments': " + st.error().message, st.error().offset};
  s_->host = std::move(host);
  return {};
}

StackId Builder::with_forward_frames(const pickle::Reader& r, StackId stack, const Value& forward) {
  std::vector<FrameId> frames(s_->stack(stack).begin(), s_->stack(stack).end());
  auto intern = [&](const Frame& f) {
    auto [it, inserted] = frame_index_.try_emplace(f, static_cast<FrameId>(s_->frames.size()));
    if (inserted) s_->frames.push_back(f);
    return it->second;
  };
  if (s_->forward_marker == Snapshot::kNoForwardMarker) {
    Frame marker;
    marker.name = s_->strings.intern("forward pass (where this tensor's forward op ran)");
    marker.filename = s_->strings.intern(kForwardPassFile);
    marker.line_none = true;
    s_->forward_marker = intern(marker);
  }
  frames.push_back(s_->forward_marker);
  std::vector<FrameId> fwd;  // outermost first, as written
  for (const Value& v : r.items(forward)) {
    if (v.tag != Tag::kStr) continue;
    std::string_view text = r.str(v);
    // Every 'File "F", line N, in NAME' in the string (a string may hold one or several).
    bool any = false;
    for (size_t at = text.find("File \""); at != std::string_view::npos; at = text.find("File \"", at + 1)) {
      const size_t fs = at + 6, fe = text.find('"', fs);
      if (fe == std::string_view::npos) break;
      const size_t ln = text.find(", line ", fe);
      const size_t in = ln == std::string_view::npos ? ln : text.find(", in ", ln);
      if (ln != fe + 1 || in == std::string_view::npos) continue;
      int64_t line = 0;
      size_t k = ln + 7;
      for (; k < in && text[k] >= '0' && text[k] <= '9' && line < (int64_t{1} << 40); ++k) line = line * 10 + (text[k] - '0');
      if (k != in) continue;
      const size_t ns = in + 5;
      size_t ne = text.find('\n', ns);
      if (ne == std::string_view::npos) ne = text.size();
      Frame f;
      f.filename = s_->strings.intern(text.substr(fs, fe - fs));
      f.name = s_->strings.intern(text.substr(ns, ne - ns));
      f.line = line;
      fwd.push_back(intern(f));
      any = true;
    }
    if (!any && !text.empty()) {
      Frame f;
      f.name = s_->strings.intern(text.substr(0, std::min<size_t>(text.size(), 200)));
      f.filename = s_->strings.intern("");
      f.line_none = true;
      fwd.push_back(intern(f));
    }
  }
  frames.insert(frames.end(), fwd.rbegin(), fwd.rend());
  return s_->stacks.intern(frames);
}

// A capture's mappings of other processes' memory (NCCL peers' buffers) are not this device's memory (owners.h, drop_peer_mappings): they are
// taken out as the file loads, so that every answer, the viewer's and merge's included, leaves them out alike.
void Builder::note_peer_mappings(const PeerMappings& m) {
  if (!m.count) return;
  std::string w = std::to_string(m.count);
  w.append(" mapping(s) of memory another process allocated and shared (imported handles, such as NCCL's peer "
           "buffers; ")
      .append(std::to_string(m.bytes))
      .append(" bytes) are left out: that memory is the other process's, on its own GPU, and counted in its own "
              "capture");
  s_->warnings.push_back(std::move(w));
}

namespace {
// A key from the file, quoted in an error: printable ASCII only, at most 40 characters.
std::string printable_key(std::string_view k) {
  std::string out;
  for (char c : k.substr(0, 40)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return k.size() > 40 ? out + "..." : out;
}
}  // namespace

Status Builder::finish(const pickle::Reader& r, const Value& root) {
  root_ = root;
  if (window_) {
    window_->end(s_->events);
    if (window_->unusual())
      return Error{"trace entries outside any list (or lists interleaved): this file loads whole only (without a "
                   "window)", 0};
  }
  if (root.tag == Tag::kList) {  // oldest format: a bare list of segments
    // A list of anything but dicts is some other pickle (`pickle.dump([1, 2, 3])`), not a segment list.
    if (!r.items(root).empty() && r.items(root)[0].tag != Tag::kDict)
      return Error{std::string(source_) + ", but not a memory snapshot: it holds a list of " +
                       type_of(r.items(root)[0]) +
                       "; a snapshot is a dict with 'segments' and 'device_traces' (or a list of segment dicts)",
                   0};
    // Nor is a list of dicts that are not segments (a profiler trace's events): a segment has an address and a size.
    if (!r.items(root).empty() && !r.find(r.items(root)[0], keys_.address) && !r.find(r.items(root)[0], keys_.total_size))
      return Error{std::string(source_) + ", but not a memory snapshot: a list of dicts without 'address' or "
                       "'total_size' (a profiler trace's events?); a snapshot is a dict with 'segments' and "
                       "'device_traces' (or a list of segment dicts)",
                   r.offset_of(r.items(root)[0])};
    ALLOCSCOPE_RETURN_IF_ERROR(read_segments(r, root));
  } else if (root.tag == Tag::kDict) {
    auto items = r.items(root);
    std::string others;  // the first few keys, quoted, for a dict that has none of a snapshot's
    bool known = false;
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const Value& k = items[i];
      if (k.tag != Tag::kStr) return Error{"top-level dict has a non-string key", r.offset_of(root)};
      const StringId key = static_cast<StringId>(k.payload);
      if (key != keys_.segments && key != keys_.device_traces && key != keys_.external_annotations &&
          key != keys_.allocator_settings && key != keys_.allocscope_outside && key != keys_.host_segments &&
          key != keys_.host_traces && key != keys_.allocscope_lent) {
        ++unknown_[key];
        if (i < 6) others += (others.empty() ? "'" : ", '") + printable_key(r.str(k)) + "'";
      } else {
        known = true;
      }
    }
    // `pickle.dump({'a': [1, 2, 3]})` once read as an empty snapshot, and a script that checked it saw success.
    // Unknown keys beside a snapshot's are kept and counted; a dict with none of its keys is something else.
    if (!known)
      return Error{std::string(source_) + ", but not a memory snapshot: " +
                       (others.empty() ? std::string("an empty dict")
                                       : "a dict with the key(s) " + others + (items.size() > 6 ? ", ..." : "")) +
                       " and neither 'segments' nor 'device_traces' (what torch.cuda.memory._snapshot() returns)",
                   0};
    if (const Value* v = r.find(root, keys_.allocscope_outside)) {
      // The capture's trace outside PyTorch is a list of its own, with its own steps and first time: windowed by
      // them it answered for other moments than PyTorch's window (NCCL at the peak: 189 MB for 407 MB, found by
      // comparing with the whole file), so a merged capture loads whole.
      if (window_)
        return Error{"a merged capture (allocscope record of a PyTorch job) loads whole, not a window: its trace "
                     "outside PyTorch has steps of its own. Leave out --from/--to", r.offset_of(*v)};
      ALLOCSCOPE_RETURN_IF_ERROR(read_outside(r, *v));
    }
    const Value* host_segments = r.find(root, keys_.host_segments);
    const Value* host_traces = r.find(root, keys_.host_traces);
    if (host_segments || host_traces) ALLOCSCOPE_RETURN_IF_ERROR(read_host(r, host_segments, host_traces));
    ALLOCSCOPE_RETURN_IF_ERROR(read_top(r, root));
    if (const Value* v = r.find(root, keys_.allocscope_lent)) read_lent(r, *v, &s_->lent_windows);
  } else {
    return Error{"the file holds a " + type_of(root) +
                     "; a memory snapshot is a dict with 'segments' and 'device_traces' (or a list of segments)",
                 0};
  }
  if (!s_->has_device_traces && s_->events.size_rows() > 0) {
    // Dicts with an 'action' outside device_traces (a setting's list, an unknown key's) were read as trace entries
    // as they streamed by; without device_traces there is no trace, as PyTorch's tools see it (they were put on
    // device 0: a settings list read as "1 events").
    if (s_->events.size_rows() > outside_rows_) note_rows_outside_traces(s_->events.size_rows() - outside_rows_);
    s_->events = EventColumns{};
  }
  if (is_capture(*s_)) note_peer_mappings(drop_peer_mappings(s_));
  note_capture_notes(s_);
  // PyTorch's entries made on threads that run no Python get the line of the call that waited for them (a capture's
  // own entries got it when they were recorded).
  if (!is_capture(*s_)) {
    std::vector<LentWindow> windows = s_->lent_windows;
    if (s_->outside) windows.insert(windows.end(), s_->outside->lent_windows.begin(), s_->outside->lent_windows.end());
    lend_window_frames(s_, windows);
  }
  if (window_) {
    // A window that no trace reaches is a mistake to say, not an empty job to answer. (The last step, the state
    // after every entry, is a window of no entries.)
    bool any_trace = false, any_step = false, any_time = false;
    for (const WindowFilter::ListRows& l : window_->lists()) {
      any_trace = true;
      any_time |= l.any_time;
      any_step |= l.end - l.after > l.begin + l.before ||
                  (s_->window.unit == TraceWindow::Unit::kStep && static_cast<uint64_t>(s_->window.from) <= l.entries);
    }
    if (any_trace && !any_step) {
      const bool timeless = s_->window.unit == TraceWindow::Unit::kTimeUs && !any_time;
      return Error{"no entry of any device's trace is in " + describe_window(s_->window) +
                   (timeless ? " (the traces record no times: PyTorch 2.0 and 2.1 write none; use a window of steps)"
                             : "")};
    }
  }
  if (window_ && s_->window.unit == TraceWindow::Unit::kTimeUs)
    for (const WindowFilter::ListRows& l : window_->lists())
      if (!l.any_time) {
        s_->warnings.push_back("a trace records no times (PyTorch 2.0 and 2.1 write none): a time window holds its "
                               "first entries only when it starts at 0; use a window of steps");
        break;
      }
  for (auto& [key, n] : unknown_) s_->unknown_keys.emplace_back(std::string(s_->strings.get(key)), n);
  std::sort(s_->unknown_keys.begin(), s_->unknown_keys.end());
  if (negative_sizes_)
    s_->warnings.push_back(std::to_string(negative_sizes_) + " trace entries have a negative size");
  for (const auto& [what, n] : odd_fields_)
    s_->warnings.push_back(std::to_string(n) + " x " + what);
  if (frames_without_line_)
    s_->warnings.push_back(std::to_string(frames_without_line_) + " frame(s) have no int 'line' (None, a float or "
                           "no key): their line reads None");
  return {};
}

}  // namespace allocscope::detail
