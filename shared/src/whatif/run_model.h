// A recorded run as the changes edit it (private to shared/src/whatif): every allocation with its size and lifetime in
// ticks, four to a recorded step, so that a change can put an allocation between two recorded events (checkpointing
// recomputes a block's activations just before its backward). Built from the snapshot, edited by the changes
// (changes.cpp), then turned back into lifetimes for the allocator replay.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/whatif.h"
#include "whatif/internal.h"

namespace allocscope::whatif_detail {

struct RunModel {
  static constexpr uint32_t kTick = 4;                                  // ticks per recorded step
  static constexpr uint32_t kForever = std::numeric_limits<uint32_t>::max();  // alive at the end

  // Per row.
  std::vector<uint64_t> size;
  std::vector<uint32_t> birth, death;  // ticks: alive in [birth, death)
  std::vector<int64_t> stream;
  std::vector<StackId> stack;
  std::vector<Category> category;
  std::vector<CategoryReason> reason;
  std::vector<uint8_t> grows;     // grows with the batch
  std::vector<StagingBound> staging;  // a reduction's staging buffer's bound (kGrowsStaging rows)
  std::vector<uint8_t> optional;  // done without under memory pressure (cuDNN's convolution workspaces)
  std::vector<uint8_t> failed;    // a request that failed in the recorded run (tried at its recorded size)
  std::vector<uint32_t> source;   // the recorded row it comes from

  // The recorded run it was built from.
  const Snapshot* snapshot = nullptr;
  const DeviceLifetimes* lifetimes = nullptr;
  const Categories* categories = nullptr;
  Iterations iterations;
  bool completed_first_step = false;  // complete_first_step added the step an OOM cut short
  std::vector<uint16_t> flags;  // stack_flags of the recording
  uint32_t ticks = 0;           // the last tick (the recorded trace's end)
  AllocatorSettings settings;   // the replay's (changed by --allocator)
  // Stretches a change plays more than once (gradient accumulation's micro-batches), in the model's ticks, in order:
  // the ticks [begin, begin + length) of what was one pass play `times` times back to back from `begin`.
  struct Repeat {
    uint32_t begin = 0, length = 0, times = 1;
  };
  std::vector<Repeat> repeats;

  uint32_t count() const { return static_cast<uint32_t>(size.size()); }
  uint32_t tick(uint32_t step) const { return step * kTick; }
  // A copy of row `i` (appended), with its own lifetime; returns its index.
  uint32_t copy_row(uint32_t i, uint32_t born, uint32_t dies);
  void drop(uint32_t i) { size[i] = 0; }  // no longer allocated (a replay skips size 0)
  bool alive_at(uint32_t i, uint32_t t) const { return size[i] && birth[i] <= t && t < death[i]; }
  // The tick each iteration (region) starts at; one past the last for the end.
  uint32_t region_start(uint32_t region) const;
  uint32_t region_of_tick(uint32_t t) const;
  // The recorded tick a model tick plays (through `repeats`: a later micro-batch's tick is its first's), for answers
  // that point into the recording (the predicted peak's step).
  uint32_t recorded_tick(uint32_t t) const;
  // The row's phase in its iteration: 1 forward, 2 backward, 3 optimizer step, 0 unknown (as the measured terms).
  int phase(uint32_t i) const;
};

// `with_failed`: the recorded lifetimes with the failed requests appended (with_failed_requests), or null.
// `staging`: per recorded row (staging_bounds).
RunModel build_run_model(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c,
                         const std::vector<uint8_t>& grows, const std::vector<StagingBound>& staging,
                         const DeviceLifetimes* with_failed);

// The model as lifetimes (ticks as steps) with each row's size, for the replay and the predicted terms.
DeviceLifetimes model_lifetimes(const RunModel& m);

// The bytes of each category alive at tick `t`, with the rows that grow scaled by `factor`.
// `seq`: the sequence scale, for what grows with its square (kGrowsSquared).
WhatIfTerms model_terms(const RunModel& m, uint32_t t, double factor, double seq = 1.0);

// A trace cut short by an out-of-memory error before its first optimizer step, and where: in the forward (the rest
// of it unknown) or in the backward (the forward seen whole).
enum class Cut : uint8_t { kNone, kInForward, kInBackward };
Cut first_step_cut(const RunModel& m);
// Adds the first step's gradients (one a weight) and AdamW's two moments a weight after the trace's end, as the step
// would have made them (the rest of its forward and backward stays unknown: the verdict's band says so).
void complete_first_step(RunModel* m, std::vector<WhatIfEffect>* effects);

// Applies one change to the model, saying what it did in `effects`. Errors for a change the recording cannot take
// (autocast on a run recorded under autocast, a checkpoint regex no frame matches, ...).
Status apply_change(const WhatIfChange& change, RunModel* m, std::vector<WhatIfEffect>* effects);

}  // namespace allocscope::whatif_detail
