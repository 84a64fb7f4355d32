// `whatif`: the peak at another batch size or sequence length (one snapshot scaled, or several runs fitted), and
// whether it fits a GPU.
#include <algorithm>
#include <cstdlib>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/whatif.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

bool parse_positive(const std::string& text, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || v > 1e9) return false;
  *out = v;
  return true;
}

// The changes, in the order given (each is a flag of its own: --optimizer sgd --checkpoint all ...).
Result<std::vector<WhatIfChange>> parse_changes(const AnswerOptions& o) {
  std::vector<WhatIfChange> out;
  double world = 0;
  if (o.has("world-size") && !parse_positive(o.get("world-size"), &world))
    return fail("whatif", "--world-size takes the number of GPUs");
  if (o.has("world-size") && !o.has("shard")) return fail("whatif", "--world-size goes with --shard");
  for (const auto& [name, value] : o.items) {
    if (name != "accumulate" && name != "precision" && name != "optimizer" && name != "checkpoint" &&
        name != "zero-grad" && name != "allocator" && name != "shard" && name != "offload")
      continue;
    auto c = parse_change(name, value, world);
    if (!c.ok()) return fail("whatif", c.error().message);
    out.push_back(c.value());
  }
  return out;
}

// Options read alone; those that depend on how many files there are are read in `run`.
Result<std::optional<GpuCapacity>> parse(const AnswerOptions& o) {
  for (const auto& [name, value] : o.items)
    // Given twice, one would silently win.
    if (o.all(name).size() > 1) return fail("whatif", "--" + name + " is given twice");
  if (auto c = parse_changes(o); !c.ok()) return c.error();
  if (o.has("to-batch") + o.has("to-seq") + o.has("to") > 1) return fail("whatif", "give one of --to-batch and --to-seq");
  double v = 0;
  if (o.has("batch") && !parse_positive(o.get("batch"), &v)) return fail("whatif", "--batch needs a scale above 0 and at most 1e9");
  if (o.has("seq") && !parse_positive(o.get("seq"), &v)) return fail("whatif", "--seq needs a scale above 0 and at most 1e9");
  std::optional<GpuCapacity> gpu;
  if (o.has("gpu")) {
    auto g = parse_gpu_capacity(o.get("gpu"));
    if (!g.ok()) return fail("whatif", g.error().describe());
    gpu = g.value();
  }
  return gpu;
}

Result<AnswerOutput> one_snapshot(LoadedSnapshot& f, const DeviceLifetimes& lt, const AnswerOptions& o,
                                  const std::optional<GpuCapacity>& gpu) {
  if (o.has("to-batch") || o.has("to-seq") || o.has("to"))
    return fail("whatif", "--to-batch and --to-seq need two snapshots or more (with --sizes); with one, --batch X and "
                          "--seq X scale it");
  if (o.has("sizes")) return fail("whatif", "--sizes needs two snapshots or more");
  WhatIfOptions w;
  parse_positive(o.get("batch", "1"), &w.batch);
  parse_positive(o.get("seq", "1"), &w.seq);
  w.changes = parse_changes(o).value();
  w.gpu = gpu;
  auto c = categorize(f.snapshot(), lt, detect_iterations(f.snapshot(), lt), f.frame_filter());
  if (!c.ok()) return fail("whatif", c.error().describe());
  const WhatIfReport r = what_if(f.snapshot(), lt, c.value(), w);
  if (!r.error.empty()) return fail("whatif", r.error);
  AnswerOutput out;
  out.out = o.has("json") ? to_json(r) + "\n" : to_text(r);
  return out;
}

Result<AnswerOutput> several(Files files, const std::vector<const DeviceLifetimes*>& devs, const AnswerOptions& o,
                             const std::optional<GpuCapacity>& gpu) {
  if (o.has("batch") || o.has("seq"))
    return fail("whatif", "two snapshots or more are predicted at a size (--to-batch N or --to-seq N), not scaled by "
                          "--batch or --seq");
  if (!parse_changes(o).value().empty())
    return fail("whatif", "changes (--accumulate, --optimizer, ...) are predicted from one snapshot");
  // --sizes: one size per file, in the files' order.
  const std::string sizes = o.get("sizes");
  std::vector<WhatIfRun> runs;
  for (size_t from = 0, k = 0; from <= sizes.size() && !sizes.empty(); ++k) {
    const size_t comma = std::min(sizes.find(',', from), sizes.size());
    double v = 0;
    if (k >= files.size() || !parse_positive(sizes.substr(from, comma - from), &v)) break;
    runs.push_back({&files[k]->snapshot(), devs[k], v});
    from = comma + 1;
  }
  if (runs.size() != files.size() ||
      std::count(sizes.begin(), sizes.end(), ',') + 1 != static_cast<long>(files.size()))
    return fail("whatif", std::to_string(files.size()) + " snapshots need --sizes with " +
                              std::to_string(files.size()) + " sizes (e.g. --sizes 256,512): the batch sizes (or "
                              "sequence lengths) they were recorded at, in the files' order");
  double target = 0;
  const std::string to = o.has("to-batch") ? o.get("to-batch") : o.has("to-seq") ? o.get("to-seq") : o.get("to");
  if (!parse_positive(to, &target))
    return fail("whatif", "two snapshots need --to-batch N (or --to-seq N): the size to predict");
  auto r = what_if_fit_runs(runs, target, gpu);
  if (!r.ok()) return fail("whatif", r.error().describe());
  AnswerOutput out;
  out.out = o.has("json") ? to_json(r.value()) + "\n" : to_text(r.value());
  return out;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto gpu = parse(o);
  if (!gpu.ok()) return gpu.error();
  std::vector<const DeviceLifetimes*> devs;
  for (LoadedSnapshot* f : files) {
    devs.push_back(device_to_predict(*f, o));
    if (!devs.back()) return no_device("whatif", *f, o.get("device"), o.has("json"));
  }
  auto out = files.size() == 1 ? one_snapshot(*files[0], *devs[0], o, gpu.value()) : several(files, devs, o, gpu.value());
  if (!out.ok()) return out;
  // Which device of a file of several was answered for, and how to ask about another.
  out->out.insert(0, predicted_device_line(*files[0], *devs[0], o));
  return out;
}

}  // namespace

const AnswerDef& whatif_answer() {
  static const AnswerDef d{
      {"whatif", {"json"}, {"batch", "seq", "gpu", "device", "sizes", "to", "to-batch", "to-seq", "accumulate",
                            "precision", "optimizer", "checkpoint", "zero-grad", "allocator", "shard", "world-size",
                            "offload"}, 1, 16,
       "usage: allocscope whatif FILE [--batch X] [--seq X] [CHANGE...] [--gpu NAME|SIZE] [--json]\n"
       "       allocscope whatif A B [C...] --sizes SA,SB[,SC...] --to-batch N|--to-seq N [--gpu NAME|SIZE] [--json]"},
      [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
