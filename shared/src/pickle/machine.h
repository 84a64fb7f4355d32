// The pickle machine's state and its container, memo and stack helpers (private to shared/src/pickle).
#pragma once

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "allocscope/pickle.h"
#include "pickle/entry_decode.h"
#include "pickle/opcodes.h"
#include "pickle/predecoder.h"
#include "pickle/run_cache.h"
#include "pickle/utf8.h"
#include "pickle/value_vec.h"

namespace allocscope::pickle {

namespace detail {

// A container under construction or finished. Consumed nodes are recycled with a new generation, so values that
// still name the old generation are detected as stale instead of silently reading a different object.
struct Node {
  Tag kind = Tag::kList;
  bool consumed = false;
  bool free = false;
  bool shared = false;  // referenced again through the memo or DUP: never recycled, its replacement stays valid
  bool has_children = false;  // holds a container (not a handle): recycling must visit its items
  uint32_t gen = 0;
  uint32_t depth = 1;
  uint32_t memo_slot = UINT32_MAX;
  uint32_t run = RunCache::kNone;  // the cached run that alone filled this list (its consumer answer can be reused)
  bool lazy = false;  // items are that run's cached values, not copied yet (Reader::items reads them in place)
  uint64_t offset = 0;  // where the opcode that created it sits
  uint64_t absorbed_first = 0;  // handles the consumer absorbed instead of storing (Reader::absorbed)
  uint64_t absorbed = 0;
  Value replacement;
  ValueVec items;
};

// A recently interned short UTF-8 string and its id (see push_string).
struct ShortString {
  uint8_t len = 0;  // 0 = empty slot
  char bytes[23] = {};
  uint32_t id = 0;
};

constexpr uint32_t kUnsetMemo = 0xFFFFFFFFu;  // aux of a kNone value marking an empty memo slot

inline Value unset_memo() { return Value{Tag::kNone, kUnsetMemo, 0}; }
inline bool is_unset(const Value& v) { return v.tag == Tag::kNone && v.aux == kUnsetMemo; }

}  // namespace detail

struct Reader::Impl {
  // Streaming state, kept between feed() calls.
  Consumer* consumer = nullptr;
  std::vector<uint8_t> carry;  // bytes of an opcode cut at a chunk boundary, waiting for the next chunk
  uint64_t base = 0;           // input offset of the first byte not yet consumed
  bool stopped = false;
  bool failed = false;
  Error error;
  int proto = 0;

  std::vector<detail::Node> nodes;
  std::vector<uint32_t> free_nodes;
  std::vector<uint32_t> to_recycle;
  detail::ValueVec stack;
  std::vector<size_t> marks;
  detail::MemoTable memo;
  detail::RunCache runs;
  // Trace entries decoded ahead on a second thread (Reader::run of a large input), and which of this reader's cached
  // runs each of that thread's run ids names (RunCache::kNone: not looked up yet).
  detail::Predecoder* pre = nullptr;
  std::vector<uint32_t> pre_runs;
  uint64_t ahead_dicts = 0;  // of fast_dicts, those the predecoder decoded
  uint64_t fast_dicts = 0;  // dicts Machine::entry_fast decoded
  // A trace entry absorbed at SETITEMS leaves the stack, but PyTorch's C++ pickler memoizes a shared dict after its
  // items ("EMPTY_DICT MARK ... SETITEMS BINPUT n"): a memo store at exactly this input offset stores the entry's
  // row instead (and moves this past itself, for a second store). UINT64_MAX: none pending.
  uint64_t absorbed_end = UINT64_MAX;
  Value absorbed_value;
  detail::ShortString short_strings[64];
  std::string scratch;
};

namespace detail {

// The machine proper: runs over one buffer (a whole input, or a streamed chunk plus any carried-over bytes). All
// state that must survive between chunks lives in Reader::Impl.
class Machine {
 public:
  // `last`: no more input follows, so a cut opcode is a truncated file rather than a reason to wait.
  Machine(Reader& r, Reader::Impl& im, StringTable& st, const Limits& lim, std::span<const uint8_t> in,
          uint64_t* pos_out, bool last)
      : reader_(r), im_(im), strings_(st), lim_(lim), p_(in.data()), begin_(in.data()), end_(in.data() + in.size()),
        consumer_(im.consumer), pos_out_(pos_out), last_(last) {}

