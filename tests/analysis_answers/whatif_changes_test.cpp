// What-if's changes and plan against runs measured on an H200 (tests/fixtures/plan_runs: eleven jobs, each recorded
// once and then measured with each change; PyTorch's max_memory_allocated / max_memory_reserved and the least memory
// each trained in are the oracle). The rules are fitted on the tuning jobs only (gpt_sdpa, cnn, mlp, and since
// 2026-12-04 opt_hf and mobilenet); gpt_attn, vit and llama_hf were the first hold-out, bert_hf, gpt2_hf and
// convnext are the hold-out. The bounds below are what was measured when the rules were frozen (docs/analyses.md),
// so a change that makes any prediction worse fails here. And plan's first options against what really trained on the GPU under a cap
// (plan_runs/oom_cut).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/loader.h"
#include "allocscope/plan.h"
#include "allocscope/whatif.h"

namespace allocscope {
namespace {

using nlohmann::json;

std::string dir() { return std::string(ALLOCSCOPE_FIXTURES) + "/plan_runs/"; }

std::vector<json> lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}
const std::vector<json>& runs() {
  static const std::vector<json> r = lines(dir() + "plan_runs.jsonl");
  return r;
}
// A file of runs keyed by job and change ("llama_hf {\"optimizer\":\"sgd\"}"), the ones `keep` takes.
std::map<std::string, json> by_run(const std::string& file, bool (*keep)(const json&)) {
  std::map<std::string, json> out;
  for (const json& r : lines(dir() + file))
    if (keep(r)) out[r["job"].get<std::string>() + " " + r["change"].dump()] = r;
  return out;
}
// The same runs measured each in a fresh process (generators/measure_fresh.py). plan_runs measured a job's changes in
// the process that recorded it, after it: cuBLAS's workspaces, kept for the process's life, then sat where the
// recording's run had put them, and moved max_memory_reserved by up to 16% (Llama with SGD: 3.58 GB after the
// recording, 4.11 GB fresh; the prediction, 4.11). A user reruns a changed script: fresh.
const std::map<std::string, json>& fresh() {
  static const std::map<std::string, json> f = by_run("fresh_runs.jsonl", [](const json&) { return true; });
  return f;
}
// The least memory each trained in, bisected again with every probe in a fresh process (measure_fresh.py --least),
// where that bisection bracketed it (all 44: 35 within 10% of the in-process one, 9 within 50%).
const std::map<std::string, json>& fresh_least() {
  static const std::map<std::string, json> f =
      by_run("fresh_least.jsonl", [](const json& r) { return !r["at_window_edge"].get<bool>(); });
  return f;
}

// The jobs rules were fitted on; the first hold-out (reported 2026-12-02, tuned on since: its numbers before are in
// docs/analyses.md); the hold-out frozen 2026-12-03 before its runs were recorded, never tuned on.
std::string split_of(const std::string& job) {
  if (job == "gpt_attn" || job == "vit" || job == "llama_hf") return "first holdout";
  if (job == "bert_hf" || job == "gpt2_hf" || job == "convnext") return "holdout";
  return "tuning";
}
// The group a job's worst ratios are bounded in: its split, but MobileNetV2 (a tuning job since 2026-12-04) on its
// own, since the model misses it by more than every other job (docs/analyses.md: cuDNN's bf16 workspaces, and
// reserved checkpointed at twice the batch), and the other tuning jobs' bounds keep guarding what they measured.
std::string bound_group(const std::string& job) { return job == "mobilenet" ? "mobilenet" : split_of(job); }

struct Loaded {
  Snapshot s;
  DeviceLifetimes lt;
  Categories c;
};
const Loaded& load(const std::string& file) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& p = cache[file];
  if (!p) {
    auto r = load_snapshot_file(file);
    EXPECT_TRUE(r.ok()) << file;
    p = std::make_unique<Loaded>();
    if (!r.ok()) return *p;
    p->s = std::move(r).value();
    p->lt = build_device_lifetimes(p->s, 0);
    p->c = categorize(p->s, p->lt, detect_iterations(p->s, p->lt), FrameFilter(p->s)).value();
  }
  return *p;
}

