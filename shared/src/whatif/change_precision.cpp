// bf16: under autocast, the forward's and backward's tensors are bf16 (half the bytes) except what autocast runs in
// fp32 (softmax, the norms, the losses, embeddings), the weights, their gradients and the optimizer's state stay fp32,
// and each weight gets a bf16 copy for the step (cached for the forward, kept until its backward); with bf16 weights,
// everything a step allocates in floating point is half.
#include <algorithm>
#include <map>

#include "whatif/changes_impl.h"
#include "whatif/internal.h"
#include "whatif/run_model.h"

namespace allocscope::whatif_detail {
namespace {

// Ops autocast runs in fp32 (PyTorch's autocast op lists), and embedding, which keeps its fp32 weight's type: their
// outputs keep their size. Matched in the frames' names, C++ (at::native::softmax) or Python (functional.softmax).
bool fp32_op(const RunModel& m, uint32_t i) {
  for (const char* op : {"softmax", "layer_norm", "group_norm", "rms_norm", "cross_entropy", "nll_loss", "mse_loss",
                         "l1_loss", "kl_div", "logsumexp", "embedding", "cumsum", "binary_cross_entropy"})
    if (stack_mentions(m, i, op)) return true;
  return false;
}

uint64_t half(uint64_t b) { return std::max<uint64_t>(512, b / 2); }

// The integer output of a forward op that also makes a floating-point one, judged on the recorded sizes (before any
// is halved): max pooling's int64 indices, made just after its output and twice an fp32 one, and dropout's bool mask,
// made just before its output and a quarter of an fp32 one. bf16 halves floats only (the CNN under autocast,
// recorded: max pooling's 32 MiB of indices stayed 32 MiB while its output halved; taken as half, the CNN read 0.971
// allocated). Sizes first: reading a stack's frames is the costly part.
bool integer_output(const RunModel& m, uint32_t i) {
  if (!m.size[i]) return false;
  auto near = [](uint64_t x, uint64_t y) { return (x > y ? x - y : y - x) <= 2048; };  // sizes rounded to 512 bytes
  const bool indices = i > 0 && m.stack[i] == m.stack[i - 1] && near(m.size[i], 2 * m.size[i - 1]);
  const bool mask = i + 1 < m.count() && near(4 * m.size[i], m.size[i + 1]);
  if ((!indices && !mask) || stack_mentions(m, i, "backward")) return false;
  return (indices && stack_mentions(m, i, "max_pool")) ||
         (mask && stack_mentions(m, i, "dropout") && stack_mentions(m, i + 1, "dropout"));
}

// The loss: computed in fp32 in a bf16 model too (the logits upcast first, as transformers' losses do), so its tensors
// keep their size.
bool loss_op(const RunModel& m, uint32_t i) {
  for (const char* op : {"cross_entropy", "nll_loss", "log_softmax", "mse_loss", "l1_loss", "binary_cross_entropy"})
    if (stack_mentions(m, i, op)) return true;
  return false;
}

// Softmax is on autocast's fp32 list: its output stays fp32 and is what its backward saves. In attention the next op
// is a matmul, which autocast runs in bf16 on a bf16 copy of that output and saves too: half the output's bytes more,
// for as long as the output lives (written-out attention under autocast read 11% low without it: gpt_attn, a tuning
// job since 2026-12-03). When an activation of the output's size is made just after it (a dropout's output, or
// transformers' own cast to the values' type), that one is what the matmul saves, and it is halved already.
uint64_t add_softmax_copies(RunModel& m) {
  const uint32_t n = m.count();
  uint64_t added = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (!m.size[i] || m.failed[i] || m.category[i] != Category::kActivation) continue;
    if (!(flags_at(m.flags, m.stack[i]) & kSoftmax)) continue;  // a loss's softmax is not attention's
    bool consumed_by_other = false;
    for (uint32_t j = i + 1, seen = 0; j < n && seen < 6; ++j) {
      if (!m.size[j] || m.birth[j] < m.birth[i]) continue;
      ++seen;
      if (m.size[j] == m.size[i] && m.category[j] == Category::kActivation &&
          !(flags_at(m.flags, m.stack[j]) & kSoftmax)) {
        consumed_by_other = true;
        break;
      }
    }
    if (consumed_by_other) continue;
    const uint32_t row = m.copy_row(i, m.birth[i], m.death[i]);
    m.size[row] = half(m.size[i]);
    added += m.size[row];
  }
  return added;
}

// cuDNN's convolution workspaces: a convolution in bf16 asks for about half of what it asked in fp32 (the CNN run with
// bf16 weights, recorded 2026-12-03: its forward's 32 MiB workspaces and its weight gradients' 34 MiB ones were half,
// the largest of each 0.63x). cuBLAS's workspaces are a fixed size per handle and stay. Under autocast the CNN's
// shrink alike, but halving them there takes allocated low where a workspace is alive at the peak (the CNN
// checkpointed under autocast 1.001 -> 0.969, ConvNeXt's 0.929 -> 0.895): they stay, the side a verdict can afford.
uint64_t halve_conv_workspaces(RunModel& m) {
  uint64_t halved = 0;
  for (uint32_t i = 0; i < m.count(); ++i) {
    if (!m.size[i] || m.failed[i] || !(flags_at(m.flags, m.stack[i]) & kCudnnConvWorkspace)) continue;
    halved += m.size[i];
    m.size[i] = half(m.size[i]);
  }
  return halved;
}

bool under_autocast(const RunModel& m) {
  for (uint32_t i = 0; i < m.count(); ++i)
    if (m.size[i] && (flags_at(m.flags, m.stack[i]) & kAutocastCast)) return true;
  return false;
}

}  // namespace

