// What-if predictions against real runs: tests/fixtures/whatif holds the same loops (MLP, CNN, a GPT with attention
// written out; SGD and AdamW; bf16 autocast; activation checkpointing) recorded on an H100 at several batch sizes and
// sequence lengths, with the peaks PyTorch measured (torch.cuda.max_memory_allocated / max_memory_reserved) in
// whatif_runs.json. Those counters are the oracle; each prediction is made from other runs than the one it is
// judged against.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/loader.h"
#include "allocscope/whatif.h"

namespace allocscope {
namespace {

std::string dir() { return std::string(ALLOCSCOPE_FIXTURES) + "/whatif/"; }

nlohmann::json read_array(const std::string& file) {
  std::ifstream f(dir() + file);
  return f ? nlohmann::json::parse(f) : nlohmann::json::array();
}

const nlohmann::json* entry_named(const nlohmann::json& list, const std::string& name) {
  for (const auto& r : list)
    if (r["name"] == name) return &r;
  return nullptr;
}

const nlohmann::json& runs() {
  static const nlohmann::json j = read_array("whatif_runs.json");
  return j;
}
const nlohmann::json* run_named(const std::string& name) { return entry_named(runs(), name); }

struct LoadedRun {
  Snapshot s;
  DeviceLifetimes lt;
  Categories c;
};

const LoadedRun* load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<LoadedRun>> cache;
  auto& p = cache[name];
  if (p) return p.get();
  auto r = load_snapshot_file(dir() + name + ".pickle.gz");
  if (!r.ok()) return nullptr;
  p = std::make_unique<LoadedRun>();
  p->s = std::move(r).value();
  p->lt = build_device_lifetimes(p->s, 0);
  auto c = categorize(p->s, p->lt, detect_iterations(p->s, p->lt), FrameFilter(p->s));
  if (!c.ok()) return nullptr;
  p->c = std::move(c).value();
  return p.get();
}

double err(uint64_t predicted, uint64_t measured) {
  return std::fabs(static_cast<double>(predicted) - static_cast<double>(measured)) / static_cast<double>(measured);
}

// The allocator model, replaying each run at its own sizes, gives the peaks PyTorch's counters measured.
TEST(WhatIf, AllocatorReplayEqualsPyTorchsCounters) {
  ASSERT_GE(runs().size(), 20u);
  for (const auto& m : runs()) {
    const std::string name = m["name"];
    const LoadedRun* r = load(name);
    ASSERT_TRUE(r) << name;
    const AllocatorReplay a = replay_caching_allocator(r->lt, r->lt.size);
    const uint64_t alloc = m["max_allocated"], reserved = m["max_reserved"];
    std::printf("%-26s allocated %.4f reserved %.4f\n", name.c_str(), static_cast<double>(a.peak_allocated) / alloc,
                static_cast<double>(a.peak_reserved) / reserved);
    EXPECT_LT(err(a.peak_allocated, alloc), 0.01) << name;
    EXPECT_LT(err(a.peak_reserved, reserved), 0.02) << name;
  }
}

// A row of size 0 is not in the run: the replay (its order built once, as bisections reuse it) must equal the replay
// of the same lifetimes with those rows removed, exactly, capped or not. Replaying them as 512-byte blocks instead
// moved no verdict of the tests above, so this pins it.
TEST(WhatIf, ARowOfSizeZeroIsNotInTheRun) {
  for (const char* name : {"gpt_adamw_b8_s256", "cnn_sgd_b32", "gpt2c_amp_adamw_b4_s512"}) {
    const LoadedRun* r = load(name);
    ASSERT_TRUE(r) << name;
    const DeviceLifetimes& lt = r->lt;
    std::vector<uint64_t> sizes = lt.size;
    DeviceLifetimes kept;  // lt without every third row
    kept.device = lt.device, kept.event_begin = lt.event_begin, kept.event_count = lt.event_count;
    for (uint32_t i = 0; i < lt.count(); ++i) {
      if (i % 3 == 1) {
        sizes[i] = 0;
        continue;
      }
      kept.addr.push_back(lt.addr[i]), kept.size.push_back(lt.size[i]), kept.block_size.push_back(lt.block_size[i]);
      kept.stream.push_back(lt.stream[i]), kept.stack.push_back(lt.stack[i]);
      kept.alloc_event.push_back(lt.alloc_event[i]), kept.free_event.push_back(lt.free_event[i]);
      kept.free_requested_event.push_back(lt.free_requested_event[i]), kept.origin.push_back(lt.origin[i]);
    }
    const ReplayOrder order = replay_order(lt);
    const AllocatorReplay whole = replay_caching_allocator(kept, kept.size);
    const uint64_t between = whole.peak_allocated + (whole.peak_reserved - whole.peak_allocated) / 2;
    for (uint64_t cap : {uint64_t{0}, whole.peak_reserved, between, whole.peak_allocated / 2}) {
      const AllocatorReplay a = replay_caching_allocator(lt, order, sizes, cap);
      const AllocatorReplay b = replay_caching_allocator(kept, kept.size, cap);
      EXPECT_EQ(a.peak_allocated, b.peak_allocated) << name << " cap " << cap;
      EXPECT_EQ(a.peak_reserved, b.peak_reserved) << name << " cap " << cap;
      EXPECT_EQ(a.peak_allocated_step, b.peak_allocated_step) << name << " cap " << cap;
      EXPECT_EQ(a.out_of_memory, b.out_of_memory) << name << " cap " << cap;
      EXPECT_EQ(a.out_of_memory_step, b.out_of_memory_step) << name << " cap " << cap;
    }
    EXPECT_EQ(least_allocator_room(lt, order, sizes), least_allocator_room(kept, kept.size)) << name;
  }
}

struct Family {
  const char* prefix;  // name = prefix + batch + suffix
  const char* suffix;
  std::vector<int> batches;
};
const Family kFamilies[] = {
    {"mlp_adamw_b", "", {256, 512, 1024, 2048}},        {"mlp_sgd_amp_b", "", {256, 512, 1024, 2048}},
    {"cnn_sgd_b", "", {16, 32, 64, 128}},               {"gpt_adamw_b", "_s256", {4, 8, 16, 32}},
    {"gpt_ckpt_adamw_b", "_s256", {4, 8, 16, 32}},      {"gpt_amp_adamw_b", "_s256", {4, 8, 16}},
    // Held out: recorded after the scaling rules were set from the families above (GPT-2's widths, tied embedding,
    // fused attention, 512 tokens); one rule was added for them afterwards (autocast copies counted per step).
    {"gpt2_amp_adamw_b", "_s512", {2, 4, 8, 16}},       {"gpt2_sgd_b", "_s512", {2, 4, 8}},
    // and under torch.compile (recorded after every rule above).
    {"gpt2c_amp_adamw_b", "_s512", {2, 4, 8}},
};

std::string name_of(const Family& f, int b) { return f.prefix + std::to_string(b) + f.suffix; }

// The least memory each run trains in, measured on the GPU (tests/fixtures/generators/gen_whatif_caps.py: the run
// repeated under set_per_process_memory_fraction, the cap bisected to where it trains and 0.3% below where it does
// not).
const nlohmann::json& caps() {
  static const nlohmann::json j = read_array("whatif_caps.json");
  return j;
}
const nlohmann::json* cap_named(const std::string& name) { return entry_named(caps(), name); }

// Verdicts judged on a GPU whose room is `margin` times what the target run really trained in: wrong when the
// verdict says the opposite; "unsure" is never wrong, and is counted, for each margin.
struct Tally {
  std::map<double, int> right, unsure, wrong;
  void add(Verdict v, double margin, const std::string& what) {
    if (v == Verdict::kUnsure) ++unsure[margin];
    else if ((v == Verdict::kFits) == (margin > 1)) ++right[margin];
    else {
      ++wrong[margin];
      ADD_FAILURE() << what << ": says " << verdict_name(v) << " on " << margin << "x its need";
    }
  }
  void print(const char* what) const {
    std::set<double> margins;
    for (const auto* m : {&right, &unsure, &wrong})
      for (const auto& kv : *m) margins.insert(kv.first);
    for (double m : margins)
      std::printf("%s on %.2fx the need: %d right, %d unsure, %d wrong\n", what, m, count(right, m), count(unsure, m),
                  count(wrong, m));
  }
  static int count(const std::map<double, int>& m, double margin) { return m.count(margin) ? m.at(margin) : 0; }
};
GpuCapacity gpu_for(const nlohmann::json& cap, double margin) {
  return GpuCapacity{static_cast<uint64_t>(cap["min_cap"].get<double>() * margin) + kTypicalContextBytes, "test", false};
}

// One snapshot, batch scaled up to 4x: the predicted peak allocated within 10% of the measured run's, and the
// fits verdict right on GPUs 15% above and below the least memory the run really trained in (and how often at 10%).
TEST(WhatIf, OneSnapshotPredictsLargerBatchesWithin10Percent) {
  int predictions = 0;
  double worst = 0;
  Tally tally;
  for (const Family& f : kFamilies)
    for (int from : f.batches)
      for (int to : f.batches) {
        if (to <= from || to > 4 * from) continue;
        const LoadedRun* base = load(name_of(f, from));
        const nlohmann::json* truth = run_named(name_of(f, to));
        ASSERT_TRUE(base && truth) << name_of(f, to);
        const uint64_t alloc = (*truth)["max_allocated"], reserved = (*truth)["max_reserved"];
        WhatIfOptions o;
        o.batch = static_cast<double>(to) / from;
        const WhatIfReport r = what_if(base->s, base->lt, base->c, o);
        const double e = err(r.predicted_allocated, alloc);
        worst = std::max(worst, e);
        std::printf("%-26s -> b%-5d allocated %.3f reserved %.3f\n", name_of(f, from).c_str(), to,
                    static_cast<double>(r.predicted_allocated) / alloc, static_cast<double>(r.predicted_reserved) / reserved);
        EXPECT_LT(e, 0.10) << name_of(f, from) << " -> " << to;
        // The oracle for "fits": the least memory the target run really trained in (whatif_caps.json), not its
        // unconstrained reserved peak (the CNN's is 1.5x what it needs).
        const nlohmann::json* cap = cap_named(name_of(f, to));
        ASSERT_TRUE(cap) << name_of(f, to);
        std::printf("    least room predicted %.3f of the measured need\n",
                    static_cast<double>(r.predicted_needed) / (*cap)["min_cap"].get<double>());
        for (double margin : {1.2, 0.8, 1.15, 0.85, 1.1, 0.9}) {
          o.gpu = gpu_for(*cap, margin);
          const WhatIfReport v = what_if(base->s, base->lt, base->c, o);
          tally.add(v.verdict, margin, name_of(f, from) + " -> " + std::to_string(to));
          // Twice the recorded batch or nearer, 20% either way is decided.
          if (o.batch <= 2 && (margin == 1.2 || margin == 0.8))
            EXPECT_NE(v.verdict, Verdict::kUnsure) << name_of(f, from) << " -> " << to << " on " << margin << "x its need";
        }
        ++predictions;
      }
  std::printf("%d predictions from one snapshot, worst error %.3f\n", predictions, worst);
  tally.print("one snapshot, batch up to 4x");
  EXPECT_GE(predictions, 15);
}

// Every direction and distance the fixtures allow (smaller and larger batches up to 8x from one snapshot; every pair
// of two snapshots for every other size, extrapolated or between them; the GPT's sequence lengths from one snapshot
// and from two), judged by what each target run trained in on GPUs 10-20% above and below it: no verdict wrong.
// Until 2026-11-26 three were (a helper's audit): from one snapshot the CNN 16 -> 128 (its least memory read 10%
// high) said "does not fit" where it fit; two compiled GPT-2 runs predicted downward read 1.45x and 1.54x
// (torch.compile's autotuning, a different number of buffers at each shape, outran the pairing, and what had no
// partner kept its size); and one snapshot scaling the sequence length said "fits" where attention's square made
// the run 8-26% larger than linear.
TEST(WhatIf, VerdictsAreNeverWrong) {
  Tally one, two, seq;
  const double margins[] = {1.2, 0.8, 1.15, 0.85, 1.1, 0.9};
  for (const Family& f : kFamilies)
    for (int from : f.batches)
      for (int to : f.batches) {
        if (to == from || to > 8 * from || from > 8 * to) continue;
        const LoadedRun* base = load(name_of(f, from));
        const nlohmann::json* cap = cap_named(name_of(f, to));
        ASSERT_TRUE(base && cap) << name_of(f, to);
        WhatIfOptions o;
        o.batch = static_cast<double>(to) / from;
        for (double margin : margins) {
          o.gpu = gpu_for(*cap, margin);
          const WhatIfReport v = what_if(base->s, base->lt, base->c, o);
          one.add(v.verdict, margin, name_of(f, from) + " -> " + std::to_string(to));
          // Every recorded run up to the largest batch that surely fits does fit this GPU (each run's real need
          // against the room it leaves).
          EXPECT_LE(v.max_batch_scale_sure, v.max_batch_scale);
          for (int other : f.batches) {
            const nlohmann::json* c = cap_named(name_of(f, other));
            if (!c || static_cast<double>(other) / from > v.max_batch_scale_sure) continue;
            EXPECT_LE((*c)["min_cap"].get<double>(), static_cast<double>(allocator_room(*o.gpu)))
                << name_of(f, from) << ": batch " << other << " is within the largest batch that surely fits ("
                << v.max_batch_scale_sure << "x) on " << margin << "x the need of " << to;
          }
        }
      }
  struct Case {
    std::string a, b;
    double sa, sb;
  };
  std::vector<std::pair<Case, std::pair<std::string, double>>> cases;
  for (const Family& f : kFamilies)
    for (size_t i = 0; i < f.batches.size(); ++i)
      for (size_t k = i + 1; k < f.batches.size(); ++k)
        for (int t : f.batches)
          if (t != f.batches[i] && t != f.batches[k])
            cases.push_back({{name_of(f, f.batches[i]), name_of(f, f.batches[k]), double(f.batches[i]), double(f.batches[k])},
                             {name_of(f, t), double(t)}});
  // Sequence lengths: the GPT with attention written out (memory in t^2), and GPT-2 with PyTorch's fused attention
  // (memory linear in t; recorded 2026-11-26 on an H200, after the rules above were set: held out).
  struct Lengths {
    const char* prefix;
    std::vector<int> t;
  };
  const Lengths length_families[] = {{"gpt_adamw_b8_s", {128, 256, 512, 1024}},
                                     {"gpt2_seq_b4_s", {256, 512, 1024, 2048}}};
  for (const Lengths& f : length_families)
    for (size_t i = 0; i < f.t.size(); ++i)
      for (size_t k = i + 1; k < f.t.size(); ++k)
        for (int t : f.t)
          if (t != f.t[i] && t != f.t[k])
            cases.push_back({{f.prefix + std::to_string(f.t[i]), f.prefix + std::to_string(f.t[k]), double(f.t[i]),
                              double(f.t[k])},
                             {f.prefix + std::to_string(t), double(t)}});
  for (const auto& [c, target] : cases) {
    const LoadedRun* a = load(c.a);
    const LoadedRun* b = load(c.b);
    const nlohmann::json* cap = cap_named(target.first);
    ASSERT_TRUE(a && b && cap) << target.first;
    std::vector<WhatIfRun> runs{{&a->s, &a->lt, c.sa}, {&b->s, &b->lt, c.sb}};
    for (double margin : margins) {
      auto v = what_if_fit_runs(runs, target.second, gpu_for(*cap, margin));
      ASSERT_TRUE(v.ok()) << c.a << " + " << c.b << ": " << v.error().message;
      two.add(v.value().verdict, margin, c.a + " + " + c.b + " -> " + target.first);
    }
  }
  for (const Lengths& f : length_families)
    for (int from : f.t)
      for (int to : f.t) {
        if (to == from) continue;
        const std::string a = f.prefix + std::to_string(from), b = f.prefix + std::to_string(to);
        const LoadedRun* base = load(a);
        const nlohmann::json* cap = cap_named(b);
        ASSERT_TRUE(base && cap) << b;
        WhatIfOptions o;
        o.seq = static_cast<double>(to) / from;
        for (double margin : margins) {
          o.gpu = gpu_for(*cap, margin);
          seq.add(what_if(base->s, base->lt, base->c, o).verdict, margin, a + " -> " + b);
        }
      }
  one.print("one snapshot, batch 1/8x to 8x");
  two.print("two snapshots, any target");
  seq.print("one snapshot, sequence length");
}

// What one snapshot scales, allocation by allocation, against a real run at a larger batch: each allocation paired
// with the larger run's (by stack, in trace order) grows there exactly as the batch or not at all, so the real run
// says which rows batch_dependent_rows should scale. cuDNN's workspaces are left out (their size jumps with the
// algorithm chosen per shape). Before 2026-11-25 up to 9.7% of the bytes grew otherwise than predicted (activations
// the size of a weight taken for weights, bf16 weight gradients and reductions' staging buffers missed); now every
// pair is within 0.1% but the bf16 GPT at batch 8 -> 16 (2.2%: fc1's input and the fc1 and fc2 weights are all 2 MiB
// copies of 4 MiB tensors made at one line), and what is left is neither kind (a causal mask, position ids: constant,
// made in the forward).
bool staging(const Snapshot& s, StackId stack) {
  for (FrameId f : s.stack(stack))
    if (s.str(s.frames[f].name).find("gpu_reduce_kernel") != std::string_view::npos) return true;
  return false;
}

TEST(WhatIf, OneSnapshotScalesWhatTheLargerRunGrew) {
  double worst = 0;
  for (const Family& f : kFamilies)
    for (size_t i = 0; i < 2; ++i)
      for (int to : f.batches) {
        const int from = f.batches[i];
        if (to <= from || to > 4 * from) continue;
        // Not for torch.compile's runs: their generated code keys every buffer of a graph alike (its file and lines
        // change with the shapes), so pairing by order can match a buffer with its neighbour, and a mismatch says
        // nothing. Their peaks, above, are the check.
        if (std::string(f.prefix).rfind("gpt2c_", 0) == 0) continue;
        const LoadedRun* a = load(name_of(f, from));
        const LoadedRun* b = load(name_of(f, to));
        ASSERT_TRUE(a && b);
        const std::vector<uint8_t> grows = batch_dependent_rows(a->s, a->lt, a->c);
        const std::vector<int64_t> pair = pair_allocations(a->s, a->lt, b->s, b->lt);
        const double scale = static_cast<double>(to) / from;
        double bytes = 0, wrong = 0;
        uint32_t rows = 0, wrong_rows = 0;
        for (uint32_t j = 0; j < b->lt.count(); ++j) {
          if (pair[j] < 0) continue;
          const auto r = static_cast<uint32_t>(pair[j]);
          if (a->c.reason[r] == CategoryReason::kWorkspace) continue;
          const double real = static_cast<double>(b->lt.size[j]);
          const double predicted = static_cast<double>(a->lt.size[r]) * (grows[r] ? scale : 1.0);
          bytes += real;
          ++rows;
          // A reduction's staging buffer grows with its input only up to what the GPU's blocks can take (GPT-2's
          // bias sums: 48, 96, then 132 MiB at batch 4, 8, 16), so for it only whether it grows is judged.
          const bool right = staging(a->s, a->lt.stack[r])
                                 ? (grows[r] != 0) == (real > 1.01 * static_cast<double>(a->lt.size[r]))
                                 : std::fabs(predicted - real) <= 0.01 * real;
          if (!right) {
            wrong += real;
            ++wrong_rows;
          }
        }
        ASSERT_GT(rows, 100u) << name_of(f, from) << " -> " << to;
        uint32_t paired = 0;
        for (int64_t p : pair) paired += p >= 0;
        // Most allocations pair (the bf16 MLP from batch 1024 on has 24 of 162 that smaller runs lack).
        EXPECT_GT(paired, b->lt.count() * 8 / 10) << name_of(f, from) << " -> " << to << ": the runs should pair";
        const double share = wrong / bytes;
        worst = std::max(worst, share);
        std::printf("%-26s -> b%-5d %4u of %5u allocations, %5.2f%% of the bytes, grow otherwise than predicted\n",
                    name_of(f, from).c_str(), to, wrong_rows, rows, 100 * share);
        const bool known = name_of(f, from) == "gpt_amp_adamw_b8_s256";  // the ambiguous copies above
        EXPECT_LT(share, known ? 0.03 : 0.002) << name_of(f, from) << " -> " << to;
      }
  std::printf("worst %.2f%% of the bytes\n", 100 * worst);
}

// Two snapshots: the two smallest runs of a family predict the larger ones within 5%, and the GPT's two shortest
// sequence lengths predict 4x and 8x longer sequences, attention's quadratic terms included.
TEST(WhatIf, TwoSnapshotsPredictWithin5Percent) {
  struct Case {
    std::string a, b, target;
    double sa, sb, st;
    double tolerance = 0.05;
  };
  std::vector<Case> cases;
  for (const Family& f : kFamilies)
    for (size_t i = 0; i + 2 < f.batches.size(); ++i)
      for (size_t k = i + 2; k < f.batches.size(); ++k)
        cases.push_back({name_of(f, f.batches[i]), name_of(f, f.batches[i + 1]), name_of(f, f.batches[k]),
                         double(f.batches[i]), double(f.batches[i + 1]), double(f.batches[k])});
  // The bf16 MLP allocates 24 more blocks per run from batch 1024 on (other kernels for the larger matrices): a fit
  // on 256 and 512 cannot see them, and reads 7% low at 2048. Measured and kept visible rather than hidden.
  for (Case& c : cases)
    if (c.a == "mlp_sgd_amp_b256" && c.target == "mlp_sgd_amp_b2048") c.tolerance = 0.08;
  cases.push_back({"gpt_adamw_b8_s128", "gpt_adamw_b8_s256", "gpt_adamw_b8_s512", 128, 256, 512});
  cases.push_back({"gpt_adamw_b8_s128", "gpt_adamw_b8_s256", "gpt_adamw_b8_s1024", 128, 256, 1024});
  // torch.compile's runs downward and between two sizes (the replayed run is the second, as the CLI picks the one
  // nearer the target): until 2026-11-26 they read 1.45x and 1.62x (the compiler's autotuning outran the pairing).
  cases.push_back({"gpt2c_amp_adamw_b8_s512", "gpt2c_amp_adamw_b4_s512", "gpt2c_amp_adamw_b2_s512", 8, 4, 2});
  cases.push_back({"gpt2c_amp_adamw_b2_s512", "gpt2c_amp_adamw_b8_s512", "gpt2c_amp_adamw_b4_s512", 2, 8, 4});
  Tally tally;
  for (const Case& c : cases) {
    const LoadedRun* a = load(c.a);
    const LoadedRun* b = load(c.b);
    const nlohmann::json* truth = run_named(c.target);
    ASSERT_TRUE(a && b && truth) << c.target;
    const uint64_t alloc = (*truth)["max_allocated"];
    auto r = what_if_fit(a->s, a->lt, b->s, b->lt, c.sa, c.sb, c.st, std::nullopt);
    ASSERT_TRUE(r.ok()) << c.target << ": " << r.error().message;
    std::printf("%-26s + %-26s -> %-26s allocated %.3f (paired %u, unpaired %u)\n", c.a.c_str(), c.b.c_str(),
                c.target.c_str(), static_cast<double>(r.value().predicted_allocated) / alloc, r.value().paired,
                r.value().unpaired);
    EXPECT_LT(err(r.value().predicted_allocated, alloc), c.tolerance) << c.a << " + " << c.b << " -> " << c.target;
    // The fits verdict on GPUs 10-15% above and below the least memory the target run trained in: never wrong,
    // and decided at 15% where the target is within twice the nearer size.
    const nlohmann::json* cap = cap_named(c.target);
    ASSERT_TRUE(cap) << c.target;
    for (double margin : {1.15, 0.85, 1.1, 0.9}) {
      auto v = what_if_fit(a->s, a->lt, b->s, b->lt, c.sa, c.sb, c.st, gpu_for(*cap, margin));
      ASSERT_TRUE(v.ok());
      tally.add(v.value().verdict, margin, c.a + " + " + c.b + " -> " + c.target);
      if (c.st <= 2 * std::max(c.sa, c.sb) && (margin == 1.15 || margin == 0.85))
        EXPECT_NE(v.value().verdict, Verdict::kUnsure) << c.a << " + " << c.b << " -> " << c.target << " on " << margin;
    }
  }
  tally.print("two snapshots");
}

// The allocator replay under a cap, at each run's own sizes, against the least memory the run trained in: within 1%
// below (a "fits" that would run out of memory) and 3% above. The CNN trains in less only because cuDNN, when a
// workspace runs out of memory, tries its next algorithm: the replay does without such a workspace (optional_rows);
// without that it read 3-11% high.
TEST(WhatIf, LeastRoomEqualsWhatTheRunTrainedIn) {
  ASSERT_EQ(caps().size(), 40u);
  double worst = 0;
  for (const auto& c : caps()) {
    const std::string name = c["name"];
    const LoadedRun* r = load(name);
    ASSERT_TRUE(r) << name;
    const std::vector<uint8_t> optional = optional_rows(r->s, r->lt);
    const uint64_t least = least_allocator_room(r->lt, r->lt.size, &optional);
    const double measured = c["min_cap"].get<double>();
    const double ratio = static_cast<double>(least) / measured;
    worst = std::max(worst, std::fabs(ratio - 1));
    std::printf("%-26s least room %.3f of the measured (unconstrained reserved %.3f)\n", name.c_str(), ratio,
                c["max_reserved"].get<double>() / measured);
    EXPECT_GT(ratio, 0.99) << name;
    EXPECT_LT(ratio, 1.03) << name;
  }
  std::printf("worst %.3f\n", worst);
}

// Three snapshots or more: the fit uses the pair nearest the target, whatever order the files come in, and checks
// each larger run from the two below it. The bf16 MLP's miss above (256 + 512 -> 2048) is within 5% given 1024 too.
TEST(WhatIf, SeveralSnapshotsFitOnThePairNearestTheTarget) {
  struct Case {
    std::vector<std::string> names;
    std::vector<double> sizes;
    std::string target;
    double target_size, pair_a, pair_b;  // the pair expected to be used (b: the one nearer the target)
  };
  const std::vector<Case> cases = {
      {{"mlp_sgd_amp_b1024", "mlp_sgd_amp_b256", "mlp_sgd_amp_b512"}, {1024, 256, 512}, "mlp_sgd_amp_b2048", 2048, 512, 1024},
      {{"cnn_sgd_b16", "cnn_sgd_b32", "cnn_sgd_b128"}, {16, 32, 128}, "cnn_sgd_b64", 64, 32, 128},  // brackets 64
      {{"gpt_adamw_b8_s256", "gpt_adamw_b8_s512", "gpt_adamw_b8_s1024"}, {256, 512, 1024}, "gpt_adamw_b8_s128", 128, 512, 256},
  };
  for (const Case& c : cases) {
    std::vector<WhatIfRun> given;
    for (size_t i = 0; i < c.names.size(); ++i) {
      const LoadedRun* r = load(c.names[i]);
      ASSERT_TRUE(r) << c.names[i];
      given.push_back({&r->s, &r->lt, c.sizes[i]});
    }
    const nlohmann::json* truth = run_named(c.target);
    ASSERT_TRUE(truth) << c.target;
    const uint64_t alloc = (*truth)["max_allocated"];
    auto r = what_if_fit_runs(given, c.target_size, std::nullopt);
    ASSERT_TRUE(r.ok()) << c.target << ": " << r.error().message;
    std::printf("%-20s from %zu runs -> %-22s allocated %.3f (fitted on %g and %g)\n", c.names[0].c_str(),
                c.names.size(), c.target.c_str(), static_cast<double>(r.value().predicted_allocated) / alloc,
                r.value().size_a, r.value().size_b);
    EXPECT_EQ(r.value().size_a, c.pair_a) << c.target;
    EXPECT_EQ(r.value().size_b, c.pair_b) << c.target;
    EXPECT_LT(err(r.value().predicted_allocated, alloc), 0.05) << c.target;
    // Each run above the two smallest, predicted from the two below it: the same number the pair alone gives, and
    // measured as the allocator model replays that run (within 1% of PyTorch's counter for it).
    ASSERT_EQ(r.value().checks.size(), c.names.size() - 2);
    std::vector<double> sorted = c.sizes;
    std::sort(sorted.begin(), sorted.end());
    const WhatIfFit::Check& k = r.value().checks[0];
    EXPECT_EQ(k.size_a, sorted[0]);
    EXPECT_EQ(k.size_b, sorted[1]);
    EXPECT_EQ(k.size, sorted[2]);
    auto name_at = [&](double size) {
      for (size_t i = 0; i < c.sizes.size(); ++i)
        if (c.sizes[i] == size) return c.names[i];
      return std::string();
    };
    const LoadedRun* a = load(name_at(sorted[0]));
    const LoadedRun* b = load(name_at(sorted[1]));
    auto alone = what_if_fit(a->s, a->lt, b->s, b->lt, sorted[0], sorted[1], sorted[2], std::nullopt);
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(k.predicted_allocated, alone.value().predicted_allocated);
    const nlohmann::json* third = run_named(name_at(sorted[2]));
    ASSERT_TRUE(third);
    EXPECT_LT(err(k.measured_allocated, (*third)["max_allocated"]), 0.01) << name_at(sorted[2]);
  }
  // Sizes must differ; one snapshot is not a fit.
  const LoadedRun* x = load("mlp_adamw_b256");
  ASSERT_TRUE(x);
  EXPECT_FALSE(what_if_fit_runs({{&x->s, &x->lt, 256}, {&x->s, &x->lt, 256}}, 512, std::nullopt).ok());
  EXPECT_FALSE(what_if_fit_runs({{&x->s, &x->lt, 256}}, 512, std::nullopt).ok());
}

// The room "fits" leaves beside the allocator covers the CUDA context measured after a training step's libraries
// (generators/measure_context.py on the H100: init, a matmul, a convolution, all of them with autocast and attention).
TEST(WhatIf, ContextRoomCoversTheMeasuredContexts) {
  const nlohmann::json stages = read_array("context_h100.json");
  ASSERT_EQ(stages.size(), 4u);
  for (const auto& st : stages)
    EXPECT_GE(kTypicalContextBytes, st["context_bytes"].get<uint64_t>()) << st["stage"];
}

// torch.compile's autotuning in the first step (Inductor benchmarking its kernels' configs: Triton's 50 MiB buffer
// that flushes the H100's L2, copies of the kernels' arguments): a third of the compiled runs' allocations, a
// different number at each batch, gone after the first step.
bool autotuning(const Snapshot& s, StackId stack) {
  for (FrameId f : s.stack(stack)) {
    const Frame& fr = s.frames[f];
    if (s.str(fr.filename).find("/_inductor/") != std::string_view::npos &&
        s.str(fr.name).find("bench") != std::string_view::npos)
      return true;
  }
  return false;
}

// The same check without pairing, for torch.compile's runs too (whose buffers cannot be paired one by one): the sizes
// one snapshot predicts, as a multiset, against the sizes the larger run allocated. Left out on both sides: what
// launch heuristics size (cuDNN workspaces, reductions' staging buffers) and the compiler's first-step autotuning.
// Bytes of the larger run that no predicted allocation matches within 1%, and predicted bytes that match nothing it
// allocated: at most 0.35% each, but for the compiled GPT-2 at batch 2 (1.2% and 2.8%) and the bf16 GPT at batch 8
// (its ambiguous copies, 2.9% and 2.2%).
TEST(WhatIf, OneSnapshotPredictsTheSizesTheLargerRunAllocated) {
  for (const Family& f : kFamilies)
    for (size_t i = 0; i < 2; ++i)
      for (int to : f.batches) {
        const int from = f.batches[i];
        if (to <= from || to > 4 * from) continue;
        const LoadedRun* a = load(name_of(f, from));
        const LoadedRun* b = load(name_of(f, to));
        ASSERT_TRUE(a && b);
        const std::vector<uint8_t> grows = batch_dependent_rows(a->s, a->lt, a->c);
        const double scale = static_cast<double>(to) / from;
        std::multiset<uint64_t> predicted;
        for (uint32_t r = 0; r < a->lt.count(); ++r)
          if (a->lt.alloc_event[r] != kNoEvent && a->c.reason[r] != CategoryReason::kWorkspace && !autotuning(a->s, a->lt.stack[r]) &&
              !staging(a->s, a->lt.stack[r]))
            predicted.insert(static_cast<uint64_t>(std::llround(static_cast<double>(a->lt.size[r]) * (grows[r] ? scale : 1.0))));
        double predicted_bytes = 0;
        for (uint64_t x : predicted) predicted_bytes += static_cast<double>(x);
        double bytes = 0, unmatched = 0;
        for (uint32_t j = 0; j < b->lt.count(); ++j) {
          if (b->lt.alloc_event[j] == kNoEvent || b->c.reason[j] == CategoryReason::kWorkspace || autotuning(b->s, b->lt.stack[j]) ||
              staging(b->s, b->lt.stack[j]))
            continue;
          const uint64_t real = b->lt.size[j];
          bytes += static_cast<double>(real);
          auto it = predicted.lower_bound(real - real / 100);
          if (it != predicted.end() && *it <= real + real / 100) predicted.erase(it);
          else unmatched += static_cast<double>(real);
        }
        // Both ways: what the larger run allocated that was not predicted, and what was predicted that it did not.
        double left = 0;
        for (uint64_t x : predicted) left += static_cast<double>(x);
        const double share = unmatched / bytes, left_share = left / predicted_bytes;
        std::printf("%-26s -> b%-5d %5.2f%% of the larger run's bytes have no predicted size, %5.2f%% of the predicted "
                    "bytes no real one\n", name_of(f, from).c_str(), to, 100 * share, 100 * left_share);
        const bool known = name_of(f, from) == "gpt_amp_adamw_b8_s256";
        const bool compiled = std::string(f.prefix).rfind("gpt2c_", 0) == 0;
        // The compiled runs' weight copies are recognised cautiously: what stays unrecognised is scaled, so they
        // over-predict (up to 2.8% of the predicted bytes) rather than under-predict (1.2%).
        EXPECT_LT(share, known ? 0.035 : compiled ? 0.015 : 0.006) << name_of(f, from) << " -> " << to;
        EXPECT_LT(left_share, known || compiled ? 0.035 : 0.006) << name_of(f, from) << " -> " << to;
      }
}

// Under a memory cap, a convolution's cuDNN workspace that does not fit is done without (PyTorch's try_plans catches
// the out-of-memory and tries the next engine), but attention's is not caught: the held-out GPT-2 runs ran cuDNN's
// attention (scaled_dot_product_attention on the H100), and none of its workspaces may be taken as optional. A guard
// on the rule's frame matching, with a fixture that holds both kinds; the evidence that the rule is right is the
// least memory the runs trained in (LeastRoomEqualsWhatTheRunTrainedIn).
TEST(WhatIf, OnlyConvolutionWorkspacesAreOptional) {
  auto workspaces = [](const LoadedRun& r, const char* frame) {
    uint32_t all = 0, optional = 0;
    const std::vector<uint8_t> opt = optional_rows(r.s, r.lt);
    for (uint32_t i = 0; i < r.lt.count(); ++i) {
      bool hit = false;
      for (FrameId f : r.s.stack(r.lt.stack[i]))
        if (r.s.str(r.s.frames[f].name).find(frame) != std::string_view::npos) hit = true;
      if (!hit) continue;
      ++all;
      optional += opt[i];
    }
    return std::make_pair(all, optional);
  };
  const LoadedRun* gpt2 = load("gpt2_amp_adamw_b4_s512");
  const LoadedRun* cnn = load("cnn_sgd_b32");
  ASSERT_TRUE(gpt2 && cnn);
  const auto [sdp, sdp_optional] = workspaces(*gpt2, "run_cudnn_SDP");
  EXPECT_GT(sdp, 0u) << "the fixture no longer holds cuDNN attention";
  EXPECT_EQ(sdp_optional, 0u);
  const auto [conv, conv_optional] = workspaces(*cnn, "run_conv_plan");
  EXPECT_GT(conv, 0u);
  EXPECT_EQ(conv_optional, conv);
}

// One labelled OOM run of tests/fixtures/oom_causes: its label, snapshot, device 0's lifetimes and categories.
struct OomRun {
  nlohmann::json label;
  Snapshot s;
  DeviceLifetimes lt;
  Categories c;
};
std::unique_ptr<OomRun> load_oom_run(const std::string& name) {
  const std::string dir = std::string(ALLOCSCOPE_FIXTURES) + "/oom_causes/";
  std::ifstream lf(dir + name + ".label.json");
  auto loaded = load_snapshot_file(dir + name + ".pickle.gz");
  if (!lf || !loaded.ok()) return nullptr;
  auto r = std::make_unique<OomRun>();
  r->label = nlohmann::json::parse(lf);
  r->s = std::move(loaded).value();
  r->lt = build_device_lifetimes(r->s, 0);
  auto c = categorize(r->s, r->lt, detect_iterations(r->s, r->lt), FrameFilter(r->s));
  if (!c.ok()) return nullptr;
  r->c = std::move(c).value();
  return r;
}

// torch.compile's generated code is told by its file, in Inductor's default cache (/tmp/torchinductor_USER) or, named
// as Inductor names it (xy/cxy...py), wherever TORCHINDUCTOR_CACHE_DIR puts it: the compiled runs' frames moved to
// another cache folder pair as well as where they were recorded (and without that rule only 407 of 1,400 pair).
// A run that ran out of memory, asked about at its own batch on its own GPU (tests/fixtures/oom_causes: ten runs made
// to fail on an H100, each labelled with its cause): the requests that failed are tried in the replay, so a run that
// failed for its own tensors, fragmentation or a request larger than the GPU is never called FITS there (8 of the 10
// were before 2026-11-26, a review found). A run capped by set_per_process_memory_fraction, or crowded out by
// memory another process held, does fit the whole GPU on its own.
TEST(WhatIf, RunsThatRanOutOfMemoryDoNotFitTheirOwnGpu) {
  int runs = 0;
  for (const char* name : {"oom_capped", "oom_fragmentation", "oom_fragmentation_streams", "oom_live",
                           "oom_live_expandable", "oom_live_freed", "oom_live_segment_rounding", "oom_outside",
                           "oom_outside_modest", "oom_too_large"}) {
    const std::unique_ptr<OomRun> run = load_oom_run(name);
    ASSERT_TRUE(run) << name;
    const nlohmann::json& label = run->label;
    const Snapshot& s = run->s;
    const DeviceLifetimes& lt = run->lt;
    WhatIfOptions o;
    o.gpu = GpuCapacity{label["gpu_total"].get<uint64_t>(), "its own", false};
    const WhatIfReport w = what_if(s, lt, run->c, o);
    // The same through the two-snapshot fit: the run given as both snapshots (sizes 1 and 2, its own twice), so
    // every allocation pairs with itself and keeps its size, predicted at its own size.
    auto f = what_if_fit(s, lt, s, lt, 1, 2, 2, o.gpu);
    ASSERT_TRUE(f.ok()) << name;
    const std::string cause = label["cause"];
    for (Verdict v : {w.verdict, f.value().verdict}) {
      if (cause == "allocator_cap" || cause == "held_outside")
        EXPECT_EQ(v, Verdict::kFits) << name << " (" << cause << ")";
      else
        EXPECT_NE(v, Verdict::kFits) << name << " (" << cause << ") failed on this GPU";
    }
    ++runs;
  }
  EXPECT_EQ(runs, 10);
}

// A third audit's finds on the runs that ran out of memory, each on the GPU it ran out on (the label's):
// - asked about 0.9x, the answer claimed "the largest batch that fits: 1.13x to 65,000x, surely": a run at or above
//   the recorded batch makes the failed requests too;
// - the recorded batch itself was UNSURE where the OOM's own numbers (reserved plus the driver's free bytes) show
//   the allocator had no more room than this GPU gives;
// - a GPU with no room past the context (700 MiB) gave "the largest batch that fits: 1.99x".
TEST(WhatIf, ARunThatRanOutOfMemoryFitsNoLargerBatchOnItsGpu) {
  int checked = 0;
  for (const char* name : {"oom_fragmentation", "oom_fragmentation_streams", "oom_live", "oom_live_expandable",
                           "oom_live_freed", "oom_live_segment_rounding", "oom_too_large"}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<OomRun> run = load_oom_run(name);
    ASSERT_TRUE(run);
    const nlohmann::json& label = run->label;
    const Snapshot& s = run->s;
    const DeviceLifetimes& lt = run->lt;
    const Categories& cats = run->c;
    WhatIfOptions o;
    o.gpu = GpuCapacity{label["gpu_total"].get<uint64_t>(), "its own", false};
    for (double batch : {0.5, 0.9, 1.0, 2.0}) {
      o.batch = batch;
      const WhatIfReport w = what_if(s, lt, cats, o);
      EXPECT_LT(w.max_batch_scale_sure, 1.0) << batch;
      EXPECT_LT(w.max_batch_scale, 1.0 + 1e-9) << batch;
      if (batch >= 1.0) EXPECT_EQ(w.verdict, Verdict::kDoesNotFit) << batch;
    }
    o.batch = 1;
    o.gpu = GpuCapacity{700ull << 20, "no room", false};
    const WhatIfReport none = what_if(s, lt, cats, o);
    EXPECT_EQ(none.max_batch_scale, 0.0);
    EXPECT_EQ(none.max_batch_scale_sure, 0.0);
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

// Two snapshots given sizes in the other order than the files, or one file twice: refused with why (an audit:
// "--sizes 8,4" predicted batch 16 to fit a GPU where it does not).
TEST(WhatIf, SizesOutOfTheFilesOrderAreRefused) {
  const std::string dir = std::string(ALLOCSCOPE_FIXTURES) + "/whatif/";
  auto a = load_snapshot_file(dir + "gpt_adamw_b4_s256.pickle.gz");
  auto b = load_snapshot_file(dir + "gpt_adamw_b8_s256.pickle.gz");
  ASSERT_TRUE(a.ok() && b.ok());
  const DeviceLifetimes la = build_device_lifetimes(a.value(), 0), lb = build_device_lifetimes(b.value(), 0);
  EXPECT_TRUE(what_if_fit_runs({{&a.value(), &la, 4}, {&b.value(), &lb, 8}}, 16, std::nullopt).ok());
  auto swapped = what_if_fit_runs({{&a.value(), &la, 8}, {&b.value(), &lb, 4}}, 16, std::nullopt);
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.error().message.find("are --sizes in the files' order?"), std::string::npos);
  auto twice = what_if_fit_runs({{&a.value(), &la, 4}, {&a.value(), &la, 8}}, 16, std::nullopt);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("the same run twice?"), std::string::npos);
}

// With expandable segments a run maps pages as its blocks need them and needs about its allocated peak, less than the
// model of the default allocator finds where that one would fragment: the range's low end reaches down to the
// allocated peak, so no "does not fit" rests on fragmentation the run will not have.
TEST(WhatIf, ExpandableSegmentsReachDownToTheAllocatedPeak) {
  auto r = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/expandable_segments.pickle");
  ASSERT_TRUE(r.ok());
  const Snapshot s = std::move(r).value();
  ASSERT_TRUE(s.expandable_segments());
  const DeviceLifetimes lt = build_device_lifetimes(s, 0);
  auto c = categorize(s, lt, detect_iterations(s, lt), FrameFilter(s));
  ASSERT_TRUE(c.ok());
  WhatIfOptions o;
  o.gpu = GpuCapacity{80ull << 30, "test", false};
  const WhatIfReport w = what_if(s, lt, c.value(), o);
  ASSERT_GT(w.predicted_needed, w.predicted_allocated);  // the default allocator's model needs more
  EXPECT_LE(w.needed_low, static_cast<uint64_t>(static_cast<double>(w.predicted_allocated) * 0.95) + 1);
}

// How many allocations of B pair_allocations pairs with one of A.
uint32_t paired(const Snapshot& sa, const DeviceLifetimes& la, const Snapshot& sb, const DeviceLifetimes& lb) {
  uint32_t k = 0;
  for (int64_t p : pair_allocations(sa, la, sb, lb)) k += p >= 0;
  return k;
}

// torch.compile's autotuning is told by PyTorch's own frames (torch/_inductor/), not by a user's folder or function
// that happens to be named alike: such a job pairs as it does under its own names (a review's case: a script in
// ~/my_inductor_tests whose function is benchmark_run lost two thirds of its pairs).
TEST(WhatIf, AutotuningIsPyTorchsOwnFramesOnly) {
  const LoadedRun* a = load("mlp_adamw_b256");
  const LoadedRun* b = load("mlp_adamw_b512");
  ASSERT_TRUE(a && b);
  auto renamed = [](Snapshot s) {
    uint32_t frames = 0;
    for (Frame& f : s.frames) {
      const std::string file(s.str(f.filename));
      if (file.size() < 13 || file.substr(file.size() - 13) != "gen_whatif.py") continue;
      f.filename = s.strings.intern("/home/u/my_inductor_tests/gen_whatif.py");
      if (s.str(f.name) == "run_one") f.name = s.strings.intern("benchmark_run");
      ++frames;
    }
    EXPECT_GT(frames, 0u);
    return s;
  };
  const Snapshot ra = renamed(a->s), rb = renamed(b->s);
  EXPECT_EQ(paired(ra, a->lt, rb, b->lt), paired(a->s, a->lt, b->s, b->lt));
}

TEST(WhatIf, CompiledRunsPairWhereverTheCacheIs) {
  const LoadedRun* a = load("gpt2c_amp_adamw_b2_s512");
  const LoadedRun* b = load("gpt2c_amp_adamw_b4_s512");
  ASSERT_TRUE(a && b);
  auto moved = [](Snapshot s) {
    uint32_t files = 0;
    for (Frame& f : s.frames) {
      const std::string file(s.str(f.filename));
      const size_t at = file.find("/torchinductor_");
      if (at == std::string::npos) continue;
      const size_t dir = file.find('/', at + 1);  // the xy/ folder after the cache's own
      f.filename = s.strings.intern("/data/inductor-cache" + file.substr(dir));
      ++files;
    }
    EXPECT_GT(files, 0u);
    return s;
  };
  // Nine in ten of what is not the compiler's first-step autotuning (left out of the pairing: it allocates a
  // different number of buffers at each shape).
  uint32_t steady = 0;
  for (uint32_t j = 0; j < b->lt.count(); ++j) steady += !autotuning(b->s, b->lt.stack[j]);
  const uint32_t where_recorded = paired(a->s, a->lt, b->s, b->lt);
  EXPECT_GT(where_recorded, steady * 9 / 10);
  const Snapshot ma = moved(a->s), mb = moved(b->s);
  EXPECT_EQ(paired(ma, a->lt, mb, b->lt), where_recorded);
}

// Past twice the recorded size the answer says kernels may change (the bf16 MLP from 256 and 512 to 2048 reads 7%
// low for buffers only batch 1024 and up allocate); within it, it does not cry wolf.
TEST(WhatIf, FarTargetsSayKernelsMayChange) {
  auto says = [](const std::vector<std::string>& notes) {
    return std::any_of(notes.begin(), notes.end(),
                       [](const std::string& n) { return n.find("nearest recorded size") != std::string::npos; });
  };
  const LoadedRun* a = load("mlp_sgd_amp_b256");
  const LoadedRun* b = load("mlp_sgd_amp_b512");
  ASSERT_TRUE(a && b);
  WhatIfOptions o;
  o.batch = 2;
  EXPECT_FALSE(says(what_if(b->s, b->lt, b->c, o).notes));
  o.batch = 4;
  EXPECT_TRUE(says(what_if(b->s, b->lt, b->c, o).notes));
  auto near = what_if_fit(a->s, a->lt, b->s, b->lt, 256, 512, 1024, std::nullopt);
  auto far = what_if_fit(a->s, a->lt, b->s, b->lt, 256, 512, 2048, std::nullopt);
  auto below = what_if_fit(a->s, a->lt, b->s, b->lt, 256, 512, 64, std::nullopt);
  ASSERT_TRUE(near.ok() && far.ok() && below.ok());
  EXPECT_FALSE(says(near.value().notes));
  EXPECT_TRUE(says(far.value().notes));
  EXPECT_TRUE(says(below.value().notes));
}

// Sequence length from one snapshot is linear, so it misses attention's square; the answer says so.
TEST(WhatIf, OneSnapshotSaysSequenceScalingIsLinear) {
  const LoadedRun* base = load("gpt_adamw_b8_s256");
  ASSERT_TRUE(base);
  WhatIfOptions o;
  o.seq = 2;
  const WhatIfReport r = what_if(base->s, base->lt, base->c, o);
  bool said = false;
  for (const auto& n : r.notes) said = said || n.find("square") != std::string::npos;
  EXPECT_TRUE(said);
  ASSERT_FALSE(r.terms.empty());
  EXPECT_EQ(r.terms[0].phase, "peak");
}

}  // namespace
}  // namespace allocscope
