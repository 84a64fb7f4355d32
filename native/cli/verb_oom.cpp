// `allocscope oom FILE`: at each out-of-memory event, the request against free memory and what was alive.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/oom.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_oom(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"top"});
  for (const auto& [name, value] : args.options)
    if (name != "json" && name != "top") return fail("oom: unknown option --" + name);
  if (args.positional.size() != 1) return fail("usage: allocscope oom FILE [--top N] [--json]");
  const std::string top = args.get("top", "10");
  if (top.empty() || top.size() > 6 || top.find_first_not_of("0123456789") != std::string::npos)
    return fail("oom: --top needs a number");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const Lifetimes lt = build_lifetimes(s);
  const auto reports = analyze_ooms(s, lt, static_cast<uint32_t>(std::stoul(top)));
  const std::string out =
      args.has("json") ? "{\"ooms\":" + to_json(s, lt, reports) + "}\n" : to_text(s, lt, reports);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "oom",
    "why an allocation failed: request vs free memory, fragmentation, largest live tensors",
    "usage: allocscope oom FILE [--top N] [--json]\n\n"
    "For every `oom` event: the requested size, what the driver reported free (device_free), reserved and\n"
    "allocated bytes just before it, free bytes cached in segments and the largest free block (if the cache\n"
    "could hold the request but no block is large enough, the failure is fragmentation), then the N largest\n"
    "live allocations (default 10) with the frame that allocated them.\n\n"
    "  --json   {\"ooms\": [...]}\n\n"
    "example:\n"
    "  allocscope oom tests/fixtures/oom.pickle\n",
    run_oom,
    13,
});

}  // namespace
}  // namespace allocscope::cli
