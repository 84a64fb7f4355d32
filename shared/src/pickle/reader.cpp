// The bounded pickle stack machine: opcodes of protocols 0-5 for plain data, streaming through a Consumer.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "allocscope/pickle.h"
#include "pickle/opcodes.h"
#include "pickle/utf8.h"

namespace allocscope::pickle {

double Value::as_double() const {
  double d;
  std::memcpy(&d, &payload, 8);
  return d;
}

namespace {

// A container under construction or finished. Consumed nodes are recycled with a new generation, so values that
// still name the old generation are detected as stale instead of silently reading a different object.
struct Node {
  Tag kind = Tag::kList;
  bool consumed = false;
  bool free = false;
  bool shared = false;  // referenced again through the memo or DUP: never recycled, its replacement stays valid
  uint32_t gen = 0;
  uint32_t depth = 1;
  uint32_t memo_slot = UINT32_MAX;
  uint64_t offset = 0;  // where the opcode that created it sits
  Value replacement;
  std::vector<Value> items;
};

constexpr uint32_t kUnsetMemo = 0xFFFFFFFFu;  // aux of a kNone value marking an empty memo slot

Value unset_memo() { return Value{Tag::kNone, kUnsetMemo, 0}; }
bool is_unset(const Value& v) { return v.tag == Tag::kNone && v.aux == kUnsetMemo; }

}  // namespace

struct Reader::Impl {
  std::vector<Node> nodes;
  std::vector<uint32_t> free_nodes;
  std::vector<uint32_t> to_recycle;
  std::vector<Value> stack;
  std::vector<size_t> marks;
  std::vector<Value> memo;
  std::string scratch;
};

Reader::Reader(StringTable* strings, Limits limits) : strings_(strings), limits_(limits), impl_(new Impl) {}
Reader::~Reader() { delete impl_; }

std::span<const Value> Reader::items(const Value& v) const {
  if (!v.is_container() || v.payload >= impl_->nodes.size()) return {};
  const Node& n = impl_->nodes[v.payload];
  if (n.gen != v.aux || n.free) return {};
  return n.items;
}

uint64_t Reader::offset_of(const Value& v) const {
  if (!v.is_container() || v.payload >= impl_->nodes.size()) return Error::kNoOffset;
  return impl_->nodes[v.payload].offset;
}

const Value* Reader::find(const Value& dict, StringId key) const {
  if (dict.tag != Tag::kDict) return nullptr;
  auto it = items(dict);
  for (size_t i = it.size(); i >= 2; i -= 2) {
    const Value& k = it[i - 2];
    if (k.tag == Tag::kStr && k.payload == key) return &it[i - 1];
  }
  return nullptr;
}

namespace {

// The machine proper; one per run() call, holding the cursor and error state.
class Machine {
 public:
  Machine(Reader& r, Reader::Impl& im, StringTable& st, const Limits& lim, std::span<const uint8_t> in,
          Consumer* c, uint64_t* pos_out)
      : reader_(r), im_(im), strings_(st), lim_(lim), p_(in.data()), begin_(in.data()), end_(in.data() + in.size()),
        consumer_(c), pos_out_(pos_out) {}

  Result<Value> run(const std::function<void(uint64_t, uint64_t)>& progress);

 private:
  uint64_t off() const { return static_cast<uint64_t>(op_start_ - begin_); }
  // Internals return bool (true = fine) and park the error here: no error object is built on the hot path.
  [[gnu::noinline, gnu::cold]] bool err(std::string msg) {
    error_ = Error{"opcode " + opcode_label(op_) + ": " + std::move(msg), off()};
    return false;
  }
  bool fail(Error e) {
    error_ = std::move(e);
    return false;
  }
  [[gnu::noinline, gnu::cold]] bool truncated(size_t need) {
    return err("expected " + std::to_string(need) + " more byte(s) of argument, but the input ends " +
               std::to_string(end_ - p_) + " byte(s) later (truncated file?)");
  }
  bool have(size_t n) const { return static_cast<size_t>(end_ - p_) >= n; }

