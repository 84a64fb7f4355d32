// Recorder hooks: unwind and read the clock outside the lock, then intern the stack, append to the ring buffer and
// update the live table under one short lock, so the trace and the final `segments` always agree.
#include "recorder.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <utility>

#include "python_frames.h"
#include "unwind.h"

namespace allocscope::capture {
namespace {

std::atomic<uint64_t> g_generation{1};

// The calling thread's open ranges, tied to one recorder generation (a new start() forgets old ranges).
struct ThreadRanges {
  uint64_t generation = 0;
  std::vector<uint32_t> paths;  // innermost last
};
thread_local ThreadRanges t_ranges;

struct Captured {
  uintptr_t ips[kMaxFramesLimit + kMaxPythonFrames];
  int n = 0;
  uint64_t hash = 0;
};

}  // namespace

const char* api_name(Api api) {
  switch (api) {
    case Api::kUser: return "user";
    case Api::kMemAlloc: return "cuMemAlloc";
    case Api::kMemAllocPitch: return "cuMemAllocPitch";
    case Api::kMemAllocManaged: return "cuMemAllocManaged";
    case Api::kMemAllocAsync: return "cuMemAllocAsync";
    case Api::kMemAllocFromPoolAsync: return "cuMemAllocFromPoolAsync";
    case Api::kMemFree: return "cuMemFree";
    case Api::kMemFreeAsync: return "cuMemFreeAsync";
    case Api::kMemCreate: return "cuMemCreate";
    case Api::kMemRelease: return "cuMemRelease";
    case Api::kMemMap: return "cuMemMap";
    case Api::kMemMapImported: return "cuMemMap(imported)";
    case Api::kMemUnmap: return "cuMemUnmap";
    case Api::kMemAddressReserve: return "cuMemAddressReserve";
    case Api::kMemAddressFree: return "cuMemAddressFree";
    case Api::kMemPoolCreate: return "cuMemPoolCreate";
    case Api::kMemPoolDestroy: return "cuMemPoolDestroy";
    case Api::kMemPoolTrimTo: return "cuMemPoolTrimTo";
    case Api::kContextDestroy: return "context_destroy";
    case Api::kMemAllocAsyncPtsz: return "cuMemAllocAsync_ptsz";
    case Api::kMemAllocFromPoolAsyncPtsz: return "cuMemAllocFromPoolAsync_ptsz";
    case Api::kMemFreeAsyncPtsz: return "cuMemFreeAsync_ptsz";
  }
  return "?";
}

int64_t now_us() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

Recorder::Recorder(Options options)
    : options_(std::move(options)), generation_(g_generation.fetch_add(1)), ring_(options_.max_entries) {
  if (options_.max_frames > kMaxFramesLimit) options_.max_frames = kMaxFramesLimit;
  strings_.emplace_back();
  string_ids_.emplace("", 0);
  annotations_.reserve(1024);
  // Windows older than PyTorch's trace ring lend to nothing: a backward() per step, a few collectives per step.
  windows_.resize(std::max<uint64_t>(1024, options_.max_entries / 16));
  if (options_.stacks != StackMode::kNone) unwind_init();
  if (options_.stacks == StackMode::kPython) python_frames_prepare();
}

// Every hook starts the same way: unwind in the hook's own frame (so `skip` counts right; hence a macro) and read the
// clock and the annotation path outside the lock, then take the lock and intern the stack. Declares t, path, lock
// and stack.
#define ALLOCSCOPE_HOOK_BEGIN(skip)                                                           \
  Captured cap;                                                                               \
  if (options_.stacks == StackMode::kPython) {                                                \
    uintptr_t native[kMaxFramesLimit];                                                        \
    const int n = capture_stack(native, options_.max_frames, (skip) + 1);                     \
    cap.n = merge_python_frames(native, n, cap.ips, kMaxFramesLimit + kMaxPythonFrames);      \
    cap.hash = StackInterner::hash(cap.ips, cap.n);                                           \
  } else if (options_.stacks == StackMode::kNative) {                                         \
    cap.n = capture_stack(cap.ips, options_.max_frames, (skip) + 1);                          \
    cap.hash = StackInterner::hash(cap.ips, cap.n);                                           \
  }                                                                                           \
  const int64_t t = now_us();                                                                 \
  const uint32_t path = current_path();                                                       \
  std::lock_guard<std::mutex> lock(mu_);                                                      \
  const uint32_t stack = stacks_.intern(cap.ips, cap.n, cap.hash)

void Recorder::push(Action a, const Site& s, uint64_t addr, uint64_t size, uint32_t stack, int64_t t,
                    uint32_t path) {
  RawEvent& e = ring_[next_slot_];
  e.addr = addr;
  e.size = size;
  e.stream = s.stream;
  e.time_us = t;
  e.pool = s.pool;
  e.stack = stack;
  e.path = path;
  e.context = s.context;
  e.device = s.device;
  e.action = a;
  e.api = s.api;
  if (++next_slot_ == ring_.size()) next_slot_ = 0;
  ++pushed_;
}

uint32_t Recorder::current_path() {
  if (t_ranges.generation != generation_ || t_ranges.paths.empty()) return 0;
  return t_ranges.paths.back();
}

namespace {
// The live-table row of a block that was just allocated or mapped.
LiveEntry live_entry(const Site& site, uint64_t addr, uint64_t size, int64_t t, uint32_t stack, uint32_t path,
                     SegmentKind kind, uint64_t pool) {
  LiveEntry e;
  e.addr = addr;
  e.size = size;
  e.stream = site.stream;
  e.time_us = t;
  e.pool = pool;
  e.stack = stack;
  e.context = site.context;
  e.meta = path;
  e.device = site.device;
  e.kind = kind;
  return e;
}
}  // namespace

__attribute__((noinline)) void Recorder::on_alloc(const Site& site, uint64_t addr, uint64_t size, SegmentKind kind,
                                                  int skip) {
  ALLOCSCOPE_HOOK_BEGIN(skip);
  push(Action::kSegmentAlloc, site, addr, size, stack, t, path);
  push(Action::kAlloc, site, addr, size, stack, t, path);
  live_.put(live_entry(site, addr, size, t, stack, path, kind, site.pool));
}

__attribute__((noinline)) void Recorder::on_free(const Site& site, uint64_t addr, uint64_t size_hint, bool async,
                                                 int skip) {
  ALLOCSCOPE_HOOK_BEGIN(skip);
  LiveEntry e;
  const bool known = live_.take(addr, &e);
  Site s = site;
  const uint64_t size = known ? e.size : size_hint;
  if (async) push(Action::kFreeRequested, s, addr, size, stack, t, path);
  if (known) {
    // The block completes on the stream it was allocated on, as PyTorch records it.
    s.stream = e.stream;
    s.pool = e.pool;
  }
  push(Action::kFreeCompleted, s, addr, size, stack, t, path);
  push(Action::kSegmentFree, s, addr, size, stack, t, path);
}

__attribute__((noinline)) void Recorder::on_map(const Site& site, uint64_t addr, uint64_t size, int skip) {
  ALLOCSCOPE_HOOK_BEGIN(skip);
  push(Action::kSegmentMap, site, addr, size, stack, t, path);
  push(Action::kAlloc, site, addr, size, stack, t, path);
  LiveEntry e = live_entry(site, addr, size, t, stack, path, SegmentKind::kMapped, /*pool=*/0);
  live_.put(e);
}

__attribute__((noinline)) void Recorder::on_unmap(const Site& site, uint64_t addr, uint64_t size, int skip) {
  ALLOCSCOPE_HOOK_BEGIN(skip);
  // One unmap may cover several mapped pieces laid end to end.
  uint64_t off = 0;
  bool any = false;
  while (off < size || !any) {
    LiveEntry e;
    if (!live_.take(addr + off, &e)) break;
    any = true;
    push(Action::kFreeCompleted, site, e.addr, e.size, stack, t, path);
    push(Action::kSegmentUnmap, site, e.addr, e.size, stack, t, path);
    if (e.size == 0) break;
    off += e.size;
  }
  if (!any) {
    push(Action::kFreeCompleted, site, addr, size, stack, t, path);
    push(Action::kSegmentUnmap, site, addr, size, stack, t, path);
  }
}

__attribute__((noinline)) void Recorder::on_oom(const Site& site, uint64_t size, uint64_t device_free, int skip) {
  ALLOCSCOPE_HOOK_BEGIN(skip);
  push(Action::kOom, site, device_free, size, stack, t, path);
}

void Recorder::on_context_destroy(uint32_t context) {
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LiveEntry> gone;
  live_.for_each([&](const LiveEntry& e) {
    if (e.context == context) gone.push_back(e);
  });
  for (const LiveEntry& e : gone) {
    live_.take(e.addr, nullptr);
    Site s;
    s.api = Api::kContextDestroy;
    s.device = e.device;  // the allocation's: the thread that destroys a context may have another device current
    s.stream = e.stream;
    s.context = context;
    push(Action::kFreeCompleted, s, e.addr, e.size, 0, t, 0);
    push(e.kind == SegmentKind::kMapped ? Action::kSegmentUnmap : Action::kSegmentFree, s, e.addr, e.size, 0, t, 0);
  }
}

bool Recorder::is_live(uint64_t addr) {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.find(addr) != nullptr;
}

namespace {
uint64_t handle_key(HandleKind kind, uint64_t id) { return id ^ (static_cast<uint64_t>(kind) << 60); }
}  // namespace

void Recorder::note_created(const HandleInfo& h) {
  std::lock_guard<std::mutex> lock(mu_);
  handles_[handle_key(h.kind, h.id)] = h;
}

void Recorder::note_destroyed(HandleKind kind, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  handles_.erase(handle_key(kind, id));
}

bool Recorder::imported(uint64_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  return handles_.count(handle_key(HandleKind::kImported, handle)) > 0;
}

void Recorder::on_pool_trim(const Site& site, uint64_t pool, uint64_t keep, uint64_t before, uint64_t after) {
  auto bytes = [](uint64_t v) { return v == kUnknownBytes ? std::string("?") : std::to_string(v); };
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(pool));
  const std::string name = std::string("cuMemPoolTrimTo pool=") + hex + " keep=" + std::to_string(keep) +
                           " reserved=" + bytes(before) + "->" + bytes(after);
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  ++pool_trims_;
  if (auto it = handles_.find(handle_key(HandleKind::kPool, pool)); it != handles_.end()) {
    ++it->second.trims;
    it->second.reserved_after_trim = after;
  }
  const uint32_t name_id = intern_string_locked(name);
  for (bool start : {true, false}) {
    RawAnnotation a{start, name_id, site.device, t};
    if (annotations_.size() < options_.max_entries) annotations_.push_back(a);
    else annotations_[annotations_pushed_ % options_.max_entries] = a;
    ++annotations_pushed_;
  }
}

