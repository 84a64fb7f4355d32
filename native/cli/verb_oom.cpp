// `allocscope oom FILE`: at each out-of-memory event, the request against free memory, the cause, and what was alive.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/oom.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_oom(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"top", "gpu"});
  for (const auto& [name, value] : args.options)
    if (name != "json" && name != "top" && name != "gpu") return fail("oom: unknown option --" + name);
  if (args.positional.size() != 1) return fail("usage: allocscope oom FILE [--top N] [--gpu NAME|SIZE] [--json]");
  uint32_t top = 0;
  if (!parse_count(args.get("top", "10"), &top))
    return fail("oom: --top needs a number from 0 to 4294967295");
  OomOptions options;
  options.top = top;
  if (args.has("gpu")) {
    auto gpu = parse_gpu_capacity(args.get("gpu", ""));
    if (!gpu.ok()) return fail("oom: " + gpu.error().describe());
    options.gpu = gpu.value();
  }
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const Lifetimes lt = build_lifetimes(s);
  const auto reports = analyze_ooms(s, lt, options);
  const std::string out =
      args.has("json") ? "{\"ooms\":" + to_json(s, lt, reports) + "}\n" : to_text(s, lt, reports);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "oom",
    "why an allocation failed: the cause (too large, held outside, fragmentation, live tensors) and what to do",
    "usage: allocscope oom FILE [--top N] [--gpu NAME|SIZE] [--json]\n\n"
    "For every `oom` event: the requested size, what the driver reported free (device_free), reserved and\n"
    "allocated bytes just before it, free bytes cached in segments and the largest free block, the GPU's size\n"
    "and the bytes held outside PyTorch's allocator, then the cause, decided in this order:\n"
    "  request_too_large  the request alone is larger than the GPU\n"
    "  held_outside       larger than all PyTorch reserved plus the driver's free: the rest of the GPU is held\n"
    "                     by another process or library, so freeing PyTorch's tensors cannot help\n"
    "  allocator_cap      the driver had enough free, yet the allocator refused (set_per_process_memory_fraction)\n"
    "  fragmentation      enough free bytes (cached + driver) but no free block large enough\n"
    "  live_tensors       live tensors hold the memory\n"
    "with what to do about it, then the N largest live allocations (default 10) with their sites.\n\n"
    "A snapshot does not hold the GPU's size: without --gpu it is inferred as the smallest common GPU that holds\n"
    "PyTorch's reserved bytes plus the driver's free bytes, and the answer says when the cause hangs on that.\n\n"
    "  --top N            largest live allocations to list (default 10)\n"
    "  --gpu NAME|SIZE    the GPU: h100, a100-40gb, l4, 24gb, 79.18GiB or a byte count\n"
    "  --json             {\"ooms\": [{..., \"cause\", \"cause_sure\", \"advice\", \"gpu_total\", \"held_outside\"}]}\n\n"
    "example:\n"
    "  allocscope oom tests/fixtures/oom.pickle\n"
    "  allocscope oom snapshot.pickle --gpu h100 --json\n",
    run_oom,
    13,
});

}  // namespace
}  // namespace allocscope::cli
