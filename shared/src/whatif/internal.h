// What the what-if files share (private to shared/src/whatif): scaling, what stacks say, the verdict's parts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/whatif.h"

namespace allocscope::whatif_detail {

// Sizes are capped far above any GPU (2^56 bytes): a hostile size or scale cannot overflow a replay's arithmetic.
uint64_t capped(double bytes);
uint64_t scaled(uint64_t size, double factor);
uint64_t times(uint64_t bytes, double x);
// `grows` per row: 0 keeps its size, kGrows follows the batch and the sequence, kGrowsSquared follows the batch and
// the sequence's square (attention's scores: rows.cpp, batch_dependent_rows), kGrowsStaging follows them up to the
// GPU's cap (a reduction's staging buffer: reduce_staging.cpp).
constexpr uint8_t kGrows = 1;
constexpr uint8_t kGrowsSquared = 2;
constexpr uint8_t kGrowsStaging = 3;

// A reduction's staging buffer (reduce_staging.cpp). A reading of its launch: the blocks each output's column was
// split over when recorded, the split its values a thread asked for (values / 16), and the most the GPU takes. Sizes
// can be read more than one way (1000 outputs x 128 blocks is 1024 x 125): a prediction takes the largest of the
// readings. None: unknown (the GPU or the reduction's shape), scaled as anything that grows.
struct StagingReading {
  float ctas = 0;
  float split = 0;
  float cap = 0;
};
struct StagingBound {
  static constexpr int kMax = 4;
  StagingReading reading[kMax];
  int readings = 0;
};
// A buffer's row and its semaphores' row (allocated next, from the same stack).
struct StagingPair {
  uint32_t buffer, semaphores;
};
std::vector<StagingPair> staging_pairs(const DeviceLifetimes& lt, const std::vector<uint16_t>& flags);
// Per row: the buffers' bounds on a GPU that runs `resident_threads` at once (GpuCapacity; 0: unknown, all linear).
std::vector<StagingBound> staging_bounds(const DeviceLifetimes& lt, const std::vector<uint16_t>& flags,
                                         uint64_t resident_threads);
// The buffer's size at `factor` times the recorded batch, as a multiple of its recorded size (0: none is staged).
double staging_scale(const StagingBound& b, double factor);

// Each row's size, times `factor` where it grows, and times `seq` again where it grows with the sequence's square;
// a staging buffer by its bound in `staging` (per row; null or short: linear).
std::vector<uint64_t> scaled_sizes(const DeviceLifetimes& lt, const std::vector<uint8_t>& grows, double factor,
                                   double seq = 1.0, const std::vector<StagingBound>* staging = nullptr);
// One row's size so scaled.
uint64_t scaled_row(uint64_t size, uint8_t grows, double factor, double seq, const StagingBound* staging);

// torch.compile's generated code (Inductor's cache): its files and lines change with the shapes.
bool generated_code_file(std::string_view path);

// What a stack's C++ frames say beyond its category (rows.cpp, stack_flags).
enum StackFlag : uint16_t {
  kSeen = 1,
  kCudnnWorkspace = 2,
  kAutocastCast = 4,
  kCudnnConvWorkspace = 8,
  kReduceStaging = 16,
  kMat2Grad = 32,
  kMat1Grad = 64,
  kGenerated = 128,  // torch.compile's generated code (Inductor) made it
  kAutotune = 256,   // torch.compile's autotuning (rows.cpp, autotune_frame)
  kSoftmax = 512,    // a softmax that is not a loss's (attention's probabilities, when written out)
};
std::vector<uint16_t> stack_flags(const Snapshot& s, const DeviceLifetimes& lt);  // per stack id
uint16_t flags_at(const std::vector<uint16_t>& f, StackId id);

// The error a prediction has at a factor `f` from the nearest recorded size (verdict.cpp says how it was measured).
double error_band(double f);
void note_extrapolation(double factor, std::vector<std::string>* notes);

struct Decision {
  Verdict verdict = Verdict::kUnsure;
  uint64_t low = 0, high = 0;
};
// The verdict from the least memory at the prediction's low, point and high sizes, widened by `band`.
Decision decide(const DeviceLifetimes& lt, const ReplayOrder& order, const std::vector<uint64_t>& low,
                const std::vector<uint64_t>& point, const std::vector<uint64_t>& high, uint64_t point_needed,
                double band, uint64_t room, const std::vector<uint8_t>* optional, bool expandable, uint64_t floor,
                uint64_t oom_room, const AllocatorSettings& settings = {}, double high_band_extra = 0);
// What a trace cut short by an OOM in its first step adds to the band: the part of the step it never recorded. On the
// tuning jobs (gpt_sdpa, cnn, mlp, cut at 45-90% of what they need; tests/fixtures/plan_runs/oom_cut), what the
// options really needed was up to 1.24x what the completed trace predicted when the backward had started, and up to
// 2.31x when the forward had not ended: 1 + 5% + these hold both, with a quarter of the error to spare.
constexpr double kCutInBackwardBand = 0.30;
constexpr double kCutInForwardBand = 1.35;
// The error the changes add to a prediction's band (calibrated on the tuning runs of tests/fixtures/plan_runs).
double change_band(const std::vector<WhatIfChange>& changes);

// A trace that ran out of memory: the room it ran out in, its failed requests as rows, what they needed.
uint64_t room_at_oom(const Snapshot& s, const DeviceLifetimes& lt, const std::optional<GpuCapacity>& gpu);
std::optional<DeviceLifetimes> with_failed_requests(const Snapshot& s, const DeviceLifetimes& lt);
uint64_t failed_floor(const DeviceLifetimes& lt, const std::optional<DeviceLifetimes>& with_failed);

// A trace that cannot say what the run holds at its peak: the note that says why, or "".
std::string incomplete_trace(const DeviceLifetimes& lt);
Verdict incomplete_verdict(Verdict v, bool at_least_recorded);

}  // namespace allocscope::whatif_detail