uint32_t Recorder::intern_string_locked(const std::string& s) {
  auto [it, inserted] = string_ids_.emplace(s, static_cast<uint32_t>(strings_.size()));
  if (inserted) strings_.push_back(s);
  return it->second;
}

void Recorder::push_range(const char* name, int16_t device) {
  const std::string n = name ? name : "";
  const int64_t t = now_us();
  if (t_ranges.generation != generation_) t_ranges = ThreadRanges{generation_, {}};
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t parent = t_ranges.paths.empty() ? 0 : t_ranges.paths.back();
  const uint32_t name_id = intern_string_locked(n);
  const uint32_t path_id = parent ? intern_string_locked(strings_[parent] + "/" + n) : name_id;
  t_ranges.paths.push_back(path_id);
  RawAnnotation a{true, name_id, device, t};
  if (annotations_.size() < options_.max_entries) annotations_.push_back(a);
  else annotations_[annotations_pushed_ % options_.max_entries] = a;
  ++annotations_pushed_;
}

void Recorder::pop_range(int16_t device) {
  if (t_ranges.generation != generation_ || t_ranges.paths.empty()) return;
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  const std::string path = strings_[t_ranges.paths.back()];
  t_ranges.paths.pop_back();
  const size_t slash = path.rfind('/');
  const uint32_t name_id = intern_string_locked(slash == std::string::npos ? path : path.substr(slash + 1));
  RawAnnotation a{false, name_id, device, t};
  if (annotations_.size() < options_.max_entries) annotations_.push_back(a);
  else annotations_[annotations_pushed_ % options_.max_entries] = a;
  ++annotations_pushed_;
}

