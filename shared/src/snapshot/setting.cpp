// Python-like rendering of allocator settings (the form `torch.cuda.memory._snapshot()` shows them in).
#include <cstdio>

#include "allocscope/snapshot.h"

namespace allocscope {

std::string Setting::repr() const {
  char buf[64];
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return i ? "True" : "False";
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat: std::snprintf(buf, sizeof buf, "%.17g", f); return buf;
    case Kind::kStr: return "'" + s + "'";
    case Kind::kOther: return s;
    case Kind::kDict: {
      std::string out = "{";
      for (size_t k = 0; k < children.size(); ++k) {
        if (k) out += ", ";
        out += "'" + children[k].key + "': " + children[k].repr();
      }
      return out + "}";
    }
    case Kind::kList: {
      std::string out = "[";
      for (size_t k = 0; k < children.size(); ++k) {
        if (k) out += ", ";
        out += children[k].repr();
      }
      return out + "]";
    }
  }
  return "";
}

}  // namespace allocscope
