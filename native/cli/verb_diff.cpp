// `allocscope diff A B`: live memory by stack with size deltas (largest first) and segments only in one file.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "diff",
    "two snapshots (before/after, two ranks): live memory by stack with deltas, segments only in one",
    "usage: allocscope diff A B [--top N] [--json]\n\n"
    "First each device's allocated peak in A and in B (as `summary` reports it). Then groups the live blocks of\n"
    "each file's final state by stack (visible frames, so stacks compare across files; requested bytes; all\n"
    "devices together) and lists the groups whose bytes differ, largest change first (B - A), with the deepest\n"
    "user frame. Then the counts of segments present in only one file (same address and total size = the same\n"
    "segment, PyTorch's `compare` rule, meaningful for two snapshots of one process; `allocscope compare` prints\n"
    "them as PyTorch does).\n\n"
    "  --top N   groups listed (default 15; 50 with --json)\n"
    "  --json    {peak_allocated{a[{device, bytes}], b[...]}, live_a, live_b, reserved_a, reserved_b, segments_only_a[],\n"
    "            segments_only_b[], stacks[] (the first N groups, unchanged ones included), stack_groups}\n\n"
    "example:\n"
    "  allocscope diff tests/fixtures/ddp_rank0.pickle tests/fixtures/ddp_rank1.pickle\n",
    [](const std::vector<std::string>& argv) { return run_answer("diff", argv); },
    14,
});

}  // namespace
}  // namespace allocscope::cli
