// Categories against PyTorch's Memory Profiler. tests/fixtures/categories_oracle holds 11 training and inference loops
// recorded on an H100 with `_record_memory_history` while `torch.profiler.profile(profile_memory=True)` ran, and the
// category the profiler's `_memory_profile()` gave to each of the snapshot's allocations (joined by address and
// time; see that folder's README.md). The profiler is the oracle: nothing here is derived from our own output.
//
// The measure is the issue's: at 12 evenly spaced points of each trace, the share of live bytes (those the profiler
// labelled) that we put in the same category, averaged over the points.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"

namespace allocscope {
namespace {

std::string dir() { return std::string(ALLOCSCOPE_FIXTURES) + "/categories_oracle/"; }

struct Agreement {
  double mean = 0;          // live labelled bytes in the profiler's category, averaged over the points
  double tensors_only = 0;  // the same without the profiler's tensorless allocations (cuBLAS/cuDNN workspaces)
  double at_peak = 0;       // the share at the trace's peak alone
  double at_peak_tensors = 0;  // the same over what the profiler saw as tensors (the peak is where users look)
  int points = 0;
  // bytes (summed over the points) by profiler category -> our category, for the failure message
  std::map<std::string, std::map<std::string, uint64_t>> confusion;
  std::map<std::string, std::map<std::string, uint64_t>> confusion_at_peak;  // tensors only, bytes
  std::map<std::string, std::map<std::string, uint64_t>> confusion_at_peak_raw;  // what the profiler saw as no tensor
};

struct Oracle {
  Snapshot s;
  DeviceLifetimes lt;
  Categories c;
  // per lifetimes row: the profiler's category ("" when it gave none) and whether it saw a tensor
  std::vector<std::string> label;
  std::vector<uint8_t> tensor;
};

// The same job as if recorded on Windows: every path written with backslashes behind a drive letter
// ("C:\\home\\u\\venv\\Lib\\site-packages\\torch\\nn\\modules\\linear.py"), as PyTorch writes them there.
void as_windows_paths(Snapshot* s) {
  for (Frame& f : s->frames) {
    std::string path(s->strings.get(f.filename));
    if (path.empty() || path[0] != '/') continue;
    for (char& c : path) c = c == '/' ? '\\' : c;
    if (const size_t lib = path.find("\\lib\\"); lib != std::string::npos) path.replace(lib, 5, "\\Lib\\");
    f.filename = s->strings.intern("C:" + path);
  }
}

bool load(const std::string& name, Oracle* o, std::string* err, bool windows = false) {
  auto r = load_snapshot_file(dir() + name + ".pickle.gz");
  if (!r.ok()) return *err = r.error().message, false;
  o->s = std::move(r).value();
  if (windows) as_windows_paths(&o->s);
  std::ifstream f(dir() + name + ".labels.json");
  if (!f) return *err = "no labels", false;
  const nlohmann::json j = nlohmann::json::parse(f);
  const int64_t device = j.value("device", 0);
  o->lt = build_device_lifetimes(o->s, device);
  const Iterations it = detect_iterations(o->s, o->lt);
  const FrameFilter ff(o->s);
  auto c = categorize(o->s, o->lt, it, ff);
  if (!c.ok()) return *err = c.error().message, false;
  o->c = std::move(c).value();
  const uint32_t n = o->lt.count();
  o->label.assign(n, "");
  o->tensor.assign(n, 1);
  // Traced rows by their alloc entry's index; rows alive before the trace by their block's address.
  std::unordered_map<uint32_t, uint32_t> by_event;
  std::unordered_map<uint64_t, uint32_t> by_addr;
  for (uint32_t i = 0; i < n; ++i) {
    if (o->lt.alloc_event[i] != kNoEvent) by_event[o->lt.alloc_event[i]] = i;
    else by_addr[o->lt.addr[i]] = i;
  }
  for (const auto& a : j["allocs"]) {
    // Unmatched (no profiler event) and allocated-and-freed before the profiler: the oracle says nothing.
    if (a["how"].is_null() || a.value("window", "") == "before") continue;
    auto hit = by_event.find(a["i"].get<uint32_t>());
    if (hit == by_event.end()) return *err = "alloc entry " + std::to_string(a["i"].get<uint32_t>()) + " has no row", false;
    o->label[hit->second] = a["category"].get<std::string>();
    o->tensor[hit->second] = a["tensor"].is_boolean() ? a["tensor"].get<bool>() : 1;
  }
  for (const auto& b : j["blocks"]) {
    if (b["how"].is_null()) continue;
    auto hit = by_addr.find(b["addr"].get<uint64_t>());
    if (hit != by_addr.end() && o->label[hit->second].empty()) o->label[hit->second] = b["category"].get<std::string>();
  }
  return true;
}

Agreement agreement(const Oracle& o) {
  Agreement a;
  constexpr int kPoints = 12;
  const uint32_t steps = o.lt.steps();
  double sum = 0, sum_t = 0;
  int points_t = 0;
  for (int k = 1; k <= kPoints; ++k) {
    const uint32_t step = static_cast<uint32_t>(static_cast<uint64_t>(steps - 1) * k / (kPoints + 1));
    uint64_t total = 0, same = 0, total_t = 0, same_t = 0;
    for (uint32_t i = 0; i < o.lt.count(); ++i) {
      if (o.label[i].empty() || !o.lt.alive_at(i, step)) continue;
      const std::string ours(category_name(o.c.category[i]));
      const uint64_t b = o.lt.size[i];
      total += b;
      a.confusion[o.label[i]][ours] += b;
      if (ours == o.label[i]) same += b;
      if (o.tensor[i]) {
        total_t += b;
        if (ours == o.label[i]) same_t += b;
      }
    }
    if (total) sum += static_cast<double>(same) / total, ++a.points;
    if (total_t) sum_t += static_cast<double>(same_t) / total_t, ++points_t;
  }
  a.mean = a.points ? sum / a.points : 0;
  uint64_t total = 0, same = 0, total_t = 0, same_t = 0;
  for (uint32_t i = 0; i < o.lt.count(); ++i) {
    if (o.label[i].empty() || !o.lt.alive_at(i, o.lt.peak_step())) continue;
    const bool agree = category_name(o.c.category[i]) == o.label[i];
    total += o.lt.size[i];
    if (agree) same += o.lt.size[i];
    if (!o.tensor[i]) {
      a.confusion_at_peak_raw[o.label[i]][std::string(category_name(o.c.category[i]))] += o.lt.size[i];
      continue;
    }
    total_t += o.lt.size[i];
    if (agree) same_t += o.lt.size[i];
    a.confusion_at_peak[o.label[i]][std::string(category_name(o.c.category[i]))] += o.lt.size[i];
  }
  a.at_peak = total ? static_cast<double>(same) / total : 0;
  a.at_peak_tensors = total_t ? static_cast<double>(same_t) / total_t : 0;
  a.tensors_only = points_t ? sum_t / points_t : 0;
  return a;
}

std::string describe(const Agreement& a) {
  std::string s;
  for (const auto& [theirs, row] : a.confusion)
    for (const auto& [ours, bytes] : row)
      if (theirs != ours) s += "  profiler " + theirs + " -> ours " + ours + ": " + std::to_string(bytes) + " byte-points\n";
  for (const auto& [theirs, row] : a.confusion_at_peak)
    for (const auto& [ours, bytes] : row)
      if (theirs != ours) s += "  at the peak: profiler " + theirs + " -> ours " + ours + ": " + std::to_string(bytes) + " bytes\n";
  for (const auto& [theirs, row] : a.confusion_at_peak_raw)
    for (const auto& [ours, bytes] : row)
      if (theirs != ours)
        s += "  at the peak, no tensor: profiler " + theirs + " -> ours " + ours + ": " + std::to_string(bytes) + " bytes\n";
  return s;
}

// ddp_mlp_adamw's floor is 0.7: the profiler has no category for DistributedDataParallel's gradient buckets (it says
// unknown), which we call gradients; Categories.DdpBucketsAreOneCopyOfTheGradients checks them against the program.
// fsdp2_mlp_adamw's is 0.45: the profiler calls AdamW's state of FSDP's sharded parameters (made in `_init_group`)
// parameters, a third of the tensors' bytes. graphed_mlp_sgd's is 0.6: its gradients live in the CUDA graph's pool,
// made before the trace with no frames, and we say unknown where the profiler, which saw the capture, says gradient.
// Measured and explained in docs/analyses.md.
struct Loop {
  const char* name;
  double floor;  // the agreement this loop must keep, with and without workspaces (measured: docs/analyses.md)
};

class CategoriesOracle : public testing::TestWithParam<Loop> {};

TEST_P(CategoriesOracle, LiveBytesAgreeWithPyTorchsMemoryProfiler) {
  const Loop loop = GetParam();
  Oracle o;
  std::string err;
  ASSERT_TRUE(load(loop.name, &o, &err)) << loop.name << ": " << err;
  const Agreement a = agreement(o);
  ASSERT_EQ(a.points, 12) << loop.name;
  std::printf("%-28s agreement %.3f (tensors only %.3f, at the peak %.3f, tensors only %.3f)\n", loop.name, a.mean,
              a.tensors_only, a.at_peak, a.at_peak_tensors);
  EXPECT_GE(a.mean, loop.floor) << loop.name << " disagrees:\n" << describe(a);
  EXPECT_GE(a.tensors_only, loop.floor) << loop.name << " disagrees:\n" << describe(a);
  if (std::getenv("ALLOCSCOPE_ORACLE_VERBOSE")) std::printf("%s", describe(a).c_str());
}

// What FSDP's all-gathers and reduce-scatters make (reason kFsdp): the profiler, which follows each tensor through
// the ops, agrees with the rule's parameters and gradients on most of those bytes (before the rule they read as
// activations, autograd buffers and unknown: 0 of them agreed). The rows it calls otherwise are the reduce-scatter's
// staging buffers, which it calls autograd_detail.
TEST(CategoriesOracleFsdp, AllGathersAreParametersAndReduceScattersGradients) {
  Oracle o;
  std::string err;
  ASSERT_TRUE(load("fsdp2_mlp_adamw", &o, &err)) << err;
  uint64_t labelled = 0, agree = 0, params = 0, grads = 0;
  for (uint32_t i = 0; i < o.lt.count(); ++i) {
    if (o.c.reason[i] != CategoryReason::kFsdp || o.label[i].empty()) continue;
    const std::string ours(category_name(o.c.category[i]));
    labelled += o.lt.size[i];
    if (ours == o.label[i]) agree += o.lt.size[i];
    (o.c.category[i] == Category::kParameter ? params : grads) += o.lt.size[i];
    if (std::getenv("ALLOCSCOPE_ORACLE_VERBOSE")) {
      std::string where;
      for (FrameId f : o.s.stack(o.lt.stack[i]))
        if (o.s.str(o.s.frames[f].filename).find("/fsdp/") != std::string_view::npos) {
          where = std::string(o.s.str(o.s.frames[f].name)) + ":" + std::to_string(o.s.frames[f].line);
          break;
        }
      std::printf("  %s profiler %s ours %s %llu\n", where.c_str(), o.label[i].c_str(), ours.c_str(),
                  static_cast<unsigned long long>(o.lt.size[i]));
    }
  }
  ASSERT_GT(params, 0u);
  ASSERT_GT(grads, 0u);
  std::printf("fsdp2_mlp_adamw: FSDP rows %.3f agree with the profiler (%llu of %llu bytes)\n",
              static_cast<double>(agree) / static_cast<double>(labelled), static_cast<unsigned long long>(agree),
              static_cast<unsigned long long>(labelled));
  EXPECT_GE(static_cast<double>(agree) / static_cast<double>(labelled), 0.75);
}

// Every rule that reads a directory (torch/nn, torch/optim, torch/autograd, site-packages) must read Windows paths
// too: written with backslashes, the same loops once fell from 0.93 to 0.05.
TEST_P(CategoriesOracle, WindowsPathsGiveTheSameCategories) {
  const Loop loop = GetParam();
  Oracle posix, windows;
  std::string err;
  ASSERT_TRUE(load(loop.name, &posix, &err)) << loop.name << ": " << err;
  ASSERT_TRUE(load(loop.name, &windows, &err, true)) << loop.name << ": " << err;
  ASSERT_EQ(posix.c.category.size(), windows.c.category.size());
  size_t differ = 0;
  for (size_t i = 0; i < posix.c.category.size(); ++i) differ += posix.c.category[i] != windows.c.category[i];
  EXPECT_EQ(differ, 0u) << loop.name;
  EXPECT_GE(agreement(windows).tensors_only, loop.floor) << loop.name << " disagrees:\n" << describe(agreement(windows));
}

INSTANTIATE_TEST_SUITE_P(
    Loops, CategoriesOracle,
    testing::Values(Loop{"mlp_sgd", 0.9}, Loop{"mlp_adamw", 0.9}, Loop{"cnn_bn_sgd_momentum", 0.9},
                    Loop{"transformer_adamw", 0.9}, Loop{"amp_bf16_adamw", 0.9}, Loop{"grad_accum_adamw", 0.9},
                    Loop{"zero_grad_keep_sgd_momentum", 0.9}, Loop{"mlp_sgd_pystacks", 0.9},
                    Loop{"params_before_record_adamw", 0.9}, Loop{"inference_no_grad", 0.9},
                    Loop{"warm_start_adamw_pystacks", 0.9}, Loop{"mlp_adamw_fused", 0.9},
                    Loop{"mlp_sgd_expandable", 0.9}, Loop{"transformer_adamw_compiled", 0.9},
                    Loop{"transformer_larger_adamw", 0.9}, Loop{"ddp_mlp_adamw", 0.7},
                    Loop{"fsdp2_mlp_adamw", 0.45}, Loop{"graphed_mlp_sgd", 0.6}),
    [](const testing::TestParamInfo<Loop>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace allocscope
