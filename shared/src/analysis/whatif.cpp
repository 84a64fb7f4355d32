// What-if predictions (whatif.h): scale what grows with the batch, replay, and ask the allocator model for reserved.
#include "allocscope/whatif.h"

#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/oom.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace allocscope {
namespace {

// Scaled sizes are capped far above any GPU (2^56 bytes) so that a hostile size or scale cannot overflow the
// replay's arithmetic; such a prediction simply does not fit.
constexpr double kMaxBytes = 72057594037927936.0;  // 2^56
uint64_t capped(double bytes) { return static_cast<uint64_t>(std::llround(std::clamp(bytes, 0.0, kMaxBytes))); }

uint64_t scaled(uint64_t size, double factor) { return capped(static_cast<double>(size) * factor); }

std::vector<uint64_t> scaled_sizes(const DeviceLifetimes& lt, const std::vector<uint8_t>& grows, double factor) {
  std::vector<uint64_t> sizes(lt.size);
  for (uint32_t i = 0; i < lt.count(); ++i)
    if (grows[i]) sizes[i] = scaled(lt.size[i], factor);
  return sizes;
}

// torch.compile's generated code (Inductor): a file in its cache, /tmp/torchinductor_USER by default, or wherever
// TORCHINDUCTOR_CACHE_DIR puts it, named by the code's hash: DIR/xy/cxy<49 more of [a-z0-9]>.py.
bool generated_code_file(std::string_view path) {
  if (path.find("torchinductor_") != std::string_view::npos) return true;
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || slash < 3 || path[slash - 3] != '/') return false;
  const std::string_view base = path.substr(slash + 1), dir = path.substr(slash - 2, 2);
  if (base.size() != 55 || base[0] != 'c' || base.substr(52) != ".py" || base.substr(1, 2) != dir) return false;
  for (size_t k = 1; k < 52; ++k)
    if (!((base[k] >= 'a' && base[k] <= 'z') || (base[k] >= '0' && base[k] <= '9'))) return false;
  return true;
}

enum StackFlag : uint16_t {
  kSeen = 1,
  kCudnnWorkspace = 2,
  kAutocastCast = 4,
  kCudnnConvWorkspace = 8,
  kReduceStaging = 16,
  kMat2Grad = 32,
  kMat1Grad = 64,
  kGenerated = 128,  // torch.compile's generated code (Inductor) made it
  kAutotune = 256,   // torch.compile's autotuning (below)
};

// torch.compile's autotuning in a compiled graph's first call: Inductor benchmarks each kernel's configs
// (torch/_inductor/runtime/triton_heuristics.py's benchmark_all_configs, runtime/benchmarking.py) with copies of the
// kernel's arguments and a buffer that flushes the L2. A different number of allocations at each shape (200 copies
// at batch 4, 400 at 8 in the compiled GPT-2 runs), all freed before the step goes on.
bool autotune_frame(std::string_view file, std::string_view name) {
  if (name.find("bench") == std::string_view::npos) return false;
  // PyTorch's own package only (a user's folder named "*_inductor*" is not it), on any OS.
  return file.find("torch/_inductor/") != std::string_view::npos ||
         file.find("torch\\_inductor\\") != std::string_view::npos;
}

// What a stack's C++ frames say beyond its category: a cuDNN workspace (its size follows the batch, unlike cuBLAS's
// fixed one), a convolution's among them (optional under a cap), autocast's cast of an operand (a weight's cast does
// not grow with the batch; the input's does), a reduction's staging buffer, and which operand of a matmul a gradient
// is for.
std::vector<uint16_t> stack_flags(const Snapshot& s, const DeviceLifetimes& lt) {
  std::vector<uint16_t> f(s.stacks.size(), 0);
  for (uint32_t i = 0; i < lt.count(); ++i) {
    const StackId id = lt.stack[i];
    if (id >= f.size() || f[id]) continue;
    f[id] = kSeen;
    for (FrameId fr : s.stack(id)) {
      const std::string_view name = s.str(s.frames[fr].name);
      if (workspace_frame(name) == WorkspaceKind::kCudnn) f[id] |= kCudnnWorkspace;
      // A convolution's workspace only: its out-of-memory is caught and the next cuDNN engine tried (Conv_v8.cpp's
      // try_plans); attention's (run_cudnn_SDP) is not, and ends the run like any other allocation.
      if (name.find("run_conv_plan") != std::string_view::npos) f[id] |= kCudnnConvWorkspace;
      if (name.find("autocast::cached_cast") != std::string_view::npos) f[id] |= kAutocastCast;
      // A reduction split over several blocks stages partial sums in a buffer sized by its input (reducing a
      // broadcast gradient over the batch: a GPT's position embedding, a bias).
      if (name.find("gpu_reduce_kernel") != std::string_view::npos) f[id] |= kReduceStaging;
      // Autograd's formula for a matmul's gradients (FunctionsManual.cpp): a linear layer's weight is mat2
      // (addmm(bias, input, weight.t()), and x @ W), its input mat1; W @ x or two activations are otherwise.
      if (name.find("mm_mat2_backward") != std::string_view::npos) f[id] |= kMat2Grad;
      if (name.find("mm_mat1_backward") != std::string_view::npos) f[id] |= kMat1Grad;
      const std::string_view file = s.str(s.frames[fr].filename);
      if (generated_code_file(file)) f[id] |= kGenerated;
      if (autotune_frame(file, name)) f[id] |= kAutotune;
    }
  }
  return f;
}

uint16_t flags_at(const std::vector<uint16_t>& f, StackId id) { return id < f.size() ? f[id] : 0; }

// Said when the prediction reaches more than twice (or under half) the size a snapshot was recorded at: PyTorch picks
// some kernels by shape, and those can allocate what no recorded run did.
void note_extrapolation(double factor, std::vector<std::string>* notes) {
  if (!(factor > 2.0 || factor < 0.5)) return;
  char note[400];
  std::snprintf(note, sizeof note,
                "the target is %.3gx the nearest recorded size: kernels PyTorch picks by shape (a reduction split "
                "over blocks, a cuDNN algorithm, embedding's backward past 3072 indices) can allocate buffers no "
                "recorded run has (a bf16 MLP recorded at batch 256 and 512 read 7%% low at 2048); a snapshot nearer "
                "the target checks it",
                factor);
  notes->push_back(note);
}

