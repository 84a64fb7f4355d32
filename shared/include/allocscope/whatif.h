// What-if: the peak a training loop will reach at another batch size or sequence length, and whether it fits a GPU,
// predicted from measured snapshots (checked against real runs: tests/fixtures/whatif, docs/analyses.md).
//
// One snapshot: every allocation is kept with its lifetime; those that grow with the batch (activations, inputs,
// the forward's and backward's temporaries) are scaled, the rest (parameters, gradients, optimizer state and the
// optimizer's scratch, workspaces, backward buffers of a weight's size and no activation's) are not; the trace is
// replayed with the new sizes for the allocated peak, and through a model of PyTorch's caching allocator for the
// reserved peak.
// Two snapshots of the same loop at two sizes: allocations are paired in trace order and each one's size is fitted as
// c * size^k, which also follows attention's quadratic terms that one snapshot cannot see.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/gpu_sizes.h"
#include "allocscope/lifetimes.h"
#include "allocscope/result.h"
#include "allocscope/snapshot.h"

namespace allocscope {

// The PYTORCH_CUDA_ALLOC_CONF settings the replay models (allocator_replay.cpp says how).
struct AllocatorSettings {
  bool expandable_segments = false;
  uint64_t max_split_size = UINT64_MAX;     // max_split_size_mb, in bytes
  double garbage_collection_threshold = 0;  // kept and said; it acts only near a per-process cap
  // Where the recording's driver mapped its segments (address, size), in the order it made them: not a setting but
  // what the snapshot says. Best fit breaks ties between equal free blocks by address, so while a replay makes the
  // same segments they go where the recording's went; from the first that differs, each goes below the lowest.
  std::vector<std::pair<uint64_t, uint64_t>> segment_addresses;
  std::string text() const;                 // as PYTORCH_CUDA_ALLOC_CONF spells it ("" for the defaults)
  bool operator==(const AllocatorSettings&) const = default;
};
// PYTORCH_CUDA_ALLOC_CONF's syntax: "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6".
// Options the replay does not model (roundup_power2_divisions, backend, ...) are errors that name them.
Result<AllocatorSettings> parse_allocator_settings(std::string_view conf);

// PyTorch's caching allocator replayed over a device's allocations with the sizes given (per lifetimes row; 0: not
// allocated): its size classes (512-byte rounding; blocks up to 1 MiB in 2 MiB segments, up to 10 MiB in 20 MiB
// segments, larger in their own rounded to 2 MiB), best-fit reuse, splitting and merging of cached blocks per stream,
// and no release to the driver unless capped (below). Returns the highest reserved (segment) bytes and the highest
// allocated (block) bytes.
// With `cap` (bytes the allocator may reserve; 0: no cap), a segment that would cross it first frees the cached
// segments nothing uses, as PyTorch does before it gives up; `out_of_memory` says the run did not fit even then.
struct AllocatorReplay {
  uint64_t peak_reserved = 0;
  uint64_t peak_allocated = 0;  // block bytes, as torch.cuda.max_memory_allocated counts them
  uint32_t peak_allocated_step = 0;
  bool out_of_memory = false;
  uint32_t out_of_memory_step = 0;
};
// `optional` (per row, may be null): allocations the run does without when they do not fit (cuDNN tries its next
// algorithm when a workspace runs out of memory): under the cap, one that fails is skipped instead of ending the run.
AllocatorReplay replay_caching_allocator(const DeviceLifetimes& lt, const std::vector<uint64_t>& sizes,
                                         uint64_t cap = 0, const std::vector<uint8_t>* optional = nullptr,
                                         const AllocatorSettings& settings = {});
// The order a replay walks a device's rows in (by step, frees before allocs at a step), for the callers that replay
// one device many times with other sizes (bisections: re-sorting it each time was 15% of a 1M-event `whatif`).
// Rows whose size is 0 in a replay are skipped there, which leaves the same order a sort of the others gives.
struct ReplayOrder {
  std::vector<std::pair<uint32_t, int64_t>> events;  // (step, row + 1 for its alloc, -(row + 1) for its free)
};
ReplayOrder replay_order(const DeviceLifetimes& lt);
AllocatorReplay replay_caching_allocator(const DeviceLifetimes& lt, const ReplayOrder& order,
                                         const std::vector<uint64_t>& sizes, uint64_t cap = 0,
                                         const std::vector<uint8_t>* optional = nullptr,
                                         const AllocatorSettings& settings = {});
// The rows a run can do without under memory pressure (cuDNN workspaces), for `optional` above.
std::vector<uint8_t> optional_rows(const Snapshot& s, const DeviceLifetimes& lt);
// The least memory the allocator needs for the run (sizes as above): a cap, found by bisection to within 1 MiB, under
// which the replay does not run out of memory while 1 MiB less does. At most the uncapped peak reserved, and less
// when freeing cached segments lets the run go on (tests/fixtures/whatif/whatif_caps.json: runs that trained in up
// to 35% less). Running out is not strictly monotone in the cap (where segments get released changes how they
// fragment), so a verdict also replays at the GPU's own room (WhatIfReport::fits).
uint64_t least_allocator_room(const DeviceLifetimes& lt, const std::vector<uint64_t>& sizes,
                              const std::vector<uint8_t>* optional = nullptr, const AllocatorSettings& settings = {});
uint64_t least_allocator_room(const DeviceLifetimes& lt, const ReplayOrder& order, const std::vector<uint64_t>& sizes,
                              const std::vector<uint8_t>* optional = nullptr, const AllocatorSettings& settings = {});

// Whether a run fits a GPU. A prediction has an error that grows with how far its target is from what was recorded
// (and, with one snapshot, with a sequence scale it cannot see attention in): "unsure" where the GPU's room lies
// within it, rather than a verdict the error could turn.
enum class Verdict : uint8_t { kFits, kDoesNotFit, kUnsure };
const char* verdict_name(Verdict v);  // "fits", "does not fit", "unsure"

// The terms of the usual estimate (parameters + optimizer state + max(gradients + optimizer scratch, activations)),
// measured at one step.
struct WhatIfTerms {
  std::string phase;  // "peak", "forward", "backward", "optimizer step": the highest step of each phase
  uint32_t step = 0;
  uint64_t total = 0;  // requested bytes alive
  uint64_t parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, temporaries = 0, other = 0;
};

// A change a user makes to the job, as `whatif` takes it (whatif/changes.cpp models each on the recorded run).
struct WhatIfChange {
  enum class Kind : uint8_t {
    kAccumulate,  // value: micro-batches per optimizer step (K), the same batch per step
    kPrecision,   // text: "bf16-autocast" (fp32 weights, bf16 math) or "bf16-weights" (everything bf16)
    kOptimizer,   // text: "sgd", "sgd-momentum", "adamw", "adamw-fused", "adafactor", "adam-8bit"
    kCheckpoint,  // text: "all" (every repeated block) or a regex of the module frames to recompute
    kZeroGrad,    // text: "none" (set_to_none, PyTorch's default) or "zeros"
    kAllocator,   // settings: PYTORCH_CUDA_ALLOC_CONF
    kShard,       // text: "zero1", "zero2", "zero3"; value: the world size
    kOffload,     // text: "optimizer": the optimizer's state on the host
  };
  Kind kind = Kind::kAccumulate;
  double value = 0;
  std::string text;
  AllocatorSettings settings;
  std::string flag() const;  // as the CLI spells it: "--optimizer sgd", "--shard zero2 --world-size 8"
  std::string code() const;  // the one line (of code, or of environment) that makes the change
  int cost() const;          // what it costs the user: 1 a setting, 2 a line of code, 3 a change of training
};
// One flag of `whatif` and its value (--accumulate 4, --checkpoint all, ...); --shard takes its world size from
// `world_size` (0: not given). An error says what the flag takes.
Result<WhatIfChange> parse_change(std::string_view flag, std::string_view value, double world_size = 0);

// What one change did to the run: a sentence with the bytes it moved, per change.
struct WhatIfEffect {
  std::string change;  // its flag
  std::string what;
};

struct WhatIfOptions {
  double batch = 1.0;  // scale of the batch size
  double seq = 1.0;    // scale of the sequence length (linear in one snapshot: see `notes`)
  std::vector<WhatIfChange> changes;  // applied in order, before the batch and sequence scales
  std::optional<GpuCapacity> gpu;  // for fits / the largest batch that fits
  bool with_totals = false;        // fill WhatIfReport::predicted_total (the viewer draws it)
  bool largest_batch = true;       // with a GPU, bisect the largest batch that fits (plan skips it)
};

struct WhatIfReport {
  std::string error;  // a change the recording cannot take (nothing else is filled)
  int64_t device = 0;
  double batch = 1.0, seq = 1.0;
  std::vector<WhatIfChange> changes;  // as given
  std::vector<WhatIfEffect> effects;  // what each change did
  std::vector<WhatIfTerms> terms;  // measured
  WhatIfTerms predicted_terms;     // at the predicted peak (with changes: how the terms moved)
  // What the file records: its peak allocated (the requested bytes alive, as `peak` says it) and reserved (its
  // segments). Then the replay of the recorded sizes, and the prediction, in the allocator's block bytes: compare
  // replayed with predicted (one model on both sides), measured with what PyTorch's own counters said.
  uint64_t measured_allocated = 0, measured_reserved = 0;
  uint64_t replayed_allocated = 0, replayed_reserved = 0;
  uint64_t predicted_allocated = 0, predicted_reserved = 0;
  // The least the allocator needs (least_allocator_room). With a GPU, it fits when this plus the context does and
  // the replay capped at the GPU's room does not run out of memory.
  uint64_t predicted_needed = 0;
  uint32_t predicted_peak_step = 0;
  uint64_t scaled_bytes_at_peak = 0;  // what scales, at the measured peak (requested bytes)
  // With a GPU: whether the run fits beside a CUDA context (predicted_needed above), and the largest batch scale that
  // does (by the prediction itself, so with its error).
  std::optional<GpuCapacity> gpu;
  Verdict verdict = Verdict::kUnsure;
  bool fits = false;  // verdict == kFits
  // The least memory with the prediction's error: sizes that one snapshot cannot pin (a sequence scale: linear to
  // quadratic) at either end, widened by error_band for the distance from the recorded size.
  uint64_t needed_low = 0, needed_high = 0;
  // The largest batch scale that fits, as a range: by the prediction itself, and surely (the high end of its range
  // under the room). At or above the batch asked about for FITS (the sure end), below it for DOES NOT FIT (the
  // prediction's end), and around it for UNSURE. 0: not even a thousandth of the recorded batch.
  double max_batch_scale = 0, max_batch_scale_sure = 0;
  // The trace cannot say what the run holds at its peak: it frees memory it never saw allocated, 5% of its peak or
  // more (a wrapped ring buffer, or recording started late), or it holds no allocation at all. Never "fits", and no
  // batch fits surely (the first note says why).
  bool trace_incomplete = false;
  std::vector<std::string> notes;  // what the prediction assumes
  std::vector<uint64_t> predicted_total;  // with_totals: requested bytes alive at each step, sizes scaled
};

// Which rows grow with the batch (1) and which do not (0), from their categories, reasons, frames and sizes (a size
// that is a weight's and no activation's; autocast's copies counted per iteration).
std::vector<uint8_t> batch_dependent_rows(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c);

WhatIfReport what_if(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, const WhatIfOptions& options);

// Two snapshots of the same loop recorded at sizes `size_a` and `size_b` (batch sizes or sequence lengths); predicts
// the run at `target`. Errors when the traces cannot be paired (different programs).
struct WhatIfFit {
  double size_a = 0, size_b = 0, target = 0;
  uint32_t paired = 0, unpaired = 0;  // rows of B paired with rows of A, and not
  uint64_t measured_allocated_a = 0, measured_allocated_b = 0;
  uint64_t predicted_allocated = 0, predicted_reserved = 0;
  uint64_t predicted_needed = 0;  // as WhatIfReport::predicted_needed
  std::optional<GpuCapacity> gpu;
  Verdict verdict = Verdict::kUnsure;  // as WhatIfReport's, unpaired allocations taken as constant to quadratic
  bool fits = false;
  bool trace_incomplete = false;  // either snapshot's, as WhatIfReport's
  uint64_t needed_low = 0, needed_high = 0;
  std::vector<std::string> notes;
  // With more than two snapshots (what_if_fit_runs): every size given, and how one step of extrapolation did in this
  // job: each run above the two smallest predicted from the two just below it, against what it measured.
  struct Check {
    double size_a = 0, size_b = 0, size = 0;
    uint64_t predicted_allocated = 0, measured_allocated = 0;
  };
  std::vector<double> sizes;
  std::vector<Check> checks;
};
// The rows of `lb` paired with rows of `la` (-1: none), as the fit above pairs them: by stack, in trace order, a
// lookahead of 64 skipping what one run has and the other lacks; frames in torch.compile's generated code count by
// their function only (their files and lines change with the shapes). Also how batch_dependent_rows is checked against a
// second real run (whatif_test.cpp).
std::vector<int64_t> pair_allocations(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b,
                                      const DeviceLifetimes& lb);
Result<WhatIfFit> what_if_fit(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b,
                              const DeviceLifetimes& lb, double size_a, double size_b, double target,
                              const std::optional<GpuCapacity>& gpu);

// Two or more snapshots of the same loop (sizes all different). The prediction is fitted on the pair nearest the
// target: the two largest when the target is above them all, the two that bracket it, or the two smallest; kernels
// change with the shapes (a bf16 MLP's reductions allocate buffers only from batch 1024 on), so a pair far from the
// target misses what only sizes near it allocate. The other runs check the fit (WhatIfFit::checks).
struct WhatIfRun {
  const Snapshot* snapshot = nullptr;
  const DeviceLifetimes* lifetimes = nullptr;
  double size = 0;
};
Result<WhatIfFit> what_if_fit_runs(std::vector<WhatIfRun> runs, double target, const std::optional<GpuCapacity>& gpu);

std::string to_text(const WhatIfReport& r);
std::string to_json(const WhatIfReport& r);
std::string to_text(const WhatIfFit& r);
std::string to_json(const WhatIfFit& r);

}  // namespace allocscope
