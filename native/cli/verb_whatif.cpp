// `allocscope whatif FILE [FILE2]`: the peak at another batch size or sequence length, and whether it fits a GPU.
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/whatif.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

bool parse_positive(const std::string& text, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || v > 1e9) return false;
  *out = v;
  return true;
}

// The device to answer for: --device, else the one that ran out of memory, else the one with the most events (an
// audit: a 4-GPU file was answered for device 0, "fits", where device 1 had run out).
const DeviceLifetimes* pick(const Snapshot& s, const Lifetimes& all, const Args& args) {
  if (args.has("device")) {
    for (const DeviceLifetimes& d : all.devices)
      if (std::to_string(d.device) == args.get("device")) return &d;
    return nullptr;
  }
  const DeviceLifetimes* best = nullptr;
  bool best_oom = false;
  for (const DeviceLifetimes& d : all.devices) {
    if (d.event_count == 0) continue;
    bool oom = false;
    for (uint32_t i = 0; i < d.event_count && !oom; ++i) oom = s.events.action[d.event_begin + i] == Action::kOom;
    if (!best || (oom && !best_oom) || (oom == best_oom && d.event_count > best->event_count)) best = &d, best_oom = oom;
  }
  return best;
}

size_t traced_devices(const Lifetimes& all) {
  size_t n = 0;
  for (const DeviceLifetimes& d : all.devices) n += d.event_count > 0;
  return n;
}