// How far the least memory a prediction finds may be from what the run needs, by how far the target is from the
// nearest recorded size (a factor f, either way): 5% + 4% per doubling. Measured against what 36 real runs trained
// in (whatif_caps.json; WhatIf.VerdictsAreNeverWrong): the replay at a run's own sizes within 2.5%, one snapshot 2x
// away within 7.9% (the compiled GPT-2 from batch 8 to 4), 4x within 7.1%, 8x within 10% (the CNN from 16 to 128,
// whose cuDNN algorithms change with the shape).
// Capped at half: no measured error came near it, and a run predicted at a thousand times its batch is still
// told apart from a GPU a thousand times too small.
double error_band(double f) {
  if (!(f > 0) || !std::isfinite(f)) return 0.5;
  return std::min(0.5, 0.05 + 0.04 * std::fabs(std::log2(f)));
}

uint64_t times(uint64_t bytes, double x) { return capped(static_cast<double>(bytes) * x); }

// The memory PyTorch's allocator could use when the recorded run ran out (its reserved bytes then, plus the
// driver's free bytes the OOM event reports), the most over its OOMs whose cause is this device's size (a request too
// large, fragmentation, live tensors: the OOM analysis's one rule, oom.h); 0 without one. A run at least as large as
// recorded, on a GPU whose allocator has no more room than that, runs out the same way (same program, same sizes).
// An OOM under a per-process cap or beside memory held outside PyTorch says nothing about the GPU's size.
uint64_t room_at_oom(const Snapshot& s, const DeviceLifetimes& lt, const std::optional<GpuCapacity>& gpu) {
  bool any = false;
  for (uint32_t i = 0; i < lt.event_count; ++i) any |= s.events.action[lt.event_begin + i] == Action::kOom;
  if (!any) return 0;
  Lifetimes one;
  one.devices.push_back(lt);
  OomOptions o;
  o.gpu = gpu;
  uint64_t most = 0;
  for (const OomReport& r : analyze_ooms(s, one, o))
    if (r.device == lt.device && (r.cause == OomCause::kRequestTooLarge || r.cause == OomCause::kFragmentation ||
                                  r.cause == OomCause::kLiveTensors))
      most = std::max(most, r.reserved + r.device_free);
  return most;
}

// The verdict from the least memory at the prediction's low and high sizes, widened by its error band: "fits" only
// when the high end fits (and the point replay under the GPU's room does not run out), "does not fit" only when the
// low end does not.
struct Decision {
  Verdict verdict = Verdict::kUnsure;
  uint64_t low = 0, high = 0;
};
// With expandable segments the run maps pages as its blocks need them, and needs about its allocated peak: less than
// this model of the default allocator finds where that allocator would fragment. So the low end reaches down to the
// allocated peak, and the model cannot call such a run "does not fit" for fragmentation it will not have.
// `floor`: what the run is measured to need (failed_floor), below which no end of the range goes. `oom_room`: the
// room the recorded run ran out in (room_at_oom; 0: none), measured, not modelled: a run at least as large as
// recorded, on a GPU with no more room, runs out too (an audit found the recorded configuration on the GPU it failed
// on called UNSURE).
Decision decide(const DeviceLifetimes& lt, const ReplayOrder& order, const std::vector<uint64_t>& low,
                const std::vector<uint64_t>& point,
                const std::vector<uint64_t>& high, uint64_t point_needed, double band, uint64_t room,
                const std::vector<uint8_t>* optional, bool expandable, uint64_t floor, uint64_t oom_room) {
  Decision d;
  if (oom_room && room <= oom_room) floor = std::max(floor, room + 1);
  const uint64_t at_low = &low == &point ? point_needed : least_allocator_room(lt, order, low, optional);
  const uint64_t at_high = &high == &point ? point_needed : least_allocator_room(lt, order, high, optional);
  // (At the arithmetic's cap, 2^56 bytes, the range still holds the point.)
  d.low = std::min(times(std::min(at_low, point_needed), 1.0 - band), point_needed);
  d.high = std::max(times(std::max(at_high, point_needed), 1.0 + band), point_needed);
  if (expandable) d.low = std::min(d.low, times(replay_caching_allocator(lt, order, low).peak_allocated, 1.0 - band));
  d.low = std::max(d.low, floor);
  d.high = std::max(d.high, d.low);
  const bool point_fits =
      point_needed <= room && !replay_caching_allocator(lt, order, point, room, optional).out_of_memory;
  if (point_fits && d.high <= room) d.verdict = Verdict::kFits;
  else if (d.low > room) d.verdict = Verdict::kDoesNotFit;
  return d;
}

// The requests that failed (a trace that ran out of memory) have no row, so a replay never tries them, and reads
// such a run as fitting the GPU it failed on, fragmentation included. `lt` with a row for each failed request, at
// its recorded size, from right after its failure to the next event; nullopt when the trace has none. Only for runs
// at least as large as recorded: a smaller one may ask for less.
std::optional<DeviceLifetimes> with_failed_requests(const Snapshot& s, const DeviceLifetimes& lt) {
  const auto first = s.events.action.begin() + lt.event_begin;
  if (std::none_of(first, first + lt.event_count, [](Action a) { return a == Action::kOom; })) return std::nullopt;
  DeviceLifetimes out = lt;
  for (uint32_t e = 0; e < lt.event_count; ++e) {
    const uint32_t row = lt.event_begin + e;
    if (s.events.action[row] != Action::kOom) continue;
    out.addr.push_back(0);
    out.size.push_back(s.events.size[row]);
    out.block_size.push_back(0);
    out.stream.push_back(s.events.stream[row]);
    out.stack.push_back(0);
    out.alloc_event.push_back(e);
    out.free_event.push_back(e + 1 < lt.event_count ? e + 1 : kNoEvent);
    out.free_requested_event.push_back(kNoEvent);
    out.origin.push_back(LifetimeOrigin{});
  }
  return out;
}

// What was alive when each failed request was made, plus the request (requested bytes; `with_failed` is
// with_failed_requests(lt)): measured, not modelled, so a floor for the least memory. 0 without failed requests.
uint64_t failed_floor(const DeviceLifetimes& lt, const std::optional<DeviceLifetimes>& with_failed) {
  uint64_t floor = 0;
  if (with_failed)
    for (uint32_t j = lt.count(); j < with_failed->count(); ++j)
      floor = std::max(floor, lt.total[std::min(with_failed->alloc_event[j], lt.steps() - 1)] + with_failed->size[j]);
  return floor;
}

}  // namespace

