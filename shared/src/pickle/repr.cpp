// A bounded, Python-like rendering of pickle values, used for allocator settings and diagnostics.
#include <cstdio>
#include <string>

#include "allocscope/pickle.h"

namespace allocscope::pickle {

namespace {
void render(const Reader& r, const Value& v, std::string* out, size_t max_len, int depth) {
  if (out->size() >= max_len) return;
  char buf[64];
  switch (v.tag) {
    case Tag::kNone: out->append("None"); return;
    case Tag::kBool: out->append(v.payload ? "True" : "False"); return;
    case Tag::kInt: out->append(std::to_string(v.as_int())); return;
    case Tag::kUInt: out->append(std::to_string(v.as_uint())); return;
    case Tag::kFloat: std::snprintf(buf, sizeof buf, "%.17g", v.as_double()); out->append(buf); return;
    case Tag::kStr: out->append("'").append(r.str(v)).append("'"); return;
    case Tag::kBytes: out->append("b'...'"); return;
    case Tag::kHandle: out->append("<...>"); return;
    default: break;
  }
  const bool dict = v.tag == Tag::kDict;
  out->append(dict ? "{" : v.tag == Tag::kTuple ? "(" : "[");
  if (depth > 8) {
    out->append("...");
  } else {
    auto items = r.items(v);
    for (size_t i = 0; i < items.size() && out->size() < max_len; ++i) {
      if (i) out->append(dict && i % 2 ? ": " : ", ");
      render(r, items[i], out, max_len, depth + 1);
    }
  }
  out->append(dict ? "}" : v.tag == Tag::kTuple ? ")" : "]");
}
}  // namespace

std::string repr(const Reader& reader, const Value& v, size_t max_len) {
  std::string out;
  render(reader, v, &out, max_len, 0);
  if (out.size() > max_len) out.resize(max_len), out.append("...");
  return out;
}

}  // namespace allocscope::pickle