Status apply_precision(const WhatIfChange& c, RunModel* mp, std::string* what) {
  RunModel& m = *mp;
  const bool autocast = under_autocast(m);
  const uint32_t n = m.count();
  std::vector<uint8_t> integer(n);
  for (uint32_t i = 0; i < n; ++i) integer[i] = integer_output(m, i);
  // The op-name tests read a row's frames; rows share a few hundred stacks (a 1M-event trace has 334k rows), so each
  // stack is read once.
  std::vector<int8_t> fp32_of(m.snapshot->stacks.size(), -1), loss_of(m.snapshot->stacks.size(), -1);
  auto per_stack = [&](std::vector<int8_t>& memo, bool (*test)(const RunModel&, uint32_t), uint32_t i) {
    const StackId id = m.stack[i];
    if (id >= memo.size()) return test(m, i);
    if (memo[id] < 0) memo[id] = test(m, i) ? 1 : 0;
    return memo[id] == 1;
  };
  if (c.text == "bf16-weights") {
    uint64_t before = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (!m.size[i] || m.failed[i]) continue;
      switch (m.category[i]) {
        case Category::kParameter:
        case Category::kGradient:
        case Category::kOptimizerState:
        case Category::kActivation:
        case Category::kInput:
        case Category::kTemporary:
        case Category::kAutogradDetail:
          if (per_stack(loss_of, loss_op, i) || integer[i]) break;
          before += m.size[i];
          // Autocast's copies of the weights are the weights now: no copy.
          if (autocast && (flags_at(m.flags, m.stack[i]) & kAutocastCast) && !m.grows[i]) m.drop(i);
          else m.size[i] = half(m.size[i]);
          break;
        default: break;
      }
    }
    const uint64_t workspaces = halve_conv_workspaces(m);
    *what = "weights, gradients, optimizer state and every floating-point tensor a step makes in bf16 but the "
            "loss's: half of " + bytes_text(before) + " over the trace" +
            (workspaces ? "; cuDNN's convolution workspaces half (" + bytes_text(workspaces) + ")" : "");
    return {};
  }
  if (autocast) return Error{"the run was recorded under autocast already"};
  // The forward's and backward's tensors, but for what autocast keeps in fp32.
  uint64_t halved = 0, kept = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (!m.size[i] || m.failed[i] || m.category[i] == Category::kInput) continue;
    const bool step_tensor = m.category[i] == Category::kActivation || m.category[i] == Category::kAutogradDetail ||
                             (m.category[i] == Category::kTemporary && m.reason[i] != CategoryReason::kOptimizerFrame);
    if (!step_tensor) continue;
    if (per_stack(fp32_of, fp32_op, i) || integer[i]) {
      kept += m.size[i];
      continue;
    }
    halved += m.size[i];
    m.size[i] = half(m.size[i]);
  }
  const uint64_t softmax_copies = add_softmax_copies(m);
  // A bf16 copy of each weight (a bias or a norm's scale too, if small) from its forward to its backward: made when
  // the step's forward starts and freed when that weight's gradient is made (the backward visits the weights in
  // reverse: the k-th weight of a size pairs with the k-th gradient of that size from the end).
  const std::vector<uint32_t> starts = forward_starts(m);
  std::map<uint64_t, std::vector<uint32_t>> params;
  for (uint32_t i = 0; i < n; ++i)
    if (m.size[i] && m.category[i] == Category::kParameter && m.size[i] >= (16u << 10)) params[m.size[i]].push_back(i);
  for (auto& [size, rows] : params)
    std::stable_sort(rows.begin(), rows.end(), [&](uint32_t a, uint32_t b) { return m.birth[a] < m.birth[b]; });
  uint64_t copies = 0;
  for (uint32_t r = 0; r < starts.size(); ++r) {
    if (starts[r] == RunModel::kForever) continue;
    std::map<uint64_t, std::vector<uint32_t>> grads;  // this step's gradients by size, in birth order
    uint32_t last_grad = starts[r] + 1;
    for (uint32_t i = 0; i < n; ++i)
      if (m.size[i] && m.category[i] == Category::kGradient && m.birth[i] >= starts[r] &&
          m.region_of_tick(m.birth[i]) == r) {
        grads[m.size[i]].push_back(i);
        last_grad = std::max(last_grad, m.birth[i]);
      }
    for (auto& [size, g] : grads)
      std::stable_sort(g.begin(), g.end(), [&](uint32_t a, uint32_t b) { return m.birth[a] < m.birth[b]; });
    for (auto& [size, rows] : params) {
      const std::vector<uint32_t>* g = grads.count(size) ? &grads[size] : nullptr;
      for (size_t k = 0; k < rows.size(); ++k) {
        // Only the weights the step has: a run that loads and frees weights as it goes (an inference that streams
        // its layers in: 40 GB of weight rows over the trace, 14.8 GB alive at once) casts those alive then.
        if (!m.alive_at(rows[k], starts[r])) continue;
        const uint32_t dies = g && k < g->size() ? m.birth[(*g)[g->size() - 1 - k]] : last_grad;
        const uint32_t row = m.copy_row(rows[k], starts[r], std::max(dies, starts[r] + 1));
        m.size[row] = half(size);
        m.category[row] = Category::kActivation;
        m.reason[row] = CategoryReason::kForwardFrame;
        m.grows[row] = 0;
        copies += m.size[row];
      }
    }
  }
  *what = "the forward's and backward's tensors in bf16 (" + bytes_text(halved) + " over the trace halved; " +
          bytes_text(kept) + " of fp32 ops kept" +
          (softmax_copies ? ", " + bytes_text(softmax_copies) + " of bf16 copies of softmax outputs for the matmul after" : "") +
          "), and a bf16 copy of the weights for each step (" +
          bytes_text(copies) + " over the trace)";
  return {};
}

}  // namespace allocscope::whatif_detail
