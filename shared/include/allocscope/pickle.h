// Pickle reader and writer for the data types snapshots use (dict, list, tuple, str, bytes, int, float, bool, None).
//
// The reader is a bounded stack machine over a byte span. It never executes anything: opcodes that name classes or
// call functions (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT*) are rejected. Every length is
// checked against the remaining input before use, and memo, stack, nesting and container sizes are bounded.
//
// Large files stream through a Consumer: when a finished container is inserted into its parent, the consumer may
// turn it into a compact Handle (a trace row, an interned frame, a stack) and the reader recycles the container.
// That is how a 1M-event snapshot loads without building a million dicts.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "allocscope/result.h"
#include "allocscope/snapshot.h"

namespace allocscope::pickle {

enum class Tag : uint8_t { kNone, kBool, kInt, kUInt, kFloat, kStr, kBytes, kList, kDict, kTuple, kSet, kHandle };

// A value on the machine's stack or inside a container. 16 bytes; containers are referenced by node index + generation
// (a recycled node gets a new generation, so a stale reference is detected, never followed).
struct Value {
  Tag tag = Tag::kNone;
  uint32_t aux = 0;      // node generation for containers; handle kind for kHandle
  uint64_t payload = 0;  // int/uint bits, double bits, string id, node index, handle id

  bool is_container() const {
    constexpr unsigned kContainers = 1u << static_cast<int>(Tag::kList) | 1u << static_cast<int>(Tag::kDict) |
                                     1u << static_cast<int>(Tag::kTuple) | 1u << static_cast<int>(Tag::kSet);
    return (kContainers >> static_cast<int>(tag)) & 1u;
  }
  int64_t as_int() const { return static_cast<int64_t>(payload); }
  uint64_t as_uint() const { return payload; }
  double as_double() const;
  static Value none() { return {}; }
  static Value boolean(bool b) { return {Tag::kBool, 0, b ? 1u : 0u}; }
  static Value integer(int64_t v) { return {Tag::kInt, 0, static_cast<uint64_t>(v)}; }
  static Value handle(uint32_t kind, uint64_t id) { return {Tag::kHandle, kind, id}; }
};

struct Limits {
  uint64_t max_stack = 1u << 24;        // values on the machine's stack
  uint32_t max_marks = 1u << 16;        // open MARKs
  uint32_t max_depth = 512;             // container nesting
  uint64_t max_memo = 1ull << 28;       // memo slots
  uint64_t max_container_items = 1ull << 31;
};

class Reader;

// Streaming hook: called for each finished container just before it is inserted into a parent container (list append,
// dict setitem, tuple/list/dict built from MARK). `key` is the dict key when the parent is a dict, else nullptr.
// One exception to "just before": a dict finished by SETITEMS while it is the only value on its list's batch MARK
// ("list MARK dict" — a trace entry, the ones before it having been absorbed) is offered as soon as SETITEMS
// completes it, with no key, as APPENDS would; an absorbed answer (a trace entry's row) is counted into that list
// at once.
// Return true and set *out to replace the container (usually with a Value::handle); return an Error to abort.
// The answer must depend only on the container's items and `key`: a list built from exactly the same run of memo
// references as an earlier one (a repeated stack) may be given the earlier answer without being offered again.
class Consumer {
 public:
  virtual ~Consumer() = default;
  virtual Result<bool> consume(const Reader& reader, const Value& container, const Value* key, Value* out) = 0;
  // The same offer for a dict the reader decoded without building it: `items` flat as items() gives them (scalars and
  // handles only), `offset` where its EMPTY_DICT sits, no key. It must answer exactly as consume would for such a
  // dict. Returning false (the default) or an error makes the reader build the dict and offer it through consume.
  // `same_keys`: the keys (items at even positions) are, position by position, those of the previous consume_items
  // call of this run, so what the consumer made of those keys alone still holds.
  virtual Result<bool> consume_items(const Reader& reader, std::span<const Value> items, uint64_t offset, Value* out,
                                     bool same_keys) {
    (void)reader, (void)items, (void)offset, (void)out, (void)same_keys;
    return false;
  }
  // A replacement (a handle from consume) that a list need not hold: the list only counts a run of them whose
  // payloads ascend by one (Reader::absorbed). A snapshot's trace list holds millions of row handles that say no
  // more than "rows first..first+count": keeping them cost 16 bytes each, and twice that while the list grew.
  virtual bool absorbs(const Value& replacement) const {
    (void)replacement;
    return false;
  }
  // A list absorbed its first handle, `first_payload`: the one consume just answered (each offer is absorbed before
  // the next is made), so the consumer learns where each list of a run of absorbed handles begins as it streams.
  virtual void list_began(uint64_t first_payload) { (void)first_payload; }
};

class Reader {
 public:
  explicit Reader(StringTable* strings, Limits limits = {});
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Runs the machine over a whole pickle to STOP. The returned root stays valid while this Reader lives.
  // `progress(done_bytes, total_bytes)` is called about every 4 MiB.
  Result<Value> run(std::span<const uint8_t> input, Consumer* consumer = nullptr,
                    const std::function<void(uint64_t, uint64_t)>& progress = {});
  // Makes the next run() decode trace entries ahead on a second thread (natively; the answer is the same either
  // way). `spare_time`, if set, is work for that thread while it waits (LoadOptions::spare_time); it must outlive
  // the run.
  void decode_ahead(const std::function<bool()>* spare_time = nullptr) {
    ahead_ = true;
    spare_time_ = spare_time;
  }

