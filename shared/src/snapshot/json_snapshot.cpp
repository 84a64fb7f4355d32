// A JSON snapshot re-encoded as the pickle Python would have written for the same dict (json_snapshot.h).
#include "snapshot/json_snapshot.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

#include <simdjson.h>

#include "pickle/opcodes.h"

namespace allocscope::detail {

static_assert(simdjson::SIMDJSON_PADDING <= kJsonPadding, "the loader pads JSON text with kJsonPadding bytes");

void JsonOffsets::add(uint64_t pickle, uint64_t json) {
  // Sampled: one pair per 4 KiB of pickle keeps a 1 GB JSON's map at a few MB.
  if (!samples_.empty() && pickle < samples_.back().first + 4096) return;
  samples_.emplace_back(pickle, json);
}

uint64_t JsonOffsets::json_near(uint64_t pickle) const {
  auto it = std::upper_bound(samples_.begin(), samples_.end(), std::make_pair(pickle, UINT64_MAX));
  return it == samples_.begin() ? 0 : std::prev(it)->second;
}

namespace {

using namespace simdjson;
using pickle::Opcode;

// Writes pickle opcodes as CPython's protocol 4 pickler lays them out for a snapshot's dicts, lists, strings and
// numbers, so the pickle machine's fast paths (trace entries and frames decoded from their bytes, keys recognised as
// repeats of the previous entry's) apply as they do to PyTorch's own files. Strings are memoized and repeats written
// as memo references, as Python's pickler does for the key and file-name strings it shares; containers are not (a
// JSON value is never referenced twice).
class Emitter {
 public:
  static constexpr size_t kChunk = 4u << 20;
  static constexpr size_t kBatch = 1000;  // items per MARK, as Python batches APPENDS and SETITEMS

  explicit Emitter(const std::function<Status(std::span<const uint8_t>)>& sink) : sink_(sink) {
    buf_.reserve(kChunk + (1u << 16));
    byte(Opcode::kPROTO), byte(4);
  }
  uint64_t offset() const { return flushed_ + buf_.size(); }
  Status flush_if_full() { return buf_.size() >= kChunk ? flush() : Status{}; }
  Status flush() {
    if (buf_.empty()) return {};
    Status st = sink_(buf_);
    flushed_ += buf_.size();
    buf_.clear();
    return st;
  }

