// Folded-stack lines of `_memory_viz.py`'s `segments`, `memory` and `compare` flame graphs.
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "allocscope/memviz.h"
#include "memviz/frames.h"

namespace allocscope::memviz {

std::string segments_folded(const Snapshot& s) {
  StackFormatter fmt(s);
  std::string out;
  for (const Segment& seg : s.segments)
    write_blocks(s, &fmt, "stream_" + py_int(seg.stream) + ";seg_" + py_int(seg.address), seg, &out);
  return out;
}

std::string memory_folded(const Snapshot& s) {
  StackFormatter fmt(s);
  std::string out;
  for (const Segment& seg : s.segments) write_blocks(s, &fmt, "stream_" + py_int(seg.stream), seg, &out);
  return out;
}

namespace {

struct KeyHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& k) const {
    return std::hash<uint64_t>()(k.first * 0x9E3779B97F4A7C15ull ^ k.second);
  }
};
using KeySet = std::unordered_set<std::pair<uint64_t, uint64_t>, KeyHash>;

// `_seg_key`: a segment is "the same" in both snapshots when its address and total size match.
KeySet seg_keys(const Snapshot& s) {
  KeySet keys;
  for (const Segment& seg : s.segments) keys.insert({seg.address, seg.total_size});
  return keys;
}

// Appends the blocks of `side`'s segments missing from `other`; records their addresses (each key once).
void only_in(const Snapshot& side, const KeySet& other, const std::string& label, std::vector<uint64_t>* addrs,
             std::string* folded) {
  StackFormatter fmt(side);
  KeySet listed;
  for (const Segment& seg : side.segments) {
    const std::pair<uint64_t, uint64_t> key{seg.address, seg.total_size};
    if (other.count(key)) continue;
    if (listed.insert(key).second) addrs->push_back(seg.address);
    write_blocks(side, &fmt, label + ";stream_" + py_int(seg.stream) + ";seg_" + py_int(seg.address), seg, folded);
  }
}

std::string py_list(const std::vector<uint64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += py_int(v[i]);
  }
  return out + "]";
}

}  // namespace

CompareResult compare(const Snapshot& before, const Snapshot& after) {
  CompareResult r;
  const KeySet before_keys = seg_keys(before), after_keys = seg_keys(after);
  only_in(before, after_keys, "only_before", &r.only_before, &r.folded);
  only_in(after, before_keys, "only_after", &r.only_after, &r.folded);
  // PyTorch prints these from Python sets (hash order); we list addresses in file order, which is deterministic.
  r.summary = "only_before = " + py_list(r.only_before) + "\nonly_after = " + py_list(r.only_after) + "\n";
  return r;
}

}  // namespace allocscope::memviz
