// Loads each fixture once per test binary and builds the per-device analyses the answers need.
#pragma once

#include <fstream>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/summary.h"

namespace allocscope::test {

inline std::string fixture_path(const std::string& name) {
  // Small fixtures are kept as .pickle, the rest gzipped: whichever exists.
  const std::string base = std::string(ALLOCSCOPE_FIXTURES) + "/" + name;
  return std::filesystem::exists(base + ".pickle") ? base + ".pickle" : base + ".pickle.gz";
}

struct Loaded {
  Snapshot s;
  Lifetimes lifetimes;
  FrameFilter ff;
};

// nullptr when loading fails (the caller asserts).
inline const Loaded* load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto r = load_snapshot_file(fixture_path(name));
  std::unique_ptr<Loaded> p;
  if (r.ok()) {
    p = std::make_unique<Loaded>();
    p->s = std::move(r).value();
    p->lifetimes = build_lifetimes(p->s);
    p->ff = FrameFilter(p->s);
  }
  return cache.emplace(name, std::move(p)).first->second.get();
}

// The device with events (ddp_rank1 traces device 1).
inline const DeviceLifetimes& traced_device(const Loaded& l) {
  for (const auto& d : l.lifetimes.devices)
    if (d.event_count) return d;
  return l.lifetimes.devices.front();
}

// A GPU run's label (tests/fixtures/DIR/JOB.label.json): what the job's libraries reported themselves.
inline nlohmann::json label_of(const std::string& dir, const std::string& job) {
  std::ifstream in(std::string(ALLOCSCOPE_FIXTURES) + "/" + dir + "/" + job + ".label.json");
  return nlohmann::json::parse(in, nullptr, false);
}

inline bool warns_leak(const Summary& s) {
  for (const std::string& w : s.warnings)
    if (w.find("leak suspected") != std::string::npos) return true;
  return false;
}

}  // namespace allocscope::test
