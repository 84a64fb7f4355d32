// Gradients' lifetimes: zero_grad without set_to_none (the gradients stay allocated from the first backward on, and
// each backward's gradients are added into them); and what the other changes share (each iteration's forward start,
// a stack's frames).
#include <algorithm>

#include "whatif/changes_impl.h"
#include "whatif/internal.h"
#include "whatif/run_model.h"

namespace allocscope::whatif_detail {

std::vector<uint32_t> forward_starts(const RunModel& m) {
  const uint32_t regions = m.iterations.regions();
  std::vector<uint32_t> last_optimizer(regions, 0), start(regions, RunModel::kForever);
  for (uint32_t i = 0; i < m.count(); ++i)
    if (m.size[i] && m.phase(i) == 3) {
      const uint32_t r = m.region_of_tick(m.birth[i]);
      last_optimizer[r] = std::max(last_optimizer[r], m.birth[i]);
    }
  for (uint32_t i = 0; i < m.count(); ++i) {
    if (!m.size[i] || m.birth[i] == 0 || m.failed[i]) continue;
    if (m.category[i] != Category::kActivation && m.category[i] != Category::kInput) continue;
    const uint32_t r = m.region_of_tick(m.birth[i]);
    if (m.birth[i] > last_optimizer[r]) start[r] = std::min(start[r], m.birth[i]);
  }
  return start;
}

bool stack_mentions(const RunModel& m, uint32_t row, std::string_view needle) {
  const Snapshot& s = *m.snapshot;
  if (m.stack[row] >= s.stacks.size()) return false;
  for (FrameId f : s.stack(m.stack[row]))
    if (s.str(s.frames[f].name).find(needle) != std::string_view::npos ||
        s.str(s.frames[f].filename).find(needle) != std::string_view::npos)
      return true;
  return false;
}

Status apply_zero_grad(const WhatIfChange& c, RunModel* mp, std::string* what) {
  RunModel& m = *mp;
  // Gradients a recording keeps across iterations (zeroed, not freed): born in one region, alive past the next.
  // Held: alive through a whole later region (a next forward and backward ran with them allocated). Alive to the
  // trace's end with no whole region after theirs (a trace of one step, or one that ends at the step): what zero_grad
  // does is not in the trace (an audit of real files: three CS336 runs of one step were told they keep them).
  std::vector<uint32_t> grads;
  bool held = false, freed = false;
  for (uint32_t i = 0; i < m.count(); ++i)
    if (m.size[i] && m.category[i] == Category::kGradient) {
      grads.push_back(i);
      const uint32_t r = m.region_of_tick(m.birth[i]);
      held = held || (m.death[i] != RunModel::kForever && m.region_of_tick(m.death[i]) > r + 1) ||
             (m.death[i] == RunModel::kForever && r + 2 < m.iterations.regions());
      freed = freed || m.death[i] != RunModel::kForever;
    }
  const bool unseen = !held && !freed && !grads.empty();  // none freed, none through a whole later region
  if (c.text == "none") {
    if (held)
      return Error{"the recording keeps its gradients across steps (zero_grad(set_to_none=False)); freeing them is "
                   "not modelled: record with set_to_none=True to compare"};
    if (grads.empty()) return Error{"the trace holds no gradients"};
    *what = unseen ? "the trace ends before a next forward shows whether zero_grad frees the gradients; freed after "
                     "the last step, nothing in the trace changes"
                   : "the recording already frees its gradients at zero_grad (set_to_none=True): no change";
    return {};
  }
  if (held) {
    *what = "the recording already keeps its gradients across steps: no change";
    return {};
  }
  if (grads.empty()) return Error{"the trace holds no gradients"};
  // The first step's gradients stay allocated to the end; each later backward's are temporaries added into them.
  uint32_t first_region = UINT32_MAX;
  for (uint32_t i : grads) first_region = std::min(first_region, m.region_of_tick(m.birth[i]));
  uint64_t kept = 0;
  for (uint32_t i : grads) {
    if (m.region_of_tick(m.birth[i]) == first_region) {
      m.death[i] = RunModel::kForever;
      kept += m.size[i];
    } else {
      m.death[i] = m.birth[i] + 2;
      m.category[i] = Category::kAutogradDetail;
    }
  }
  *what = "the gradients (" + bytes_text(kept) + ") stay allocated from the first backward on, through every forward";
  return {};
}

}  // namespace allocscope::whatif_detail
