// Protocol-2 pickle emitter with a memo for repeated strings and objects (the shape PyTorch's C++ pickler writes).
#include <cstring>

#include "allocscope/pickle.h"
#include "pickle/opcodes.h"

namespace allocscope::pickle {

namespace {
constexpr uint32_t kBatch = 1000;  // items per APPENDS/SETITEMS, as Python's pickler batches
}

Writer::Writer() {
  op(kPROTO);
  out_.push_back(2);
}

Writer::Writer(Fragment f) : next_memo_(f.memo_base), memo_base_(f.memo_base), fragment_(true) {}

void Writer::op(uint8_t code) {
  out_.push_back(code);
  if (sink_ && out_.size() >= chunk_) drain(chunk_);
}
void Writer::raw(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out_.insert(out_.end(), b, b + n);
  if (sink_ && out_.size() >= chunk_) drain(chunk_);
}

void Writer::stream_to(std::function<void(std::span<const uint8_t>)> sink, size_t chunk) {
  sink_ = std::move(sink);
  chunk_ = chunk ? chunk : 1;
  drain(chunk_);
}

void Writer::drain(size_t at_least) {
  if (!sink_ || out_.size() < at_least) return;
  sink_(out_);
  out_.clear();
}

void Writer::before_item() {
  if (!open_.empty() && open_.back().pending == 0) op(kMARK);
}

void Writer::item_done() {
  if (open_.empty()) return;
  Open& o = open_.back();
  ++o.pending;
  const uint32_t full = o.dict ? 2 * kBatch : kBatch;
  if (o.pending == full) {
    op(o.dict ? kSETITEMS : kAPPENDS);
    o.pending = 0;
  }
}

uint32_t Writer::put_memo() {
  const uint32_t slot = next_memo_++;
  memo_op(kBINPUT, kLONG_BINPUT, slot);
  return slot;
}

// A memo opcode with its slot: the 1-byte form below 256, else the 4-byte one.
void Writer::memo_op(uint8_t short_op, uint8_t long_op, uint32_t slot) {
  if (slot < 256) {
    op(short_op);
    out_.push_back(static_cast<uint8_t>(slot));
  } else {
    op(long_op);
    raw(&slot, 4);
  }
}

void Writer::get_memo(uint32_t slot) {
  before_item();
  memo_op(kBINGET, kLONG_BINGET, slot);
  item_done();
}

uint32_t Writer::begin_dict() {
  before_item();
  op(kEMPTY_DICT);
  uint32_t slot = put_memo();
  open_.push_back({true, 0});
  return slot;
}

uint32_t Writer::begin_list() {
  before_item();
  op(kEMPTY_LIST);
  uint32_t slot = put_memo();
  open_.push_back({false, 0});
  return slot;
}

void Writer::end_dict() {
  if (open_.back().pending) op(kSETITEMS);
  open_.pop_back();
  item_done();
}

void Writer::end_list() {
  if (open_.back().pending) op(kAPPENDS);
  open_.pop_back();
  item_done();
}

void Writer::str(std::string_view s) {
  before_item();
  str_key_.assign(s.data(), s.size());  // reused buffer: no allocation per lookup once it has grown
  auto it = str_memo_.find(str_key_);
  if (it != str_memo_.end()) {
    memo_op(kBINGET, kLONG_BINGET, it->second);
  } else {
    op(kBINUNICODE);
    const uint32_t n = static_cast<uint32_t>(s.size());
    raw(&n, 4);
    raw(s.data(), s.size());
    str_memo_.emplace(str_key_, put_memo());
  }
  item_done();
}

void Writer::bytes(std::span<const uint8_t> b) {
  before_item();
  op(kBINBYTES);
  const uint32_t n = static_cast<uint32_t>(b.size());
  raw(&n, 4);
  raw(b.data(), b.size());
  item_done();
}

void Writer::integer(int64_t v) {
  before_item();
  if (v >= 0 && v < 256) {
    op(kBININT1);
    out_.push_back(static_cast<uint8_t>(v));
  } else if (v >= 0 && v < 65536) {
    op(kBININT2);
    const uint16_t x = static_cast<uint16_t>(v);
    raw(&x, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    op(kBININT);
    const int32_t x = static_cast<int32_t>(v);
    raw(&x, 4);
  } else {
    // LONG1 with the minimal two's-complement width, as Python writes it.
    uint8_t b[8];
    std::memcpy(b, &v, 8);
    size_t n = 8;
    while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xFF && (b[n - 2] & 0x80)))) --n;
    op(kLONG1);
    out_.push_back(static_cast<uint8_t>(n));
    raw(b, n);
  }
  item_done();
}

void Writer::uinteger(uint64_t v) {
  if (v <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(v));
  before_item();
  op(kLONG1);
  out_.push_back(9);
  raw(&v, 8);
  out_.push_back(0);  // sign byte: positive
  item_done();
}

void Writer::floating(double v) {
  before_item();
  op(kBINFLOAT);
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  bits = __builtin_bswap64(bits);
  raw(&bits, 8);
  item_done();
}

void Writer::boolean(bool b) {
  before_item();
  op(b ? kNEWTRUE : kNEWFALSE);
  item_done();
}

void Writer::none() {
  before_item();
  op(kNONE);
  item_done();
}

void Writer::tuple2_int(int64_t a, int64_t b) {
  before_item();
  // Emit the two ints outside of the open container's batch accounting, then TUPLE2.
  std::vector<Open> saved;
  saved.swap(open_);
  integer(a);
  integer(b);
  saved.swap(open_);
  op(kTUPLE2);
  item_done();
}

std::vector<uint8_t> Writer::finish() {
  if (!fragment_) op(kSTOP);
  drain(1);
  std::vector<uint8_t> out = std::move(out_);
  out_.clear();
  open_.clear();
  str_memo_.clear();
  next_memo_ = memo_base_;
  if (!fragment_) {
    op(kPROTO);
    out_.push_back(2);
  }
  return out;
}

}  // namespace allocscope::pickle