std::vector<uint8_t> optional_rows(const Snapshot& s, const DeviceLifetimes& lt) {
  const std::vector<uint16_t> flags = stack_flags(s, lt);
  std::vector<uint8_t> out(lt.count(), 0);
  for (uint32_t i = 0; i < lt.count(); ++i) out[i] = (flags_at(flags, lt.stack[i]) & kCudnnConvWorkspace) ? 1 : 0;
  return out;
}

std::vector<uint8_t> batch_dependent_rows(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c) {
  const uint32_t n = lt.count();
  const std::vector<uint16_t> flags = stack_flags(s, lt);
  auto forward_made = [&](uint32_t i) {
    return c.category[i] == Category::kActivation || c.category[i] == Category::kInput;
  };
  // A copy of an operand, which may be a weight's: autocast's (a cached_cast frame), or any buffer the forward of a
  // torch.compile'd graph makes (Inductor fuses the casts into its kernels: nothing in the stack tells a weight's bf16
  // copy from an activation).
  auto autocast_cast = [&](uint32_t i) { return (flags_at(flags, lt.stack[i]) & kAutocastCast) != 0; };
  auto copy = [&](uint32_t i) {
    return autocast_cast(i) || ((flags_at(flags, lt.stack[i]) & kGenerated) && forward_made(i));
  };
  std::unordered_map<uint64_t, uint32_t> params_of_size;
  bool copies = false;
  for (uint32_t i = 0; i < n; ++i) {
    if (c.category[i] == Category::kParameter) ++params_of_size[lt.size[i]];
    copies = copies || copy(i);
  }
  auto params = [&](uint64_t size) {
    auto f = params_of_size.find(size);
    return f == params_of_size.end() ? 0u : f->second;
  };
  // Twice a size, or 0 where that would not fit in 64 bits (a hostile size): no parameter has size 0.
  auto twice = [](uint64_t b) { return b <= UINT64_MAX / 2 ? 2 * b : 0; };

  // A copy of a weight: half a weight's size (an fp32 weight for a bf16 op) or twice it (a bf16 weight for an fp32
  // op). Autocast caches a weight's copy for the forward, so a step makes at most one per weight: where a step makes
  // more copies of a size than there are weights of its source's size, they are activations' (GPT-2 widths at batch
  // 4: nine 3 MiB copies a step, and one 6 MiB weight, the position embedding, which is never cast).
  std::unordered_map<uint64_t, uint32_t> copies_per_step;  // size -> the most copies of it one iteration makes
  if (copies) {
    const Iterations it = detect_iterations(s, lt);
    if (it.source != Iterations::Source::kNone) {
      std::map<std::pair<uint32_t, uint64_t>, uint32_t> counts;
      for (uint32_t i = 0; i < n; ++i)
        if (copy(i) && lt.alloc_event[i] != kNoEvent) {
          const uint32_t k = ++counts[{it.region_of(lt.birth_step(i)), lt.size[i]}];
          copies_per_step[lt.size[i]] = std::max(copies_per_step[lt.size[i]], k);
        }
    }
  }
  // Autocast's own copies: without iterations to count in, any weight of the source's size decides. A compiled
  // forward's buffer is a weight's copy only when it is counted and half a weight (fp32 to bf16, what autocast does
  // under compile): by size alone, an fp32 compiled model's activations would pass for copies and the prediction
  // would come out low.
  std::vector<uint8_t> weight_copy(n, 0);
  bool half = false;  // half precision: a weight's gradient may be half its size
  for (uint32_t i = 0; i < n; ++i) {
    if (!copy(i)) continue;
    const uint64_t b = lt.size[i];
    const bool seen = autocast_cast(i);
    const uint32_t sources = params(twice(b)) + (seen && b % 2 == 0 ? params(b / 2) : 0);
    auto made = copies_per_step.find(b);
    weight_copy[i] = made == copies_per_step.end() ? seen && sources > 0 : sources > 0 && made->second <= sources;
    half = half || seen || weight_copy[i];
  }
  // Sizes of what the forward made other than copies (autocast's, or a compiled forward's taken for a weight's): a
  // gradient of an activation has an activation's size.
  std::unordered_set<uint64_t> activation_sizes;
  for (uint32_t i = 0; i < n; ++i)
    if (forward_made(i) && !autocast_cast(i) && !weight_copy[i]) activation_sizes.insert(lt.size[i]);
  std::vector<uint8_t> grows(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    const uint16_t f = flags_at(flags, lt.stack[i]);
    if (f & kCudnnWorkspace) {
      grows[i] = 1;
      continue;
    }
    switch (c.category[i]) {
      case Category::kActivation:
      case Category::kInput:
        grows[i] = !weight_copy[i];  // a copy of a weight stays; of an activation, it grows
        break;
      // The optimizer step's scratch has the parameters' shapes; the forward's and backward's follows the batch.
      case Category::kTemporary: grows[i] = c.reason[i] != CategoryReason::kOptimizerFrame; break;
      // A weight-gradient contribution has its parameter's size (half of it under autocast); a gradient of an
      // activation, the activation's; a reduction's staging buffer, its input's. Where the size is both a weight's
      // and an activation's, a matmul's frame says which operand the gradient is for, and otherwise the activation
      // wins: shapes made of powers of two often give an activation a weight's size (a GPT at batch 8 x 256 tokens x
      // 512 wide: 4 MiB, as its 512x2048 weights), and with `zero_grad(set_to_none=True)`, PyTorch's default, a
      // weight's contribution becomes its .grad (a gradient, not this category), so the activation is the likelier.
      // Taking such rows for weights read gpt_ckpt_adamw_b8 -> b32's reserved 17% high (tests/fixtures/whatif).
      case Category::kAutogradDetail: {
        const uint64_t b = lt.size[i];
        const bool weight = params(b) > 0 || (half && params(twice(b)) > 0);
        const bool activation = activation_sizes.count(b) > 0;
        if (f & kReduceStaging) grows[i] = 1;
        else if (weight && activation && (f & (kMat1Grad | kMat2Grad))) grows[i] = (f & kMat1Grad) != 0;
        else grows[i] = !weight || activation;
        break;
      }
      default: break;
    }
  }
  return grows;
}