  void byte(uint8_t b) { buf_.push_back(b); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void none() { byte(Opcode::kNONE); }
  void boolean(bool b) { byte(b ? Opcode::kNEWTRUE : Opcode::kNEWFALSE); }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      byte(Opcode::kBININT1), byte(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 65536) {
      byte(Opcode::kBININT2), byte(static_cast<uint8_t>(v)), byte(static_cast<uint8_t>(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      const int32_t w = static_cast<int32_t>(v);
      byte(Opcode::kBININT), bytes(&w, 4);
    } else {
      // LONG1: the fewest little-endian two's complement bytes that keep the sign, as Python's encode_long.
      uint8_t le[8];
      std::memcpy(le, &v, 8);
      size_t n = 8;
      while (n > 1 && ((le[n - 1] == 0 && !(le[n - 2] & 0x80)) || (le[n - 1] == 0xff && (le[n - 2] & 0x80)))) --n;
      byte(Opcode::kLONG1), byte(static_cast<uint8_t>(n)), bytes(le, n);
    }
  }
  void unsigned_integer(uint64_t v) {  // past INT64_MAX: 8 bytes and a zero byte for the sign
    if (v <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(v));
    byte(Opcode::kLONG1), byte(9), bytes(&v, 8), byte(0);
  }
  void floating(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    byte(Opcode::kBINFLOAT);
    for (int i = 7; i >= 0; --i) byte(static_cast<uint8_t>(bits >> (8 * i)));  // big-endian, as struct '>d'
  }
  void string(std::string_view s) {
    if (auto it = memo_.find(s); it != memo_.end()) return get(it->second);
    const uint32_t n = static_cast<uint32_t>(s.size());
    if (n < 256) {
      byte(Opcode::kSHORT_BINUNICODE), byte(static_cast<uint8_t>(n));
    } else {
      byte(Opcode::kBINUNICODE), bytes(&n, 4);
    }
    bytes(s.data(), s.size());
    // Memoized as Python's pickler would for a shared string; long or endless unique strings (user metadata) are
    // not, so the table stays bounded.
    if (s.size() <= 256 && memo_.size() < (1u << 20)) {
      byte(Opcode::kMEMOIZE);
      memo_.emplace(s, next_memo_++);
    }
  }

 private:
  void get(uint32_t slot) {
    if (slot < 256) {
      byte(Opcode::kBINGET), byte(static_cast<uint8_t>(slot));
    } else {
      byte(Opcode::kLONG_BINGET), bytes(&slot, 4);
    }
  }

  const std::function<Status(std::span<const uint8_t>)>& sink_;
  std::vector<uint8_t> buf_;
  uint64_t flushed_ = 0;
  // The views point into the parser's string buffer, which lives as long as the document.
  std::unordered_map<std::string_view, uint32_t> memo_;
  uint32_t next_memo_ = 0;
};

class Transcoder {
 public:
  Transcoder(std::span<const uint8_t> json, uint64_t base, uint32_t max_depth, Emitter* out, JsonOffsets* offsets,
             const std::function<void(uint64_t, uint64_t)>& progress)
      : json_(json), base_(base), max_depth_(max_depth), out_(out), offsets_(offsets), progress_(progress) {}

  Status run(ondemand::document& doc) {
    ondemand::json_type t;
    if (auto e = doc.type().get(t)) return fail(doc, e, "a JSON object or list");
    if (t == ondemand::json_type::array) {  // the oldest format: a list of segments
      ondemand::array root;
      if (auto e = doc.get_array().get(root)) return fail(doc, e, "a JSON list");
      ALLOCSCOPE_RETURN_IF_ERROR(array(doc, root, 1));
    } else {
      ondemand::object root;
      if (auto e = doc.get_object().get(root)) return fail(doc, e, "a JSON object");
      ALLOCSCOPE_RETURN_IF_ERROR(object(doc, root, 1));
    }
    // Python's json.load refuses anything but spaces after the value; so does this.
    const char* rest = nullptr;
    if (!doc.current_location().get(rest)) return Error{"text after the JSON value ends", at(rest), false, true};
    out_->byte(pickle::Opcode::kSTOP);
    return out_->flush();
  }

 private:
  uint64_t at(const char* p) const {
    return base_ + static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(p) - json_.data());
  }
  // Where the document stands (the end when past it).
  uint64_t here(ondemand::document& doc) {
    const char* p = nullptr;
    return doc.current_location().get(p) ? base_ + json_.size() : at(p);
  }
  Error fail(ondemand::document& doc, error_code e, const char* expected) {
    std::string what = error_message(e);
    if (!what.empty() && what.back() == '.') what.pop_back();
    return Error{std::string("expected ") + expected + " (simdjson: " + what + ")", here(doc), false, true};
  }
  Status step(ondemand::document& doc) {
    offsets_->add(out_->offset(), here(doc));
    if (out_->offset() >= next_progress_ && progress_) {
      progress_(here(doc), base_ + json_.size());
      next_progress_ = out_->offset() + Emitter::kChunk;
    }
    return out_->flush_if_full();
  }

  Status object(ondemand::document& doc, ondemand::object& o, uint32_t depth) {
    ALLOCSCOPE_RETURN_IF_ERROR(step(doc));
    out_->byte(pickle::Opcode::kEMPTY_DICT);
    size_t in_batch = 0;
    for (auto field : o) {
      ondemand::field f;
      if (auto e = std::move(field).get(f)) return fail(doc, e, "a \"key\": value pair");
      std::string_view key;
      if (auto e = f.unescaped_key().get(key)) return fail(doc, e, "a string key");
      if (in_batch == 0) out_->byte(pickle::Opcode::kMARK);
      out_->string(key);
      ondemand::value v = f.value();
      ALLOCSCOPE_RETURN_IF_ERROR(value(doc, v, depth));
      if (++in_batch == Emitter::kBatch) out_->byte(pickle::Opcode::kSETITEMS), in_batch = 0;
    }
    if (in_batch > 0) out_->byte(pickle::Opcode::kSETITEMS);
    return {};
  }

  Status array(ondemand::document& doc, ondemand::array& a, uint32_t depth) {
    ALLOCSCOPE_RETURN_IF_ERROR(step(doc));
    out_->byte(pickle::Opcode::kEMPTY_LIST);
    size_t in_batch = 0;
    for (auto item : a) {
      ondemand::value v;
      if (auto e = std::move(item).get(v)) return fail(doc, e, "a value");
      if (in_batch == 0) out_->byte(pickle::Opcode::kMARK);
      ALLOCSCOPE_RETURN_IF_ERROR(value(doc, v, depth));
      if (++in_batch == Emitter::kBatch) out_->byte(pickle::Opcode::kAPPENDS), in_batch = 0;
    }
    if (in_batch > 0) out_->byte(pickle::Opcode::kAPPENDS);
    return {};
  }

  Status value(ondemand::document& doc, ondemand::value& v, uint32_t depth) {
    ondemand::json_type t;
    if (auto e = v.type().get(t)) return fail(doc, e, "a value");
    const bool container = t == ondemand::json_type::object || t == ondemand::json_type::array;
    if (container && depth + 1 > max_depth_)
      return Error{"JSON nested deeper than " + std::to_string(max_depth_) + " levels", here(doc), false, true};
    switch (t) {
      case ondemand::json_type::object: {
        ondemand::object o;
        if (auto e = v.get_object().get(o)) return fail(doc, e, "an object");
        return object(doc, o, depth + 1);
      }
      case ondemand::json_type::array: {
        ondemand::array a;
        if (auto e = v.get_array().get(a)) return fail(doc, e, "a list");
        return array(doc, a, depth + 1);
      }
      case ondemand::json_type::string: {
        std::string_view s;
        if (auto e = v.get_string().get(s)) return fail(doc, e, "a string");
        out_->string(s);
        return {};
      }
      case ondemand::json_type::number: {
        ondemand::number_type nt;
        if (auto e = v.get_number_type().get(nt))
          return fail(doc, e, "a number (an integer past 64 bits is not one a snapshot holds)");
        if (nt == ondemand::number_type::signed_integer) {
          int64_t i;
          if (auto e = v.get_int64().get(i)) return fail(doc, e, "an integer");
          out_->integer(i);
        } else if (nt == ondemand::number_type::unsigned_integer) {
          uint64_t u;
          if (auto e = v.get_uint64().get(u)) return fail(doc, e, "an integer");
          out_->unsigned_integer(u);
        } else {
          double d;
          if (auto e = v.get_double().get(d)) return fail(doc, e, "a number");
          out_->floating(d);
        }
        return {};
      }
      case ondemand::json_type::boolean: {
        bool b;
        if (auto e = v.get_bool().get(b)) return fail(doc, e, "true or false");
        out_->boolean(b);
        return {};
      }
      case ondemand::json_type::null: {
        bool null = false;
        if (auto e = v.is_null().get(null); e || !null) return fail(doc, e ? e : INCORRECT_TYPE, "null");
        out_->none();
        return {};
      }
    }
    return fail(doc, INCORRECT_TYPE, "a value");
  }

  std::span<const uint8_t> json_;
  uint64_t base_;
  uint32_t max_depth_;
  Emitter* out_;
  JsonOffsets* offsets_;
  const std::function<void(uint64_t, uint64_t)>& progress_;
  uint64_t next_progress_ = 0;
};

}  // namespace

Status json_to_pickle(std::span<const uint8_t> json, uint32_t max_depth,
                      const std::function<Status(std::span<const uint8_t>)>& sink, JsonOffsets* offsets,
                      const std::function<void(uint64_t, uint64_t)>& progress) {
  uint64_t base = 0;  // a UTF-8 byte order mark, which Python's json.load refuses but editors write, is skipped
  if (json.size() >= 3 && json[0] == 0xef && json[1] == 0xbb && json[2] == 0xbf) base = 3, json = json.subspan(3);
  if (json.size() > simdjson::SIMDJSON_MAXSIZE_BYTES)
    return Error{"a JSON snapshot of " + std::to_string(json.size() >> 20) +
                     " MiB: JSON is read up to 4 GiB; write a pickle (torch.cuda.memory._dump_snapshot) for larger",
                 0, false, true};
  ondemand::parser parser;
  // simdjson's own depth bound sits one above ours, so ours is the one that speaks.
  if (auto e = parser.allocate(json.size(), max_depth + 2))
    return Error{std::string("cannot hold this JSON's index (simdjson: ") + error_message(e) + ")", 0, false, true};
  ondemand::document doc;
  if (auto e = parser.iterate(json.data(), json.size(), json.size() + kJsonPadding).get(doc))
    return Error{std::string("not JSON this reader can index (simdjson: ") + error_message(e) + ")", base, false,
                 true};
  Emitter out(sink);
  return Transcoder(json, base, max_depth, &out, offsets, progress).run(doc);
}

}  // namespace allocscope::detail
