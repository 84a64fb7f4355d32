// Text and JSON for what-if reports: the prediction and the verdict first, then the measured terms it rests on.
#include <cstdio>

#include "allocscope/whatif.h"
#include "analysis/frame_filter_text.h"
#include "analysis/json_common.h"

namespace allocscope {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kFits: return "fits";
    case Verdict::kDoesNotFit: return "does not fit";
    case Verdict::kUnsure: return "unsure";
  }
  return "unsure";
}

using namespace text_detail;
using json_detail::Json;

namespace {

std::string scale(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3gx", x);
  return b;
}

// The verdict, the least memory and its range, and the room the GPU leaves; for "unsure", what would settle it.
std::string verdict(const std::optional<GpuCapacity>& gpu, Verdict v, uint64_t needed, uint64_t low, uint64_t high,
                    bool incomplete) {
  if (!gpu) return "";
  const char* head = v == Verdict::kFits ? "FITS" : v == Verdict::kDoesNotFit ? "DOES NOT FIT" : "UNSURE";
  std::string o = std::string(head) + " on " + gpu->label + " (" + size(gpu->total_bytes) + "): needs " + size(needed) +
                  " (" + size(low) + " to " + size(high) + " with this prediction's error) for the allocator, which has " +
                  size(allocator_room(*gpu)) + " beside the CUDA context\n";
  if (v == Verdict::kUnsure && incomplete)
    o += "  the trace is incomplete (see the first note): a snapshot recorded over a whole iteration, from the first "
         "step, settles it\n";
  else if (v == Verdict::kUnsure)
    o += "  the GPU's room lies within the prediction's error: a snapshot recorded nearer the target settles it\n";
  return o;
}

Json verdict_json(const std::optional<GpuCapacity>& gpu, Verdict v) {
  return gpu ? Json(verdict_name(v)) : Json(nullptr);
}

Json gpu_json(const std::optional<GpuCapacity>& gpu) {
  if (!gpu) return nullptr;
  return Json{{"total", gpu->total_bytes}, {"label", gpu->label}, {"inferred", gpu->inferred},
              {"allocator_room", allocator_room(*gpu)}};
}

}  // namespace

std::string to_text(const WhatIfReport& r) {
  std::string o = "device " + std::to_string(r.device) + ": batch " + scale(r.batch) + ", sequence " + scale(r.seq) +
                  "\n";
  for (const WhatIfEffect& e : r.effects) o += "  " + e.change + ": " + e.what + "\n";
  // "in blocks": the allocated bytes rounded up to the allocator's blocks, what must fit in reserved memory; not
  // `peak`'s "peak allocated", which counts the requested bytes (docs/analyses.md, "Words").
  o += "  peak in blocks  " + rpad(size(r.replayed_allocated), 10) + " -> " + rpad(size(r.predicted_allocated), 10) +
       "  (allocated, rounded up to the allocator's blocks; the file's peak allocated is " +
       size(r.measured_allocated) + ")\n";
  o += "  peak reserved   " + rpad(size(r.replayed_reserved), 10) + " -> " + rpad(size(r.predicted_reserved), 10) +
       "  (the allocator model; the file records " + size(r.measured_reserved) + ")\n";
  o += "  least memory it runs in: " + size(r.predicted_needed) + " (short of memory, the allocator frees its cache)\n";
  o += "  grows with the batch at the peak: " + size(r.scaled_bytes_at_peak) + "\n";
  const std::string v =
      verdict(r.gpu, r.verdict, r.predicted_needed, r.needed_low, r.needed_high, r.trace_incomplete);
  if (!v.empty()) {
    o += "  " + v;
    char most[200];
    if (r.max_batch_scale_sure > 0)
      std::snprintf(most, sizeof most, "  largest batch that fits: %.4gx to %.4gx the recorded one (surely, and by the "
                    "prediction itself)\n", r.max_batch_scale_sure, r.max_batch_scale);
    else if (r.max_batch_scale > 0)
      std::snprintf(most, sizeof most, "  largest batch that fits: up to %.4gx the recorded one by the prediction; "
                    "none surely\n", r.max_batch_scale);
    else
      std::snprintf(most, sizeof most, "  not even a thousandth of the recorded batch fits%s\n",
                    r.seq != 1.0 ? " at this sequence length" : "");
    o += most;
  }
  o += "measured terms (requested bytes):\n";
  o += "  phase            step      total  parameters   gradients  optimizer  activations  temporaries     other\n";
  for (const WhatIfTerms& t : r.terms) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-14s %6u %10s %11s %11s %10s %12s %12s %9s\n", t.phase.c_str(), t.step,
                  size(t.total).c_str(), size(t.parameters).c_str(), size(t.gradients).c_str(),
                  size(t.optimizer_state).c_str(), size(t.activations).c_str(), size(t.temporaries).c_str(),
                  size(t.other).c_str());
    o += line;
  }
  if (!r.changes.empty()) {
    const WhatIfTerms& t = r.predicted_terms;
    char line[256];
    std::snprintf(line, sizeof line, "  %-14s %6s %10s %11s %11s %10s %12s %12s %9s\n", "changed peak", "",
                  size(t.total).c_str(), size(t.parameters).c_str(), size(t.gradients).c_str(),
                  size(t.optimizer_state).c_str(), size(t.activations).c_str(), size(t.temporaries).c_str(),
                  size(t.other).c_str());
    o += line;
  }
  for (const std::string& n : r.notes) o += "note: " + n + "\n";
  return o;
}

