// Snapshot -> PyTorch-compatible pickle. Frames are memoized once and referenced by BINGET afterwards, so a stack
// costs a few bytes per frame however many events share it.
#include "allocscope/writer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "allocscope/loader.h"
#include "allocscope/pickle.h"

namespace allocscope {

namespace {

class SnapshotWriter {
 public:
  SnapshotWriter(const Snapshot& s, pickle::Writer& w) : s_(s), w_(w), frame_slot_(s.frames.size(), UINT32_MAX) {}

  std::vector<uint8_t> run() {
    body();
    return w_.finish();
  }

  void body() {
    w_.begin_dict();
    w_.key("segments");
    w_.begin_list();
    for (const Segment& seg : s_.segments) segment(seg);
    w_.end_list();
    if (s_.has_device_traces || !s_.devices.empty()) {
      w_.key("device_traces");
      w_.begin_list();
      for (const DeviceTrace& d : s_.devices) trace(d);
      w_.end_list();
    }
    w_.key("allocator_settings");
    w_.begin_dict();
    for (const Setting& st : s_.allocator_settings) {
      w_.key(st.key);
      setting(st);
    }
    w_.end_dict();
    w_.key("external_annotations");
    w_.begin_list();
    for (const Annotation& a : s_.annotations) {
      w_.begin_dict();
      w_.key("stage"), w_.str(a.start ? "START" : "END");
      w_.key("name"), w_.str(s_.str(a.name));
      w_.key("device"), w_.integer(a.device);
      w_.key("time_us"), w_.integer(a.time_us);
      w_.end_dict();
    }
    w_.end_list();
    if (!s_.lent_windows.empty()) {  // the capture's windows (lent_frames.h): a key PyTorch's tools never read
      w_.key("allocscope_lent");
      w_.begin_list();
      for (const LentWindow& lw : s_.lent_windows) {
        if (lw.stack >= s_.stacks.size()) continue;  // not this snapshot's: its frames are unknown
        w_.begin_dict();
        w_.key("kind"), w_.str(s_.str(lw.kind));
        w_.key("start_us"), w_.integer(lw.start_us);
        w_.key("end_us"), w_.integer(lw.end_us);
        w_.key("stack"), frames(lw.stack);
        w_.end_dict();
      }
      w_.end_list();
    }
    if (s_.outside) {  // a merged snapshot's capture part (outside.h), after PyTorch's keys as a merge appends it
      w_.key("allocscope_outside");
      SnapshotWriter(*s_.outside, w_).body();
    }
    w_.end_dict();
  }

 private:
  void frames(StackId id) {
    w_.begin_list();
    for (FrameId f : s_.stack(id)) {
      if (frame_slot_[f] != UINT32_MAX) {
        w_.get_memo(frame_slot_[f]);
        continue;
      }
      const Frame& fr = s_.frames[f];
      frame_slot_[f] = w_.begin_dict();
      w_.key("name"), w_.str(s_.str(fr.name));
      w_.key("filename"), w_.str(s_.str(fr.filename));
      w_.key("line");
      if (fr.line_none) w_.none();
      else if (fr.line_unsigned) w_.uinteger(static_cast<uint64_t>(fr.line));
      else w_.integer(fr.line);
      w_.end_dict();
    }
    w_.end_list();
  }

