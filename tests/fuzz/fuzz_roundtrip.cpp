// libFuzzer target: whatever loads must survive load -> write -> load with an equal model, and writing that model
// again must give the same bytes (the writer is a function of the model's content, not of its ids).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "allocscope/writer.h"
#include "fuzz_common.h"

namespace {

using allocscope::Setting;
using allocscope::Snapshot;

std::string frame_text(const Snapshot& s, allocscope::FrameId f) {
  const auto& fr = s.frames[f];
  return std::string(s.str(fr.name)) + "\x1f" + std::string(s.str(fr.filename)) + "\x1f" + std::to_string(fr.line);
}
std::string stack_text(const Snapshot& s, allocscope::StackId id) {
  std::string out;
  for (auto f : s.stack(id)) out += frame_text(s, f) + "\x1e";
  return out;
}

// kOther settings (values we keep as text) are written as str, so they come back as kStr with the same text;
// floats compare by bits so NaN equals itself.
bool same_setting(const Setting& a, const Setting& b) {
  auto kind = [](Setting::Kind k) { return k == Setting::Kind::kOther ? Setting::Kind::kStr : k; };
  if (a.key != b.key || kind(a.kind) != kind(b.kind) || a.children.size() != b.children.size()) return false;
  switch (a.kind) {
    case Setting::Kind::kBool: return (a.i != 0) == (b.i != 0);
    case Setting::Kind::kInt: return a.i == b.i;
    case Setting::Kind::kFloat: return std::memcmp(&a.f, &b.f, sizeof a.f) == 0;
    case Setting::Kind::kStr:
    case Setting::Kind::kOther: return a.s == b.s;
    default: break;
  }
  for (size_t i = 0; i < a.children.size(); ++i)
    if (!same_setting(a.children[i], b.children[i])) return false;
  return true;
}

void expect_same(const Snapshot& a, const Snapshot& b) {
  FUZZ_CHECK(a.devices.size() == b.devices.size());
  for (size_t d = 0; d < a.devices.size(); ++d) FUZZ_CHECK(a.devices[d].count() == b.devices[d].count());
  const auto& x = a.events;
  const auto& y = b.events;
  FUZZ_CHECK(x.size_rows() == y.size_rows());
  // Rows are compared device by device (a model may hold rows outside every device range; those are not written).
  for (size_t d = 0; d < a.devices.size(); ++d) {
    for (uint32_t k = 0; k < a.devices[d].count(); ++k) {
      const uint32_t i = a.devices[d].begin + k, j = b.devices[d].begin + k;
      FUZZ_CHECK(x.action[i] == y.action[j]);
      FUZZ_CHECK(x.addr[i] == y.addr[j] && x.size[i] == y.size[j]);
      FUZZ_CHECK(x.stream[i] == y.stream[j] && x.time_us[i] == y.time_us[j]);
      FUZZ_CHECK(stack_text(a, x.stack[i]) == stack_text(b, y.stack[j]));
      FUZZ_CHECK(a.str(x.compile_context[i]) == b.str(y.compile_context[j]));
      FUZZ_CHECK(a.str(x.user_metadata[i]) == b.str(y.user_metadata[j]));
    }
  }
  FUZZ_CHECK(a.segments.size() == b.segments.size());
  for (size_t i = 0; i < a.segments.size(); ++i) {
    const auto& s = a.segments[i];
    const auto& t = b.segments[i];
    FUZZ_CHECK(s.device == t.device && s.address == t.address && s.total_size == t.total_size);
    FUZZ_CHECK(s.allocated_size == t.allocated_size && s.active_size == t.active_size);
    FUZZ_CHECK(s.requested_size == t.requested_size && s.stream == t.stream);
    FUZZ_CHECK(s.is_expandable == t.is_expandable && s.pool_id[0] == t.pool_id[0] && s.pool_id[1] == t.pool_id[1]);
    FUZZ_CHECK(a.str(s.segment_type) == b.str(t.segment_type));
    FUZZ_CHECK(stack_text(a, s.stack) == stack_text(b, t.stack));
    FUZZ_CHECK(s.num_blocks == t.num_blocks);
    for (uint32_t k = 0; k < s.num_blocks; ++k) {
      const auto& p = a.blocks[s.first_block + k];
      const auto& q = b.blocks[t.first_block + k];
      FUZZ_CHECK(p.address == q.address && p.size == q.size && p.requested_size == q.requested_size);
      FUZZ_CHECK(p.state == q.state && stack_text(a, p.stack) == stack_text(b, q.stack));
    }
  }
  FUZZ_CHECK(a.annotations.size() == b.annotations.size());
  for (size_t i = 0; i < a.annotations.size(); ++i) {
    FUZZ_CHECK(a.annotations[i].start == b.annotations[i].start);
    FUZZ_CHECK(a.str(a.annotations[i].name) == b.str(b.annotations[i].name));
    FUZZ_CHECK(a.annotations[i].device == b.annotations[i].device);
    FUZZ_CHECK(a.annotations[i].time_us == b.annotations[i].time_us);
  }
  FUZZ_CHECK(a.allocator_settings.size() == b.allocator_settings.size());
  for (size_t i = 0; i < a.allocator_settings.size(); ++i)
    FUZZ_CHECK(same_setting(a.allocator_settings[i], b.allocator_settings[i]));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto opt = fuzz::small_options();
  auto a = allocscope::load_snapshot(std::span<const uint8_t>(data, size), opt);
  if (!a.ok()) return 0;
  fuzz::check_model(a.value());
  const std::vector<uint8_t> once = allocscope::write_snapshot(a.value());
  // Our own output must load under default limits (small limits could refuse a legitimately large expansion).
  auto b = allocscope::load_snapshot(once);
  if (!b.ok()) {
    std::fprintf(stderr, "reloading our own output failed: %s\n", b.error().describe().c_str());
    fuzz::die("write -> load failed");
  }
  fuzz::check_model(b.value());
  expect_same(a.value(), b.value());
  const std::vector<uint8_t> twice = allocscope::write_snapshot(b.value());
  FUZZ_CHECK(once == twice);
  return 0;
}