// A run's change as whatif options ({"batch": 2, "checkpoint": "all"} -> batch 2 and --checkpoint all).
WhatIfOptions options_of(const json& change) {
  WhatIfOptions o;
  for (const auto& [key, value] : change.items()) {
    if (key == "batch") o.batch = value.get<double>();
    else if (key == "seq") o.seq = value.get<double>();
    else {
      std::string flag = key;
      for (char& ch : flag) ch = ch == '_' ? '-' : ch;
      const std::string v = value.is_string() ? value.get<std::string>() : std::to_string(value.get<int>());
      auto c = parse_change(flag, v);
      EXPECT_TRUE(c.ok()) << flag << " " << v;
      if (c.ok()) o.changes.push_back(c.value());
    }
  }
  return o;
}

TEST(WhatIfChanges, EachChangeWithinItsMeasuredBounds) {
  // The worst ratios (predicted / measured). The sequence scale of written-out attention is in: its softmax's size
  // grows with the length's square (it read 0.82 and 0.87 at twice the length when all grew linearly).
  struct Worst {
    double allocated = 0, reserved = 0;
  };
  std::map<std::string, Worst> worst;
  int judged = 0, fresh_judged = 0;
  // ALLOCSCOPE_RATIOS=FILE writes each ratio, a JSON line a run (docs/analyses.md's table is made from it).
  std::unique_ptr<std::ofstream> ratios;
  if (const char* path = std::getenv("ALLOCSCOPE_RATIOS")) ratios = std::make_unique<std::ofstream>(path);
  for (const json& r : runs()) {
    if (r.contains("recorded") || r["max_allocated"].is_null()) continue;
    const std::string job = r["job"];
    const Loaded& l = load(dir() + job + ".pickle.gz");
    WhatIfOptions o = options_of(r["change"]);
    o.gpu = parse_gpu_capacity("h200").value();  // the GPU they ran on, named as a user would
    o.largest_batch = false;
    const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
    ASSERT_TRUE(w.error.empty()) << job << " " << r["change"] << ": " << w.error;
    auto f = fresh().find(job + " " + r["change"].dump());
    const json& m = f != fresh().end() ? f->second : r;  // allocator settings were measured fresh in plan_runs
    if (f != fresh().end()) ++fresh_judged;
    const double a = static_cast<double>(w.predicted_allocated) / m["max_allocated"].get<double>();
    const double res = static_cast<double>(w.predicted_reserved) / m["max_reserved"].get<double>();
    if (ratios)
      *ratios << json{{"job", job}, {"change", r["change"]}, {"allocated", a}, {"reserved", res}}.dump() << "\n";
    Worst& k = worst[bound_group(job) + (r["change"].size() > 1 ? " combined" : "")];
    k.allocated = std::max(k.allocated, std::fabs(a - 1));
    k.reserved = std::max(k.reserved, std::fabs(res - 1));
    ++judged;
  }
  EXPECT_GE(judged, 200);
  EXPECT_EQ(fresh_judged, 221);  // every run plan_runs measured after its recording
  for (const auto& [k, w] : worst) std::printf("  worst %-24s allocated %.3f reserved %.3f\n", k.c_str(), w.allocated, w.reserved);
  // The worst |predicted / measured - 1| of each split, as measured when frozen (2026-12-03). Allocated, one change:
  // tuning 5.1% (cnn with 4 micro-batches; the MLP at 4x the batch read 6.6% until its reduction's staging buffers
  // stopped growing at the H200's blocks, reduce_staging.cpp), first hold-out 7.3% (Llama under autocast: its
  // residual stream stays fp32), hold-out 2.9%; combined 9.2%, 9.6% and 7.3% (ConvNeXt checkpointed under
  // autocast). Reserved, against runs measured each in a fresh process: one change, the hold-outs within 6.8% and
  // 9.9% (the goal was 10%; against runs measured after their recording they read 18.7% and 13.4%); the tuning jobs
  // 11.4% (cnn with 4 micro-batches; 19.6% on bf16 weights until cuDNN's workspaces halved with them), 20.4% combined
  // (cnn at twice the batch under autocast with SGD: where its driver maps segments breaks best-fit ties, and the
  // replay knows it only while it makes the recording's segments, docs/analyses.md). Combined, the hold-outs' worst
  // is GPT-2 at twice the batch checkpointed (19.8% high;
  // 20.1% since the checkpointed forward frees as Python does, which took BERT's same run from 18.8% high to 3.0% low:
  // GPT-2's own run differs from its recording before the first block, in what transformers makes for its masks).
  // MobileNetV2 (tuning, 2026-12-04; bounded on its own): bf16 weights 9.7% low (cuDNN picks other algorithms in
  // bf16 there: one weight gradient's workspace is 100 MiB), combined 8.3% (2 micro-batches under autocast);
  // reserved within 8.2% and 16.0% combined (checkpointed at twice the batch, low). Checkpointed it read 17.4% high
  // while its one-line blocks, back to back, were taken as 6 calls a step, 13.7% with 12 (some cut inside a block);
  // found as its calls start, all 17: 2.8% low.
  // Gradient accumulation played micro-batch by micro-batch (2026-12-06, change_accumulate.cpp; one shrunk pass
  // before) took reserved on every job's 2 and 4 micro-batches to within 8%: the CNN's 4 from 11.4% low to 6.2%, OPT's
  // 2 from 7.0% low to exact, the hold-out's GPT-2 and BERT to exact, ConvNeXt's 4 from 1.8% low to 7.6% high. Every
  // single change of every job is now within 10% of both counters; the worst one-change reserved is the tuning jobs'
  // 8.4% (gpt_sdpa under autocast), the hold-out's 7.6%.
  struct Bound {
    const char* split;
    double allocated, reserved;
  };
  for (const Bound& b : {Bound{"tuning", 0.055, 0.09}, Bound{"first holdout", 0.08, 0.07}, Bound{"holdout", 0.03, 0.08},
                         Bound{"tuning combined", 0.06, 0.21}, Bound{"first holdout combined", 0.10, 0.115},
                         Bound{"holdout combined", 0.08, 0.21}, Bound{"mobilenet", 0.10, 0.085},
                         Bound{"mobilenet combined", 0.085, 0.14}}) {
    EXPECT_LE(worst[b.split].allocated, b.allocated) << b.split;
    EXPECT_LE(worst[b.split].reserved, b.reserved) << b.split;
  }
}

