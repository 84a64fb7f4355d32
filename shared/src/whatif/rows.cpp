// Which recorded allocations grow with the batch, what their stacks say (stack_flags), and scaling sizes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/oom.h"
#include "whatif/internal.h"

namespace allocscope {
namespace whatif_detail {

// Scaled sizes are capped far above any GPU (2^56 bytes) so that a hostile size or scale cannot overflow the
// replay's arithmetic; such a prediction simply does not fit.
constexpr double kMaxBytes = 72057594037927936.0;  // 2^56
uint64_t capped(double bytes) { return static_cast<uint64_t>(std::llround(std::clamp(bytes, 0.0, kMaxBytes))); }

uint64_t scaled(uint64_t size, double factor) { return capped(static_cast<double>(size) * factor); }

uint64_t scaled_row(uint64_t size, uint8_t grows, double factor, double seq, const StagingBound* staging) {
  switch (grows) {
    case 0: return size;
    case kGrowsSquared: return scaled(size, factor * seq);
    case kGrowsStaging: return staging ? scaled(size, staging_scale(*staging, factor)) : scaled(size, factor);
    default: return scaled(size, factor);
  }
}

std::vector<uint64_t> scaled_sizes(const DeviceLifetimes& lt, const std::vector<uint8_t>& grows, double factor,
                                   double seq, const std::vector<StagingBound>* staging) {
  std::vector<uint64_t> sizes(lt.size);
  for (uint32_t i = 0; i < lt.count(); ++i)
    sizes[i] = scaled_row(lt.size[i], grows[i], factor, seq, staging && i < staging->size() ? &(*staging)[i] : nullptr);
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
// is for, and a softmax that is not a loss's.
std::vector<uint16_t> stack_flags(const Snapshot& s, const DeviceLifetimes& lt) {
  std::vector<uint16_t> f(s.stacks.size(), 0);
  for (uint32_t i = 0; i < lt.count(); ++i) {
    const StackId id = lt.stack[i];
    if (id >= f.size() || f[id]) continue;
    f[id] = kSeen;
    bool softmax = false, loss = false;
    for (FrameId fr : s.stack(id)) {
      const std::string_view name = s.str(s.frames[fr].name);
      softmax = softmax || name.find("softmax") != std::string_view::npos;
      for (const char* l : {"log_softmax", "cross_entropy", "nll_loss"})
        loss = loss || name.find(l) != std::string_view::npos;
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
    if (softmax && !loss) f[id] |= kSoftmax;
  }
  return f;
}

uint16_t flags_at(const std::vector<uint16_t>& f, StackId id) { return id < f.size() ? f[id] : 0; }

}  // namespace whatif_detail

using namespace whatif_detail;

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
  // Attention written out keeps batch x heads x length x length tensors: its softmax's output, and the scores, their
  // masked and scaled copies and their gradients, each of that size. One snapshot tells them from activations that are
  // linear in the length by that size (sdpa's fused kernels keep none: nothing then grows with its square).
  std::unordered_set<uint64_t> squared;
  for (uint32_t i = 0; i < n; ++i)
    if (grows[i] && c.category[i] == Category::kActivation && (flags_at(flags, lt.stack[i]) & kSoftmax))
      squared.insert(lt.size[i]);
  if (!squared.empty())
    for (uint32_t i = 0; i < n; ++i)
      if (grows[i] == kGrows && squared.count(lt.size[i])) grows[i] = kGrowsSquared;
  // A reduction's buffer grows up to the GPU's cap; its semaphores, one int per column of blocks, do not grow.
  for (const StagingPair& p : staging_pairs(lt, flags)) {
    grows[p.buffer] = kGrowsStaging;
    grows[p.semaphores] = 0;
  }
  return grows;
}


}  // namespace allocscope