  // The same, streamed: begin(), feed() the bytes in order in chunks of any size, then finish(). An opcode cut at a
  // chunk boundary waits for the next chunk, so the whole input never has to be in memory at once. `size_hint`
  // (0 if unknown) only sizes buffers. Errors are sticky and name offsets in the whole input.
  void begin(Consumer* consumer = nullptr, uint64_t size_hint = 0);
  Status feed(std::span<const uint8_t> chunk);
  Result<Value> finish();

  // Container access (valid for values reachable from the root or passed to a Consumer).
  // Dict items are flat: key0, value0, key1, value1, ...
  std::span<const Value> items(const Value& container) const;
  // Dict lookup by interned key (last assignment wins, like Python); nullptr when absent or not a dict.
  const Value* find(const Value& dict, StringId key) const;
  std::string_view str(const Value& v) const { return strings_->get(static_cast<StringId>(v.payload)); }
  StringTable& strings() const { return *strings_; }
  uint64_t offset() const { return pos_; }  // current byte offset (for consumer error messages)
  uint64_t offset_of(const Value& container) const;  // byte offset of the opcode that created a container
  // The handles a list absorbed (Consumer::absorbs): payloads first, first+1, ..., first+count-1, in that order,
  // whether they came before, between or after its stored items is not recorded (a list holding both is the
  // caller's to refuse).
  struct Absorbed {
    uint64_t first = 0;
    uint64_t count = 0;
  };
  Absorbed absorbed(const Value& list) const;
  // Memo slots the pickle has used (after run/finish): where a pickle appended to this one may start its own.
  uint64_t memo_size() const;
  // Dicts decoded by the fast path (Consumer::consume_items) rather than built: how often it applied.
  uint64_t fast_dicts() const;
  // Of those, the ones decoded ahead on a second thread (decode_ahead).
  uint64_t ahead_dicts() const;
  // The bytes the pickle took, through its STOP (after finish): bytes fed after it are ignored, as Python ignores them.
  uint64_t pickle_end() const;

  struct Impl;  // the machine's storage (private to reader.cpp)

 private:
  StringTable* strings_;
  Limits limits_;
  uint64_t pos_ = 0;
  bool ahead_ = false;
  const std::function<bool()>* spare_time_ = nullptr;
  Impl* impl_;
};

// Python-repr-like text of a value (bounded depth/length), for settings and messages.
std::string repr(const Reader& reader, const Value& v, size_t max_len = 200);

// A pickle writer emitting protocol 2 the way PyTorch's C++ pickler does: PROTO 2, BINPUT/BINGET memo for repeated
// objects, MARK/APPENDS/SETITEMS batches of at most 1000. The caller drives it like a stack machine.
class Writer {
 public:
  Writer();
  // A fragment to append to another pickle: no PROTO header, memo slots from `memo_base` (the other pickle's
  // Reader::memo_size()), and finish() adds no STOP.
  struct Fragment {
    uint32_t memo_base = 0;
  };
  explicit Writer(Fragment f);
  uint32_t begin_dict();             // EMPTY_DICT + memo put (returns the slot); then items, then end_dict()
  void end_dict();                   // emits pending SETITEMS
  uint32_t begin_list();
  void end_list();
  void key(std::string_view k) { str(k); }
  void str(std::string_view s);      // memoized: a repeated string is written once then referenced
  void bytes(std::span<const uint8_t> b);
  void integer(int64_t v);
  void uinteger(uint64_t v);
  void floating(double v);
  void boolean(bool b);
  void none();
  void tuple2_int(int64_t a, int64_t b);
  // References an object memoized earlier (a finished dict or list, by the slot its begin_* returned).
  void get_memo(uint32_t slot);
  std::vector<uint8_t> finish();     // STOP; the writer is reset
  // Hands the output written so far to `sink` each time it passes `chunk` bytes, instead of holding it all (a
  // 100M-event snapshot is 18 GB: tests/bench's make_big_trace); finish() then hands over the rest and returns
  // nothing. The output is only ever appended to, so a chunk once handed over is final.
  void stream_to(std::function<void(std::span<const uint8_t>)> sink, size_t chunk = 64u << 20);

 private:
  void op(uint8_t code);
  void raw(const void* p, size_t n);
  void before_item();
  void item_done();
  uint32_t put_memo();
  void memo_op(uint8_t short_op, uint8_t long_op, uint32_t slot);
  struct Open { bool dict; uint32_t pending; };
  void drain(size_t at_least);
  std::vector<uint8_t> out_;
  std::function<void(std::span<const uint8_t>)> sink_;
  size_t chunk_ = 0;
  std::vector<Open> open_;
  uint32_t next_memo_ = 0;
  uint32_t memo_base_ = 0;
  bool fragment_ = false;
  std::unordered_map<std::string, uint32_t> str_memo_;  // string -> memo slot
  std::string str_key_;
};

// Appends code point `cp` as UTF-8 (U+FFFD past U+10FFFF): for code that reads text in other encodings (the capture
// reads CPython's Latin-1, UCS-2 and UCS-4 strings).
void append_utf8(uint32_t cp, std::string* out);

}  // namespace allocscope::pickle
