// Interning tables of the model (strings, stacks) and small helpers of Snapshot.
#include <algorithm>

#include "allocscope/snapshot.h"
#include "util/hash.h"

namespace allocscope {

namespace {
constexpr std::string_view kActionNames[] = {"alloc",        "free_requested", "free_completed", "segment_alloc",
                                             "segment_free", "segment_map",    "segment_unmap",  "oom",
                                             "snapshot",     "annotate",       "unknown"};
}  // namespace

std::string_view action_name(Action a) { return kActionNames[static_cast<int>(a)]; }

Action action_from_name(std::string_view name) {
  for (int i = 0; i < kActionCount - 1; ++i)
    if (kActionNames[i] == name) return static_cast<Action>(i);
  return Action::kUnknown;
}

std::string line_text(const Frame& f) {
  if (f.line_none) return "None";
  return f.line_unsigned ? std::to_string(static_cast<uint64_t>(f.line)) : std::to_string(f.line);
}

std::string_view block_state_name(BlockState s) {
  switch (s) {
    case BlockState::kActiveAllocated: return "active_allocated";
    case BlockState::kActivePendingFree: return "active_pending_free";
    case BlockState::kInactive: return "inactive";
    default: return "unknown";
  }
}

// ---- StringTable: strings back to back plus an open-addressing index of ids.

StringTable::StringTable() {
  offsets_.push_back(0);
  offsets_.push_back(0);  // id 0 = ""
  rehash(64);
}

void StringTable::rehash(size_t n) {
  buckets_.assign(n, 0);
  for (uint32_t id = 1; id < size(); ++id) {
    size_t i = detail::hash_string(get(id)) & (n - 1);
    while (buckets_[i]) i = (i + 1) & (n - 1);
    buckets_[i] = id + 1;
  }
}

bool StringTable::find(std::string_view s, StringId* out) const {
  if (s.empty()) {
    *out = 0;
    return true;
  }
  const size_t mask = buckets_.size() - 1;
  for (size_t i = detail::hash_string(s) & mask; buckets_[i]; i = (i + 1) & mask) {
    if (get(buckets_[i] - 1) == s) {
      *out = buckets_[i] - 1;
      return true;
    }
  }
  return false;
}

StringId StringTable::intern(std::string_view s) {
  if (s.empty()) return 0;
  const size_t mask = buckets_.size() - 1;
  size_t i = detail::hash_string(s) & mask;
  for (; buckets_[i]; i = (i + 1) & mask)
    if (get(buckets_[i] - 1) == s) return buckets_[i] - 1;
  const StringId id = size();
  data_.append(s);
  offsets_.push_back(static_cast<uint32_t>(data_.size()));
  buckets_[i] = id + 1;
  if (size() * 2 > buckets_.size()) rehash(buckets_.size() * 2);
  return id;
}

size_t StringTable::memory_bytes() const {
  return data_.capacity() + offsets_.capacity() * 4 + buckets_.capacity() * 4;
}

// ---- StackTable: frame-id sequences, deduplicated by content.

StackTable::StackTable() {
  offsets_.push_back(0);
  offsets_.push_back(0);  // stack 0 = no frames
  hashes_.push_back(detail::hash_bytes(nullptr, 0));
  rehash(1024);
}

void StackTable::rehash(size_t n) {
  buckets_.assign(n, 0);
  for (uint32_t id = 1; id < size(); ++id) {
    size_t i = hashes_[id] & (n - 1);
    while (buckets_[i]) i = (i + 1) & (n - 1);
    buckets_[i] = id + 1;
  }
}

StackId StackTable::intern(std::span<const FrameId> frames) {
  if (frames.empty()) return 0;
  const uint64_t h = detail::hash_bytes(frames.data(), frames.size_bytes());
  const size_t mask = buckets_.size() - 1;
  size_t i = h & mask;
  for (; buckets_[i]; i = (i + 1) & mask) {
    const uint32_t id = buckets_[i] - 1;
    if (hashes_[id] != h) continue;
    auto s = get(id);
    if (s.size() == frames.size() && std::equal(s.begin(), s.end(), frames.begin())) return id;
  }
  const StackId id = size();
  frames_.insert(frames_.end(), frames.begin(), frames.end());
  offsets_.push_back(static_cast<uint32_t>(frames_.size()));
  hashes_.push_back(h);
  buckets_[i] = id + 1;
  if (size() * 2 > buckets_.size()) rehash(buckets_.size() * 2);
  return id;
}

size_t StackTable::memory_bytes() const {
  return frames_.capacity() * 4 + offsets_.capacity() * 4 + hashes_.capacity() * 8 + buckets_.capacity() * 4;
}

size_t EventColumns::memory_bytes() const {
  return action.capacity() + addr.capacity() * 8 + size.capacity() * 8 + stream.capacity() * 8 +
         time_us.capacity() * 8 + stack.capacity() * 4 + compile_context.capacity() * 4 +
         user_metadata.capacity() * 4 + layout.capacity() + unknown_action.capacity() * 8;
}

uint8_t EventColumns::unknown_action_of(size_t row) const {
  auto it = std::lower_bound(unknown_action.begin(), unknown_action.end(), row,
                             [](const std::pair<uint32_t, uint8_t>& u, size_t r) { return u.first < r; });
  return it != unknown_action.end() && it->first == row ? it->second : kUnnamedAction;
}

std::string_view Snapshot::action_text(size_t row) const {
  const Action a = events.action[row];
  if (a != Action::kUnknown) return action_name(a);
  const uint8_t i = events.unknown_action_of(row);
  return i < unknown_action_names.size() ? std::string_view(unknown_action_names[i]) : action_name(a);
}

void EventColumns::append_row(const EventColumns& from, size_t row) {
  // Values, not references: `from` may be this table, whose vectors may move while growing.
  const Action a = from.action[row];
  const uint64_t ad = from.addr[row], sz = from.size[row];
  const int64_t st = from.stream[row], t = from.time_us[row];
  const StackId sk = from.stack[row];
  const uint32_t cc = from.compile_context[row], um = from.user_metadata[row];
  action.push_back(a), addr.push_back(ad), size.push_back(sz), stream.push_back(st), time_us.push_back(t);
  stack.push_back(sk), compile_context.push_back(cc), user_metadata.push_back(um);
  if (a == Action::kUnknown)
    if (const uint8_t n = from.unknown_action_of(row); n != kUnnamedAction)
      unknown_action.emplace_back(static_cast<uint32_t>(action.size() - 1), n);
  if (row < from.layout.size()) {
    const uint8_t l = from.layout[row];
    layout.push_back(l);
  }
}

void EventColumns::truncate(size_t rows) {
  if (rows >= size_rows()) return;
  action.resize(rows), addr.resize(rows), size.resize(rows), stream.resize(rows), time_us.resize(rows);
  stack.resize(rows), compile_context.truncate(rows), user_metadata.truncate(rows);
  if (layout.size() > rows) layout.resize(rows);
  while (!unknown_action.empty() && unknown_action.back().first >= rows) unknown_action.pop_back();
}

const DeviceTrace* Snapshot::device(int64_t ordinal) const {
  for (const DeviceTrace& d : devices)
    if (d.device == ordinal) return &d;
  return nullptr;
}

bool Snapshot::expandable_segments() const {
  for (const Setting& st : allocator_settings)
    if (st.key == "expandable_segments") return st.kind == Setting::Kind::kBool && st.i != 0;
  for (const Segment& g : segments)
    if (g.is_expandable) return true;
  return false;
}

size_t Snapshot::memory_bytes() const {
  return strings.memory_bytes() + frames.capacity() * sizeof(Frame) + stacks.memory_bytes() +
         segments.capacity() * sizeof(Segment) + blocks.capacity() * sizeof(Block) + events.memory_bytes() +
         block_history.capacity() * sizeof(BlockHistory) + annotations.capacity() * sizeof(Annotation) +
         (outside ? outside->memory_bytes() : 0);
}

}  // namespace allocscope
