// `leaks`: what survives each iteration, which sites grow (a leak) and which gradients are held.
#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

struct Request {
  CategoryOptions co;
  int64_t device = -1;  // -1: every device with a trace
};

Result<Request> parse(const AnswerOptions& o) {
  Request r;
  ALLOCSCOPE_RETURN_IF_ERROR(parse_rules("leaks", o, &r.co));
  ALLOCSCOPE_RETURN_IF_ERROR(parse_device("leaks", o, &r.device));
  return r;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto req = parse(o);
  if (!req.ok()) return req.error();
  const Request& r = req.value();
  LoadedSnapshot& f = *files[0];
  const Snapshot& s = f.snapshot();
  const bool json = o.has("json");
  AnswerOutput out;
  out.out = json ? "{\"devices\":[" : "";
  bool first = true, leak = false;
  for (const DeviceLifetimes& lt : f.lifetimes().devices) {
    if (r.device >= 0 ? lt.device != r.device : lt.event_count == 0) continue;
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, f.frame_filter(), r.co);
    if (!c.ok()) return fail("leaks", c.error().describe());
    const LeakReport rep = find_leaks(s, lt, it, c.value(), f.frame_filter());
    leak = leak || rep.leak_suspected() || rep.pool_growth_suspected();
    out.out += (first ? "" : json ? "," : "\n") + (json ? to_json(s, rep) : to_text(s, rep));
    first = false;
  }
  if (first) return no_device("leaks", f, r.device >= 0 ? std::to_string(r.device) : "", json);
  if (json) out.out += "]}\n";
  out.exit_code = leak ? 3 : 0;  // scripts can gate on a suspected leak
  return out;
}

}  // namespace

const AnswerDef& leaks_answer() {
  static const AnswerDef d{{"leaks", {"json"}, {"device", "rule"}, 1, 1, "usage: allocscope leaks FILE [--device N] [--json]"},
                           [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
