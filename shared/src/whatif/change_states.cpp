// The optimizer's memory: its state (moments kept per weight, from the first step to the end) and its step's scratch
// (the foreach implementations' temporary lists), as another optimizer, the host (offload), or N ranks (ZeRO) would
// hold them. Checked against the runs in tests/fixtures/plan_runs (docs/analyses.md has the table).
#include <algorithm>
#include <map>

#include "whatif/changes_impl.h"
#include "whatif/internal.h"
#include "whatif/run_model.h"

namespace allocscope::whatif_detail {
namespace {

// Optimizer state rows of a weight's size (the step counters, a few bytes each, stay).
bool state_row(const RunModel& m, uint32_t i) {
  return m.size[i] > 4096 && m.category[i] == Category::kOptimizerState;
}
bool scratch_row(const RunModel& m, uint32_t i) {
  return m.size[i] && m.category[i] == Category::kTemporary && m.reason[i] == CategoryReason::kOptimizerFrame;
}

struct Recorded {
  std::string name = "unknown";  // "adamw", "adam", "sgd", "adafactor", ...
  bool fused = false;
  double states = 0;  // bytes of state per byte of weights
  uint64_t weights = 0, state_bytes = 0, scratch_bytes = 0;
};

Recorded recorded_optimizer(const RunModel& m) {
  Recorded r;
  const Snapshot& s = *m.snapshot;
  for (uint32_t i = 0; i < m.count(); ++i) {
    if (!m.size[i] || m.failed[i]) continue;
    if (m.category[i] == Category::kParameter && m.death[i] == RunModel::kForever) r.weights += m.size[i];
    if (state_row(m, i)) r.state_bytes += m.size[i];
    if (scratch_row(m, i)) r.scratch_bytes += m.size[i];
    if (m.reason[i] != CategoryReason::kOptimizerFrame || m.stack[i] >= s.stacks.size()) continue;
    for (FrameId f : s.stack(m.stack[i])) {
      const std::string_view file = s.str(s.frames[f].filename), fn = s.str(s.frames[f].name);
      const size_t optim = file.rfind("torch/optim/");
      if (optim != std::string_view::npos && r.name == "unknown") {
        std::string_view base = file.substr(optim + 12);
        if (base.size() > 3 && base.substr(base.size() - 3) == ".py") base.remove_suffix(3);
        if (base != "optimizer" && base != "_functional" && base.find('/') == std::string_view::npos)
          r.name = std::string(base);
      }
      if (fn.find("_fused_") != std::string_view::npos) r.fused = true;
    }
  }
  if (r.weights == 0)  // every weight made before the trace and freed: count them where they are
    for (uint32_t i = 0; i < m.count(); ++i)
      if (m.size[i] && m.category[i] == Category::kParameter) r.weights += m.size[i];
  r.states = r.weights ? static_cast<double>(r.state_bytes) / static_cast<double>(r.weights) : 0;
  return r;
}

// Bytes of state per byte of weight each optimizer keeps: Adam's two moments, momentum's one buffer; Adafactor
// factors its second moment of a matrix into a row and a column (small) and keeps a vector's whole; 8-bit Adam keeps
// its two moments in a byte each (a quarter of fp32).
double states_of(const std::string& target) {
  if (target == "adamw" || target == "adamw-fused" || target == "adam") return 2;
  if (target == "sgd-momentum") return 1;
  if (target == "adam-8bit") return 0.5;
  return 0;  // sgd, adafactor (its vectors' states are kept below), offload
}

uint32_t first_optimizer_tick(const RunModel& m) {
  uint32_t t = RunModel::kForever;
  for (uint32_t i = 0; i < m.count(); ++i)
    if (m.size[i] && m.phase(i) == 3) t = std::min(t, m.birth[i]);
  if (t != RunModel::kForever) return t;
  for (uint32_t i = 0; i < m.count(); ++i)  // no optimizer frames: after the first backward's gradients
    if (m.size[i] && m.category[i] == Category::kGradient) t = std::min(t, m.birth[i] + 1);
  return t == RunModel::kForever ? m.ticks : t;
}

}  // namespace

Status apply_optimizer(const std::string& target, RunModel* mp, std::string* what) {
  RunModel& m = *mp;
  const Recorded r = recorded_optimizer(m);
  if (r.weights == 0) return Error{"the recording holds no parameters to size an optimizer's state by"};
  const double want = states_of(target);
  const double have = r.states < 0.25 ? 0 : r.states < 1.5 ? 1 : 2;  // what the recorded optimizer keeps
  std::vector<uint32_t> states;
  for (uint32_t i = 0; i < m.count(); ++i)
    if (state_row(m, i)) states.push_back(i);
  std::stable_sort(states.begin(), states.end(), [&](uint32_t a, uint32_t b) { return m.birth[a] < m.birth[b]; });
  const uint64_t before = r.state_bytes;
  if (target == "adafactor") {
    // A matrix keeps a row and a column of its second moment; a vector (a bias, a norm's scale) keeps it whole.
    // By size alone: a weight of 256 KiB or more is taken for a matrix.
    std::map<uint64_t, uint32_t> kept;
    for (uint32_t i : states) {
      const bool vector = m.size[i] < (256u << 10);
      if (!vector || (have == 2 && kept[m.size[i]]++ % 2 == 1)) m.drop(i);
    }
  } else if (target == "adam-8bit") {
    if (have == 0) return Error{"8-bit Adam from a run with no optimizer state is not modelled"};
    for (uint32_t i : states) m.size[i] = std::max<uint64_t>(512, m.size[i] / (have == 2 ? 4 : 2));
  } else if (want < have) {
    // Adam makes exp_avg then exp_avg_sq for each weight: keeping every other state of each size keeps one a weight.
    std::map<uint64_t, uint32_t> seen;
    for (uint32_t i : states) {
      const uint32_t k = seen[m.size[i]]++;
      if (want == 0 || (have == 2 && want == 1 && k % 2 == 1)) m.drop(i);
    }
  } else if (want > have) {
    if (have == 0) {
      // A state of each weight's size per moment, made at the first step and kept to the end.
      const uint32_t t = first_optimizer_tick(m);
      const uint32_t n = m.count();
      for (uint32_t i = 0; i < n; ++i) {
        if (!m.size[i] || m.category[i] != Category::kParameter || m.death[i] != RunModel::kForever) continue;
        for (int k = 0; k < static_cast<int>(want); ++k) {
          const uint32_t c = m.copy_row(i, t, RunModel::kForever);
          m.category[c] = Category::kOptimizerState;
          m.reason[c] = CategoryReason::kOptimizerFrame;
          m.grows[c] = 0;
        }
      }
    } else {
      for (uint32_t i : states) m.copy_row(i, m.birth[i], m.death[i]);  // a second moment beside the first
    }
  }
  // The step's scratch: foreach AdamW (PyTorch's default on CUDA) allocates temporary lists the size of the weights
  // (the square root of the second moment, ...); fused AdamW, SGD's in-place foreach updates, and a CPU-held state
  // allocate none on the GPU.
  const bool foreach_adam = (target == "adamw" || target == "adam");
  uint64_t scratch_before = r.scratch_bytes, scratch_after = r.scratch_bytes;
  if (!foreach_adam) {
    for (uint32_t i = 0; i < m.count(); ++i)
      if (scratch_row(m, i)) m.drop(i);
    scratch_after = 0;
  } else if (r.scratch_bytes == 0 || r.fused) {
    // From a run without it: one list the size of the weights, during each step.
    const uint32_t t = first_optimizer_tick(m);
    uint32_t proto = m.count();
    for (uint32_t i = 0; i < m.count() && proto == m.count(); ++i)
      if (m.size[i] && m.category[i] == Category::kParameter) proto = i;
    if (proto < m.count()) {
      const uint32_t c = m.copy_row(proto, t, t + 2);
      m.size[c] = r.weights;
      m.category[c] = Category::kTemporary;
      m.reason[c] = CategoryReason::kOptimizerFrame;
      m.grows[c] = 0;
      scratch_after = r.weights;
    }
  }
  if (target == "adafactor") {
    // Adafactor updates one weight at a time, with temporaries of that weight's size (its squared gradient, the
    // update): two of the largest weight, during each step.
    uint32_t proto = m.count();
    uint64_t largest = 0;
    for (uint32_t i = 0; i < m.count(); ++i)
      if (m.size[i] && m.category[i] == Category::kParameter && m.size[i] > largest) largest = m.size[i], proto = i;
    const uint32_t t = first_optimizer_tick(m);
    if (proto < m.count()) {
      const uint32_t c = m.copy_row(proto, t, t + 2);
      m.size[c] = 2 * largest;
      m.category[c] = Category::kTemporary;
      m.reason[c] = CategoryReason::kOptimizerFrame;
      m.grows[c] = 0;
      scratch_after = 2 * largest;
    }
  }
  uint64_t after = 0;
  for (uint32_t i = 0; i < m.count(); ++i)
    if (state_row(m, i)) after += m.size[i];
  const std::string from = r.name + (r.fused ? " (fused)" : "");
  // Sums over the trace (every state and scratch allocation it makes), not what is alive at the peak: said so, since
  // a user compares them with the peak's terms (an audit: "scratch 152.3GiB" beside a 51.8 GiB need).
  *what = "optimizer state allocated over the trace " + bytes_text(before) + " -> " + bytes_text(after) +
          " (recorded: " + from + ", keeping " + (have == 2 ? "2 moments" : have == 1 ? "1 buffer" : "nothing") +
          " per weight)";
  if (scratch_before != scratch_after)
    *what += "; the optimizer steps' scratch over the trace " + bytes_text(scratch_before) + " -> " +
             bytes_text(scratch_after);
  if (target == "offload") *what += "; the gradients are still made on the GPU, then copied to the host";
  return {};
}

Status apply_shard(const WhatIfChange& c, RunModel* mp, std::string* what) {
  RunModel& m = *mp;
  const uint64_t n = static_cast<uint64_t>(c.value);
  const int stage = c.text.back() - '0';
  uint64_t states = 0, grads = 0, params = 0, largest_param = 0;
  auto shard = [&](uint32_t i) { m.size[i] = std::max<uint64_t>(512, (m.size[i] + n - 1) / n); };
  for (uint32_t i = 0; i < m.count(); ++i) {
    if (!m.size[i]) continue;
    if (state_row(m, i) || scratch_row(m, i)) {
      states += m.size[i];
      shard(i);
    } else if (stage >= 2 && m.category[i] == Category::kGradient) {
      grads += m.size[i];
      shard(i);
    } else if (stage >= 3 && m.category[i] == Category::kParameter) {
      params += m.size[i];
      largest_param = std::max(largest_param, m.size[i]);
      shard(i);
    }
  }
  *what = "each of " + std::to_string(n) + " ranks holds 1/" + std::to_string(n) + " of the optimizer state (" +
          bytes_text(states) + ")";
  if (stage >= 2) *what += ", of the gradients (" + bytes_text(grads) + ")";
  if (stage >= 3) {
    *what += " and of the weights (" + bytes_text(params) + ")";
    // Each block's weights are gathered whole for its forward and backward, the next one's prefetched: two of the
    // largest weight at a time, through the forward and backward of each step.
    const std::vector<uint32_t> starts = forward_starts(m);
    const uint32_t t_opt = first_optimizer_tick(m);
    uint32_t proto = m.count();
    for (uint32_t i = 0; i < m.count() && proto == m.count(); ++i)
      if (m.size[i] && m.category[i] == Category::kParameter) proto = i;
    if (proto < m.count() && largest_param)
      for (uint32_t start : starts) {
        if (start == RunModel::kForever) continue;
        uint32_t end = RunModel::kForever;
        const uint32_t region = m.region_of_tick(start);
        for (uint32_t i = 0; i < m.count(); ++i)  // the step's gradients are its backward's last allocations
          if (m.size[i] && m.category[i] == Category::kGradient && m.birth[i] >= start &&
              m.region_of_tick(m.birth[i]) == region)
            end = end == RunModel::kForever ? m.birth[i] + 1 : std::max(end, m.birth[i] + 1);
        if (end == RunModel::kForever) end = std::max(start + 1, t_opt);
        const uint32_t g = m.copy_row(proto, start, end);
        m.size[g] = 2 * largest_param;
        m.category[g] = Category::kTemporary;
        m.grows[g] = 0;
      }
    *what += ", plus two blocks' weights gathered at a time (" + bytes_text(2 * largest_param) + ")";
  }
  *what += "; collectives' buffers (NCCL's) are not modelled";
  return {};
}

}  // namespace allocscope::whatif_detail