namespace {
// A trace that cannot say what the run holds at its peak, or what grows with the batch: no verdict from it says
// "fits". Returns the note that says why, or "".
// - It starts mid-run (a wrapped ring buffer kept only the newest events, or recording began late): it frees memory
//   it never saw allocated, 5% of its peak or more. What the run held before its first event, and how high it went
//   there, are unknown: a prediction from the part recorded can be far below the run (an audit: 1.2 GiB "fits" for
//   a run that needs 2.78 GiB, from its newest 10%).
// - It holds no allocation at all (a snapshot taken at an OOM with one event): everything is the state before it,
//   and nothing shows what the run allocates as it goes (an audit: "fits surely up to 65,410x" on such a file).
std::string incomplete_trace(const DeviceLifetimes& lt) {
  uint64_t bytes = 0;
  uint32_t count = 0, traced = 0;
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (lt.origin[i] == LifetimeOrigin::kFreedOnly) bytes += lt.size[i], ++count;
    traced += lt.origin[i] == LifetimeOrigin::kTraced;
  }
  const uint64_t peak = lt.total.empty() ? 0 : lt.total[lt.peak_step()];
  char note[440];
  if (count > 0 && bytes * 20 >= peak) {
    std::snprintf(note, sizeof note,
                  "the trace starts mid-run: %u allocations (%.1f MiB) made before its first event are freed in it "
                  "(a wrapped ring buffer, or recording started late), so what the run held before the trace, and its "
                  "peak there, are unknown: no verdict says it fits. Record from before the first step, with "
                  "max_entries large enough for a whole iteration",
                  count, static_cast<double>(bytes) / (1 << 20));
    return note;
  }
  if (traced == 0 && lt.count() > 0) {
    std::snprintf(note, sizeof note,
                  "the trace holds no allocation (%u event%s): what the run allocates as it runs, and what of it "
                  "grows with the batch, are unknown, so no verdict says it fits. Record memory history over a whole "
                  "iteration",
                  lt.event_count, lt.event_count == 1 ? "" : "s");
    return note;
  }
  return "";
}

// The verdict such a trace allows: not "fits"; "does not fit" only for a run at least as large as recorded (what
// the trace saw is then a floor).
Verdict incomplete_verdict(Verdict v, bool at_least_recorded) {
  if (v == Verdict::kFits || (v == Verdict::kDoesNotFit && !at_least_recorded)) return Verdict::kUnsure;
  return v;
}
}  // namespace

