// The recorder core: hooks turn CUDA memory calls into PyTorch trace actions in a preallocated ring buffer, keep the
// live allocations for the final `segments`, and freeze both into a Snapshot at dump time.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocscope/result.h"
#include "allocscope/snapshot.h"
#include "live_table.h"
#include "options.h"
#include "stack_interner.h"

namespace allocscope::capture {

// The driver call behind an event (kept in user_metadata, which PyTorch's tools ignore).
enum class Api : uint8_t {
  kUser, kMemAlloc, kMemAllocPitch, kMemAllocManaged, kMemAllocAsync, kMemAllocFromPoolAsync, kMemFree,
  kMemFreeAsync, kMemCreate, kMemRelease, kMemMap, kMemUnmap, kMemAddressReserve, kMemAddressFree, kMemPoolCreate,
  kMemPoolDestroy, kMemPoolTrimTo, kContextDestroy,
  // The per-thread-default-stream entry points (nvcc --default-stream per-thread, CUDA_API_PER_THREAD_DEFAULT_STREAM).
  kMemAllocAsyncPtsz, kMemAllocFromPoolAsyncPtsz, kMemFreeAsyncPtsz,
  // cuMemMap of a handle this process imported (cuMemImportFromShareableHandle): memory another process allocated,
  // on its device (NCCL's peer buffers), which the analyses must not count as this device's.
  kMemMapImported,
};
const char* api_name(Api api);

// Where an event happened.
struct Site {
  Api api = Api::kUser;
  int16_t device = 0;
  int64_t stream = 0;
  uint32_t context = 0;  // CUPTI's context uid (0 unknown)
  uint64_t pool = 0;     // CUmemoryPool handle for pool allocations
};

struct RawEvent {
  uint64_t addr = 0;  // oom: device_free
  uint64_t size = 0;
  int64_t stream = 0;
  int64_t time_us = 0;
  uint64_t pool = 0;
  uint32_t stack = 0;
  uint32_t path = 0;  // range path (index into Frozen::strings), 0 none
  uint32_t context = 0;
  int16_t device = 0;
  Action action = Action::kAlloc;
  Api api = Api::kUser;
};

// Driver objects that hold or shape memory without being trace entries: listed live at dump time in
// allocator_settings (PyTorch's tools show it verbatim), so VMM reservations, physical handles, pools and streams
// are visible next to the segments.
enum class HandleKind : uint8_t { kStream, kPool, kReservation, kPhysical, kImported };
struct HandleInfo {
  HandleKind kind = HandleKind::kStream;
  uint64_t id = 0;    // stream / pool / physical handle, or the reservation's address
  uint64_t size = 0;  // reservation and physical handle sizes
  uint32_t context = 0;
  int16_t device = 0;
  int64_t time_us = 0;
  uint64_t trims = 0;                // pools: cuMemPoolTrimTo calls
  uint64_t reserved_after_trim = 0;  // pools: bytes reserved after the last trim (kUnknownBytes: unknown)
};

struct RawAnnotation {
  bool start = true;
  uint32_t name = 0;  // index into Frozen::strings
  int16_t device = 0;
  int64_t time_us = 0;
};

// A loan of Python frames (python_frames.h) as a time span: what lent_frames.h needs to give PyTorch's own frameless
// entries of that span the same frames.
struct RawWindow {
  int64_t start_us = 0;
  int64_t end_us = 0;     // 0 while the loan lasts
  uint32_t stack = 0;     // the lent frames, interned like an event's stack
  uint32_t kind = 0;      // index into Frozen::strings: "backward", "all_reduce", ...
  uint64_t serial = 0;    // 1 + its place among all windows ever opened (0: an empty slot)
};

// A consistent copy of the recorder's state, taken under its lock in O(size) memcpy-like work.
struct Frozen {
  std::vector<RawEvent> events;  // oldest first
  std::vector<LiveEntry> live;
  StackInterner stacks;
  std::vector<std::string> strings;  // range names and paths; [0] = ""
  std::vector<RawAnnotation> annotations;
  std::vector<HandleInfo> handles;
  std::vector<RawWindow> windows;  // oldest first; one still open ends at the freeze
  uint64_t recorded = 0;  // events ever pushed
  uint64_t dropped = 0;   // pushed out of the ring
  uint64_t pool_trims = 0;  // cuMemPoolTrimTo calls seen
  Options options;
};

class Recorder {
 public:
  explicit Recorder(Options options);
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  const Options& options() const { return options_; }

