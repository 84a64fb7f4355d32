// `allocscope categories FILE`: bytes per category (parameter, gradient, ...) at the peak or any step.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_categories(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"device", "rule", "at"});
  CategoryOptions co;
  for (const auto& [name, value] : args.options) {
    if (name == "rule") {
      auto r = parse_category_rule(value);
      if (!r.ok()) return fail("categories: " + r.error().describe());
      co.rules.push_back(r.value());
    } else if (name != "json" && name != "device" && name != "at") {
      return fail("categories: unknown option --" + name);
    }
  }
  if (args.positional.size() != 1)
    return fail("usage: allocscope categories FILE [--at peak|end|STEP] [--rule REGEX=CATEGORY]... [--json]");
  const std::string at = args.get("at", "peak"), dev = args.get("device");
  uint32_t at_step = 0;
  if (at != "peak" && at != "end" && !parse_count(at, &at_step))
    return fail("categories: --at takes peak, end or a step number");
  if (args.has("device") && (dev.empty() || dev.find_first_not_of("0123456789") != std::string::npos || dev.size() > 9))
    return fail("categories: --device needs an ordinal");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const Lifetimes all = build_lifetimes(s);
  const FrameFilter ff(s);
  std::string out = args.has("json") ? "{\"devices\":[" : "";
  bool first = true;
  for (const DeviceLifetimes& lt : all.devices) {
    if (args.has("device") ? lt.device != std::stoll(dev) : !answered_without_device(all, lt)) continue;
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, ff, co);
    if (!c.ok()) return fail("categories: " + c.error().describe());
    uint32_t step = at == "peak" ? lt.peak_step() : at == "end" ? lt.steps() - 1 : at_step;
    if (step >= lt.steps())  // past the trace: said, not clamped into its last step
      return fail("categories: --at " + at + " is past the end of device " + std::to_string(lt.device) +
                  "'s trace (steps 0.." + std::to_string(lt.steps() - 1) + ")" +
                  (args.has("device") ? "" : "; --device picks one device"));
    out += (first ? "" : args.has("json") ? "," : "\n") +
           (args.has("json") ? to_json(s, lt, c.value(), step) : to_text(s, lt, c.value(), ff, step));
    first = false;
  }
  if (first) return no_device("categories", args.positional[0], all, dev, args.has("json"));
  if (!args.has("device")) note_devices_left_out("categories", all);
  if (args.has("json")) out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "categories",
    "memory by kind (parameter, gradient, optimizer_state, activation, input, temporary, autograd_detail, unknown)",
    "usage: allocscope categories FILE [--at peak|end|STEP] [--device N] [--rule REGEX=CATEGORY]... [--json]\n\n"
    "Infers each allocation's kind from its stack and lifetime (docs/analyses.md): torch/optim frames that\n"
    "outlive their iteration are optimizer state; module construction and moves (__init__, _apply, .to, .cuda)\n"
    "are parameters; what the backward pass leaves alive with a parameter's size is a gradient; what a\n"
    "module's forward makes is an activation (as PyTorch's Memory Profiler says, saved for backward or not);\n"
    "what else is freed within its iteration is temporary. Prints the bytes of each kind alive at the step (default: the allocated peak) with the three\n"
    "largest sites of each, so a wrong guess is easy to spot and correct with a rule.\n\n"
    "  --rule REGEX=CATEGORY  frames whose \"path/file.py:LINE:name\" matches REGEX (ECMAScript) decide first;\n"
    "                         repeatable, first match wins\n"
    "  --at peak|end|STEP     which state (default peak)\n"
    "  --json                 {\"devices\": [{device, step, alive{category: {bytes, count}}, all_allocations}]}\n\n"
    "example:\n"
    "  allocscope categories tests/fixtures/resnet18_grad_bug.pickle --rule 'my_cache\\.py=unknown'\n",
    run_categories,
    15,
});

}  // namespace
}  // namespace allocscope::cli