  // Runs until STOP (true), an error (false, error()), or, when not `last`, the end of the buffer in the middle of an
  // opcode or between opcodes (false, need_more(); consumed() bytes are done, the rest must be fed again).
  bool run(const std::function<void(uint64_t, uint64_t)>* progress) {
    progress_ = progress;
    return step();
  }
  bool need_more() const { return need_more_; }
  const Error& error() const { return error_; }
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }

 private:
  uint64_t off() const { return im_.base + static_cast<uint64_t>(op_start_ - begin_); }
  // The buffer ends inside the current opcode: rewind to its start and ask for more input.
  bool wait_for_more() {
    need_more_ = true;
    p_ = op_start_;
    return false;
  }
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
    if (!last_) return wait_for_more();
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
    n.has_children = false;
    n.depth = 1;
    n.memo_slot = UINT32_MAX;
    n.run = RunCache::kNone;
    n.lazy = false;
    n.offset = off();
    n.absorbed_first = n.absorbed = 0;
    n.items.clear();
    *out = Value{kind, n.gen, idx};
    return true;
  }

  // Offers container `v` to the consumer (*taken: whether it answered, in *out); false on its error, with an offset.
  bool consume_now(const Value& v, const Value* key, Value* out, bool* taken) {
    *pos_out_ = off();
    auto c = consumer_->consume(reader_, v, key, out);
    if (!c.ok()) {
      Error e = c.error();
      if (e.offset == Error::kNoOffset) e.offset = off();
      return fail(std::move(e));
    }
    *taken = c.value();
    return true;
  }
  // Container `v` is now `out`: later references see the answer (memo included), and its node is recycled.
  void settle(const Value& v, const Value& out) {
    Node& n = im_.nodes[v.payload];
    n.consumed = true;
    n.replacement = out;
    if (n.memo_slot < im_.memo.size()) {
      const Value m = im_.memo.get(n.memo_slot);
      if (m.is_container() && m.payload == v.payload && m.aux == v.aux) im_.memo.set(n.memo_slot, out);
    }
    im_.to_recycle.push_back(static_cast<uint32_t>(v.payload));
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
      Value out;
      const uint32_t run = n.run;
      bool taken = key && run != RunCache::kNone && im_.runs.answer(run, *key, &out);
      if (!taken) {
        if (!consume_now(v, key, &out, &taken)) return false;
        if (taken && key && run != RunCache::kNone) im_.runs.remember(run, *key, out);
      }
      if (taken) {
        settle(v, out);
        *result = out;
        return true;
      }
    }
    Node& parent = im_.nodes[parent_idx];
    parent.has_children = true;
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
      for (size_t k = 0; n.has_children && k < n.items.size(); ++k) {
        const Value& c = n.items[k];
        if (c.is_container() && c.payload < im_.nodes.size()) {
          Node& cn = im_.nodes[c.payload];
          if (!cn.free && !cn.shared && cn.gen == c.aux) {
            // A child the memo still holds may be referenced again by a later BINGET (an unknown key's list shared
            // by every entry, `tags=T`: CPython loads it, and recycling it here made that BINGET "never stored").
            // It stays, as one shared through the memo does.
            if (cn.memo_slot < im_.memo.size()) {
              const Value m = im_.memo.get(cn.memo_slot);
              if (m.is_container() && m.payload == c.payload && m.aux == cn.gen) {
                cn.shared = true;
                continue;
              }
            }
            cn.consumed = true;  // unreachable once its parent is gone (it was never referenced again)
            im_.to_recycle.push_back(static_cast<uint32_t>(c.payload));
          }
        }
      }
      if (n.memo_slot < im_.memo.size()) {
        const Value m = im_.memo.get(n.memo_slot);
        if (m.is_container() && m.payload == idx && m.aux == n.gen) im_.memo.set(n.memo_slot, unset_memo());
      }
      n.items.clear();
      n.lazy = false;
      if (n.items.capacity() > 4096) n.items.release();
      n.free = true;
      n.consumed = false;
      ++n.gen;
      im_.free_nodes.push_back(idx);
    }
  }

  // Copies a lazily filled list's values into it before anything is added.
  void materialize(Node& n) {
    if (!n.lazy) return;
    const Value* vals = im_.runs.values(n.run);
    n.items.append(vals, vals + im_.runs.count(n.run));
    n.lazy = false;
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
    materialize(*tn);
    if (!check_items(*tn, im_.stack.size() - first)) return false;
    tn->run = RunCache::kNone;  // no longer exactly one cached run
    bool any_container = false;
    for (size_t i = first; i < im_.stack.size(); ++i) any_container |= im_.stack[i].is_container();
    if (!any_container) {  // scalars and handles (e.g. a frame list): no consumer, no nesting to track
      tn->items.append(im_.stack.data() + first, im_.stack.end());
      im_.stack.truncate(first);
      return true;
    }
    const uint32_t ti = static_cast<uint32_t>(target.payload);
    for (size_t i = first; i < im_.stack.size(); ++i) {
      Value v;
      if (!prepare(ti, im_.stack[i], nullptr, &v)) return false;
      Node& t = im_.nodes[ti];
      if (consumer_ && !set_op && v.tag == Tag::kHandle && consumer_->absorbs(v)) {
        if (!absorb(t, v)) return false;
        continue;
      }
      t.items.push_back(v);
    }
    im_.stack.truncate(first);
    recycle();
    return true;
  }

  // Counts an absorbed handle (Consumer::absorbs) into list `t`; its payloads must ascend by one.
  static bool absorbable(const Node& t, const Value& v) {
    return t.absorbed == 0 || v.payload == t.absorbed_first + t.absorbed;
  }
  bool absorb(Node& t, const Value& v) {
    if (!absorbable(t, v))
      return err("a list's entries are not in stream order (two lists' entries interleaved: not supported)");
    if (t.absorbed == 0) {
      t.absorbed_first = v.payload;
      consumer_->list_began(v.payload);
    }
    ++t.absorbed;
    return true;
  }

  // The open list of the innermost MARK batch ("list MARK ..."), when `above` values sit on that MARK: the dict
  // being finished (1), or none yet (0). Only a dict alone on its list's MARK is an item of that list for sure:
  // CPython writes a one-item list as "EMPTY_LIST item APPEND" with no MARK of its own (a one-entry device trace
  // inside device_traces' batch), a one-key dict as "EMPTY_DICT key value SETITEM", and a tuple as "MARK items
  // TUPLE" whose MARK may share the list's position. Entries of a trace batch are each alone on the MARK, since the
  // ones before them were absorbed. Checking only the top keeps this O(1) whatever the batch holds. What it cannot
  // see is the opcode after the dict: a dict that opens a TUPLE1-3 (no MARK) as a batch's first item is taken as the
  // list's own. No snapshot writer puts dicts in tuples; such a file is read differently, the same way streamed or
  // whole.
  bool batch_list(size_t above, uint32_t* list) const {
    if (im_.marks.empty()) return false;
    const size_t m = im_.marks.back();
    if (m == 0 || im_.stack.size() != m + above) return false;
    if (im_.marks.size() >= 2 && im_.marks[im_.marks.size() - 2] == m) return false;
    const Value& l = im_.stack[m - 1];
    if (l.tag != Tag::kList || l.payload >= im_.nodes.size()) return false;
    const Node& n = im_.nodes[l.payload];
    if (n.free || n.consumed || n.gen != l.aux) return false;
    *list = static_cast<uint32_t>(l.payload);
    return true;
  }

  // After SETITEMS: a dict alone on its list's batch MARK (batch_list) is offered to the consumer now, with no key,
  // as APPENDS would offer it later (Consumer, pickle.h). Offering it here is what lets the fast path (entry_fast)
  // skip building trace entries, and both paths must agree wherever a chunk boundary falls.
  bool offer_in_batch() {
    if (!consumer_ || im_.stack.empty() || im_.stack.back().tag != Tag::kDict) return true;
    uint32_t list = 0;
    if (!batch_list(1, &list)) return true;
    const Value v = im_.stack.back();
    Node* np = nullptr;
    if (!node_of(v, &np)) return false;
    if (np->consumed) return true;
    Value out;
    bool taken = false;
    if (!consume_now(v, nullptr, &out, &taken)) return false;
    if (!taken) return true;
    settle(v, out);
    if (out.tag == Tag::kHandle && consumer_->absorbs(out)) {
      if (!absorb(im_.nodes[list], out)) return false;
      im_.stack.pop_back();
      im_.absorbed_end = off() + 1;  // just past this SETITEMS
      im_.absorbed_value = out;
    } else {
      im_.stack.back() = out;
    }
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
    // All pairs go in at once; only containers then need preparing (offered to the consumer, resolved, nesting
    // checked), in order, keys before their values. A trace entry has one: its frame list.
    const size_t before = tn->items.size();
    tn->items.append(im_.stack.data() + first, im_.stack.end());
    for (size_t j = first; j < im_.stack.size(); ++j) {
      if (!im_.stack[j].is_container()) continue;
      Value* slot = im_.nodes[ti].items.data() + before + (j - first);
      const bool is_value = (j - first) % 2 == 1;
      const Value key = is_value ? slot[-1] : Value{};
      if (!prepare(ti, *slot, is_value ? &key : nullptr, slot)) return false;
    }
    im_.stack.truncate(first);
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
    im_.stack.truncate(first);
    recycle();
    return push(target);
  }

  // Every memo store costs at least two bytes of input, so a real pickle never has more slots than half the bytes
  // read before the store at `pos` (plus sequential slack): memo_put's bound, and entry_fast's.
  uint64_t memo_cap(uint64_t pos) const { return std::min<uint64_t>(lim_.max_memo, pos / 2 + 320); }

  [[gnu::always_inline]] bool memo_put(uint64_t idx) {
    const Value* top = nullptr;
    if (__builtin_expect(im_.stack.empty() || (!im_.marks.empty() && im_.marks.back() == im_.stack.size()), 0)) {
      if (off() != im_.absorbed_end)
        return err("expected a value to memoize, found " +
                   std::string(!im_.marks.empty() && im_.marks.back() == im_.stack.size() ? "a MARK" : "an empty stack"));
      top = &im_.absorbed_value;  // the entry SETITEMS just absorbed (see Reader::Impl::absorbed_end)
      im_.absorbed_end = im_.base + static_cast<uint64_t>(p_ - begin_);
    }
    // The bound depends only on the position, so a whole-buffer load and a streamed one agree.
    const uint64_t cap = memo_cap(off());
    if (idx >= cap)
      return err("memo index " + std::to_string(idx) + " exceeds what the first " + std::to_string(off()) +
                 " bytes of a pickle can hold (expected at most " + std::to_string(cap) + " slots)");
    if (idx > im_.memo.size() + 256)
      return err("memo index " + std::to_string(idx) + " is far beyond the " + std::to_string(im_.memo.size()) +
                 " slots in use (expected sequential memo slots)");
    const Value& v = top ? *top : im_.stack.back();
    if (idx == im_.memo.size()) {
      im_.memo.push_back(v);  // the common case: MEMOIZE / sequential BINPUT
    } else {
      if (idx > im_.memo.size()) im_.memo.grow_to(idx + 1, unset_memo());
      else im_.runs.disable();  // a slot is overwritten: cached runs may no longer decode as recorded
      im_.memo.set(idx, v);
    }
    if (v.is_container()) im_.nodes[v.payload].memo_slot = static_cast<uint32_t>(idx);
    return true;
  }

  [[gnu::always_inline]] bool memo_get(uint64_t idx) {
    if (idx >= im_.memo.size() || is_unset(im_.memo.get(idx)))
      return err("refers to memo slot " + std::to_string(idx) + ", which was never stored (" +
                 std::to_string(im_.memo.size()) + " slots in use)");
    const Value v = im_.memo.get(idx);
    if (v.is_container()) {
      Node* np = nullptr;
      if (!node_of(v, &np)) return false;
      np->shared = true;
    }
    return push(v);
  }

  bool push_string(const uint8_t* data, size_t n, Tag tag) { return push(string_value(data, n, tag)); }

  // A few bytes compared inline: memcmp is a call, and every trace entry compares its 'N/A'.
  static bool same_short(const char* a, const uint8_t* b, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (static_cast<uint8_t>(a[i]) != b[i]) return false;
    return true;
  }

  Value string_value(const uint8_t* data, size_t n, Tag tag) {
    std::string_view s(reinterpret_cast<const char*>(data), n);
    // Short strings recur in every trace entry (a compile context of 'N/A', written anew each time): a small
    // direct-mapped cache of valid ones skips validation and the table lookup.
    ShortString* slot = nullptr;
    if (tag == Tag::kStr && n - 1 < sizeof(ShortString::bytes)) {
      slot = &im_.short_strings[(n * 31 + data[0] + data[n - 1] * 7) % std::size(im_.short_strings)];
      if (slot->len == n && same_short(slot->bytes, data, n)) return Value{tag, 0, slot->id};
    }
    if (tag == Tag::kStr && !utf8_valid(s)) {
      utf8_sanitize(s, &im_.scratch);
      s = im_.scratch;
      slot = nullptr;
    }
    const StringId id = strings_.intern(s);
    if (slot) {
      slot->len = static_cast<uint8_t>(n);
      std::memcpy(slot->bytes, data, n);
      slot->id = id;
    }
    return Value{tag, 0, id};
  }

  bool push_long(const uint8_t* b, size_t n) {
    if (n == 0) return push(Value::integer(0));
    uint64_t low = 0;
    const size_t k = n < 8 ? n : 8;
    std::memcpy(&low, b, k);  // little-endian two's complement, as pickle stores it (x86 and wasm are little-endian)
    const bool neg = b[n - 1] & 0x80;
    if (n < 8) {
      const int shift = static_cast<int>(64 - 8 * n);
      return push(Value::integer(static_cast<int64_t>(low << shift) >> shift));  // sign-extend
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
    if (!nl) {
      if (!last_) return wait_for_more();
      return err("expected a newline-terminated argument, but the input ends first (truncated file?)");
    }
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

  // The cached run of memo references that starts at `p` and ends at an APPENDS (at *run_end), or kNone.
  // `context`: what a guess of it goes by (run_context; 0 outside a trace entry).
  [[gnu::always_inline]] uint32_t cached_run(const uint8_t* p, const uint8_t** run_end, uint64_t context) {
    return known_run(im_.runs, p, end_, context, /*add=*/false, run_end);
  }

  // The fast path of "MARK (BINGET|LONG_BINGET)+ APPENDS" when the list on top of the stack is open and every
  // reference is a scalar or handle: appends the memo values to the list and moves past APPENDS. Returns false,
  // having changed nothing, for any other shape (the general path then runs and reports errors as usual).
  bool append_memo_run() {
    const Value target = im_.stack.back();
    if (target.payload >= im_.nodes.size()) return false;
    Node& n = im_.nodes[target.payload];
    if (n.free || n.consumed || n.gen != target.aux) return false;
    materialize(n);  // a second run appended to one list (never seen in real files)
    const bool fresh = n.items.empty();
    // A run seen before (the same stack again): its exact bytes are its key.
    const uint8_t* run_end = nullptr;
    if (const uint32_t e = cached_run(p_, &run_end, 0); e != RunCache::kNone) {
      const size_t count = im_.runs.count(e);
      if (n.items.size() + count > lim_.max_container_items) return false;
      if (fresh) {  // the list is exactly this run: leave its values in the cache until something must change them
        n.run = e;
        n.lazy = true;
      } else {
        const Value* vals = im_.runs.values(e);
        n.items.append(vals, vals + count);
        n.run = RunCache::kNone;
      }
      p_ = run_end + 1;
      return true;
    }
    const auto& memo = im_.memo;
    const uint64_t memo_size = memo.size();
    // First pass: validate and count, writing nothing.
    size_t count = 0;
    const uint8_t* const end = end_;
    const uint8_t* q = p_;
    uint64_t idx;
    while (memo_ref(q, end, &idx)) {
      if (idx >= memo_size) return false;
      const Value v = memo.get(idx);
      if (v.tag == Tag::kNone ? v.aux == kUnsetMemo : v.is_container()) return false;
      ++count;
    }
    if (q >= end || *q != kAPPENDS || n.items.size() + count > lim_.max_container_items) return false;
    // Second pass: copy the values (the run was just validated, so decoding cannot fail).
    Value* const first = n.items.extend(count);
    Value* out = first;
    for (const uint8_t* r = p_; r < q;) {  // validated above: every opcode here is BINGET or LONG_BINGET
      uint32_t i32 = r[1];
      if (*r == kLONG_BINGET) std::memcpy(&i32, r + 1, 4);
      r += *r == kBINGET ? 2 : 5;
      *out++ = memo.get(i32);
    }
    const uint32_t e = im_.runs.add(p_, static_cast<size_t>(q - p_), first, count);
    n.run = fresh ? e : RunCache::kNone;
    p_ = q + 1;
    return true;
  }

  // The fast path of a trace entry (or a frame) inside a list's MARK batch, entered at EMPTY_DICT (already read):
  //   EMPTY_DICT <store> MARK (key value)+ SETITEMS
  // where <store> is MEMOIZE (protocol 4) or BINPUT/LONG_BINPUT of the next memo slot (protocol 2), with keys that
  // are strings and values that are scalars, strings, memo references to scalars or handles, or a frame list that
  // repeats a cached run. It decodes the pairs in place, without a container, a stack or a dispatch
  // per opcode, and hands them to Consumer::consume_items: the same offer offer_in_batch makes at SETITEMS. Any
  // other shape, a limit, a chunk boundary, or a consumer that declines returns false having changed nothing the
  // general path would not redo identically (strings interned in stream order), and the general path then runs
  // from EMPTY_DICT. A consumer error, or a row out of stream order, also falls back after the consumer counted
  // the row: the general path then fails with the same error, so nothing of that load survives. A 1M-event
  // snapshot is 1M of these.
  // The decode looks only at bytes (entry_decode.h); a predecoder thread may have done it already for this offset.
  static constexpr size_t kPairs = DecodedEntry::kPairs;
  bool entry_fast() {
    if (im_.pre) {
      if (const DecodedEntry* d = im_.pre->take(static_cast<uint64_t>(p_ - begin_))) {
        if (!apply_entry(*d, true)) return false;
        ++im_.ahead_dicts;
        // The entries right after it, while already decoded: the predecoder found each at an EMPTY_DICT, so that
        // opcode is not read here again (its line is in the other core's cache, not this one's).
        bool passed = false;
        while (p_ < end_ && (d = im_.pre->ready(static_cast<uint64_t>(p_ - begin_) + 1, &passed))) {
          op_start_ = p_++;
          op_ = kEMPTY_DICT;
          if (!apply_entry(*d, true)) {
            p_ = op_start_;  // the dispatch loop reads this dict the other ways
            break;
          }
          ++im_.ahead_dicts;
        }
        return true;
      }
    }
    auto find_run = [this](const uint8_t* run, const uint8_t** run_end, uint64_t context) {
      return cached_run(run, run_end, context);
    };
    return decode_entry(p_, begin_, end_, find_run, &fast_decoded_) && apply_entry(fast_decoded_, false);
  }

  // The main run cache's entry for a predecoder's run `w` (its bytes at `run`, `len` long), or kNone.
  uint32_t local_run(uint32_t w, const uint8_t* run, size_t len) {
    if (im_.runs.disabled()) return RunCache::kNone;
    if (w < im_.pre_runs.size() && im_.pre_runs[w] != RunCache::kNone) return im_.pre_runs[w];
    const uint32_t e = im_.runs.find(run, len);
    if (e == RunCache::kNone) return e;  // not cached here yet: the general path adds it
    if (w >= im_.pre_runs.size()) im_.pre_runs.resize(w + 1, RunCache::kNone);
    im_.pre_runs[w] = e;  // the predecoder's run ids name exact bytes, so the same id is the same entry from now on
    return e;
  }

  // Everything of entry_fast that depends on the parse so far: memo slots, strings, runs' answers, the consumer.
  // `foreign`: the run ids are the predecoder's, not this reader's.
  bool apply_entry(const DecodedEntry& d, bool foreign) {
    const uint8_t* const end = end_;
    const uint8_t* const q = begin_ + d.at;
    const uint64_t memo_size = im_.memo.size();
    // The memo store after a new object: MEMOIZE (protocol 4), or BINPUT/LONG_BINPUT of the next slot (protocol 2,
    // as PyTorch's C++ pickler and our writer emit it; any other slot goes the general way). Its length, or 0.
    size_t n_fresh = 0;
    auto store_len = [&](const uint8_t* op) -> size_t {
      if (op >= end) return 0;
      if (*op == kMEMOIZE) return 1;
      const uint64_t next = memo_size + n_fresh;
      if (*op == kBINPUT) return end - op >= 2 && op[1] == next ? 2 : 0;
      if (*op != kLONG_BINPUT || end - op < 5) return 0;
      uint32_t idx;
      std::memcpy(&idx, op + 1, 4);
      return idx == next ? 5 : 0;
    };
    // PyTorch's C++ pickler stores nothing here (it stores a shared dict after SETITEMS); our writer uses BINPUT.
    // Whether a store the decode saw is one apply would take: a MEMOIZE always is, so its byte is not read again
    // (the predecoder's thread read it, on the other core).
    auto stores = [&](const uint8_t* op, uint8_t len) { return len == 1 || store_len(op) == len; };
    const size_t dict_store = d.dict_store;
    if (dict_store && !stores(q, d.dict_store)) return false;
    uint32_t list = 0;
    if (!batch_list(0, &list) || im_.marks.size() >= lim_.max_marks) return false;
    const uint64_t at = off();
    // New memo slots, in stream order: the dict's own first (its answer, once known).
    Value* const fresh = fast_fresh_;
    auto memoize = [&](const uint8_t* op, const Value& v) {
      const uint64_t idx = memo_size + n_fresh;
      const uint64_t pos = im_.base + static_cast<uint64_t>(op - begin_);
      if (idx >= memo_cap(pos)) return false;
      if (n_fresh == std::size(fast_fresh_)) return false;  // cannot happen (at most 3 per pair), but stay in bounds
      fresh[n_fresh++] = v;
      return true;
    };
    if (dict_store && !memoize(q, Value{})) return false;
    auto memo_ref_value = [&](uint64_t idx, Value* v) {  // only slots stored before this dict: scalars or handles
      if (idx >= memo_size) return false;
      *v = im_.memo.get(idx);
      return !(v->tag == Tag::kNone ? v->aux == kUnsetMemo : v->is_container());
    };
    auto string = [&](const EntryToken& t, Value* v) {  // its bytes, then the store the decode saw after them
      if (t.x) {  // the bytes are in the token, and any store after them is a MEMOIZE
        // Every entry of a trace writes its compile context 'N/A' anew: the same bytes, the same interned string.
        if (t.a != last_short_len_ || t.b != last_short_bytes_) {
          last_short_value_ = string_value(reinterpret_cast<const uint8_t*>(&t.b), t.a, Tag::kStr);
          last_short_len_ = t.a;
          last_short_bytes_ = t.b;
        }
        *v = last_short_value_;
        // memoize's bound is checked at the dict's start, a few bytes before the store: at most stricter than at
        // the store itself, and then the general path stores it, with its own check at its own position.
        return !t.after || memoize(q, *v);
      }
      const uint8_t* const bytes = begin_ + t.b;
      *v = string_value(bytes, t.a, Tag::kStr);
      if (!t.after) return true;
      const uint8_t* const op = bytes + t.a;
      return stores(op, t.after) && memoize(op, *v);
    };
    Value* const kv = fast_kv_;
    const size_t n = d.n;
    const bool same_keys = same_keys_as_last(d);
    if (!same_keys) last_keys_n_ = 0;  // kv's keys are about to change
    for (size_t i = 0; i < n; i += 2) {
      const EntryToken& kt = d.tok[i];
      Value& k = kv[i];
      if (same_keys) {
        // kv[i] still holds this key, read from the same memo slot, which nothing has rewritten since
      } else if (kt.kind == EntryToken::kStr) {
        if (!string(kt, &k)) return false;
      } else if (!memo_ref_value(kt.a, &k) || k.tag != Tag::kStr) {
        return false;
      }
      const EntryToken& vt = d.tok[i + 1];
      Value& v = kv[i + 1];
      switch (vt.kind) {
        case EntryToken::kRef:
          if (!memo_ref_value(vt.a, &v)) return false;
          break;
        case EntryToken::kScalar: v = Value{static_cast<Tag>(vt.x), 0, vt.b}; break;
        case EntryToken::kStr:
          if (!string(vt, &v)) return false;
          break;
        case EntryToken::kList: {
          const uint8_t* const run = begin_ + (vt.b & EntryToken::kOffsetMask);
          uint32_t e = static_cast<uint32_t>(vt.b >> EntryToken::kRunShift);
          if (foreign) e = local_run(e, run, vt.a);
          if (e == RunCache::kNone || im_.runs.count(e) > lim_.max_container_items || !im_.runs.answer(e, k, &v))
            return false;
          if (vt.x) {
            const uint8_t* const op = run - 1 - vt.x;
            if (!stores(op, vt.x) || !memoize(op, v)) return false;
          }
          // The C++ pickler stores a shared list after its items: the list is this answer by then too. Stored both
          // before and after (no writer does that), the general path keeps only the last slot's node link, so the
          // first slot would keep the list itself: leave that to the general path.
          if (vt.after) {
            const uint8_t* const op = run + vt.a + 1;
            if (vt.x || !stores(op, vt.after) || !memoize(op, v)) return false;
          }
          break;
        }
      }
    }
    // At SETITEMS. What the general path would have pushed must fit, as it would have had to.
    if (im_.stack.size() + 1 + n > lim_.max_stack || n > lim_.max_container_items) return false;
    const uint8_t* const setitems = begin_ + d.setitems;
    *pos_out_ = im_.base + static_cast<uint64_t>(setitems - begin_);
    Value out;
    auto c = consumer_->consume_items(reader_, std::span<const Value>(kv, n), at, &out, same_keys);
    if (!same_keys) remember_keys(d);
    if (!c.ok() || !c.value()) return false;  // the general path offers it again and reports any error itself
    const bool absorbed = out.tag == Tag::kHandle && consumer_->absorbs(out);
    if (absorbed) {
      Node& t = im_.nodes[list];
      if (!absorbable(t, out)) return false;  // the general path reports it
      absorb(t, out);
    }
    // The dict's own slot takes the answer straight from `out`: copied whole into fresh[0], the 16-byte load of what
    // the consumer had just written field by field waited for those stores (2% of a 1M-event load).
    size_t i = 0;
    if (dict_store) im_.memo.push_back(out), i = 1;
    for (; i < n_fresh; ++i) im_.memo.push_back(fresh[i]);
    if (absorbed) {
      im_.absorbed_end = im_.base + static_cast<uint64_t>(setitems + 1 - begin_);  // as offer_in_batch leaves it
      im_.absorbed_value = out;
    } else {
      im_.stack.push_back(out);
    }
    ++im_.fast_dicts;
    p_ = setitems + 1;
    return true;
  }

  // The keys of the last dict offered through consume_items, when every one was a memo reference (as in all but
  // the first few entries of a trace): memo indices, left in fast_kv_'s even slots. A trace's entries repeat one or
  // two key orders, so an entry whose key references are the same, while no memo slot was rewritten, has the same
  // keys: neither this reader nor the consumer reads them again (a third of the work of applying an entry).
  bool same_keys_as_last(const DecodedEntry& d) const {
    if (d.n != last_keys_n_ || im_.memo.rewrites() != last_keys_rewrites_) return false;
    for (size_t i = 0; i < d.n; i += 2)
      if (d.tok[i].kind != EntryToken::kRef || d.tok[i].a != last_keys_[i / 2]) return false;
    return true;
  }
  void remember_keys(const DecodedEntry& d) {
    for (size_t i = 0; i < d.n; i += 2) {
      if (d.tok[i].kind != EntryToken::kRef) return;  // last_keys_n_ stays 0: never the same
      last_keys_[i / 2] = d.tok[i].a;
    }
    last_keys_n_ = d.n;
    last_keys_rewrites_ = im_.memo.rewrites();
  }

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
  bool last_;
  bool need_more_ = false;
  Error error_;
  const std::function<void(uint64_t, uint64_t)>* progress_ = nullptr;
  // entry_fast's scratch, kept here so a call does not construct its arrays every time.
  DecodedEntry fast_decoded_;
  Value fast_kv_[2 * kPairs];
  uint32_t last_keys_[kPairs];
  size_t last_keys_n_ = 0;  // items (keys and values) of the last offer, 0 when its keys are not remembered
  uint64_t last_keys_rewrites_ = 0;
  // The last short string read from a token (its length and bytes as the token holds them) and what it read as.
  uint32_t last_short_len_ = UINT32_MAX;
  uint64_t last_short_bytes_ = 0;
  Value last_short_value_;
  Value fast_fresh_[1 + 3 * kPairs];  // the dict, then per pair a key's store and a frame list's two
};

}  // namespace detail
}  // namespace allocscope::pickle