WhatIfReport what_if(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, const WhatIfOptions& options) {
  WhatIfReport r;
  r.device = lt.device;
  r.batch = options.batch;
  r.seq = options.seq;
  const uint32_t n = lt.count();

  // The measured terms at the highest step of each phase; a step's phase is that of the allocation made there.
  std::vector<int32_t> born(lt.steps(), -1);
  for (uint32_t i = 0; i < n; ++i)
    if (lt.alloc_event[i] != kNoEvent) born[lt.birth_step(i)] = static_cast<int32_t>(i);
  auto phase_of = [&](uint32_t row) -> int {
    switch (c.reason[row]) {
      case CategoryReason::kForwardFrame: return 1;
      case CategoryReason::kBackwardFrame:
      case CategoryReason::kEngineThread: return 2;
      case CategoryReason::kOptimizerFrame: return 3;
      default: return c.category[row] == Category::kInput ? 1 : 0;
    }
  };
  static const char* kPhase[] = {"peak", "forward", "backward", "optimizer step"};
  std::vector<uint32_t> best(4, UINT32_MAX);
  best[0] = lt.peak_step();
  int phase = 0;
  for (uint32_t step = 0; step < lt.steps(); ++step) {
    if (born[step] >= 0) phase = phase_of(static_cast<uint32_t>(born[step]));
    if (phase && (best[phase] == UINT32_MAX || lt.total[step] > lt.total[best[phase]])) best[phase] = step;
  }
  for (int k = 0; k < 4; ++k) {
    if (best[k] == UINT32_MAX || lt.total.empty()) continue;
    WhatIfTerms t;
    t.phase = kPhase[k];
    t.step = best[k];
    for (uint32_t i = 0; i < n; ++i) {
      if (!lt.alive_at(i, t.step)) continue;
      const uint64_t b = lt.size[i];
      t.total += b;
      switch (c.category[i]) {
        case Category::kParameter: t.parameters += b; break;
        case Category::kGradient: t.gradients += b; break;
        case Category::kOptimizerState: t.optimizer_state += b; break;
        case Category::kActivation:
        case Category::kInput: t.activations += b; break;
        case Category::kTemporary:
        case Category::kAutogradDetail: t.temporaries += b; break;
        default: t.other += b;
      }
    }
    r.terms.push_back(t);
  }

  const std::vector<uint8_t> grows = batch_dependent_rows(s, lt, c);
  const uint32_t peak = lt.peak_step();
  for (uint32_t i = 0; i < n; ++i)
    if (grows[i] && lt.alive_at(i, peak)) r.scaled_bytes_at_peak += lt.size[i];
  const AllocatorReplay measured = replay_caching_allocator(lt, lt.size);
  r.measured_allocated = measured.peak_allocated;
  r.measured_reserved = measured.peak_reserved;
  const double factor = options.batch * options.seq;
  const std::vector<uint64_t> sizes = scaled_sizes(lt, grows, factor);
  const AllocatorReplay predicted = replay_caching_allocator(lt, sizes);
  if (options.with_totals) {
    // A difference array over steps: each row adds its size while alive.
    std::vector<int64_t> delta(lt.steps() + 1, 0);
    for (uint32_t i = 0; i < n; ++i) {
      delta[lt.birth_step(i)] += static_cast<int64_t>(sizes[i]);
      delta[std::min(lt.death_step(i), lt.steps())] -= static_cast<int64_t>(sizes[i]);
    }
    r.predicted_total.resize(lt.steps());
    int64_t run = 0;
    for (uint32_t step = 0; step < lt.steps(); ++step) r.predicted_total[step] = static_cast<uint64_t>(run += delta[step]);
  }
  r.predicted_allocated = predicted.peak_allocated;
  r.predicted_reserved = predicted.peak_reserved;
  r.predicted_peak_step = predicted.peak_allocated_step;
  // The requests that failed are tried too (with_failed_requests). A run at least as large as recorded makes them at
  // their recorded size. A smaller batch may make them smaller (if they grow with it) or not: the prediction takes
  // them as growing, the high end of its range as they were. (They were left out below the recorded batch: an
  // audit's OOM trace, which asked 95 GiB of an 80 GB GPU, was said to fit at 0.9x.)
  std::optional<DeviceLifetimes> with_failed;
  if (options.seq >= 1.0) with_failed = with_failed_requests(s, lt);
  const bool failed_rows = with_failed.has_value();
  const bool smaller = options.batch < 1.0;
  const DeviceLifetimes& rl = failed_rows ? *with_failed : lt;
  std::vector<uint8_t> grows_with_failed, grows_failed_fixed, optional = optional_rows(s, lt);
  std::vector<uint64_t> sizes_with_failed;
  if (failed_rows) {
    grows_failed_fixed = grows;
    grows_failed_fixed.resize(rl.count(), 0);  // a failed request at its recorded size
    grows_with_failed = grows;
    grows_with_failed.resize(rl.count(), smaller ? 1 : 0);
    optional.resize(rl.count(), 0);
    sizes_with_failed = scaled_sizes(rl, grows_with_failed, factor);
  }
  const std::vector<uint8_t>& grows_rl = failed_rows ? grows_with_failed : grows;
  const std::vector<uint8_t>& grows_high = failed_rows ? grows_failed_fixed : grows;
  const std::vector<uint64_t>& sizes_rl = failed_rows ? sizes_with_failed : sizes;
  const ReplayOrder order_rl = replay_order(rl);  // for every replay of rl below (bisections)
  r.predicted_needed = least_allocator_room(rl, order_rl, sizes_rl, &optional);
  // What was alive at a failure plus the request is a measured floor (the replay of a fragmenting run can need more),
  // for a run at least as large as recorded.
  const uint64_t failed_need = smaller ? 0 : failed_floor(lt, with_failed);
  if (failed_need > r.predicted_needed) {
    r.predicted_needed = failed_need;
    char note[200];
    std::snprintf(note, sizeof note,
                  "the trace ran out of memory: the run needed at least %.1f MiB (what was alive then and what it "
                  "asked for), more than the replay finds",
                  static_cast<double>(failed_need) / (1 << 20));
    r.notes.push_back(note);
  }
  // The scale farther from 1 (a longer sequence at a smaller batch is still far from what was recorded).
  const bool batch_farther = std::fabs(std::log(options.batch)) >= std::fabs(std::log(options.seq));
  if (options.gpu) {
    r.gpu = options.gpu;
    const uint64_t room = allocator_room(*options.gpu);
    // Not the unconstrained reserved peak: short of memory, PyTorch frees its cache and goes on (measured: runs
    // trained in up to 35% less than that peak). The replay under the GPU's room says whether it still runs out.
    // Conservative where the two disagree (running out of memory is not strictly monotone in the cap).
    // With a sequence scale, one snapshot cannot tell linear activations from attention's t^2 scores: the sizes
    // that grow are bracketed between the two.
    // The distance from the recording counts both scales (twice the batch at twice the length is four times the
    // tokens).
    auto band_at = [&](double b) { return error_band(std::exp2(std::fabs(std::log2(b)) + std::fabs(std::log2(options.seq)))); };
    const double q2 = options.seq * options.seq;
    auto low_at = [&](double b) { return scaled_sizes(rl, grows_rl, b * std::min(options.seq, q2)); };
    auto high_at = [&](double b) { return scaled_sizes(rl, grows_high, b * std::max(options.seq, q2)); };
    const uint64_t oom_room = options.seq >= 1.0 ? room_at_oom(s, lt, options.gpu) : 0;
    const uint64_t oom_room_here = options.batch >= 1.0 ? oom_room : 0;  // binds a run at least as large only
    Decision d;
    if (options.seq != 1.0 || (failed_rows && smaller)) {
      d = decide(rl, order_rl, low_at(options.batch), sizes_rl, high_at(options.batch), r.predicted_needed,
                 band_at(options.batch), room, &optional, s.expandable_segments(), failed_need, oom_room_here);
    } else {
      d = decide(rl, order_rl, sizes_rl, sizes_rl, sizes_rl, r.predicted_needed, band_at(options.batch), room,
                 &optional, s.expandable_segments(), failed_need, oom_room_here);
    }
    if (oom_room_here && room <= oom_room_here) {
      char note[220];
      std::snprintf(note, sizeof note,
                    "the recorded run ran out of memory with %.1f GiB for its allocator (reserved plus the driver's "
                    "free bytes): a GPU with no more room runs out at this batch too",
                    static_cast<double>(oom_room) / (1ull << 30));
      r.notes.push_back(note);
    }
    r.verdict = d.verdict;
    r.needed_low = d.low;
    r.needed_high = d.high;
    r.fits = r.verdict == Verdict::kFits;
    // The largest batch scale (the sequence scale held) that fits, as a range like the least memory: by the
    // prediction itself (its sizes under the GPU's room), and surely (the high end of the sizes under the room less
    // the error band). What a run needs grows with the batch, so each is a bisection over capped replays; running
    // out is not strictly monotone in the cap, so a boundary is where one replay fits and the next does not.
    auto largest = [&](auto&& fits_at) {
      double lo = 0, hi = 1;
      while (hi < 65536 && fits_at(hi)) lo = hi, hi *= 2;
      if (lo == 0) {  // below the recorded batch: halve down to a thousandth of it
        while (hi > 1e-3 && !fits_at(hi / 2)) hi /= 2;
        if (hi <= 1e-3) return 0.0;
        lo = hi / 2;
      }
      for (int k = 0; k < 20 && hi - lo > 0.002 * hi; ++k) {
        const double mid = (lo + hi) / 2;
        (fits_at(mid) ? lo : hi) = mid;
      }
      return lo;
    };
    // A run at or above the recorded size makes the requests that failed at their size, whatever batch was asked
    // about, and needs what was alive at its failure (an audit: asked at 0.9x, an OOM trace was said to fit "surely"
    // at 1.13x to 65,000x on the GPU it failed on); below it, they may shrink with the batch by the prediction, and
    // do not by the sure end. A GPU with no room past the context fits nothing.
    const uint64_t failed_need_all = failed_floor(lt, with_failed);
    std::vector<uint8_t> grows_shrinking;
    if (failed_rows) {
      grows_shrinking = grows;
      grows_shrinking.resize(rl.count(), 1);
    }
    auto fits_capped = [&](double b, double scale, uint64_t cap, bool sure) {
      if (cap == 0) return false;
      if (failed_rows && b >= 1.0 && failed_need_all > cap) return false;
      if (oom_room && b >= 1.0 && room <= oom_room) return false;
      const std::vector<uint8_t>& g = !failed_rows ? grows : (b >= 1.0 || sure) ? grows_failed_fixed : grows_shrinking;
      return !replay_caching_allocator(rl, order_rl, scaled_sizes(rl, g, scale), cap, &optional).out_of_memory;
    };
    r.max_batch_scale = largest([&](double b) { return fits_capped(b, b * options.seq, room, false); });
    r.max_batch_scale_sure = largest([&](double b) {
      const double cap = static_cast<double>(room) / (1.0 + band_at(b));
      return fits_capped(b, b * std::max(options.seq, q2), static_cast<uint64_t>(cap), true);
    });
    r.max_batch_scale_sure = std::min(r.max_batch_scale_sure, r.max_batch_scale);
    // Both agree with the verdict on the batch asked about (the bisections test other points): FITS has the sure
    // end at or above it, DOES NOT FIT the prediction's end below it, UNSURE lies between them.
    if (r.verdict == Verdict::kFits) {
      r.max_batch_scale_sure = std::max(r.max_batch_scale_sure, options.batch);
      r.max_batch_scale = std::max(r.max_batch_scale, options.batch);
    } else {
      r.max_batch_scale_sure = std::min(r.max_batch_scale_sure, options.batch * 0.995);
      if (r.verdict == Verdict::kDoesNotFit) r.max_batch_scale = std::min(r.max_batch_scale, options.batch * 0.995);
      else r.max_batch_scale = std::max(r.max_batch_scale, options.batch);
    }
  }
  if (const std::string why = incomplete_trace(lt); !why.empty()) {
    r.trace_incomplete = true;
    if (r.gpu) {
      r.verdict = incomplete_verdict(r.verdict, options.batch >= 1.0 && options.seq >= 1.0);
      r.fits = false;
      r.max_batch_scale_sure = 0;  // nothing is sure; the prediction's own end stays, marked as such
    }
    r.notes.insert(r.notes.begin(), why);
  }
  // The distance counts both scales (twice the batch at twice the length is four times the tokens), as the error band
  // does; an audit found --batch 2 --seq 2 without the note.
  const double distance = std::exp2(std::fabs(std::log2(options.batch)) + std::fabs(std::log2(options.seq)));
  note_extrapolation(batch_farther ? (options.batch >= 1 ? distance : 1 / distance)
                                   : (options.seq >= 1 ? distance : 1 / distance),
                     &r.notes);
  if (r.gpu && r.max_batch_scale_sure > 8.0) {
    char note[200];
    std::snprintf(note, sizeof note,
                  "the largest batch that fits is %.3gx the recorded one: nothing was measured past 8x, so past there "
                  "it is the model's reading, not a checked one",
                  r.max_batch_scale_sure);
    r.notes.push_back(note);
  }
  if (options.seq != 1.0)
    r.notes.push_back("sequence length scales activations linearly here; attention scores grow with its square, so "
                      "the verdict takes what grows as anywhere from linear to quadratic in it: give two snapshots at "
                      "two lengths (whatif A B --sizes ...) to follow them");
  if (s.expandable_segments())
    r.notes.push_back("expandable_segments is on: reserved is modelled for the default allocator and is an upper "
                      "bound");
  r.notes.push_back("reserved is modelled on PyTorch's caching allocator (default settings, freeing its cache before it "
                    "runs out of memory), and fitting leaves " + std::to_string(kTypicalContextBytes >> 20) +
                    " MiB for the CUDA context");
  return r;
}

