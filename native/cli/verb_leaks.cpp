// `allocscope leaks FILE`: what survives each iteration, which sites grow (a leak) and which gradients are held.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_leaks(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"device", "rule"});
  std::vector<CategoryRule> rules;
  for (const auto& [name, value] : args.options) {
    if (name == "rule") {
      auto r = parse_category_rule(value);
      if (!r.ok()) return fail("leaks: " + r.error().describe());
      rules.push_back(r.value());
    } else if (name != "json" && name != "device") {
      return fail("leaks: unknown option --" + name);
    }
  }
  if (args.positional.size() != 1) return fail("usage: allocscope leaks FILE [--device N] [--json]");
  const std::string dev = args.get("device");
  if (args.has("device") && (dev.empty() || dev.find_first_not_of("0123456789") != std::string::npos || dev.size() > 9))
    return fail("leaks: --device needs an ordinal");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const Lifetimes all = build_lifetimes(s);
  const FrameFilter ff(s);
  CategoryOptions co;
  co.rules = rules;
  std::string out = args.has("json") ? "{\"devices\":[" : "";
  bool first = true, leak = false;
  for (const DeviceLifetimes& lt : all.devices) {
    if (args.has("device") ? lt.device != std::stoll(dev) : lt.event_count == 0) continue;
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, ff, co);
    if (!c.ok()) return fail("leaks: " + c.error().describe());
    const LeakReport r = find_leaks(s, lt, it, c.value(), ff);
    leak = leak || r.leak_suspected();
    out += (first ? "" : args.has("json") ? "," : "\n") + (args.has("json") ? to_json(s, r) : to_text(s, r));
    first = false;
  }
  if (first) return no_device("leaks", args.positional[0], all, dev, args.has("json"));
  if (args.has("json")) out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0) return 1;
  return leak ? 3 : 0;  // scripts can gate on a suspected leak
}

const RegisterVerb kRegister({
    "leaks",
    "what grows every iteration (a leak) and gradients held across steps; exit code 3 on a leak",
    "usage: allocscope leaks FILE [--device N] [--rule REGEX=CATEGORY]... [--json]\n\n"
    "Finds the repeating iteration (the START of each `Optimizer.step#...` annotation; otherwise the allocation\n"
    "stack that repeats most regularly), counts the allocations of each site (deepest user frame) alive at each\n"
    "iteration start, and reports sites whose count keeps rising (a leak: the line and the stack that allocated\n"
    "what stays alive; with guessed iterations, only growth still held when the trace ends, or at an OOM,\n"
    "counts, since a model's layers inside one forward pass repeat too), gradients alive from one optimizer\n"
    "step to the next (held, not growing: zero_grad missing), and the active bytes at each iteration start.\n"
    "Exit code 3 when a leak is suspected.\n\n"
    "  --rule REGEX=CATEGORY  categorize frames matching REGEX first (see `allocscope categories --help`)\n"
    "  --json                 {\"devices\": [leak reports]}\n\n"
    "example:\n"
    "  allocscope leaks tests/fixtures/transformer_leak.pickle\n",
    run_leaks,
    12,
});

}  // namespace
}  // namespace allocscope::cli
