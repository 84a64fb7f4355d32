// Fixture paths shared by the core tests.
#pragma once

#include <string>
#include <vector>

namespace allocscope::testing {

inline std::string fixture(const std::string& name) { return std::string(ALLOCSCOPE_FIXTURES) + "/" + name; }

// Every PyTorch 2.11 fixture, by base name (the expected/ files use the same base).
inline const std::vector<std::pair<std::string, std::string>>& all_fixtures() {
  static const std::vector<std::pair<std::string, std::string>> f = {
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
  };
  return f;
}

}  // namespace allocscope::testing
