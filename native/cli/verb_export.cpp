// `allocscope export --json FILE`: every answer for every device as one JSON document, for scripts.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/oom.h"
#include "allocscope/peak.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/summary.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_export(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"rule"});
  CategoryOptions co;
  for (const auto& [name, value] : args.options) {
    if (name == "rule") {
      auto r = parse_category_rule(value);
      if (!r.ok()) return fail("export: " + r.error().describe());
      co.rules.push_back(r.value());
    } else if (name != "json" && name != "tree") {
      return fail("export: unknown option --" + name);
    }
  }
  if (args.positional.size() != 1 || !args.has("json"))
    return fail("usage: allocscope export --json FILE [--tree] [--rule REGEX=CATEGORY]...");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const Lifetimes all = build_lifetimes(s);
  const FrameFilter ff(s);
  // Each part is already a JSON document from the shared core; the export only nests them.
  std::string out = "{\"file\":" + nlohmann::json(args.positional[0]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ",\"summary\":" + to_json(s, summarize(s, all, ff, 5, co)) + ",\"devices\":[";
  bool first = true;
  for (const DeviceLifetimes& lt : all.devices) {
    if (!answered_without_device(all, lt)) continue;  // as `peak` and `categories` leave it out
    const SegmentTimeline st = build_segment_timeline(s, lt.device);
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, ff, co);
    if (!c.ok()) return fail("export: " + c.error().describe());
    const Peak p = find_peak(s, lt, &st, ff, &c.value());
    out += std::string(first ? "" : ",") + "{\"device\":" + std::to_string(lt.device) +
           ",\"peak\":" + to_json(s, lt, p, args.has("tree")) +
           ",\"categories\":" + to_json(s, lt, c.value(), p.allocated_step) +
           ",\"leaks\":" + (lt.event_count ? to_json(s, find_leaks(s, lt, it, c.value(), ff)) : "null") + "}";
    first = false;
  }
  out += "],\"ooms\":" + to_json(s, all, analyze_ooms(s, all)) + "}\n";
  note_devices_left_out("export", all);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "export",
    "every answer (summary, per-device peak/categories/leaks, OOMs) as one JSON document",
    "usage: allocscope export --json FILE [--tree] [--rule REGEX=CATEGORY]...\n\n"
    "Writes {file, summary, devices: [{device, peak, categories, leaks}], ooms} to stdout: the same objects\n"
    "`summary --json`, `peak --json`, `categories --json`, `leaks --json` and `oom --json` print, for scripts\n"
    "(devices: those `peak` answers; leaks is null for a device without a trace, which `leaks` refuses). The\n"
    "exit code is 0 whatever the answers say (`leaks` exits 3 on a leak; here read devices[].leaks).\n\n"
    "  --tree                 include each peak's stack tree (flat preorder arrays; larger output)\n"
    "  --rule REGEX=CATEGORY  a user rule for categories, as `categories --rule`: it applies to every category\n"
    "                         shown, the peak's breakdown included (`peak` itself takes no rules)\n\n"
    "example:\n"
    "  allocscope export --json tests/fixtures/resnet50_train.pickle > answers.json\n",
    run_export,
    16,
});

}  // namespace
}  // namespace allocscope::cli