std::vector<int64_t> pair_allocations(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b,
                                      const DeviceLifetimes& lb) {
  // Rows are paired by their stack (frame texts, since stack ids are per file) in trace order: the same loop
  // allocates the same sequence at any batch size, give or take a cached workspace.
  auto keys = [](const Snapshot& s, const DeviceLifetimes& lt) {
    // Each stack's frames hashed once (rows share stacks by the thousand).
    std::vector<size_t> of_stack(s.stacks.size(), 0);
    std::vector<uint8_t> done(s.stacks.size(), 0);
    std::vector<size_t> k(lt.count());
    for (uint32_t i = 0; i < lt.count(); ++i) {
      const StackId id = lt.stack[i];
      size_t h = 0;  // lifetimes of another snapshot (a stack id out of range): no frames to key on
      if (id < s.stacks.size()) {
        if (!done[id]) {
          for (FrameId f : s.stack(id)) {
            const Frame& fr = s.frames[f];
            of_stack[id] = of_stack[id] * 1000003u ^ std::hash<std::string_view>()(s.str(fr.name));
            // torch.compile's generated code lives in files named by a hash of the graph, and its lines move when
            // the shapes change a kernel's code: there the function alone is kept, and a graph's allocations pair
            // in order.
            const std::string_view file = s.str(fr.filename);
            if (generated_code_file(file)) continue;
            of_stack[id] = of_stack[id] * 1000003u ^ std::hash<std::string_view>()(file);
            of_stack[id] = of_stack[id] * 1000003u ^ static_cast<size_t>(fr.line);
          }
          done[id] = 1;
        }
        h = of_stack[id];
      }
      k[i] = h * 0x9e3779b97f4a7c15ull ^ static_cast<size_t>(lt.origin[i]);
    }
    return k;
  };
  const std::vector<size_t> ka = keys(a, la), kb = keys(b, lb);
  // torch.compile's autotuning allocates a different number of buffers at each shape, all in the first step: left
  // out of the alignment, where hundreds more on one side outran the lookahead and left the rest of the compiled
  // GPT-2's trace unpaired (603 of 1,624 allocations; the prediction read 1.6x).
  auto steady = [](const Snapshot& s, const DeviceLifetimes& lt) {
    const std::vector<uint16_t> flags = stack_flags(s, lt);
    std::vector<uint32_t> rows;
    rows.reserve(lt.count());
    for (uint32_t i = 0; i < lt.count(); ++i)
      if (!(flags_at(flags, lt.stack[i]) & kAutotune)) rows.push_back(i);
    return rows;
  };
  const std::vector<uint32_t> ra = steady(a, la), rb = steady(b, lb);
  std::vector<int64_t> pair(lb.count(), -1);  // row of B -> row of A
  constexpr uint32_t kLookahead = 64;
  const uint32_t na = static_cast<uint32_t>(ra.size()), nb = static_cast<uint32_t>(rb.size());
  auto key_a = [&](uint32_t x) { return ka[ra[x]]; };
  auto key_b = [&](uint32_t y) { return kb[rb[y]]; };
  for (uint32_t i = 0, j = 0; i < na && j < nb;) {
    if (key_a(i) == key_b(j)) {
      pair[rb[j++]] = ra[i++];
      continue;
    }
    // Skip whichever side reaches a match sooner.
    uint32_t di = kLookahead + 1, dj = kLookahead + 1;
    for (uint32_t d = 1; d <= kLookahead && i + d < na; ++d)
      if (key_a(i + d) == key_b(j)) { di = d; break; }
    for (uint32_t d = 1; d <= kLookahead && j + d < nb; ++d)
      if (key_b(j + d) == key_a(i)) { dj = d; break; }
    if (di <= dj && di <= kLookahead) i += di;
    else if (dj <= kLookahead) j += dj;
    else ++i, ++j;
  }
  return pair;
}