std::string to_json(const WhatIfReport& r) {
  Json terms = Json::array();
  for (const WhatIfTerms& t : r.terms)
    terms.push_back(Json{{"phase", t.phase}, {"step", t.step}, {"total", t.total}, {"parameters", t.parameters},
                         {"gradients", t.gradients}, {"optimizer_state", t.optimizer_state},
                         {"activations", t.activations}, {"temporaries", t.temporaries}, {"other", t.other}});
  Json j{{"device", r.device},
         {"batch_scale", r.batch},
         {"seq_scale", r.seq},
         {"measured_allocated", r.measured_allocated},
         {"measured_reserved", r.measured_reserved},
         {"replayed_allocated", r.replayed_allocated},
         {"replayed_reserved", r.replayed_reserved},
         {"predicted_allocated", r.predicted_allocated},
         {"predicted_reserved", r.predicted_reserved},
         {"predicted_needed", r.predicted_needed},
         {"predicted_peak_step", r.predicted_peak_step},
         {"scaled_bytes_at_peak", r.scaled_bytes_at_peak},
         {"gpu", gpu_json(r.gpu)},
         {"verdict", verdict_json(r.gpu, r.verdict)},
         {"trace_incomplete", r.trace_incomplete},
         {"fits", r.gpu ? Json(r.fits) : Json(nullptr)},
         {"needed_low", r.gpu ? Json(r.needed_low) : Json(nullptr)},
         {"needed_high", r.gpu ? Json(r.needed_high) : Json(nullptr)},
         {"max_batch_scale", r.gpu ? Json(r.max_batch_scale) : Json(nullptr)},
         {"max_batch_scale_sure", r.gpu ? Json(r.max_batch_scale_sure) : Json(nullptr)},
         {"terms", terms},
         {"notes", r.notes}};
  if (!r.changes.empty()) {
    Json changes = Json::array();
    for (size_t k = 0; k < r.changes.size(); ++k)
      changes.push_back({{"change", r.changes[k].flag()},
                         {"code", r.changes[k].code()},
                         {"effect", k < r.effects.size() ? Json(r.effects[k].what) : Json(nullptr)}});
    j["changes"] = changes;
    const WhatIfTerms& t = r.predicted_terms;
    j["predicted_terms"] = Json{{"total", t.total}, {"parameters", t.parameters}, {"gradients", t.gradients},
                                {"optimizer_state", t.optimizer_state}, {"activations", t.activations},
                                {"temporaries", t.temporaries}, {"other", t.other}};
  }
  return json_detail::dump(j);
}

std::string to_text(const WhatIfFit& r) {
  char head[160];
  std::snprintf(head, sizeof head, "fitted on sizes %g and %g, predicting %g\n", r.size_a, r.size_b, r.target);
  std::string o = head;
  char sizes[96];
  std::snprintf(sizes, sizeof sizes, " at %g, ", r.size_a);
  o += "  peak in blocks  " + size(r.measured_allocated_a) + sizes;
  std::snprintf(sizes, sizeof sizes, " at %g -> ", r.size_b);
  o += size(r.measured_allocated_b) + sizes + size(r.predicted_allocated) + "\n";
  o += "  peak reserved   -> " + size(r.predicted_reserved) + "\n";
  o += "  least memory it runs in: " + size(r.predicted_needed) + " (short of memory, the allocator frees its cache)\n";
  o += "  allocations paired " + std::to_string(r.paired) + ", unpaired " + std::to_string(r.unpaired) + "\n";
  for (const WhatIfFit::Check& k : r.checks) {
    char line[200];
    std::snprintf(line, sizeof line, "  check: from %g and %g, the run at %g reads ", k.size_a, k.size_b, k.size);
    o += line + size(k.predicted_allocated) + " predicted, " + size(k.measured_allocated) + " measured";
    if (k.measured_allocated) {
      std::snprintf(line, sizeof line, " (%.3f)", static_cast<double>(k.predicted_allocated) / k.measured_allocated);
      o += line;
    }
    o += "\n";
  }
  const std::string v =
      verdict(r.gpu, r.verdict, r.predicted_needed, r.needed_low, r.needed_high, r.trace_incomplete);
  if (!v.empty()) o += "  " + v;
  for (const std::string& n : r.notes) o += "note: " + n + "\n";
  return o;
}

std::string to_json(const WhatIfFit& r) {
  Json j{{"size_a", r.size_a},
         {"size_b", r.size_b},
         {"target", r.target},
         {"paired", r.paired},
         {"unpaired", r.unpaired},
         {"measured_allocated_a", r.measured_allocated_a},
         {"measured_allocated_b", r.measured_allocated_b},
         {"predicted_allocated", r.predicted_allocated},
         {"predicted_reserved", r.predicted_reserved},
         {"predicted_needed", r.predicted_needed},
         {"gpu", gpu_json(r.gpu)},
         {"verdict", verdict_json(r.gpu, r.verdict)},
         {"trace_incomplete", r.trace_incomplete},
         {"fits", r.gpu ? Json(r.fits) : Json(nullptr)},
         {"needed_low", r.gpu ? Json(r.needed_low) : Json(nullptr)},
         {"needed_high", r.gpu ? Json(r.needed_high) : Json(nullptr)},
         {"notes", r.notes}};
  if (!r.sizes.empty()) {
    j["sizes"] = r.sizes;
    Json checks = Json::array();
    for (const WhatIfFit::Check& k : r.checks)
      checks.push_back({{"size_a", k.size_a}, {"size_b", k.size_b}, {"size", k.size},
                        {"predicted_allocated", k.predicted_allocated}, {"measured_allocated", k.measured_allocated}});
    j["checks"] = checks;
  }
  return json_detail::dump(j);
}

}  // namespace allocscope
