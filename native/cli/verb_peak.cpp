// `allocscope peak FILE`: the highest allocated and reserved bytes (globally or in a step window) and what was
// alive at the allocated peak, by category, site, size and (optionally) as a stack tree.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/memviz.h"
#include "allocscope/peak.h"
#include "allocscope/segment_timeline.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

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

int run_peak(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"device", "from", "to", "top", "depth"});
  for (const auto& [name, value] : args.options)
    if (name != "json" && name != "device" && name != "from" && name != "to" && name != "top" && name != "tree" &&
        name != "depth")
      return fail("peak: unknown option --" + name);
  if (args.positional.size() != 1) return fail("usage: allocscope peak FILE [--device N] [--from STEP] [--to STEP] [--json]");
  PeakOptions po;
  if (args.has("from") && !parse_count(args.get("from"), &po.step_begin)) return fail("peak: --from needs a step number");
  if (args.has("to") && !parse_count(args.get("to"), &po.step_end)) return fail("peak: --to needs a step number");
  if (args.has("top") && !parse_count(args.get("top"), &po.top)) return fail("peak: --top needs a number");
  uint32_t depth = 6, device = 0;
  if (args.has("depth") && !parse_count(args.get("depth"), &depth)) return fail("peak: --depth needs a number");
  if (args.has("device") && !parse_count(args.get("device"), &device)) return fail("peak: --device needs an ordinal");
  if (po.step_begin > po.step_end)
    return fail("peak: --from " + std::to_string(po.step_begin) + " is after --to " + std::to_string(po.step_end));
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const Lifetimes all = build_lifetimes(s);
  const FrameFilter ff(s);
  std::string out = args.has("json") ? "{\"devices\":[" : "";
  bool first = true;
  for (const DeviceLifetimes& lt : all.devices) {
    if (args.has("device") ? lt.device != device : !answered_without_device(all, lt)) continue;
    // A window past the trace is a mistake to say, not one to clamp into the last step.
    if (args.has("from") && po.step_begin > lt.event_count)
      return fail("peak: --from " + std::to_string(po.step_begin) + " is past the end of device " +
                  std::to_string(lt.device) + "'s trace (steps 0.." + std::to_string(lt.event_count) + ")" +
                  (args.has("device") ? "" : "; --device picks one device"));
    if (args.has("to") && po.step_end != UINT32_MAX && po.step_end > lt.event_count)
      return fail("peak: --to " + std::to_string(po.step_end) + " is past the end of device " +
                  std::to_string(lt.device) + "'s trace (steps 0.." + std::to_string(lt.event_count) + ")" +
                  (args.has("device") ? "" : "; --device picks one device"));
    const SegmentTimeline st = build_segment_timeline(s, lt.device);
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, ff);
    const Peak p = find_peak(s, lt, &st, ff, c.ok() ? &c.value() : nullptr, po);
    if (args.has("json")) {
      out += (first ? "" : ",") + to_json(s, lt, p, args.has("tree"));
    } else {
      out += (first ? "" : "\n") + to_text(s, lt, p);
      if (args.has("tree")) out += tree_text(s, p.tree, depth);
    }
    first = false;
  }
  if (first) return no_device("peak", args.positional[0], all, args.has("device") ? std::to_string(device) : "", args.has("json"));
  if (!args.has("device")) note_devices_left_out("peak", all);
  if (args.has("json")) out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "peak",
    "peak allocated/reserved bytes and what was alive then (by category, site, stack)",
    "usage: allocscope peak FILE [--device N] [--from STEP] [--to STEP] [--top N] [--tree [--depth D]] [--json]\n\n"
    "The highest allocated (active) bytes, as PyTorch's Active Memory Timeline draws them, and the highest\n"
    "reserved bytes (segments), each with its step (step s = the state after the first s events). What is\n"
    "alive at the allocated peak is grouped by category (parameter, gradient, optimizer_state, activation,\n"
    "input, temporary, autograd_detail, unknown), by site (the deepest frame of the user's own code) and listed by size.\n\n"
    "  --from, --to STEP  search only steps in [from, to] (a window of the trace)\n"
    "  --device N         only device N (default: every device with a trace; those with segments only\n"
    "                     are named on stderr)\n"
    "  --top N            rows in the site and size lists (default 20)\n"
    "  --tree             the alive allocations as a stack tree (in JSON: flat preorder arrays)\n"
    "  --depth D          tree levels printed as text (default 6)\n"
    "  --json             {\"devices\": [peak objects]}\n\n"
    "example:\n"
    "  allocscope peak tests/fixtures/resnet50_train.pickle --from 4000 --to 6000\n",
    run_peak,
    11,
});

}  // namespace
}  // namespace allocscope::cli