TEST(WhatIfChanges, VerdictsAtFifteenPercentAreNeverWrongAndRarelyUnsure) {
  // For each run whose least memory was measured, a GPU whose allocator has 15% more (it trains) and 15% less (it
  // does not): the verdict must never say the opposite, and says UNSURE at most as often as when it was frozen.
  std::map<std::string, int> unsure, wrong, total;
  int fresh = 0;
  for (const json& r : runs()) {
    if (r.contains("recorded") || !r.contains("least_memory") || r["least_memory"].is_null()) continue;
    const std::string job = r["job"];
    const Loaded& l = load(dir() + job + ".pickle.gz");
    const std::string split = split_of(job);
    auto fl = fresh_least().find(job + " " + r["change"].dump());
    const double least = (fl != fresh_least().end() ? fl->second : r)["least_memory"].get<double>();
    fresh += fl != fresh_least().end();
    for (const double f : {1.15, 0.85}) {
      WhatIfOptions o = options_of(r["change"]);
      GpuCapacity gpu;
      gpu.total_bytes = static_cast<uint64_t>(least * f) + kTypicalContextBytes;
      gpu.label = "test";
      gpu.inferred = false;
      gpu.resident_threads = parse_gpu_capacity("h200").value().resident_threads;  // an H200's blocks, but less memory
      o.gpu = gpu;
      o.largest_batch = false;
      const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
      const Verdict want = f > 1 ? Verdict::kFits : Verdict::kDoesNotFit;
      ++total[split];
      if (w.verdict == Verdict::kUnsure) {
        ++unsure[split];
        std::printf("  UNSURE %s %s at %.2f\n", job.c_str(), r["change"].dump().c_str(), f);
      } else if (w.verdict != want) {
        ++wrong[split];
        ADD_FAILURE() << job << " " << r["change"] << " at " << f << ": " << verdict_name(w.verdict);
      }
    }
  }
  for (const auto& [k, t] : total) std::printf("  %-14s %d verdicts, %d UNSURE, %d wrong\n", k.c_str(), t, unsure[k], wrong[k]);
  EXPECT_EQ(fresh, 44);
  EXPECT_EQ(total["tuning"], 40);
  EXPECT_EQ(total["first holdout"], 24);
  EXPECT_EQ(total["holdout"], 24);
  EXPECT_EQ(wrong["tuning"] + wrong["first holdout"] + wrong["holdout"], 0);
  // Against the least memory bisected in fresh processes (2026-12-03); against the in-process one, 2, 4 and 2.
  // gpt_sdpa under autocast needs 10% more fresh than in-process (2.67 GB): at 0.85 of it, UNSURE since then. The
  // checkpointed no-grad forward (2026-12-03) took gpt_sdpa checkpointed at 0.85 out of UNSURE.
  // Tuning: 2 of 32 (6%) before MobileNetV2 joined; it adds its checkpointed run (at 1.15 when the model read 1.137
  // allocated, at 0.85 since it reads 0.972).
  EXPECT_LE(unsure["tuning"], 3);         // 8%; 3 of 24 until the checkpointed forward freed as Python does
  EXPECT_LE(unsure["first holdout"], 2);  // 21% when it was judged (2026-12-02); the goal was 20%
  EXPECT_LE(unsure["holdout"], 3);        // 13%; the goal: at most 20%
}

