// Loads each fixture once per test binary (the 1M-event one takes seconds), shared by the timeline suites.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/snapshot.h"

namespace allocscope::test {

inline std::string fixture_path(const std::string& name) {
  const bool gz = name.rfind("gpt2", 0) == 0;
  return std::string(ALLOCSCOPE_FIXTURES) + "/" + name + (gz ? ".pickle.gz" : ".pickle");
}

// nullptr (and a test failure message by the caller) when loading fails.
inline const Snapshot* fixture(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Snapshot>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto r = load_snapshot_file(fixture_path(name));
  std::unique_ptr<Snapshot> p;
  if (r.ok()) p = std::make_unique<Snapshot>(std::move(r).value());
  return cache.emplace(name, std::move(p)).first->second.get();
}

inline const std::vector<std::string>& small_fixtures() {
  static const std::vector<std::string> names = {"linear_seed", "oom", "ddp_rank0", "ddp_rank1",
                                                 "expandable_segments", "gpt2_cpp", "resnet18_grad_bug",
                                                 "resnet50_train", "transformer_leak"};
  return names;
}

}  // namespace allocscope::test