  template <typename T>
  T read_le() {
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }

  [[gnu::always_inline]] bool push(const Value& v) {
    if (__builtin_expect(im_.stack.size() >= lim_.max_stack, 0))
      return err("stack holds more than " + std::to_string(lim_.max_stack) + " values (limit)");
    im_.stack.push_back(v);
    return true;
  }
  bool pop(Value* out) {
    if (im_.stack.empty() || (!im_.marks.empty() && im_.marks.back() == im_.stack.size()))
      return err("expected a value on the stack, found " +
                 std::string(!im_.marks.empty() && im_.marks.back() == im_.stack.size() ? "a MARK" : "an empty stack"));
    *out = im_.stack.back();
    im_.stack.pop_back();
    return true;
  }
  bool pop_mark(size_t* out) {
    if (im_.marks.empty()) return err("expected a MARK on the stack, found none");
    *out = im_.marks.back();
    im_.marks.pop_back();
    return true;
  }

  bool node_of(const Value& v, Node** out) {
    if (!v.is_container() || v.payload >= im_.nodes.size()) return err("expected a container");
    Node& n = im_.nodes[v.payload];
    if (n.free || n.gen != v.aux)
      return err("refers to an object the loader already consumed (a container shared between trace entries "
                 "is not supported)");
    *out = &n;
    return true;
  }

  bool new_node(Tag kind, Value* out) {
    uint32_t idx;
    if (!im_.free_nodes.empty()) {
      idx = im_.free_nodes.back();
      im_.free_nodes.pop_back();
    } else {
      if (im_.nodes.size() >= UINT32_MAX - 1) return err("too many containers");
      idx = static_cast<uint32_t>(im_.nodes.size());
      im_.nodes.emplace_back();
    }
    Node& n = im_.nodes[idx];
    n.kind = kind;
    n.consumed = false;
    n.free = false;
    n.shared = false;
    n.depth = 1;
    n.memo_slot = UINT32_MAX;
    n.offset = off();
    n.items.clear();
    *out = Value{kind, n.gen, idx};
    return true;
  }

  // Prepares `v` for insertion into `parent`: resolves consumed nodes, offers finished containers to the consumer,
  // and enforces the nesting limit.
  [[gnu::always_inline]] bool prepare(uint32_t parent_idx, Value v, const Value* key, Value* result) {
    *result = v;
    if (!v.is_container()) return true;
    Node* np = nullptr;
    if (!node_of(v, &np)) return false;
    Node& n = *np;
    if (n.consumed) {
      *result = n.replacement;
      return true;
    }
    if (consumer_) {
      *pos_out_ = off();
      Value out;
      auto c = consumer_->consume(reader_, v, key, &out);
      if (!c.ok()) {
        Error e = c.error();
        if (e.offset == Error::kNoOffset) e.offset = off();
        return fail(std::move(e));
      }
      if (c.value()) {
        Node& n2 = im_.nodes[v.payload];  // the consumer may not add nodes, but stay safe
        n2.consumed = true;
        n2.replacement = out;
        if (n2.memo_slot < im_.memo.size()) {
          Value& m = im_.memo[n2.memo_slot];
          if (m.is_container() && m.payload == v.payload && m.aux == v.aux) m = out;
        }
        im_.to_recycle.push_back(static_cast<uint32_t>(v.payload));
        *result = out;
        return true;
      }
    }
    Node& parent = im_.nodes[parent_idx];
    const uint32_t child_depth = im_.nodes[v.payload].depth;
    if (child_depth + 1 > parent.depth) {
      parent.depth = child_depth + 1;
      if (parent.depth > lim_.max_depth)
        return err("containers nested deeper than " + std::to_string(lim_.max_depth) + " levels (limit)");
    }
    return true;
  }