// The configurations that really trained under each case's cap on the GPU (plan_choices.jsonl: both the plan made
// from the whole recording and the one made from the snapshot of its OOM), as flag lists.
std::map<std::pair<std::string, double>, std::vector<std::vector<std::string>>> trained() {
  std::map<std::pair<std::string, double>, std::vector<std::vector<std::string>>> out;
  for (const json& r : lines(dir() + "oom_cut/plan_choices.jsonl"))
    for (const char* which : {"from_recording", "from_oom"})
      if (r.contains(which) && r[which].value("trained", false) && r[which]["changes"].is_array())
        out[{r["job"], r["fraction"]}].push_back(r[which]["changes"].get<std::vector<std::string>>());
  return out;
}

PlanOptions for_cap(const json& c) {
  PlanOptions o;
  GpuCapacity gpu;
  gpu.total_bytes = c["cap"].get<uint64_t>() + kTypicalContextBytes;
  gpu.label = "capped";
  gpu.inferred = false;
  o.gpu = gpu;
  return o;
}

std::vector<std::string> flags(const PlanOption& o) {
  std::vector<std::string> f;
  for (const WhatIfChange& c : o.changes) f.push_back(c.flag());
  return f;
}

TEST(WhatIfChanges, ARecordingReplaysWhereItsDriverPutItsSegments) {
  // Best fit breaks ties between equal free blocks by address, and the driver maps segments where the process's
  // history leaves room: the CNN's at rising addresses, where the replay assumed falling ones (994,050,048 reserved
  // against PyTorch's 1,029,701,632). Following the recording's own placement while the replay makes the same
  // segments, each recording made first in its process predicts its own max_memory_allocated and
  // max_memory_reserved byte for byte: each job's (PyTorch's default stacks), and the runs of changes recorded to
  // judge their models (plan_runs/checkpointed: GPT-2, BERT and OPT with --stacks none, since PyTorch 2.11 fails in
  // their recompute when it captures stacks; plan_runs/changes: the CNN's, checkpointed too, MobileNet's and OPT's).
  // Where a prediction misses, the allocator is not the gap.
  // (The Python-stack recordings were made later in the same process, so their counters hold what earlier runs left.)
  std::vector<std::string> files;
  std::vector<json> recorded;
  for (const json& r : runs())
    if (r.contains("recorded") && r["change"].empty() && !r.contains("stacks")) files.push_back(r["recorded"]), recorded.push_back(r);
  for (const char* sub : {"checkpointed/", "changes/"})
    for (const json& r : lines(dir() + sub + "recorded.jsonl")) files.push_back(sub + r["recorded"].get<std::string>()), recorded.push_back(r);
  int n = 0;
  for (size_t k = 0; k < files.size(); ++k) {
    const json& r = recorded[k];
    const Loaded& l = load(dir() + files[k]);
    WhatIfOptions o;
    o.largest_batch = false;
    const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
    ASSERT_TRUE(w.error.empty()) << w.error;
    EXPECT_EQ(w.predicted_reserved, r["max_reserved"].get<uint64_t>()) << r["recorded"];
    EXPECT_EQ(w.predicted_allocated, r["max_allocated"].get<uint64_t>()) << r["recorded"];
    ++n;
  }
  EXPECT_EQ(n, 11 + 10 + 10);
}

