// Text and JSON for plans: the recorded run's verdict, then each option with the line that applies it.
#include <cstdio>

#include "allocscope/plan.h"
#include "analysis/frame_filter_text.h"
#include "analysis/json_common.h"

namespace allocscope {

using namespace text_detail;
using json_detail::Json;

namespace {
const char* cost_name(int cost) {
  switch (cost) {
    case 1: return "setting";
    case 2: return "code";
    case 3: return "training";
    default: return "batch";
  }
}
std::string share(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100 * f);
  return b;
}
std::string flags(const PlanOption& o) {
  std::string f;
  for (const WhatIfChange& c : o.changes) f += (f.empty() ? "" : " ") + c.flag();
  if (o.batch != 1.0) {
    char b[32];
    std::snprintf(b, sizeof b, "--batch %g", o.batch);
    f += (f.empty() ? "" : " ") + std::string(b);
  }
  return f;
}
std::string verdict_word(Verdict v) {
  return v == Verdict::kFits ? "FITS" : v == Verdict::kDoesNotFit ? "DOES NOT FIT" : "UNSURE";
}
}  // namespace

std::string to_text(const Plan& p) {
  const WhatIfReport& r = p.recorded;
  std::string o = "device " + std::to_string(p.device) + (p.from_oom ? " (ran out of memory)" : "") +
                  ": as recorded, the allocator needs " + size(r.predicted_needed);
  if (p.gpu) {
    const std::string gpu = p.gpu->label + " (" + size(p.gpu->total_bytes) + ")";
    o += " (" + size(r.needed_low) + " to " + size(r.needed_high) + "): " + verdict_word(r.verdict) + " on " + gpu +
         ", whose allocator has " + size(allocator_room(*p.gpu)) + " beside the CUDA context\n";
    if (p.incomplete_trace && r.needed_high <= allocator_room(*p.gpu))
      o += "as far as the trace shows, it fits; the trace cannot show all the run holds (the note says why)\n";
    o += p.options.empty() ? (p.tried ? "nothing tried helps\n" : "")
         : p.options.front().verdict == Verdict::kFits
             ? (r.verdict == Verdict::kFits
                    ? "it fits as recorded; changes that cut it further, cheapest first (least memory, its range, and what "
                      "the GPU leaves to spare):\n"
                    : "changes that make it fit, cheapest first (least memory, its range, and what the GPU leaves to "
                      "spare):\n")
         : p.incomplete_trace ? "changes that cut the least memory it runs in (none fits surely: the note says why):\n"
                              : "changes that bring it closest to fitting (none fits surely):\n";
  } else {
    o += p.options.empty() ? (p.tried ? "\nnothing tried cuts it by 1% or more\n" : "\n")
                           : "\nchanges that cut the least memory it runs in, cheapest first:\n";
  }
  for (size_t k = 0; k < p.options.size(); ++k) {
    const PlanOption& x = p.options[k];
    char head[64];
    std::snprintf(head, sizeof head, "  %zu. %-9s ", k + 1, cost_name(x.cost));
    std::string code;
    for (const WhatIfChange& c : x.changes) code += (code.empty() ? "" : "; ") + c.code();
    if (x.batch != 1.0) {
      char b[96];
      std::snprintf(b, sizeof b, "the batch at %g of the recorded one", x.batch);
      code += (code.empty() ? "" : "; ") + std::string(b);
    }
    o += head + code + "\n";
    o += "               needs " + size(x.predicted_needed);
    if (p.gpu)
      o += " (" + size(x.needed_low) + " to " + size(x.needed_high) + "), " + verdict_word(x.verdict) +
           (x.verdict == Verdict::kFits ? " with " + share(x.margin) + " to spare" : "");
    else
      o += ", " + share(x.margin) + " less";
    o += "   (whatif " + flags(x) + ")\n";
    for (const WhatIfEffect& e : x.effects) o += "               " + e.change + ": " + e.what + "\n";
  }
  o += "(" + std::to_string(p.tried) + " predictions made)\n";
  for (const std::string& n : p.notes) o += "note: " + n + "\n";
  return o;
}

std::string to_json(const Plan& p) {
  Json options = Json::array();
  for (const PlanOption& x : p.options) {
    Json changes = Json::array(), code = Json::array(), effects = Json::array();
    for (const WhatIfChange& c : x.changes) {
      changes.push_back(c.flag());
      code.push_back(c.code());
    }
    for (const WhatIfEffect& e : x.effects) effects.push_back(Json{{"change", e.change}, {"effect", e.what}});
    options.push_back(Json{{"changes", changes},
                           {"batch_scale", x.batch},
                           {"code", code},
                           {"cost", cost_name(x.cost)},
                           {"verdict", p.gpu ? Json(verdict_name(x.verdict)) : Json(nullptr)},
                           {"predicted_allocated", x.predicted_allocated},
                           {"predicted_reserved", x.predicted_reserved},
                           {"predicted_needed", x.predicted_needed},
                           {"needed_low", p.gpu ? Json(x.needed_low) : Json(nullptr)},
                           {"needed_high", p.gpu ? Json(x.needed_high) : Json(nullptr)},
                           {"margin", x.margin},
                           {"effects", effects}});
  }
  const WhatIfReport& r = p.recorded;
  Json gpu = p.gpu ? Json{{"total", p.gpu->total_bytes}, {"label", p.gpu->label}, {"inferred", p.gpu->inferred},
                          {"allocator_room", allocator_room(*p.gpu)}}
                   : Json(nullptr);
  Json j{{"device", p.device},
         {"gpu", gpu},
         {"from_oom", p.from_oom},
         {"incomplete_trace", p.incomplete_trace},
         {"recorded", Json{{"predicted_needed", r.predicted_needed},
                           {"needed_low", p.gpu ? Json(r.needed_low) : Json(nullptr)},
                           {"needed_high", p.gpu ? Json(r.needed_high) : Json(nullptr)},
                           {"verdict", p.gpu ? Json(verdict_name(r.verdict)) : Json(nullptr)}}},
         {"options", options},
         {"tried", p.tried},
         {"notes", p.notes}};
  return json_detail::dump(j);
}

}  // namespace allocscope