  void segment(const Segment& seg) {
    w_.begin_dict();
    w_.key("device"), w_.integer(seg.device);
    w_.key("address"), w_.uinteger(seg.address);
    w_.key("total_size"), w_.uinteger(seg.total_size);
    w_.key("allocated_size"), w_.uinteger(seg.allocated_size);
    w_.key("active_size"), w_.uinteger(seg.active_size);
    w_.key("requested_size"), w_.uinteger(seg.requested_size);
    w_.key("stream"), w_.integer(seg.stream);
    w_.key("segment_type"), w_.str(s_.str(seg.segment_type));
    w_.key("segment_pool_id"), w_.tuple2_int(seg.pool_id[0], seg.pool_id[1]);
    w_.key("is_expandable"), w_.boolean(seg.is_expandable);
    w_.key("frames"), frames(seg.stack);
    w_.key("blocks");
    w_.begin_list();
    for (const Block& b : s_.blocks_of(seg)) {
      w_.begin_dict();
      w_.key("address"), w_.uinteger(b.address);
      w_.key("size"), w_.uinteger(b.size);
      w_.key("requested_size"), w_.uinteger(b.requested_size);
      w_.key("state"), w_.str(s_.state_text(b));
      w_.key("frames"), frames(b.stack);
      w_.end_dict();
    }
    w_.end_list();
    w_.end_dict();
  }

  void trace(const DeviceTrace& d) {
    const EventColumns& e = s_.events;
    w_.begin_list();
    for (uint32_t i = d.begin; i < d.end; ++i) {
      w_.begin_dict();
      w_.key("action"), w_.str(s_.action_text(i));
      if (e.action[i] == Action::kOom) w_.key("device_free"), w_.uinteger(e.addr[i]);
      else w_.key("addr"), w_.uinteger(e.addr[i]);
      w_.key("size"), w_.uinteger(e.size[i]);
      w_.key("stream"), w_.integer(e.stream[i]);
      w_.key("time_us"), w_.integer(e.time_us[i]);
      if (e.compile_context[i]) w_.key("compile_context"), w_.str(s_.str(e.compile_context[i]));
      if (e.user_metadata[i]) w_.key("user_metadata"), w_.str(s_.str(e.user_metadata[i]));
      if (e.action[i] != Action::kSnapshot || e.stack[i]) w_.key("frames"), frames(e.stack[i]);
      w_.end_dict();
    }
    w_.end_list();
  }

  void setting(const Setting& st) {
    switch (st.kind) {
      case Setting::Kind::kNone: w_.none(); break;
      case Setting::Kind::kBool: w_.boolean(st.i != 0); break;
      case Setting::Kind::kInt: w_.integer(st.i); break;
      case Setting::Kind::kFloat: w_.floating(st.f); break;
      case Setting::Kind::kStr:
      case Setting::Kind::kOther: w_.str(st.s); break;
      case Setting::Kind::kDict:
        w_.begin_dict();
        for (const Setting& c : st.children) w_.key(c.key), setting(c);
        w_.end_dict();
        break;
      case Setting::Kind::kList:
        w_.begin_list();
        for (const Setting& c : st.children) setting(c);
        w_.end_list();
        break;
    }
  }

  const Snapshot& s_;
  pickle::Writer& w_;
  std::vector<uint32_t> frame_slot_;
};

}  // namespace

std::vector<uint8_t> write_snapshot(const Snapshot& snapshot) {
  pickle::Writer w;
  return SnapshotWriter(snapshot, w).run();
}

std::vector<uint8_t> write_snapshot_value(const Snapshot& snapshot, pickle::Writer* w) {
  return SnapshotWriter(snapshot, *w).run();
}

Status write_snapshot_file(const Snapshot& snapshot, const std::string& path) {
  return write_pickle_file(write_snapshot(snapshot), path);
}

Status write_pickle_file(std::vector<uint8_t> bytes, const std::string& path) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    auto z = gzip(bytes);
    if (!z.ok()) return z.error();
    bytes = std::move(z).value();
  }
  // The temporary name is unique per process and call: two processes of one job (or two threads) dumping to the
  // same path must not write into one file; each rename is atomic, so the path always holds one complete snapshot.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".partial." + std::to_string(static_cast<long long>(getpid())) + "." +
                          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Error{"cannot write '" + path + "': " + std::strerror(errno)};
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return Error{"writing '" + tmp + "' failed (disk full?)"};
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Error{"cannot rename '" + tmp + "' to '" + path + "'"};
  }
  return {};
}

}  // namespace allocscope