  // Frees consumed nodes (and the containers inside them) once the opcode that consumed them is done.
  void recycle() {
    while (!im_.to_recycle.empty()) {
      uint32_t idx = im_.to_recycle.back();
      im_.to_recycle.pop_back();
      Node& n = im_.nodes[idx];
      if (n.free || n.shared) continue;
      for (const Value& c : n.items) {
        if (c.is_container() && c.payload < im_.nodes.size()) {
          Node& cn = im_.nodes[c.payload];
          if (!cn.free && !cn.shared && cn.gen == c.aux) {
            cn.consumed = true;  // unreachable once its parent is gone (it was never referenced again)
            im_.to_recycle.push_back(static_cast<uint32_t>(c.payload));
          }
        }
      }
      if (n.memo_slot < im_.memo.size()) {
        Value& m = im_.memo[n.memo_slot];
        if (m.is_container() && m.payload == idx && m.aux == n.gen) m = unset_memo();
      }
      n.items.clear();
      if (n.items.capacity() > 4096) n.items.shrink_to_fit();
      n.free = true;
      n.consumed = false;
      ++n.gen;
      im_.free_nodes.push_back(idx);
    }
  }

  bool check_items(const Node& n, size_t adding) {
    if (n.items.size() + adding > lim_.max_container_items)
      return err("container holds more than " + std::to_string(lim_.max_container_items) + " items (limit)");
    return true;
  }

  bool append_range(size_t first) {  // APPENDS/ADDITEMS: stack[first..] into stack[first-1]
    if (first == 0) return err("expected a list below the MARK, found the bottom of the stack");
    Value target = im_.stack[first - 1];
    const bool set_op = op_ == kADDITEMS;
    if (target.tag != (set_op ? Tag::kSet : Tag::kList))
      return err(std::string("expected a ") + (set_op ? "set" : "list") + " to append to, found " + tag_name(target.tag));
    Node* tn = nullptr;
    if (!node_of(target, &tn)) return false;
    if (tn->consumed) return err("modifies a container after it was placed in its parent (not supported)");
    if (!check_items(*tn, im_.stack.size() - first)) return false;
    bool any_container = false;
    for (size_t i = first; i < im_.stack.size(); ++i) any_container |= im_.stack[i].is_container();
    if (!any_container) {  // scalars and handles (e.g. a frame list): no consumer, no nesting to track
      tn->items.insert(tn->items.end(), im_.stack.begin() + static_cast<std::ptrdiff_t>(first), im_.stack.end());
      im_.stack.resize(first);
      return true;
    }
    const uint32_t ti = static_cast<uint32_t>(target.payload);
    for (size_t i = first; i < im_.stack.size(); ++i) {
      Value v;
      if (!prepare(ti, im_.stack[i], nullptr, &v)) return false;
      im_.nodes[ti].items.push_back(v);
    }
    im_.stack.resize(first);
    recycle();
    return true;
  }

  bool setitems_range(size_t first) {  // SETITEMS: pairs stack[first..] into dict stack[first-1]
    if (first == 0) return err("expected a dict below the MARK, found the bottom of the stack");
    if ((im_.stack.size() - first) % 2) return err("expected key/value pairs, found an odd number of items");
    Value target = im_.stack[first - 1];
    if (target.tag != Tag::kDict) return err(std::string("expected a dict to set items on, found ") + tag_name(target.tag));
    Node* tn = nullptr;
    if (!node_of(target, &tn)) return false;
    if (tn->consumed) return err("modifies a container after it was placed in its parent (not supported)");
    if (!check_items(*tn, im_.stack.size() - first)) return false;
    const uint32_t ti = static_cast<uint32_t>(target.payload);
    for (size_t i = first; i < im_.stack.size(); i += 2) {
      Value k, v;
      if (!prepare(ti, im_.stack[i], nullptr, &k)) return false;
      if (!prepare(ti, im_.stack[i + 1], &k, &v)) return false;
      Node& n = im_.nodes[ti];
      n.items.push_back(k);
      n.items.push_back(v);
    }
    im_.stack.resize(first);
    recycle();
    return true;
  }

