// `allocscope oom FILE`: at each out-of-memory event, the request against free memory, the cause, and what was alive.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

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
    [](const std::vector<std::string>& argv) { return run_answer("oom", argv); },
    13,
});

}  // namespace
}  // namespace allocscope::cli
