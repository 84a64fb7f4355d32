// PYTORCH_CUDA_ALLOC_CONF as the replay takes it: the options it models, parsed with PyTorch's syntax
// (c10/cuda/CUDAAllocatorConfig.cpp: comma-separated key:value pairs, True/False, sizes in MiB).
#include <cstdlib>
#include <cstdio>

#include "allocscope/whatif.h"

namespace allocscope {

std::string AllocatorSettings::text() const {
  std::string o;
  auto add = [&](const std::string& kv) { o += (o.empty() ? "" : ",") + kv; };
  if (expandable_segments) add("expandable_segments:True");
  if (max_split_size != UINT64_MAX) add("max_split_size_mb:" + std::to_string(max_split_size >> 20));
  if (garbage_collection_threshold > 0) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", garbage_collection_threshold);
    add(std::string("garbage_collection_threshold:") + b);
  }
  return o;
}

Result<AllocatorSettings> parse_allocator_settings(std::string_view conf) {
  AllocatorSettings out;
  size_t at = 0;
  while (at <= conf.size()) {
    size_t comma = conf.find(',', at);
    if (comma == std::string_view::npos) comma = conf.size();
    std::string_view item = conf.substr(at, comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    at = comma + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      return Error{"allocator setting '" + std::string(item) + "' has no value (key:value, as PYTORCH_CUDA_ALLOC_CONF)"};
    const std::string key(item.substr(0, colon)), value(item.substr(colon + 1));
    char* end = nullptr;
    if (key == "expandable_segments") {
      if (value != "True" && value != "False")
        return Error{"expandable_segments takes True or False, not '" + value + "'"};
      out.expandable_segments = value == "True";
    } else if (key == "max_split_size_mb") {
      const double mb = std::strtod(value.c_str(), &end);
      // PyTorch refuses less than kLargeBuffer (20 MiB); huge values mean no limit.
      if (value.empty() || *end || !(mb > 20) || mb > 1e9)
        return Error{"max_split_size_mb takes a number of MiB above 20, not '" + value + "'"};
      out.max_split_size = static_cast<uint64_t>(mb) << 20;
    } else if (key == "garbage_collection_threshold") {
      const double f = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !(f > 0 && f < 1))
        return Error{"garbage_collection_threshold takes a fraction between 0 and 1, not '" + value + "'"};
      out.garbage_collection_threshold = f;
    } else {
      return Error{"allocator setting '" + key + "' is not modelled (expandable_segments, max_split_size_mb and "
                   "garbage_collection_threshold are)"};
    }
    if (comma == conf.size()) break;
  }
  return out;
}

}  // namespace allocscope
