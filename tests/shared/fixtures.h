// Fixture paths shared by the core tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

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