TEST(WhatIfChanges, IntegerOutputsKeepTheirSizeUnderBf16) {
  // Max pooling's int64 indices and dropout's bool mask do not halve in bf16 (change_precision.cpp, integer_output).
  // Oracle: the CNN's own runs under autocast and with bf16 weights (plan_runs/changes), predicted from its fp32
  // recording: allocated 1.004 and 1.013 (both 0.971 when the indices were halved); and, never tuned on, GPT-2 with
  // bf16 weights against its fresh run (0.999; 0.985 when its dropout masks were halved).
  struct Case {
    std::string job, recorded;
    json change;
    double max_allocated;
  };
  std::vector<Case> cases;
  for (const json& r : lines(dir() + "changes/recorded.jsonl"))
    if (r["job"] == "cnn" && r["change"].size() == 1 && r["change"].contains("precision"))
      cases.push_back({r["job"], r["recorded"], r["change"], r["max_allocated"].get<double>()});
  const json gpt2 = {{"precision", "bf16-weights"}};
  auto f = fresh().find("gpt2_hf " + gpt2.dump());
  ASSERT_NE(f, fresh().end());
  cases.push_back({"gpt2_hf", "fresh run", gpt2, f->second["max_allocated"].get<double>()});
  ASSERT_EQ(cases.size(), 3u);
  for (const Case& c : cases) {
    const Loaded& l = load(dir() + c.job + ".pickle.gz");
    WhatIfOptions o = options_of(c.change);
    o.gpu = parse_gpu_capacity("h200").value();
    o.largest_batch = false;
    const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
    ASSERT_TRUE(w.error.empty()) << w.error;
    EXPECT_NEAR(static_cast<double>(w.predicted_allocated) / c.max_allocated, 1.0, 0.015) << c.job << " " << c.recorded;
  }
}

TEST(WhatIfChanges, AccumulatedMicroBatchesReserveAsTheRunsDid) {
  // Gradient accumulation is played micro-batch by micro-batch (change_accumulate.cpp): the first micro-batch's
  // backward puts the gradients where its activations were, and the next forward finds them there. The tuning jobs
  // without convolutions (cuDNN picks other algorithms, and workspaces, at the smaller batch of a micro-batch: the
  // CNN's and MobileNet's recordings of 2 micro-batches show them) predict the reserved peak each run measured in a
  // fresh process at 2 and 4 micro-batches. One shrunk pass with the gradients made as its forward starts, the model
  // before, read OPT's at 2 0.930, Llama's at 4 0.952 and the MLP's at 4 0.958.
  int n = 0;
  for (const char* job : {"gpt_sdpa", "gpt_attn", "llama_hf", "mlp", "opt_hf", "vit"})
    for (int k : {2, 4}) {
      const json change = {{"accumulate", k}};
      const auto f = fresh().find(std::string(job) + " " + change.dump());
      ASSERT_NE(f, fresh().end()) << job << " " << k;
      const Loaded& l = load(dir() + job + ".pickle.gz");
      WhatIfOptions o = options_of(change);
      o.gpu = parse_gpu_capacity("h200").value();  // the MLP's reductions' staging buffers stop at its blocks
      o.largest_batch = false;
      const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
      ASSERT_TRUE(w.error.empty()) << w.error;
      EXPECT_NEAR(static_cast<double>(w.predicted_reserved) / f->second["max_reserved"].get<double>(), 1.0, 0.005)
          << job << " " << k;
      EXPECT_NEAR(static_cast<double>(w.predicted_allocated) / f->second["max_allocated"].get<double>(), 1.0, 0.005)
          << job << " " << k;
      ++n;
    }
  EXPECT_EQ(n, 12);
}

TEST(WhatIfChanges, ManyMicroBatchesReplayAFewAndSaySo) {
  // K can be 4096: two micro-batches show what the rest would (each later one frees and allocates as the second),
  // so 8 and 4096 cost what 2 do, say so, and shrink what grows with the batch to 1/K.
  const Loaded& l = load(dir() + "gpt_sdpa.pickle.gz");
  auto at = [&](int k) {
    WhatIfOptions o = options_of(json{{"accumulate", k}});
    o.largest_batch = false;
    return what_if(l.s, l.lt, l.c, o);
  };
  const WhatIfReport two = at(2), eight = at(8), many = at(4096);
  ASSERT_TRUE(two.error.empty() && eight.error.empty() && many.error.empty()) << eight.error << many.error;
  ASSERT_FALSE(two.effects.empty() || eight.effects.empty());
  EXPECT_NE(eight.effects[0].what.find("8 times on 1/8 of the batch"), std::string::npos) << eight.effects[0].what;
  EXPECT_NE(eight.effects[0].what.find("the first 2 replayed"), std::string::npos) << eight.effects[0].what;
  EXPECT_EQ(two.effects[0].what.find("replayed"), std::string::npos) << two.effects[0].what;
  EXPECT_LT(eight.predicted_allocated, two.predicted_allocated);
  EXPECT_LT(many.predicted_allocated, eight.predicted_allocated);
  // What does not shrink with the micro-batch stays: the weights, their gradients and AdamW's two moments.
  EXPECT_GT(many.predicted_allocated, 4 * eight.terms[0].parameters);
}

