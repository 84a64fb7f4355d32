// `peak`: the highest allocated and reserved bytes (globally or in a step window) and what was alive at the
// allocated peak, by category, site, size and (optionally) as a stack tree.
#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/memviz.h"
#include "allocscope/peak.h"
#include "allocscope/segment_timeline.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

struct Request {
  PeakOptions po;
  uint32_t depth = 6, device = 0;
};

Result<Request> parse(const AnswerOptions& o) {
  Request r;
  if (o.has("from") && !parse_count(o.get("from"), &r.po.step_begin)) return fail("peak", "--from needs a step number");
  if (o.has("to") && !parse_count(o.get("to"), &r.po.step_end)) return fail("peak", "--to needs a step number");
  if (o.has("top") && !parse_count(o.get("top"), &r.po.top)) return fail("peak", "--top needs a number");
  if (o.has("depth") && !parse_count(o.get("depth"), &r.depth)) return fail("peak", "--depth needs a number");
  if (o.has("device") && !parse_count(o.get("device"), &r.device)) return fail("peak", "--device needs an ordinal");
  if (r.po.step_begin > r.po.step_end)
    return fail("peak", "--from " + std::to_string(r.po.step_begin) + " is after --to " + std::to_string(r.po.step_end));
  return r;
}

std::string tree_text(const Snapshot& s, const FlameTree& t, uint32_t max_depth) {
  auto col = [](std::string v) { return v.size() < 10 ? std::string(10 - v.size(), ' ') + v : v; };
  std::string o = "\nstack tree of the allocations alive at the peak (visible frames, outermost first):\n" +
                  col("total") + "  " + col("self") + "  frame\n";
  for (uint32_t i = 1; i < t.size(); ++i) {
    if (t.depth[i] > max_depth) continue;
    o += col(memviz::format_size(t.total_bytes[i])) + "  " + col(memviz::format_size(t.self_bytes[i])) + "  " +
         std::string(2 * (t.depth[i] - 1), ' ') + FrameFilter::format(s, t.frame[i]) + "\n";
  }
  // The root's own bytes: allocations with no stack, or none the filter shows. Named, as the viewer's flame graph
  // names them, since they were left out and the levels did not add up to the total.
  if (t.size() && t.self_bytes[0])
    o += col(memviz::format_size(t.self_bytes[0])) + "  " + col(memviz::format_size(t.self_bytes[0])) +
         "  no stack (or only frames the filter hides)\n";
  return o;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto req = parse(o);
  if (!req.ok()) return req.error();
  const Request& r = req.value();
  LoadedSnapshot& f = *files[0];
  const Snapshot& s = f.snapshot();
  const Lifetimes& all = f.lifetimes();
  const FrameFilter& ff = f.frame_filter();
  const bool json = o.has("json"), given = o.has("device");
  AnswerOutput out;
  out.out = json ? "{\"devices\":[" : "";
  bool first = true;
  for (const DeviceLifetimes& lt : all.devices) {
    if (given ? lt.device != r.device : !answered_without_device(all, lt)) continue;
    // A window past the trace is a mistake to say, not one to clamp into the last step.
    const std::string which = given ? "" : "; --device picks one device";
    if (o.has("from") && r.po.step_begin > lt.event_count)
      return fail("peak", "--from " + std::to_string(r.po.step_begin) + " is past the end of device " +
                              std::to_string(lt.device) + "'s trace (steps 0.." + std::to_string(lt.event_count) +
                              ")" + which);
    if (o.has("to") && r.po.step_end != UINT32_MAX && r.po.step_end > lt.event_count)
      return fail("peak", "--to " + std::to_string(r.po.step_end) + " is past the end of device " +
                              std::to_string(lt.device) + "'s trace (steps 0.." + std::to_string(lt.event_count) +
                              ")" + which);
    const SegmentTimeline st = build_segment_timeline(s, lt.device);
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, ff);
    const Peak p = find_peak(s, lt, &st, ff, c.ok() ? &c.value() : nullptr, r.po);
    out.out += first ? "" : json ? "," : "\n";
    if (json) {
      out.out += to_json(s, lt, p, o.has("tree"));
    } else {
      out.out += to_text(s, lt, p);
      if (o.has("tree")) out.out += tree_text(s, p.tree, r.depth);
    }
    first = false;
  }
  if (first) return no_device("peak", f, given ? std::to_string(r.device) : "", json);
  if (!given)
    if (std::string note = devices_left_out("peak", all); !note.empty()) out.notes.push_back(note);
  if (json) out.out += "]}\n";
  return out;
}

}  // namespace

const AnswerDef& peak_answer() {
  static const AnswerDef d{
      {"peak", {"json", "tree"}, {"device", "from", "to", "top", "depth"}, 1, 1,
       "usage: allocscope peak FILE [--device N] [--from STEP] [--to STEP] [--json]"},
      [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
