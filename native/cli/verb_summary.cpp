// `allocscope summary FILE [--json]`: the one-screen answer (peaks, fragmentation, top sites, warnings).
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocscope/frame_filter.h"
#include "allocscope/summary.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_summary(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"top"});
  for (const auto& [name, value] : args.options)
    if (name != "json" && name != "top") return fail("summary: unknown option --" + name);
  if (args.positional.size() != 1) return fail("usage: allocscope summary FILE [--json] [--top N]");
  uint32_t top = 0;
  if (!parse_count(args.get("top", "5"), &top))
    return fail("summary: --top needs a number from 0 to 4294967295");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const FrameFilter ff(s);
  const Summary sum = summarize(s, ff, top);
  // The JSON names the snapshot it summarises, so `allocscope ranks` can gather summaries made where the files are.
  const std::string out = args.has("json") ? "{\"file\":" + nlohmann::json(args.positional[0]).dump(-1, ' ', false,
                                                  nlohmann::json::error_handler_t::replace) +
                                                 "," + to_json(s, sum).substr(1) + "\n"
                                           : printable(args.positional[0]) + ": " + to_text(s, sum);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "summary",
    "one screen: peaks, fragmentation, top sites, OOMs, leaks and file warnings",
    "usage: allocscope summary FILE [--json] [--top N]\n\n"
    "Per device: events and time span, peak allocated (live allocations in requested bytes, as PyTorch's\n"
    "timeline; step 0 is before the first event) and reserved bytes with their steps, the final reserved and\n"
    "allocated bytes (as torch.cuda.memory_allocated() counts them; blocks freed while another stream still used\n"
    "them are shown apart) with the largest free block and fragmentation (1 - largest free / free), the top\n"
    "N (default 5) allocation sites alive at the peak (deepest user frame), then warnings: OOMs, suspected\n"
    "leaks, gradients held across steps, a wrapped ring buffer (frees without allocs) and inconsistent content\n"
    "(blocks outside segments, repeated frees, time going backwards, negative sizes).\n\n"
    "  --json     one JSON object (devices[], warnings[]) instead of text\n\n"
    "example:\n"
    "  allocscope summary tests/fixtures/transformer_leak.pickle\n",
    run_summary,
    10,
});

}  // namespace
}  // namespace allocscope::cli
