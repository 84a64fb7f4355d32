// `allocscope whatif FILE [FILE2]`: the peak after a change to the job (another batch size or sequence length,
// precision, optimizer, checkpointing...), and whether it fits a GPU.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "whatif",
    "the peak after a change to the job (batch, precision, checkpointing...), and whether it fits a GPU",
    "usage: allocscope whatif FILE [--batch X] [--seq X] [CHANGE...] [--gpu NAME|SIZE] [--device N] [--json]\n"
    "       allocscope whatif A B [C...] --sizes SA,SB[,SC...] --to-batch N [--gpu NAME|SIZE] [--json]\n\n"
    "One snapshot: the measured terms (parameters, gradients, optimizer state, activations, temporaries) at the\n"
    "peak and at the highest step of the forward, backward and optimizer step; then the predicted peak allocated\n"
    "and reserved bytes when the batch (or sequence length) is X times the recorded one. Activations, inputs and\n"
    "the forward's and backward's temporaries scale; parameters, gradients, optimizer state, the optimizer's\n"
    "scratch and library workspaces do not. The trace is replayed with the new sizes, through a model of PyTorch's\n"
    "caching allocator for reserved bytes. With --gpu: FITS, DOES NOT FIT or UNSURE (leaving 704 MiB for the\n"
    "CUDA context), and the largest batch scale that fits (surely, and by the prediction itself). UNSURE when\n"
    "the GPU's room lies within the prediction's error: 5% plus 4% per doubling of the distance from the nearest\n"
    "recorded size (measured on 40 real runs), and with --seq from one snapshot, what grows taken as anywhere\n"
    "from linear to quadratic in the length (attention scores grow with its square): give two snapshots.\n\n"
    "Two snapshots of the same loop at two batch sizes (or sequence lengths) SA and SB: each allocation is paired\n"
    "across them and its size fitted as c * size^k, then the run at N is predicted. With three or more, the fit\n"
    "uses the two sizes nearest N (kernels change with the shapes: a larger batch may allocate buffers a small one\n"
    "never does), and each larger snapshot is also predicted from the two below it and compared with what it\n"
    "measured: how far one step of extrapolation is off in this job.\n\n"
    "CHANGE: what a user changes in the job, alone or several at once (one snapshot); each is replayed on the\n"
    "recorded trace, and the answer says what moved and why (`allocscope plan FILE` tries them all):\n"
    "  --accumulate K     K micro-batches per optimizer step, the same effective batch\n"
    "  --precision P      bf16-autocast (torch.autocast) or bf16-weights (model.to(torch.bfloat16))\n"
    "  --optimizer O      sgd, sgd-momentum, adamw, adamw-fused, adafactor or adam-8bit\n"
    "  --checkpoint all|REGEX  activation checkpointing of every repeated block, or of the modules whose frames\n"
    "                     match REGEX (their activations recomputed in the backward)\n"
    "  --zero-grad none|zeros  zero_grad(set_to_none=True), or set_to_none=False: gradients kept as zeros\n"
    "  --allocator SETTINGS  PYTORCH_CUDA_ALLOC_CONF, e.g. 'expandable_segments:True,max_split_size_mb:128,\n"
    "                     garbage_collection_threshold:0.8', replayed on the allocator model\n"
    "  --shard zero1|zero2|zero3 --world-size N  ZeRO sharding of optimizer state, gradients, parameters\n"
    "  --offload optimizer  the optimizer's state and step on the host\n\n"
    "  --batch X          batch scale (default 1)\n"
    "  --seq X            sequence-length scale (default 1)\n"
    "  --gpu NAME|SIZE    the GPU: h100, a100-40gb, l4, 24gb, 79.18GiB or a byte count\n"
    "  --sizes SA,SB,...  (two snapshots or more) the batch sizes or sequence lengths they were recorded at\n"
    "  --to-batch N       (two snapshots) the size to predict (--to-seq N: the same, for sequence lengths)\n"
    "  --device N         the device (default: the one that ran out of memory, else the one with the most events)\n"
    "  --json             the numbers: predicted_allocated, predicted_reserved, predicted_needed, needed_low,\n"
    "                     needed_high, verdict (\"fits\", \"does not fit\", \"unsure\"), fits,\n"
    "                     max_batch_scale_sure, max_batch_scale (by the prediction itself), terms; with\n"
    "                     changes: changes[{change, code, effect}] and predicted_terms\n\n"
    "example:\n"
    "  allocscope whatif tests/fixtures/whatif/gpt_adamw_b8_s256.pickle.gz --batch 4 --gpu 24gb\n"
    "  allocscope whatif tests/fixtures/plan_runs/gpt_sdpa.pickle.gz --checkpoint all --precision bf16-autocast\n"
    "  allocscope whatif tests/fixtures/whatif/gpt_adamw_b8_s128.pickle.gz \\\n"
    "      tests/fixtures/whatif/gpt_adamw_b8_s256.pickle.gz --sizes 128,256 --to-seq 1024\n"
    "  allocscope whatif tests/fixtures/whatif/mlp_sgd_amp_b{256,512,1024}.pickle.gz --sizes 256,512,1024 \\\n"
    "      --to-batch 2048\n",
    [](const std::vector<std::string>& argv) { return run_answer("whatif", argv); },
    17,
});

}  // namespace
}  // namespace allocscope::cli
