// Leaks and held memory across iterations: what each iteration leaves behind, which allocation sites grow from one
// iteration to the next (a leak), and which gradients stay alive across optimizer steps (memory held, not growing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/lifetimes.h"
#include "allocscope/owners.h"

namespace allocscope {

struct LeakOptions {
  uint32_t min_boundaries = 3;  // fewer iterations than this cannot show a trend
  // Iterations guessed from a repeating stack (no Optimizer.step annotations) need this many; a leak found over
  // them must also still be held when the trace ends (see leaks.cpp).
  uint32_t min_guessed_boundaries = 5;
};

// Allocations sharing one site (the deepest user frame; kNoFrame groups the frameless ones).
struct LeakGroup {
  FrameId site = kNoFrame;
  StackId stack = 0;           // the stack of the latest allocation alive at the last boundary (for display)
  Category category = Category::kUnknown;
  std::vector<uint32_t> alive_count;  // per boundary: the group's allocations alive at it
  std::vector<uint64_t> alive_bytes;
  uint64_t bytes_per_iteration = 0;   // growth: (last - first alive bytes) / (boundaries - 1); held: bytes held
  uint32_t allocations = 0;           // growth: net new allocations over the trace; held: allocations held
};

// In a capture without PyTorch's tensors, a library's pool (PyTorch's caching allocator, NCCL, ...) whose
// reservations keep growing at the iteration starts after warm-up: what a tensor kept alive per iteration looks like
// from the driver, and all a capture can see of it.
struct PoolGrowth {
  Owner owner = Owner::kUnknown;
  std::vector<uint64_t> reserved_at_boundary;  // the pool's reserved bytes at each boundary
  uint64_t bytes_per_iteration = 0;            // growth after warm-up, per iteration
  uint32_t warmup_boundaries = 0;              // the first boundaries, left out of the judgement
  std::vector<LeakGroup> sites;                // where its reservations grew: more bytes at the last boundary than at the warm-up's end, largest first
};

struct LeakReport {
  int64_t device = 0;
  Iterations iterations;
  // Per boundary: total active bytes at it (a leak shows as a rising floor).
  std::vector<uint64_t> total_at_boundary;
  // Per region (iterations.regions()): allocations born there that are still alive after the next region ends
  // (they outlived the iteration after their own), and their bytes.
  std::vector<uint32_t> survivor_count;
  std::vector<uint64_t> survivor_bytes;
  std::vector<LeakGroup> growing;  // largest growth first
  std::vector<LeakGroup> held;     // gradients alive across optimizer steps, largest first
  // Sites that grew across guessed iterations but were given back before the trace ended (still_held, leaks.cpp):
  // not a leak, but not "nothing grows" either (a list kept until an OOM, then deleted). Largest growth first.
  std::vector<LeakGroup> released;
  // A capture's allocations that a library's own pool reserves (PyTorch's caching allocator, NCCL) are not judged
  // here: how many were left out, so "no leak" says it is about the program's own allocations only.
  uint32_t library_reservations_left_out = 0;
  // Those of a caching allocator of tensors (PyTorch's, CuPy's, XLA's), judged as pools (capture files only):
  // growing after warm-up, largest growth first. Other libraries' buffers (NCCL, cuBLAS) are set up by the library.
  std::vector<PoolGrowth> pools_growing;
  // Whether there were boundaries enough to tell a pool's warm-up from growth (kPoolBoundaries).
  bool pools_judged = false;
  static constexpr uint32_t kPoolBoundaries = 9;  // a third for warm-up, and six to see a trend after it
  // The boundaries a trend needs with this kind of iterations (LeakOptions): with fewer, nothing can be seen to
  // grow, and "no leak" would claim more than the trace shows.
  uint32_t boundaries_needed = 0;
  // Guessed iterations whose repeats all run inside module forwards: every allocation from the first boundary to
  // the last was made in a `forward` (categories' forward-frame evidence). They may be steps of one forward pass,
  // whose activations the backward frees (pt28's device 2: 3 calls x 4 message-passing steps of one DataParallel
  // forward, cut by an OOM), or a loop that only calls the model and keeps its outputs. A snapshot cannot tell
  // these apart, so nothing is judged; `growing` still lists what grows across the repeats, for the reader.
  bool forward_only = false;
  // Guessed iterations whose repeats all build or move the model's weights: every allocation from the first boundary
  // to the last is a module's parameter or buffer made in its __init__, .cuda(), .to() or load_state_dict
  // (model_building_stacks). They are a model's layers, moved one by one (a CNN's conv and norm weights repeat per
  // block), not a loop's iterations: the trace of a job that ran out of memory in its first forward is mostly that.
  bool setup_only = false;
  // Repeats that are not iterations (either of the above): nothing is judged across them.
  bool repeats_only() const { return forward_only || setup_only; }
  bool judged() const { return !repeats_only() && iterations.boundary.size() >= boundaries_needed; }
  bool leak_suspected() const { return judged() && !growing.empty(); }
  // A pool grows with no growing site of the program's own to blame (pools_growing): a leak the capture sees only as
  // reserved memory.
  bool pool_growth_suspected() const { return judged() && !leak_suspected() && !pools_growing.empty(); }
};

LeakReport find_leaks(const Snapshot& s, const DeviceLifetimes& lt, const Iterations& it, const Categories& c,
                      const FrameFilter& ff, const LeakOptions& options = {});

std::string to_json(const Snapshot& s, const LeakReport& r);
std::string to_text(const Snapshot& s, const LeakReport& r);

}  // namespace allocscope
