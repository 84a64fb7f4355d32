// The public face of the pickle machine: running it and reading the containers it built.
#include "pickle/machine.h"

namespace allocscope::pickle {

double Value::as_double() const {
  double d;
  std::memcpy(&d, &payload, 8);
  return d;
}

using detail::Node;

Reader::Reader(StringTable* strings, Limits limits) : strings_(strings), limits_(limits), impl_(new Impl) {}
Reader::~Reader() { delete impl_; }

std::span<const Value> Reader::items(const Value& v) const {
  if (!v.is_container() || v.payload >= impl_->nodes.size()) return {};
  const Node& n = impl_->nodes[v.payload];
  if (n.gen != v.aux || n.free) return {};
  if (n.lazy) return {impl_->runs.values(n.run), impl_->runs.count(n.run)};
  return n.items;
}

Reader::Absorbed Reader::absorbed(const Value& v) const {
  if (!v.is_container() || v.payload >= impl_->nodes.size()) return {};
  const Node& n = impl_->nodes[v.payload];
  if (n.gen != v.aux || n.free) return {};
  return {n.absorbed_first, n.absorbed};
}

uint64_t Reader::memo_size() const { return impl_->memo.size(); }
uint64_t Reader::fast_dicts() const { return impl_->fast_dicts; }
uint64_t Reader::ahead_dicts() const { return impl_->ahead_dicts; }
uint64_t Reader::pickle_end() const { return impl_->base; }

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

void Reader::begin(Consumer* consumer, uint64_t /*size_hint: the memo grows by blocks, nothing to size*/) {
  Impl& im = *impl_;
  im.consumer = consumer;
  im.carry.clear();
  im.base = 0;
  im.stopped = im.failed = false;
  im.proto = 0;
  im.stack.clear();
  im.marks.clear();
  im.memo.clear();
  im.runs.reset();
  im.fast_dicts = 0;
  im.ahead_dicts = 0;
  im.absorbed_end = UINT64_MAX;
  for (auto& ss : im.short_strings) ss = {};
  im.stack.reserve(4096);
  pos_ = 0;
}

Status Reader::feed(std::span<const uint8_t> chunk) {
  Impl& im = *impl_;
  if (im.failed) return im.error;
  if (im.stopped || chunk.empty()) return {};  // bytes after STOP are ignored, as Python's pickle.loads does
  // Runs the machine on `buf` (which starts at input offset im.base); returns the bytes it consumed.
  auto run = [&](std::span<const uint8_t> buf, size_t* used) -> Status {
    detail::Machine m(*this, im, *strings_, limits_, buf, &pos_, /*last=*/false);
    const bool ok = m.run(nullptr);
    if (!ok && !m.need_more()) {
      im.failed = true;
      im.error = m.error();
      return im.error;
    }
    *used = m.consumed();
    im.base += *used;
    pos_ = im.base;
    return {};
  };
  std::span<const uint8_t> rest = chunk;
  // An opcode cut at the last boundary: complete it from the front of this chunk, taking as much as the carry holds
  // (at least 64 KB) each round, not the whole chunk: copying every chunk behind a few carried bytes cost a full
  // copy of the input (10% of a 1.8 GB load, in fresh pages).
  while (!im.carry.empty()) {
    if (rest.empty()) return {};
    const size_t old = im.carry.size();
    const size_t take = std::min(rest.size(), std::max<size_t>(old, 64u << 10));
    im.carry.insert(im.carry.end(), rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(take));
    rest = rest.subspan(take);
    size_t used = 0;
    ALLOCSCOPE_RETURN_IF_ERROR(run(im.carry, &used));
    if (im.stopped) {
      im.carry.clear();
      return {};
    }
    if (used >= old) {
      // Past the cut: the carry's unconsumed tail is the end of what was just taken from this chunk.
      const size_t tail = im.carry.size() - used;
      rest = {rest.data() - tail, rest.size() + tail};
      im.carry.clear();
    } else {
      im.carry.erase(im.carry.begin(), im.carry.begin() + static_cast<std::ptrdiff_t>(used));
    }
  }
  if (rest.empty()) return {};
  size_t used = 0;
  ALLOCSCOPE_RETURN_IF_ERROR(run(rest, &used));
  if (!im.stopped) im.carry.assign(rest.begin() + static_cast<std::ptrdiff_t>(used), rest.end());
  return {};
}

Result<Value> Reader::finish() {
  Impl& im = *impl_;
  if (im.failed) return im.error;
  if (!im.stopped) {
    // Whatever is left is all there is: run it as the end of the input so a cut opcode is reported.
    std::vector<uint8_t> rest;
    rest.swap(im.carry);
    detail::Machine m(*this, im, *strings_, limits_, rest, &pos_, /*last=*/true);
    if (!m.run(nullptr)) {
      im.failed = true;
      im.error = m.error();
      return im.error;
    }
    im.base += m.consumed();
  }
  if (im.stack.size() != 1 || !im.marks.empty())
    return Error{"STOP with " + std::to_string(im.stack.size()) + " values and " + std::to_string(im.marks.size()) +
                     " marks on the stack; expected exactly one value",
                 im.base ? im.base - 1 : 0};
  return im.stack.back();
}

Result<Value> Reader::run(std::span<const uint8_t> input, Consumer* consumer,
                          const std::function<void(uint64_t, uint64_t)>& progress) {
  begin(consumer, input.size());
  Impl& im = *impl_;
  // Trace entries decoded ahead on a second core, when asked for; stopped before this returns or throws.
  std::unique_ptr<detail::Predecoder> ahead;
  if (std::exchange(ahead_, false) && consumer) ahead = std::make_unique<detail::Predecoder>(input, spare_time_);
  struct Detach {
    Impl& im;
    ~Detach() { im.pre = nullptr; }
  } detach{im};
  im.pre = ahead.get();
  im.pre_runs.clear();
  // One buffer holding everything: no chunking, no carry, progress from inside the loop.
  detail::Machine m(*this, im, *strings_, limits_, input, &pos_, /*last=*/true);
  const bool ran = m.run(&progress);
  im.pre = nullptr;  // finish() runs a machine over another buffer
  if (ahead) ahead->stop_and_rethrow();
  if (!ran) {
    im.failed = true;
    im.error = m.error();
    return im.error;
  }
  im.base += m.consumed();
  pos_ = im.base;
  if (progress) progress(input.size(), input.size());
  return finish();
}

}  // namespace allocscope::pickle