TEST(WhatIfChanges, CheckpointedForwardFreesAsTheRunItselfDid) {
  // The tuning jobs' checkpointed runs, recorded with stacks (plan_runs/checkpointed, stacks "all"), are the oracle
  // the no-grad forward was written from (change_checkpoint.cpp): a block's values live until it returns, its operands
  // until the call that reads them returns. gpt_sdpa's, predicted from its baseline recording, makes the segments
  // PyTorch made: reserved byte for byte at 1x and 2x (it read 1.061 and 1.086 when saved tensors died three
  // allocations on, since the qkv output bound to q, k and v outlives the attention).
  int n = 0;
  for (const json& r : lines(dir() + "checkpointed/recorded.jsonl")) {
    if (r["job"] != "gpt_sdpa") continue;
    const Loaded& l = load(dir() + r["job"].get<std::string>() + ".pickle.gz");
    WhatIfOptions o = options_of(r["change"]);
    o.gpu = parse_gpu_capacity("h200").value();
    o.largest_batch = false;
    const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
    ASSERT_TRUE(w.error.empty()) << w.error;
    EXPECT_EQ(w.predicted_reserved, r["max_reserved"].get<uint64_t>()) << r["recorded"];
    // Allocated 1 MiB low (0.06%): the recording's first step makes a 1 MiB buffer more.
    EXPECT_NEAR(static_cast<double>(w.predicted_allocated) / r["max_allocated"].get<double>(), 1.0, 0.002)
        << r["recorded"];
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST(WhatIfChanges, MobileNetsCheckpointedBlocksFreeAsItsRecordingsDo) {
  // MobileNetV2's blocks are a Sequential of Sequentials (torchvision's Conv2dNormActivation) and end with a batch
  // norm. Two rules of the checkpointed forward were wrong there, found against its checkpointed recordings
  // (plan_runs/checkpointed, allocations in order): the inner Sequentials' calls have the same frames, so two
  // children read as one call and the expansion's output was freed as soon as the depthwise convolution had made its
  // own (PyTorch frees it when that child returns); and the block's output was taken to be the norm's 128-byte saved
  // statistics, made after it, so the output itself was freed when the block returned. Predicted from the baseline
  // recording: reserved 0.918 at 1x and 0.840 at 2x before, the recorded runs' bytes now.
  const Loaded& l = load(dir() + "mobilenet.pickle.gz");
  int n = 0;
  for (const json& r : lines(dir() + "checkpointed/recorded.jsonl")) {
    if (r["job"] != "mobilenet" || r["change"].contains("precision")) continue;
    WhatIfOptions o = options_of(r["change"]);
    o.largest_batch = false;
    const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
    ASSERT_TRUE(w.error.empty()) << w.error;
    EXPECT_NEAR(static_cast<double>(w.predicted_reserved) / r["max_reserved"].get<double>(), 1.0, 0.005)
        << r["recorded"];
    EXPECT_NEAR(static_cast<double>(w.predicted_allocated) / r["max_allocated"].get<double>(), 1.0, 0.005)
        << r["recorded"];
    ++n;
  }
  EXPECT_EQ(n, 2);
}

// `--accumulate K` from a snapshot an OOM cut in its first step, at the cap it ran out under, judged by the same job
// run with K micro-batches in a fresh process (fresh_runs.jsonl): "does not fit" is wrong where its reserved peak
// stayed under the cap (it never met it), "fits" where its allocated peak is over the cap. Every trace answers: the
// MLP's at 45% (no iterations, its step completed by the model) said "no iterations found" until 2026-12-06. The
// rest of a cut step is unknown, so most verdicts are UNSURE, and the plan's options from such snapshots say so.
TEST(WhatIfChanges, AccumulationFromAnOomSnapshotIsNeverWrong) {
  const json cases = json::parse(std::ifstream(dir() + "oom_cut/cases.json"));
  int judged = 0, unsure = 0, wrong = 0;
  for (const json& c : cases) {
    const std::string job = c["job"].get<std::string>();
    char name[64];
    std::snprintf(name, sizeof name, "%s_%02d_oom.pickle.gz", job.c_str(),
                  static_cast<int>(std::lround(c["fraction"].get<double>() * 100)));
    const Loaded& l = load(dir() + "oom_cut/" + name);
    const uint64_t cap = c["cap"].get<uint64_t>();
    for (const int k : {2, 4}) {
      const auto f = fresh().find(job + " " + json{{"accumulate", k}}.dump());
      ASSERT_NE(f, fresh().end()) << job << " " << k;
      WhatIfOptions o;
      o.gpu = for_cap(c).gpu;
      o.largest_batch = false;
      o.changes.push_back(parse_change("accumulate", std::to_string(k)).value());
      const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
      ASSERT_TRUE(w.error.empty()) << name << " --accumulate " << k << ": " << w.error;
      ++judged;
      unsure += w.verdict == Verdict::kUnsure;
      const bool bad = (w.verdict == Verdict::kDoesNotFit && f->second["max_reserved"].get<uint64_t>() <= cap) ||
                       (w.verdict == Verdict::kFits && f->second["max_allocated"].get<uint64_t>() > cap);
      wrong += bad;
      EXPECT_FALSE(bad) << name << " --accumulate " << k << ": " << verdict_name(w.verdict);
    }
  }
  EXPECT_EQ(judged, 88);
  EXPECT_EQ(wrong, 0);  // 1 (the CNN at 60%, 4 micro-batches) while a failed run's leftovers were taken for weights
  EXPECT_LE(unsure, 66);  // 65 of 88 on 2026-12-06
}

TEST(Plan, FirstChoiceTrainedOnTheGpuFromTheOomSnapshot) {
  // Each case ran out of memory under its cap (recorded_ooms); the plan from that OOM's own snapshot must still pick
  // an option that trained there. A plan that picks another option needs a GPU run to be judged (check_plan_choices).
  // 14 moved on 2026-12-06 (the step an OOM cut short completed for the weights the trace built, and accumulation
  // played on it): each ran under its cap on an H200 that day and trained (plan_choices.jsonl, "measured").
  const auto ok = trained();
  const json cases = json::parse(std::ifstream(dir() + "oom_cut/cases.json"));
  int judged = 0, good = 0;
  for (const json& c : cases) {
    char name[64];
    std::snprintf(name, sizeof name, "%s_%02d_oom.pickle.gz", c["job"].get<std::string>().c_str(),
                  static_cast<int>(std::lround(c["fraction"].get<double>() * 100)));
    const Loaded& l = load(dir() + "oom_cut/" + name);
    const Plan p = plan(l.s, l.lt, l.c, for_cap(c));
    ASSERT_FALSE(p.options.empty()) << name;
    ++judged;
    const auto& known = ok.count({c["job"], c["fraction"]}) ? ok.at({c["job"], c["fraction"]})
                                                               : std::vector<std::vector<std::string>>{};
    const bool trained_there = std::find(known.begin(), known.end(), flags(p.options[0])) != known.end();
    good += trained_there;
    EXPECT_TRUE(trained_there) << name << ": " << testing::PrintToString(flags(p.options[0]));
  }
  EXPECT_EQ(judged, 44);  // six jobs, the second hold-out's three, OPT and MobileNet (2026-12-04), at 4 caps each
  EXPECT_EQ(good, 44);
}

TEST(Plan, FirstChoiceFromAWholeRecordingTrained) {
  // From the job's full recording, for the same caps: 23 of 24 first options trained when judged on 2026-12-02
  // (gpt_attn at 90% took bf16 autocast, then 11% under-predicted); the second hold-out's 12 of 12 on 2026-12-03;
  // OPT's and MobileNet's 8 of 8 on 2026-12-04. Since accumulation is played micro-batch by micro-batch
  // (2026-12-06) three first options moved (the CNN at 75% to 4 micro-batches, BERT at 60% to 2, gpt_attn at 90% to
  // checkpointing): each was run under its cap on an H100 the same day (check_plan_choices.py --first
  // first_choices_2026-12-06.json, appended to plan_choices.jsonl) and trained: 44 of 44, every one run on a GPU.
  const auto ok = trained();
  const json cases = json::parse(std::ifstream(dir() + "oom_cut/cases.json"));
  int good = 0;
  for (const json& c : cases) {
    const Loaded& l = load(dir() + c["job"].get<std::string>() + ".pickle.gz");
    const Plan p = plan(l.s, l.lt, l.c, for_cap(c));
    ASSERT_FALSE(p.options.empty());
    const auto& known = ok.count({c["job"], c["fraction"]}) ? ok.at({c["job"], c["fraction"]})
                                                               : std::vector<std::vector<std::string>>{};
    const bool trained_there = std::find(known.begin(), known.end(), flags(p.options[0])) != known.end();
    good += trained_there;
    if (!trained_there)
      std::printf("  not known to train: %s at %.2f: %s\n", c["job"].get<std::string>().c_str(),
                  c["fraction"].get<double>(), testing::PrintToString(flags(p.options[0])).c_str());
  }
  EXPECT_EQ(good, 44);
}

TEST(WhatIfChanges, ShardingDividesWhatEachStageShards) {
  // ZeRO's arithmetic (what each rank keeps of the model's state): stage 1 the optimizer state, stage 2 the
  // gradients too, stage 3 the weights too, each 1/N. The predicted terms at the peak say so.
  const Loaded& l = load(dir() + "mlp.pickle.gz");
  WhatIfOptions base;
  base.changes.push_back(parse_change("zero-grad", "none").value());  // through the model, changing nothing
  const WhatIfReport whole = what_if(l.s, l.lt, l.c, base);
  ASSERT_TRUE(whole.error.empty());
  ASSERT_GT(whole.predicted_terms.optimizer_state, 0u);
  for (const char* stage : {"zero1", "zero2", "zero3"}) {
    WhatIfOptions o;
    o.changes.push_back(parse_change("shard", stage, 4).value());
    const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
    ASSERT_TRUE(w.error.empty()) << w.error;
    EXPECT_NEAR(static_cast<double>(w.predicted_terms.optimizer_state),
                static_cast<double>(whole.predicted_terms.optimizer_state) / 4, 4096.0 * 64)
        << stage;
    EXPECT_LT(w.predicted_allocated, whole.predicted_allocated) << stage;
  }
  EXPECT_FALSE(parse_change("shard", "zero2").ok());  // needs --world-size
  EXPECT_FALSE(parse_change("shard", "zero4", 8).ok());
}

TEST(WhatIfChanges, AllocatorSettingsAsPyTorchSpellsThem) {
  auto s = parse_allocator_settings("expandable_segments:True,max_split_size_mb:128, garbage_collection_threshold:0.6");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->expandable_segments);
  EXPECT_EQ(s->max_split_size, 128ull << 20);
  EXPECT_DOUBLE_EQ(s->garbage_collection_threshold, 0.6);
  EXPECT_EQ(s->text(), "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6");
  EXPECT_FALSE(parse_allocator_settings("roundup_power2_divisions:4").ok());
  EXPECT_FALSE(parse_allocator_settings("expandable_segments:yes").ok());
  EXPECT_FALSE(parse_allocator_settings("max_split_size_mb:10").ok());
  EXPECT_FALSE(parse_allocator_settings("max_split_size_mb").ok());
}

TEST(WhatIfChanges, ARecordingThatCannotTakeAChangeSaysWhy) {
  const Loaded& l = load(std::string(ALLOCSCOPE_FIXTURES) + "/whatif/gpt_amp_adamw_b8_s256.pickle.gz");
  WhatIfOptions o;
  o.changes.push_back(parse_change("precision", "bf16-autocast").value());
  const WhatIfReport w = what_if(l.s, l.lt, l.c, o);
  EXPECT_NE(w.error.find("recorded under autocast already"), std::string::npos) << w.error;
  o.changes = {parse_change("checkpoint", "no_such_module_anywhere").value()};
  EXPECT_NE(what_if(l.s, l.lt, l.c, o).error.find("no module matches"), std::string::npos);
}

}  // namespace
}  // namespace allocscope