  // LIST / DICT / TUPLE / FROZENSET: a new container from the items above the last MARK.
  bool build_from_mark(Tag kind) {
    size_t first = 0;
    if (!pop_mark(&first)) return false;
    if (kind == Tag::kDict && (im_.stack.size() - first) % 2)
      return err("expected key/value pairs, found an odd number of items");
    return build_from(kind, first);
  }
  bool build_from(Tag kind, size_t first) {
    Value target;
    if (!new_node(kind, &target)) return false;
    const uint32_t ti = static_cast<uint32_t>(target.payload);
    if (!check_items(im_.nodes[ti], im_.stack.size() - first)) return false;
    for (size_t i = first; i < im_.stack.size(); ++i) {
      const bool is_value = kind == Tag::kDict && (i - first) % 2 == 1;
      Value key = is_value ? im_.nodes[ti].items.back() : Value{};
      Value v;
      if (!prepare(ti, im_.stack[i], is_value ? &key : nullptr, &v)) return false;
      im_.nodes[ti].items.push_back(v);
    }
    im_.stack.resize(first);
    recycle();
    return push(target);
  }

  [[gnu::always_inline]] bool memo_put(uint64_t idx) {
    if (im_.stack.empty() || (!im_.marks.empty() && im_.marks.back() == im_.stack.size()))
      return err("expected a value to memoize, found " +
                 std::string(!im_.marks.empty() && im_.marks.back() == im_.stack.size() ? "a MARK" : "an empty stack"));
    // Every memo store costs at least two bytes of input (an object and the put), so a real pickle never needs
    // more slots than half its size; Python numbers slots sequentially, so a far jump means a crafted file.
    if (idx >= memo_cap_)
      return err("memo index " + std::to_string(idx) + " exceeds what a " + std::to_string(end_ - begin_) +
                 "-byte pickle can hold (expected at most " + std::to_string(memo_cap_) + " slots)");
    if (idx > im_.memo.size() + 256)
      return err("memo index " + std::to_string(idx) + " is far beyond the " + std::to_string(im_.memo.size()) +
                 " slots in use (expected sequential memo slots)");
    const Value& v = im_.stack.back();
    if (idx == im_.memo.size()) {
      im_.memo.push_back(v);  // the common case: MEMOIZE / sequential BINPUT
    } else {
      if (idx > im_.memo.size()) im_.memo.resize(idx + 1, unset_memo());
      im_.memo[idx] = v;
    }
    if (v.is_container()) im_.nodes[v.payload].memo_slot = static_cast<uint32_t>(idx);
    return true;
  }

  [[gnu::always_inline]] bool memo_get(uint64_t idx) {
    if (idx >= im_.memo.size() || is_unset(im_.memo[idx]))
      return err("refers to memo slot " + std::to_string(idx) + ", which was never stored (" +
                 std::to_string(im_.memo.size()) + " slots in use)");
    const Value& v = im_.memo[idx];
    if (v.is_container()) {
      Node* np = nullptr;
      if (!node_of(v, &np)) return false;
      np->shared = true;
    }
    return push(v);
  }

  bool push_string(const uint8_t* data, size_t n, Tag tag) {
    std::string_view s(reinterpret_cast<const char*>(data), n);
    if (tag == Tag::kStr && !utf8_valid(s)) {
      utf8_sanitize(s, &im_.scratch);
      s = im_.scratch;
    }
    return push(Value{tag, 0, strings_.intern(s)});
  }

  bool push_long(const uint8_t* b, size_t n) {
    if (n == 0) return push(Value::integer(0));
    uint64_t low = 0;
    const size_t k = n < 8 ? n : 8;
    for (size_t i = 0; i < k; ++i) low |= static_cast<uint64_t>(b[i]) << (8 * i);
    const bool neg = b[n - 1] & 0x80;
    if (n < 8) {
      if (neg) low |= ~0ULL << (8 * n);  // sign-extend
      return push(Value::integer(static_cast<int64_t>(low)));
    }
    for (size_t i = 8; i < n; ++i)
      if (b[i] != (neg ? 0xFF : 0x00)) return err("integer wider than 64 bits (" + std::to_string(n) + " bytes)");
    if (n == 8) return push(Value::integer(static_cast<int64_t>(low)));
    const bool low_top = low >> 63;
    if (!neg) return push(low_top ? Value{Tag::kUInt, 0, low} : Value::integer(static_cast<int64_t>(low)));
    if (!low_top) return err("negative integer below -2^63");
    return push(Value::integer(static_cast<int64_t>(low)));
  }

