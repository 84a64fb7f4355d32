// `categories`: bytes per category (parameter, gradient, ...) at the peak or any step.
#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

struct Request {
  CategoryOptions co;
  std::string at = "peak";  // "peak", "end" or a step
  uint32_t at_step = 0;
  int64_t device = -1;
};

Result<Request> parse(const AnswerOptions& o) {
  Request r;
  ALLOCSCOPE_RETURN_IF_ERROR(parse_rules("categories", o, &r.co));
  r.at = o.get("at", "peak");
  if (r.at != "peak" && r.at != "end" && !parse_count(r.at, &r.at_step))
    return fail("categories", "--at takes peak, end or a step number");
  ALLOCSCOPE_RETURN_IF_ERROR(parse_device("categories", o, &r.device));
  return r;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto req = parse(o);
  if (!req.ok()) return req.error();
  const Request& r = req.value();
  LoadedSnapshot& f = *files[0];
  const Snapshot& s = f.snapshot();
  const Lifetimes& all = f.lifetimes();
  const bool json = o.has("json"), given = r.device >= 0;
  AnswerOutput out;
  out.out = json ? "{\"devices\":[" : "";
  bool first = true;
  for (const DeviceLifetimes& lt : all.devices) {
    if (given ? lt.device != r.device : !answered_without_device(all, lt)) continue;
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, f.frame_filter(), r.co);
    if (!c.ok()) return fail("categories", c.error().describe());
    const uint32_t step = r.at == "peak" ? lt.peak_step() : r.at == "end" ? lt.steps() - 1 : r.at_step;
    if (step >= lt.steps())  // past the trace: said, not clamped into its last step
      return fail("categories", "--at " + r.at + " is past the end of device " + std::to_string(lt.device) +
                                    "'s trace (steps 0.." + std::to_string(lt.steps() - 1) + ")" +
                                    (given ? "" : "; --device picks one device"));
    out.out += (first ? "" : json ? "," : "\n") +
               (json ? to_json(s, lt, c.value(), step) : to_text(s, lt, c.value(), f.frame_filter(), step));
    first = false;
  }
  if (first) return no_device("categories", f, given ? std::to_string(r.device) : "", json);
  if (!given)
    if (std::string note = devices_left_out("categories", all); !note.empty()) out.notes.push_back(note);
  if (json) out.out += "]}\n";
  return out;
}

}  // namespace

const AnswerDef& categories_answer() {
  static const AnswerDef d{
      {"categories", {"json"}, {"device", "rule", "at"}, 1, 1,
       "usage: allocscope categories FILE [--at peak|end|STEP] [--rule REGEX=CATEGORY]... [--json]"},
      [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