uint64_t Recorder::recorded() {
  std::lock_guard<std::mutex> lock(mu_);
  return pushed_;
}

void Recorder::on_lend_begin(int token, const char* kind, const uintptr_t* frames, int n) {
  if (token < 1 || token > 8 || n <= 0) return;
  const uint64_t hash = StackInterner::hash(frames, n);
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  RawWindow& w = windows_[windows_opened_ % windows_.size()];
  w.start_us = t;
  w.end_us = 0;
  w.stack = stacks_.intern(frames, n, hash);
  w.kind = intern_string_locked(kind ? kind : "");
  w.serial = ++windows_opened_;
  open_window_[token - 1] = w.serial;
}

void Recorder::on_lend_end(int token) {
  if (token < 1 || token > 8) return;
  const int64_t t = now_us();
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t serial = std::exchange(open_window_[token - 1], 0);
  if (!serial) return;
  RawWindow& w = windows_[(serial - 1) % windows_.size()];
  if (w.serial == serial) w.end_us = t;  // else the ring moved past it
}

Frozen Recorder::freeze() {
  Frozen f;
  f.options = options_;
  std::lock_guard<std::mutex> lock(mu_);
  f.recorded = pushed_;
  f.pool_trims = pool_trims_;
  const size_t cap = ring_.size();
  if (pushed_ <= cap) {
    f.events.assign(ring_.begin(), ring_.begin() + static_cast<ptrdiff_t>(pushed_));
  } else {
    f.dropped = pushed_ - cap;
    f.events.reserve(cap);
    f.events.insert(f.events.end(), ring_.begin() + static_cast<ptrdiff_t>(next_slot_), ring_.end());
    f.events.insert(f.events.end(), ring_.begin(), ring_.begin() + static_cast<ptrdiff_t>(next_slot_));
  }
  f.live.reserve(live_.size());
  live_.for_each([&](const LiveEntry& e) { f.live.push_back(e); });
  f.stacks = stacks_;
  f.strings = strings_;
  f.handles.reserve(handles_.size());
  for (const auto& [k, h] : handles_) f.handles.push_back(h);
  const int64_t now = now_us();
  for (uint64_t k = windows_opened_ > windows_.size() ? windows_opened_ - windows_.size() : 0; k < windows_opened_; ++k) {
    RawWindow w = windows_[k % windows_.size()];
    if (!w.end_us) w.end_us = now;  // a dump inside the call (an OOM in backward): the span so far
    f.windows.push_back(w);
  }
  const size_t acap = options_.max_entries;
  if (annotations_pushed_ <= acap) {
    f.annotations = annotations_;
  } else {
    const size_t head = annotations_pushed_ % acap;
    f.annotations.assign(annotations_.begin() + static_cast<ptrdiff_t>(head), annotations_.end());
    f.annotations.insert(f.annotations.end(), annotations_.begin(), annotations_.begin() + static_cast<ptrdiff_t>(head));
  }
  return f;
}

}  // namespace allocscope::capture