namespace {

// what_if_fit; `with_needs` = false skips the least-memory bisection (a dozen replays) for fits only read for their
// allocated peak (what_if_fit_runs' checks).
Result<WhatIfFit> fit_pair(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b, const DeviceLifetimes& lb,
                           double size_a, double size_b, double target, const std::optional<GpuCapacity>& gpu,
                           bool with_needs) {
  if (!(size_a > 0 && size_b > 0 && target > 0) || size_a == size_b)
    return Error{"the two sizes must be positive and different, and the target positive"};
  const std::vector<int64_t> pair = pair_allocations(a, la, b, lb);  // row of B -> row of A
  WhatIfFit out;
  out.size_a = size_a;
  out.size_b = size_b;
  out.target = target;
  std::vector<uint64_t> sizes(lb.size);
  const double span = std::log(size_b / size_a);
  const std::vector<uint16_t> flags = stack_flags(b, lb);
  std::vector<uint32_t> unpaired;
  uint32_t autotune = 0;
  for (uint32_t j = 0; j < lb.count(); ++j) {
    if (pair[j] < 0) {
      unpaired.push_back(j);
      if (flags_at(flags, lb.stack[j]) & kAutotune) ++autotune;
      continue;
    }
    ++out.paired;
    const double sa = static_cast<double>(la.size[static_cast<uint32_t>(pair[j])]), sb = static_cast<double>(lb.size[j]);
    if (sa <= 0 || sb <= 0 || sa == sb) continue;
    // size = c * x^k through both points; k clamped to what loops do (constant .. cubic).
    // cuDNN picks a convolution algorithm per shape, so its workspace jumps between sizes: take it as linear.
    const double k = (flags_at(flags, lb.stack[j]) & kCudnnWorkspace) ? 1.0 : std::clamp(std::log(sb / sa) / span, 0.0, 3.0);
    sizes[j] = capped(sb * std::pow(target / size_b, k));
  }
  out.unpaired = static_cast<uint32_t>(unpaired.size());
  if (out.paired < lb.count() / 2)
    return Error{"the two snapshots do not look like the same loop: only " + std::to_string(out.paired) + " of " +
                 std::to_string(lb.count()) + " allocations pair up"};
  // What has no partner is scaled as one snapshot would scale it (linearly where it grows with the batch), and for
  // the verdict anywhere from constant to linear: what pairs is the loop itself (attention's t^2 scores included);
  // what does not is what the shapes pick (a reduction's staging buffers, cuDNN's workspaces, torch.compile's
  // autotuning), which grows with its input at most.
  const double rho = target / size_b;
  std::vector<uint64_t> low, high;
  if (!unpaired.empty()) {
    auto c = categorize(b, lb, detect_iterations(b, lb), FrameFilter(b));
    if (c.ok()) {
      const std::vector<uint8_t> grows = batch_dependent_rows(b, lb, c.value());
      for (uint32_t j : unpaired)
        if (grows[j]) sizes[j] = scaled(lb.size[j], rho);
    }
    low = high = sizes;
    for (uint32_t j : unpaired) {
      low[j] = scaled(lb.size[j], std::min(1.0, rho));
      high[j] = scaled(lb.size[j], std::max(1.0, rho));
    }
  }
  out.measured_allocated_a = replay_caching_allocator(la, la.size).peak_allocated;
  out.measured_allocated_b = replay_caching_allocator(lb, lb.size).peak_allocated;
  const AllocatorReplay p = replay_caching_allocator(lb, sizes);
  out.predicted_allocated = p.peak_allocated;
  out.predicted_reserved = p.peak_reserved;
  // The replayed run's failed requests are tried too, at their recorded size, for a target at least its size.
  std::optional<DeviceLifetimes> with_failed;
  if (target >= size_b) with_failed = with_failed_requests(b, lb);
  const DeviceLifetimes& rl = with_failed ? *with_failed : lb;
  std::vector<uint8_t> optional = optional_rows(b, lb);
  optional.resize(rl.count(), 0);
  for (auto* v : {&sizes, &low, &high})
    if (!v->empty())
      for (uint32_t j = lb.count(); j < rl.count(); ++j) v->push_back(rl.size[j]);
  const uint64_t failed_need = failed_floor(lb, with_failed);
  const ReplayOrder order_rl = replay_order(rl);
  if (with_needs || gpu)
    out.predicted_needed = std::max(least_allocator_room(rl, order_rl, sizes, &optional), failed_need);
  const double largest = std::max(size_a, size_b), smallest = std::min(size_a, size_b);
  const double beyond = target > largest ? target / largest : target < smallest ? target / smallest : 1.0;
  if (gpu) {
    out.gpu = gpu;
    // Between the two sizes, the nearer one is the distance that counts.
    const double nearest = beyond != 1.0 ? beyond : std::min(target / smallest, largest / target);
    // The replayed run's own OOM, for a target at least its size (as with one snapshot).
    const Decision d = decide(rl, order_rl, unpaired.empty() ? sizes : low, sizes, unpaired.empty() ? sizes : high,
                              out.predicted_needed, error_band(nearest), allocator_room(*gpu), &optional,
                              b.expandable_segments(), failed_need, target >= size_b ? room_at_oom(b, lb, gpu) : 0);
    out.verdict = d.verdict;
    out.needed_low = d.low;
    out.needed_high = d.high;
    out.fits = out.verdict == Verdict::kFits;
  }
  for (const DeviceLifetimes* l : {&la, &lb}) {
    const std::string why = incomplete_trace(*l);
    if (why.empty()) continue;
    out.trace_incomplete = true;
    if (gpu) {
      out.verdict = incomplete_verdict(out.verdict, target >= largest);
      out.fits = false;
    }
    out.notes.insert(out.notes.begin(), (l == &la ? "the first snapshot: " : "the second snapshot: ") + why);
  }
  note_extrapolation(beyond, &out.notes);
  if (out.unpaired) {
    std::string note = std::to_string(out.unpaired) + " allocations of the second snapshot have no partner in the "
                       "first";
    if (autotune) note += " (" + std::to_string(autotune) + " of them torch.compile's autotuning, which allocates "
                          "differently at each shape)";
    out.notes.push_back(note + ": scaled as one snapshot would scale them, and taken as anywhere from constant to "
                               "linear in the size for the verdict");
  }
  out.notes.push_back("each allocation's size is fitted as c * size^k through the two snapshots; reserved is "
                      "modelled on PyTorch's caching allocator");
  return out;
}

}  // namespace