  bool read_line(std::string_view* out) {
    const void* nl = std::memchr(p_, '\n', static_cast<size_t>(end_ - p_));
    if (!nl) return err("expected a newline-terminated argument, but the input ends first (truncated file?)");
    std::string_view s(reinterpret_cast<const char*>(p_), static_cast<const uint8_t*>(nl) - p_);
    p_ = static_cast<const uint8_t*>(nl) + 1;
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    *out = s;
    return true;
  }

  bool text_int(std::string_view s, bool is_long) {
    if (is_long && !s.empty() && s.back() == 'L') s.remove_suffix(1);
    if (!is_long && s == "00") return push(Value::boolean(false));
    if (!is_long && s == "01") return push(Value::boolean(true));
    std::string t(s);
    if (t.empty()) return err("expected a decimal integer, found an empty line");
    char* e = nullptr;
    errno = 0;
    if (t[0] == '-') {
      long long v = std::strtoll(t.c_str(), &e, 10);
      if (errno || *e) return err("expected a decimal integer within 64 bits, found '" + t.substr(0, 40) + "'");
      return push(Value::integer(v));
    }
    unsigned long long v = std::strtoull(t.c_str(), &e, 10);
    if (errno || *e) return err("expected a decimal integer within 64 bits, found '" + t.substr(0, 40) + "'");
    return push(v >> 63 ? Value{Tag::kUInt, 0, v} : Value::integer(static_cast<int64_t>(v)));
  }

  bool push_double(double d) {
    Value v{Tag::kFloat, 0, 0};
    std::memcpy(&v.payload, &d, 8);
    return push(v);
  }

  bool step();

