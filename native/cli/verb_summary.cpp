// `allocscope summary FILE [--json]`: the one-screen answer (peaks, fragmentation, top sites, warnings).
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "summary",
    "one screen: peaks, fragmentation, top sites, OOMs, leaks and file warnings",
    "usage: allocscope summary FILE [--json] [--top N] [--from A] [--to B]\n\n"
    "Per device: events and time span, peak allocated (live allocations in requested bytes, as PyTorch's\n"
    "timeline; step 0 is before the first event) and reserved bytes with their steps, the final reserved and\n"
    "allocated bytes (as torch.cuda.memory_allocated() counts them; blocks freed while another stream still used\n"
    "them are shown apart) with the largest free block and fragmentation (1 - largest free / free), the top\n"
    "N (default 5) allocation sites alive at the peak (deepest user frame), then warnings: OOMs, suspected\n"
    "leaks, gradients held across steps, a wrapped ring buffer (frees without allocs) and inconsistent content\n"
    "(blocks outside segments, repeated frees, time going backwards, negative sizes).\n\n"
    "  --json     one JSON object (devices[], warnings[]) instead of text\n"
    "  --from, --to A, B  only steps A..B of each device's trace (or times: 1.5s, 200ms, 300us), read from a\n"
    "             file of any size in memory bounded by the window and what is alive; steps are the file's\n\n"
    "example:\n"
    "  allocscope summary tests/fixtures/transformer_leak.pickle\n",
    [](const std::vector<std::string>& argv) { return run_answer("summary", argv); },
    10,
});

}  // namespace
}  // namespace allocscope::cli
