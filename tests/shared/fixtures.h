// Fixture paths shared by the core tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "allocscope/loader.h"

namespace allocscope::testing {

inline std::string fixture(const std::string& name) { return std::string(ALLOCSCOPE_FIXTURES) + "/" + name; }

// A fixture's golden file: expected/BASE.KIND, or external/expected/NAME.KIND for base "external/NAME".
inline std::string expected_file(const std::string& base, const std::string& kind) {
  const size_t slash = base.rfind('/');
  if (slash == std::string::npos) return fixture("expected/" + base + "." + kind);
  return fixture(base.substr(0, slash) + "/expected/" + base.substr(slash + 1) + "." + kind);
}

// The snapshots other projects wrote with PyTorch 2.0-2.11 (tests/fixtures/external), as ("external/NAME", path
// under tests/fixtures), sorted.
inline std::vector<std::pair<std::string, std::string>> external_fixtures() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : std::filesystem::directory_iterator(fixture("external"))) {
    const std::string leaf = e.path().filename().string();
    const std::string suffix = ".pickle.gz";
    if (leaf.size() <= suffix.size() || leaf.compare(leaf.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    out.push_back({"external/" + leaf.substr(0, leaf.size() - suffix.size()), "external/" + leaf});
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A fixture's pickle bytes, gzip inflated.
inline std::vector<uint8_t> raw_fixture(const std::string& name) {
  auto f = read_file(fixture(name));
  EXPECT_TRUE(f.ok()) << name;
  if (!f.ok()) return {};
  if (is_gzip(f.value())) return gunzip(f.value()).value();
  return f.value();
}

// Two loads of one snapshot (whole and streamed, or a pickle and a page that carries it) built the same model.
inline void expect_same_model(const Snapshot& a, const Snapshot& b) {
  EXPECT_EQ(a.events.action, b.events.action);
  EXPECT_EQ(a.events.addr, b.events.addr);
  EXPECT_EQ(a.events.size, b.events.size);
  EXPECT_EQ(a.events.time_us, b.events.time_us);
  EXPECT_EQ(a.events.stack, b.events.stack);  // interning order is the same, so ids are too
  EXPECT_EQ(a.frames.size(), b.frames.size());
  EXPECT_EQ(a.stacks.size(), b.stacks.size());
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (size_t i = 0; i < a.segments.size(); ++i) EXPECT_EQ(a.segments[i].address, b.segments[i].address);
  EXPECT_EQ(a.blocks.size(), b.blocks.size());
  EXPECT_EQ(a.allocator_settings, b.allocator_settings);
  EXPECT_EQ(a.annotations.size(), b.annotations.size());
}

// Every fixture with a facts file: the PyTorch 2.11 ones we recorded, then the external ones.
inline const std::vector<std::pair<std::string, std::string>>& all_fixtures() {
  static const std::vector<std::pair<std::string, std::string>> f = [] {
    std::vector<std::pair<std::string, std::string>> v = {
      {"linear_seed", "linear_seed.pickle"},
      {"oom", "oom.pickle"},
      {"resnet18_grad_bug", "resnet18_grad_bug.pickle"},
      {"resnet50_train", "resnet50_train.pickle"},
      {"transformer_leak", "transformer_leak.pickle"},
      {"expandable_segments", "expandable_segments.pickle"},
      {"ddp_rank0", "ddp_rank0.pickle"},
      {"ddp_rank1", "ddp_rank1.pickle"},
      {"gpt2_cpp", "gpt2_cpp.pickle.gz"},
      {"gpt2_big_1M", "gpt2_big_1M.pickle.gz"},
      {"torch211_cpp_pickler", "torch211_cpp_pickler.pickle.gz"},
    };
    for (auto& e : external_fixtures()) v.push_back(e);
    return v;
  }();
  return f;
}

}  // namespace allocscope::testing
