// Plan: what to change so a recorded job fits a GPU (or, without one, what cuts its peak most), from the changes
// `whatif` models (whatif.h): each single change, then the smallest combinations, ordered by what they cost the user
// (a setting, then a line of code, then a change of training), each with its prediction, its verdict and margin, and
// the one line that applies it. A snapshot that ran out of memory is planned from its OOM: the GPU it ran out on (the
// OOM analysis's inferred size unless one is given), with the requests that failed tried.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/gpu_sizes.h"
#include "allocscope/lifetimes.h"
#include "allocscope/snapshot.h"
#include "allocscope/whatif.h"

namespace allocscope {

struct PlanOptions {
  std::optional<GpuCapacity> gpu;  // none: the GPU of the OOM if the file has one, else rank by the peak cut
  double world_size = 0;           // with 2 or more: the sharding stages too
  uint32_t max_options = 8;        // options listed
};

struct PlanOption {
  std::vector<WhatIfChange> changes;
  int cost = 0;  // the highest of its changes' costs (WhatIfChange::cost); the smaller batch is 4
  Verdict verdict = Verdict::kUnsure;
  uint64_t predicted_allocated = 0, predicted_reserved = 0, predicted_needed = 0;
  uint64_t needed_low = 0, needed_high = 0;
  double margin = 0;  // with a GPU: (room - needed_high) / room; without: the peak cut, a fraction of the recorded
  std::vector<WhatIfEffect> effects;
  double batch = 1.0;  // a smaller batch as the change (cost 4), else 1
  uint32_t rank = 0;   // the order options are tried in: the milder of two alike first (2 micro-batches before 4)
};

struct Plan {
  int64_t device = 0;
  std::optional<GpuCapacity> gpu;
  bool from_oom = false;        // the file ran out of memory; the plan starts from there
  bool incomplete_trace = false;  // it starts mid-run or holds no allocation: no verdict says "fits" (notes say why)
  WhatIfReport recorded;        // the run as recorded (its verdict on the GPU)
  std::vector<PlanOption> options;  // cheapest first; with a GPU, those that fit (then, if none, the closest)
  uint32_t tried = 0;               // candidates predicted
  std::vector<std::string> notes;
};

Plan plan(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, const PlanOptions& options);

std::string to_text(const Plan& p);
std::string to_json(const Plan& p);

}  // namespace allocscope