  Reader& reader_;
  Reader::Impl& im_;
  StringTable& strings_;
  const Limits& lim_;
  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  const uint8_t* op_start_ = nullptr;
  uint8_t op_ = 0;
  Consumer* consumer_;
  uint64_t* pos_out_;
  bool stopped_ = false;
  int proto_ = 0;
  Error error_;
  const std::function<void(uint64_t, uint64_t)>* progress_ = nullptr;
  uint64_t memo_cap_ = 0;
};

Result<Value> Machine::run(const std::function<void(uint64_t, uint64_t)>& progress) {
  im_.stack.clear();
  im_.marks.clear();
  im_.memo.clear();
  im_.stack.reserve(4096);
  // Memo slots: about one per 60 bytes in real snapshots; reserving avoids regrowing a large array.
  memo_cap_ = std::min<uint64_t>(lim_.max_memo, static_cast<uint64_t>(end_ - begin_) / 2 + 64);
  im_.memo.reserve(std::min<size_t>(static_cast<size_t>(end_ - begin_) / 48 + 64, memo_cap_));
  const uint64_t total = static_cast<uint64_t>(end_ - begin_);
  progress_ = &progress;
  if (!step()) return error_;
  *pos_out_ = static_cast<uint64_t>(p_ - begin_);
  if (progress) progress(total, total);
  if (im_.stack.size() != 1 || !im_.marks.empty())
    return Error{"STOP with " + std::to_string(im_.stack.size()) + " values and " + std::to_string(im_.marks.size()) +
                     " marks on the stack; expected exactly one value",
                 off()};
  return im_.stack.back();
}

// The dispatch loop: one function for all opcodes so the hot ones (BINGET, MEMOIZE, ints) cost a few instructions.
bool Machine::step() {
  const uint64_t total = static_cast<uint64_t>(end_ - begin_);
  const uint8_t* next_report = begin_ + (4u << 20);
  for (;;) {
  if (__builtin_expect(p_ >= end_, 0)) {
    op_start_ = p_;
    op_ = 0;
    return fail(Error{"expected an opcode (the pickle has no STOP; truncated file?)", off()});
  }
  if (__builtin_expect(p_ >= next_report, 0)) {
    *pos_out_ = static_cast<uint64_t>(p_ - begin_);
    if (progress_ && *progress_) (*progress_)(*pos_out_, total);
    next_report = p_ + (4u << 20);
  }
  op_start_ = p_;
  op_ = *p_++;
  switch (op_) {
    case kPROTO: {
      if (!have(1)) return truncated(1);
      proto_ = *p_++;
      if (proto_ > 5) return err("protocol " + std::to_string(proto_) + " is newer than 5, the highest known");
      continue;
    }
    case kFRAME: {
      if (!have(8)) return truncated(8);
      uint64_t n = read_le<uint64_t>();
      if (n > static_cast<uint64_t>(end_ - p_))
        return err("expected a frame of " + std::to_string(n) + " bytes, but only " + std::to_string(end_ - p_) +
                   " bytes are left (truncated file?)");
      continue;
    }
    case kSTOP: stopped_ = true; return true;
    case kMARK:
      if (im_.marks.size() >= lim_.max_marks)
        return err("more than " + std::to_string(lim_.max_marks) + " open MARKs (limit)");
      im_.marks.push_back(im_.stack.size());
      continue;
    case kPOP: {
      if (!im_.marks.empty() && im_.marks.back() == im_.stack.size()) {
        im_.marks.pop_back();  // POP of a MARK discards it, as Python does
        continue;
      }
      Value v;
      if (!(pop(&v))) return false;
      continue;
    }
    case kPOP_MARK: {
      size_t m = 0;
      if (!pop_mark(&m)) return false;
      im_.stack.resize(m);
      continue;
    }
    case kDUP: {
      if (im_.stack.empty()) return err("expected a value to duplicate, found an empty stack");
      const Value v = im_.stack.back();
      if (v.is_container()) {
        Node* np = nullptr;
        if (!node_of(v, &np)) return false;
        np->shared = true;
      }
      if (!(push(v))) return false;
      continue;
    }
    case kNONE: if (!(push(Value::none()))) return false;
      continue;
    case kNEWTRUE: if (!(push(Value::boolean(true)))) return false;
      continue;
    case kNEWFALSE: if (!(push(Value::boolean(false)))) return false;
      continue;
    case kBININT: {
      if (!have(4)) return truncated(4);
      if (!(push(Value::integer(read_le<int32_t>())))) return false;
      continue;
    }
    case kBININT1: {
      if (!have(1)) return truncated(1);
      if (!(push(Value::integer(*p_++)))) return false;
      continue;
    }
    case kBININT2: {
      if (!have(2)) return truncated(2);
      if (!(push(Value::integer(read_le<uint16_t>())))) return false;
      continue;
    }
    case kLONG1: {
      if (!have(1)) return truncated(1);
      size_t n = *p_++;
      if (!have(n)) return truncated(n);
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_long(b, n))) return false;
      continue;
    }
    case kLONG4: {
      if (!have(4)) return truncated(4);
      int32_t n = read_le<int32_t>();
      if (n < 0) return err("negative length " + std::to_string(n));
      if (!have(static_cast<size_t>(n))) return truncated(static_cast<size_t>(n));
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_long(b, static_cast<size_t>(n)))) return false;
      continue;
    }
    case kINT:
    case kLONG: {
      std::string_view line;
      if (!read_line(&line)) return false;
      if (!(text_int(line, op_ == kLONG))) return false;
      continue;
    }
    case kBINFLOAT: {
      if (!have(8)) return truncated(8);
      uint64_t be;
      std::memcpy(&be, p_, 8);
      p_ += 8;
      be = __builtin_bswap64(be);
      double d;
      std::memcpy(&d, &be, 8);
      if (!(push_double(d))) return false;
      continue;
    }
    case kFLOAT: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string t(line);
      char* e = nullptr;
      double d = std::strtod(t.c_str(), &e);
      if (t.empty() || *e) return err("expected a decimal float, found '" + t.substr(0, 40) + "'");
      if (!(push_double(d))) return false;
      continue;
    }
    case kSHORT_BINUNICODE:
    case kSHORT_BINSTRING:
    case kSHORT_BINBYTES: {
      if (!have(1)) return truncated(1);
      size_t n = *p_++;
      if (!have(n)) return truncated(n);
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_string(b, n, op_ == kSHORT_BINBYTES ? Tag::kBytes : Tag::kStr))) return false;
      continue;
    }
    case kBINUNICODE:
    case kBINSTRING:
    case kBINBYTES: {
      if (!have(4)) return truncated(4);
      uint64_t n = op_ == kBINSTRING ? static_cast<uint64_t>(read_le<int32_t>()) : read_le<uint32_t>();
      if (op_ == kBINSTRING && static_cast<int64_t>(n) < 0) return err("negative length");
      if (!have(n)) return truncated(n);
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_string(b, n, op_ == kBINBYTES ? Tag::kBytes : Tag::kStr))) return false;
      continue;
    }
    case kBINUNICODE8:
    case kBINBYTES8:
    case kBYTEARRAY8: {
      if (!have(8)) return truncated(8);
      uint64_t n = read_le<uint64_t>();
      if (n > static_cast<uint64_t>(end_ - p_)) return truncated(n);
      if (n > UINT32_MAX) return err("string of " + std::to_string(n) + " bytes is larger than 4 GiB (limit)");
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_string(b, n, op_ == kBINUNICODE8 ? Tag::kStr : Tag::kBytes))) return false;
      continue;
    }
    case kSTRING: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string out;
      if (!python_string_literal(line, &out))
        return err("expected a quoted string literal, found '" + std::string(line.substr(0, 40)) + "'");
      if (!(push_string(reinterpret_cast<const uint8_t*>(out.data()), out.size(), Tag::kStr))) return false;
      continue;
    }
    case kUNICODE: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string out;
      raw_unicode_escape(line, &out);
      if (!(push_string(reinterpret_cast<const uint8_t*>(out.data()), out.size(), Tag::kStr))) return false;
      continue;
    }
    case kEMPTY_DICT:
    case kEMPTY_LIST:
    case kEMPTY_SET: {
      Value v;
      if (!new_node(op_ == kEMPTY_DICT ? Tag::kDict : op_ == kEMPTY_LIST ? Tag::kList : Tag::kSet, &v)) return false;
      if (!(push(v))) return false;
      continue;
    }
    case kEMPTY_TUPLE: if (!(build_from(Tag::kTuple, im_.stack.size()))) return false;
      continue;
    case kTUPLE1:
    case kTUPLE2:
    case kTUPLE3: {
      size_t n = op_ - kTUPLE1 + 1;
      size_t floor = im_.marks.empty() ? 0 : im_.marks.back();
      if (im_.stack.size() < floor + n)
        return err("expected " + std::to_string(n) + " values for the tuple, found " +
                   std::to_string(im_.stack.size() - floor));
      if (!(build_from(Tag::kTuple, im_.stack.size() - n))) return false;
      continue;
    }
    case kTUPLE: if (!(build_from_mark(Tag::kTuple))) return false;
      continue;
    case kLIST: if (!(build_from_mark(Tag::kList))) return false;
      continue;
    case kDICT: if (!(build_from_mark(Tag::kDict))) return false;
      continue;
    case kFROZENSET: if (!(build_from_mark(Tag::kSet))) return false;
      continue;
    case kAPPEND: {
      size_t floor = im_.marks.empty() ? 0 : im_.marks.back();
      if (im_.stack.size() < floor + 2) return err("expected a list and a value on the stack");
      if (!(append_range(im_.stack.size() - 1))) return false;
      continue;
    }
    case kAPPENDS:
    case kADDITEMS: {
      size_t m = 0;
      if (!pop_mark(&m)) return false;
      if (!(append_range(m))) return false;
      continue;
    }
    case kSETITEM: {
      size_t floor = im_.marks.empty() ? 0 : im_.marks.back();
      if (im_.stack.size() < floor + 3) return err("expected a dict, a key and a value on the stack");
      if (!(setitems_range(im_.stack.size() - 2))) return false;
      continue;
    }
    case kSETITEMS: {
      size_t m = 0;
      if (!pop_mark(&m)) return false;
      if (!(setitems_range(m))) return false;
      continue;
    }
    case kMEMOIZE: if (!(memo_put(im_.memo.size()))) return false;
      continue;
    case kBINPUT: {
      if (!have(1)) return truncated(1);
      if (!(memo_put(*p_++))) return false;
      continue;
    }
    case kLONG_BINPUT: {
      if (!have(4)) return truncated(4);
      if (!(memo_put(read_le<uint32_t>()))) return false;
      continue;
    }
    case kPUT:
    case kGET: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string t(line);
      char* e = nullptr;
      errno = 0;
      unsigned long long idx = std::strtoull(t.c_str(), &e, 10);
      if (t.empty() || *e || errno) return err("expected a decimal memo index, found '" + t.substr(0, 40) + "'");
      if (!(op_ == kPUT ? memo_put(idx) : memo_get(idx))) return false;
      continue;
    }
    case kBINGET:
    case kLONG_BINGET: {
      // Runs of memo references (a frame list is dozens in a row) go through one tight loop with the cursor in a
      // register; any problem falls back to the general path for the exact error.
      const uint8_t* p = op_start_;
      auto& memo = im_.memo;
      auto& stack = im_.stack;
      for (;;) {
        uint64_t idx;
        const uint8_t* q = p;
        if (*q == kBINGET && end_ - q >= 2) {
          idx = q[1];
          q += 2;
        } else if (*q == kLONG_BINGET && end_ - q >= 5) {
          uint32_t i32;
          std::memcpy(&i32, q + 1, 4);
          idx = i32;
          q += 5;
        } else {
          break;
        }
        if (idx >= memo.size()) break;
        const Value v = memo[idx];
        if (is_unset(v) || v.is_container() || stack.size() >= lim_.max_stack) break;
        stack.push_back(v);
        p = q;
        if (p >= end_) break;
      }
      if (p != op_start_) {  // consumed at least one reference; resume dispatch after the run
        p_ = p;
        continue;
      }
      // First reference of the run needs the general path (container, error, or limit).
      if (op_ == kBINGET) {
        if (!have(1)) return truncated(1);
        if (!(memo_get(*p_++))) return false;
        continue;
      }
      if (!have(4)) return truncated(4);
      if (!(memo_get(read_le<uint32_t>()))) return false;
      continue;
    }
    case kREADONLY_BUFFER:
      if (im_.stack.empty()) return err("expected a buffer on the stack");
      continue;
    case kNEXT_BUFFER:
      return err("out-of-band buffers (protocol 5 NEXT_BUFFER) are not part of a snapshot and cannot be read");
    case kGLOBAL:
    case kSTACK_GLOBAL:
    case kREDUCE:
    case kBUILD:
    case kINST:
    case kOBJ:
    case kNEWOBJ:
    case kNEWOBJ_EX:
    case kPERSID:
    case kBINPERSID:
    case kEXT1:
    case kEXT2:
    case kEXT4:
      return err("refers to a Python class or function; snapshots contain only dicts, lists and scalars, and "
                 "allocscope never executes anything from a file");
    default:
      return err("unknown opcode (not a pickle, or a corrupted one)");
  }
  }
}

}  // namespace

Result<Value> Reader::run(std::span<const uint8_t> input, Consumer* consumer,
                          const std::function<void(uint64_t, uint64_t)>& progress) {
  Machine m(*this, *impl_, *strings_, limits_, input, consumer, &pos_);
  return m.run(progress);
}

}  // namespace allocscope::pickle
