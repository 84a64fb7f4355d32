// `allocscope plan FILE [--gpu G]`: what to change so the job fits, cheapest first.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "plan",
    "what to change so the job fits the GPU (settings, code, training), cheapest first, with the line to apply",
    "usage: allocscope plan FILE [--gpu NAME|SIZE] [--world-size N] [--device N] [--top N] [--json]\n\n"
    "Predicts the recorded job under every change `whatif` models (an allocator setting, zero_grad's set_to_none,\n"
    "fused AdamW, bf16 autocast, activation checkpointing, gradient accumulation, another optimizer, bf16 weights,\n"
    "the optimizer's state on the host, ZeRO sharding with --world-size, a smaller batch), then the smallest\n"
    "combinations of those that help. Lists the options that make the job fit the GPU, cheapest for the user\n"
    "first (a setting, then a line of code, then a change of how it trains, then a smaller batch), each with the\n"
    "least memory it needs, that prediction's range, the margin the GPU leaves, what the change moves, and the one\n"
    "line that applies it. Without --gpu: the GPU the file ran out of memory on, if it did; else the changes that\n"
    "cut at least 1%, cheapest first, the larger cut first among equals. A recording with no gradient and no\n"
    "optimizer state (inference, a forward alone) is offered no change of training. Each option is\n"
    "`allocscope whatif FILE` with the flags shown.\n\n"
    "  --gpu NAME|SIZE   the GPU to fit: h100, a100-40gb, 24gb, 79.18GiB or a byte count\n"
    "  --world-size N    also ZeRO stages 1-3 on N GPUs\n"
    "  --device N        the device to plan for (default: the one that ran out of memory, else the busiest)\n"
    "  --top N           options listed (default 8)\n"
    "  --json            {device, gpu, from_oom, incomplete_trace, recorded, options[{changes, code, cost, verdict,\n"
    "                    predicted_needed, needed_low, needed_high, margin, effects}], tried, notes}\n\n"
    "example:\n"
    "  allocscope plan tests/fixtures/python_gpu/hf_oom.pickle.gz\n",
    [](const std::vector<std::string>& argv) { return run_answer("plan", argv); },
    18,
});

}  // namespace
}  // namespace allocscope::cli