  // Hooks, called at API exit. `skip` = frames of the caller's own to leave out of the stack. All noinline so that
  // skip counts stay exact.
  void on_alloc(const Site& site, uint64_t addr, uint64_t size, SegmentKind kind, int skip);  // segment_alloc+alloc
  // [free_requested] + free_completed + segment_free; `size_hint` when the allocation predates recording.
  void on_free(const Site& site, uint64_t addr, uint64_t size_hint, bool async, int skip);
  void on_map(const Site& site, uint64_t addr, uint64_t size, int skip);    // segment_map + alloc
  void on_unmap(const Site& site, uint64_t addr, uint64_t size, int skip);  // free_completed + segment_unmap
  void on_oom(const Site& site, uint64_t size, uint64_t device_free, int skip);
  void on_context_destroy(uint32_t context);  // frees what the context still held, each on its own device
  bool is_live(uint64_t addr);
  // Driver objects created / destroyed (rare calls: these may allocate).
  void note_created(const HandleInfo& h);
  void note_destroyed(HandleKind kind, uint64_t id);
  // Whether `handle` came from cuMemImportFromShareableHandle (and was not released since).
  bool imported(uint64_t handle) const;
  // cuMemPoolTrimTo: not a trace entry (a pool's own reservations are not segments, so the model does not change);
  // an instant external_annotation (START and END at one time) naming the pool, the bytes kept and what the pool
  // reserved before and after (kUnknownBytes when the driver did not say), and a count on the pool's entry.
  void on_pool_trim(const Site& site, uint64_t pool, uint64_t keep, uint64_t reserved_before, uint64_t reserved_after);

  // Named ranges of the calling thread (user scopes and NVTX): external_annotations + the path in metadata.
  void push_range(const char* name, int16_t device);
  void pop_range(int16_t device);

  // A loan of Python frames begins (token from python_frames_lend_begin, its frames) or ends: kept as a window in a
  // ring (the newest max(1024, max_entries / 16)), written under 'allocscope_lent'. `kind` names the call.
  void on_lend_begin(int token, const char* kind, const uintptr_t* frames, int n);
  void on_lend_end(int token);

  Frozen freeze();
  uint64_t recorded();

 private:
  void push(Action a, const Site& s, uint64_t addr, uint64_t size, uint32_t stack, int64_t t, uint32_t path);
  uint32_t intern_string_locked(const std::string& s);
  uint32_t current_path();

  Options options_;
  uint64_t generation_;
  mutable std::mutex mu_;
  std::vector<RawEvent> ring_;
  uint64_t pushed_ = 0;
  size_t next_slot_ = 0;
  StackInterner stacks_;
  LiveTable live_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_ids_;
  std::vector<RawAnnotation> annotations_;
  uint64_t annotations_pushed_ = 0;
  std::unordered_map<uint64_t, HandleInfo> handles_;  // key: id ^ kind in the top bits
  uint64_t pool_trims_ = 0;
  std::vector<RawWindow> windows_;       // ring
  uint64_t windows_opened_ = 0;
  uint64_t open_window_[8] = {};         // per loan token (python_frames.cpp: 8 slots): the open window's serial
};

int64_t now_us();
constexpr uint64_t kUnknownBytes = UINT64_MAX;

}  // namespace allocscope::capture