int run_whatif(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"batch", "seq", "gpu", "device", "sizes", "to", "to-batch", "to-seq"});
  for (const auto& [name, value] : args.options) {
    if (name != "json" && name != "batch" && name != "seq" && name != "gpu" && name != "device" && name != "sizes" &&
        name != "to" && name != "to-batch" && name != "to-seq")
      return fail("whatif: unknown option --" + name);
    // Given twice, one would silently win.
    if (std::count_if(args.options.begin(), args.options.end(), [&](const auto& o) { return o.first == name; }) > 1)
      return fail("whatif: --" + name + " is given twice");
  }
  const int targets = args.has("to-batch") + args.has("to-seq") + args.has("to");
  if (targets > 1) return fail("whatif: give one of --to-batch and --to-seq");
  if (args.positional.empty() || args.positional.size() > 16)
    return fail("usage: allocscope whatif FILE [--batch X] [--seq X] [--gpu NAME|SIZE] [--json]\n"
                "       allocscope whatif A B [C...] --sizes SA,SB[,SC...] --to-batch N|--to-seq N [--gpu NAME|SIZE] "
                "[--json]");
  std::optional<GpuCapacity> gpu;
  if (args.has("gpu")) {
    auto g = parse_gpu_capacity(args.get("gpu"));
    if (!g.ok()) return fail("whatif: " + g.error().describe());
    gpu = g.value();
  }
  std::vector<Snapshot> snaps(args.positional.size());
  std::vector<Lifetimes> lts;
  std::vector<const DeviceLifetimes*> devs;
  for (size_t k = 0; k < snaps.size(); ++k) {
    if (!load_or_report(args.positional[k], &snaps[k])) return 1;
    lts.push_back(build_lifetimes(snaps[k]));
  }
  for (size_t k = 0; k < snaps.size(); ++k) {
    devs.push_back(pick(snaps[k], lts[k], args));
    if (!devs.back())
      return no_device("whatif", args.positional[k], lts[k], args.get("device"), args.has("json"));
  }
  std::string out;
  // Which device of a file of several was answered for, and how to ask about another.
  std::string which;
  if (!args.has("device") && !args.has("json") && traced_devices(lts[0]) > 1)
    which = "(" + printable(args.positional[0]) + " traces " + std::to_string(traced_devices(lts[0])) + " devices: this is cuda:" +
            std::to_string(devs[0]->device) + ", the one that ran out of memory or else the busiest; --device N "
            "asks about another)\n";
  if (snaps.size() == 1) {
    if (targets) return fail("whatif: --to-batch and --to-seq need two snapshots or more (with --sizes); with one, "
                             "--batch X and --seq X scale it");
    if (args.has("sizes")) return fail("whatif: --sizes needs two snapshots or more");
    WhatIfOptions o;
    if (args.has("batch") && !parse_positive(args.get("batch"), &o.batch)) return fail("whatif: --batch needs a scale above 0 and at most 1e9");
    if (args.has("seq") && !parse_positive(args.get("seq"), &o.seq)) return fail("whatif: --seq needs a scale above 0 and at most 1e9");
    o.gpu = gpu;
    const DeviceLifetimes& lt = *devs[0];
    const FrameFilter ff(snaps[0]);
    auto c = categorize(snaps[0], lt, detect_iterations(snaps[0], lt), ff);
    if (!c.ok()) return fail("whatif: " + c.error().describe());
    const WhatIfReport r = what_if(snaps[0], lt, c.value(), o);
    out = args.has("json") ? to_json(r) + "\n" : to_text(r);
  } else {
    if (args.has("batch") || args.has("seq"))
      return fail("whatif: two snapshots or more are predicted at a size (--to-batch N or --to-seq N), not scaled by "
                  "--batch or --seq");
    // --sizes: one size per file, in the files' order.
    const std::string sizes = args.get("sizes");
    std::vector<WhatIfRun> runs;
    for (size_t from = 0, k = 0; from <= sizes.size() && !sizes.empty(); ++k) {
      const size_t comma = std::min(sizes.find(',', from), sizes.size());
      double v = 0;
      if (k >= snaps.size() || !parse_positive(sizes.substr(from, comma - from), &v)) break;
      runs.push_back({&snaps[k], devs[k], v});
      from = comma + 1;
    }
    if (runs.size() != snaps.size() || std::count(sizes.begin(), sizes.end(), ',') + 1 != static_cast<long>(snaps.size()))
      return fail("whatif: " + std::to_string(snaps.size()) + " snapshots need --sizes with " +
                  std::to_string(snaps.size()) + " sizes (e.g. --sizes 256,512): the batch sizes (or sequence "
                  "lengths) they were recorded at, in the files' order");
    double target = 0;
    const std::string to = args.has("to-batch") ? args.get("to-batch") : args.has("to-seq") ? args.get("to-seq") : args.get("to");
    if (!parse_positive(to, &target)) return fail("whatif: two snapshots need --to-batch N (or --to-seq N): the size to predict");
    auto r = what_if_fit_runs(runs, target, gpu);
    if (!r.ok()) return fail("whatif: " + r.error().describe());
    out = args.has("json") ? to_json(r.value()) + "\n" : to_text(r.value());
  }
  out = which + out;
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "whatif",
    "the peak at another batch size or sequence length, and whether it fits a GPU",
    "usage: allocscope whatif FILE [--batch X] [--seq X] [--gpu NAME|SIZE] [--device N] [--json]\n"
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
    "  --batch X          batch scale (default 1)\n"
    "  --seq X            sequence-length scale (default 1)\n"
    "  --gpu NAME|SIZE    the GPU: h100, a100-40gb, l4, 24gb, 79.18GiB or a byte count\n"
    "  --sizes SA,SB,...  (two snapshots or more) the batch sizes or sequence lengths they were recorded at\n"
    "  --to-batch N       (two snapshots) the size to predict (--to-seq N: the same, for sequence lengths)\n"
    "  --device N         the device (default: the one that ran out of memory, else the one with the most events)\n"
    "  --json             the numbers: predicted_allocated, predicted_reserved, predicted_needed, needed_low,\n"
    "                     needed_high, verdict (\"fits\", \"does not fit\", \"unsure\"), fits,\n"
    "                     max_batch_scale_sure, max_batch_scale (by the prediction itself), terms\n\n"
    "example:\n"
    "  allocscope whatif tests/fixtures/whatif/gpt_adamw_b8_s256.pickle.gz --batch 4 --gpu 24gb\n"
    "  allocscope whatif tests/fixtures/whatif/gpt_adamw_b8_s128.pickle.gz \\\n"
    "      tests/fixtures/whatif/gpt_adamw_b8_s256.pickle.gz --sizes 128,256 --to-seq 1024\n"
    "  allocscope whatif tests/fixtures/whatif/mlp_sgd_amp_b{256,512,1024}.pickle.gz --sizes 256,512,1024 \\\n"
    "      --to-batch 2048\n",
    run_whatif,
    17,
});

}  // namespace
}  // namespace allocscope::cli
