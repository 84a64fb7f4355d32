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

Result<Value> Reader::run(std::span<const uint8_t> input, Consumer* consumer,
                          const std::function<void(uint64_t, uint64_t)>& progress) {
  detail::Machine m(*this, *impl_, *strings_, limits_, input, consumer, &pos_);
  return m.run(progress);
}

}  // namespace allocscope::pickle