namespace allocscope {
namespace {

TEST(WhatIfFitPairing, AMovedTopLevelLinePairsTheSameAllocations) {
  // Two runs of one loop, the second with its script's top level edited above the call (every `<module>` frame's
  // line moved): the pairing must not see two different programs.
  const std::string d = std::string(ALLOCSCOPE_FIXTURES) + "/whatif/";
  const Loaded& a = load(d + "gpt_adamw_b8_s256.pickle.gz");
  auto b = load_snapshot_file(d + "gpt_adamw_b16_s256.pickle.gz");
  ASSERT_TRUE(b.ok());
  const DeviceLifetimes lb = build_device_lifetimes(b.value(), 0);
  auto paired = [&](const Snapshot& s) {
    const std::vector<int64_t> p = pair_allocations(a.s, a.lt, s, lb);
    return std::count_if(p.begin(), p.end(), [](int64_t x) { return x >= 0; });
  };
  const auto before = paired(b.value());
  Snapshot moved = std::move(b).value();
  uint32_t shifted = 0;
  for (Frame& f : moved.frames)
    if (moved.str(f.name) == "<module>") f.line += 3, ++shifted;
  ASSERT_GT(shifted, 0u);
  EXPECT_EQ(paired(moved), before);
  EXPECT_GT(before, static_cast<long>(lb.count() * 9 / 10));
}

}  // namespace
}  // namespace allocscope