Result<WhatIfFit> what_if_fit(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b,
                              const DeviceLifetimes& lb, double size_a, double size_b, double target,
                              const std::optional<GpuCapacity>& gpu) {
  return fit_pair(a, la, b, lb, size_a, size_b, target, gpu, /*with_needs=*/true);
}

Result<WhatIfFit> what_if_fit_runs(std::vector<WhatIfRun> runs, double target, const std::optional<GpuCapacity>& gpu) {
  if (runs.size() < 2) return Error{"a fit needs two snapshots or more"};
  std::sort(runs.begin(), runs.end(), [](const WhatIfRun& x, const WhatIfRun& y) { return x.size < y.size; });
  for (size_t i = 1; i < runs.size(); ++i)
    if (!(runs[i].size > runs[i - 1].size)) return Error{"the snapshots' sizes must all be different"};
  // A run at a larger batch or length holds more at its peak. Sizes given in the other order than the files (an
  // audit: "--sizes 8,4" for files at 4 and 8 predicted batch 16 to fit where it does not) show as a larger size
  // holding clearly less; the same file twice, as nothing growing at all.
  for (size_t i = 1; i < runs.size(); ++i) {
    const DeviceLifetimes& x = *runs[i - 1].lifetimes;
    const DeviceLifetimes& y = *runs[i].lifetimes;
    const double px = x.total.empty() ? 0 : static_cast<double>(x.total[x.peak_step()]);
    const double py = y.total.empty() ? 0 : static_cast<double>(y.total[y.peak_step()]);
    char why[240];
    if (py < 0.95 * px) {
      std::snprintf(why, sizeof why,
                    "the snapshot given size %g holds %.1f MiB at its peak, less than the one given size %g (%.1f "
                    "MiB): are --sizes in the files' order?",
                    runs[i].size, py / (1 << 20), runs[i - 1].size, px / (1 << 20));
      return Error{why};
    }
    if (runs[i].snapshot == runs[i - 1].snapshot ||
        (py == px && x.count() == y.count() && x.event_count == y.event_count && x.size == y.size)) {
      std::snprintf(why, sizeof why,
                    "the snapshots given sizes %g and %g hold exactly the same allocations: the same run twice?",
                    runs[i - 1].size, runs[i].size);
      return Error{why};
    }
  }
  // The pair nearest the target; the fit's base (b) is the one nearer to it, whose trace is replayed.
  size_t lo = 0;
  if (target >= runs.back().size) lo = runs.size() - 2;
  else if (target > runs.front().size)
    while (runs[lo + 1].size < target) ++lo;
  size_t a = lo, b = lo + 1;
  if (std::abs(std::log(target / runs[a].size)) < std::abs(std::log(target / runs[b].size))) std::swap(a, b);
  auto fit = what_if_fit(*runs[a].snapshot, *runs[a].lifetimes, *runs[b].snapshot, *runs[b].lifetimes, runs[a].size,
                         runs[b].size, target, gpu);
  if (!fit.ok() || runs.size() == 2) return fit;
  WhatIfFit out = std::move(fit).value();
  for (const WhatIfRun& r : runs) out.sizes.push_back(r.size);
  for (size_t i = 2; i < runs.size(); ++i) {
    auto c = fit_pair(*runs[i - 2].snapshot, *runs[i - 2].lifetimes, *runs[i - 1].snapshot, *runs[i - 1].lifetimes,
                      runs[i - 2].size, runs[i - 1].size, runs[i].size, std::nullopt, /*with_needs=*/false);
    if (!c.ok()) {  // the prediction stands; only this check could not be made
      char note[120];
      std::snprintf(note, sizeof note, "the check from %g and %g to %g could not be made: ", runs[i - 2].size,
                    runs[i - 1].size, runs[i].size);
      out.notes.push_back(note + c.error().message);
      continue;
    }
    WhatIfFit::Check k;
    k.size_a = runs[i - 2].size;
    k.size_b = runs[i - 1].size;
    k.size = runs[i].size;
    k.predicted_allocated = c.value().predicted_allocated;
    k.measured_allocated = replay_caching_allocator(*runs[i].lifetimes, runs[i].lifetimes->size).peak_allocated;
    out.checks.push_back(k);
  }
  double worst = 0;
  for (const WhatIfFit::Check& k : out.checks)
    if (k.measured_allocated)
      worst = std::max(worst, std::abs(static_cast<double>(k.predicted_allocated) / k.measured_allocated - 1));
  char note[200];
  std::snprintf(note, sizeof note,
                "fitted on the two snapshots nearest the target; predicting each larger snapshot from the two below "
                "it was off by up to %.1f%% in this job",
                worst * 100);
  out.notes.push_back(note);
  return out;
}

}  // namespace allocscope
