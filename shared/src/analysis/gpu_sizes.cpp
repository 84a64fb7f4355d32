// The GPU catalogue and the two ways to get a capacity: named by the user, or inferred from a snapshot's numbers.
#include <cstdio>
#include "allocscope/gpu_sizes.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace allocscope {

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Totals as cudaMemGetInfo reports them (PyTorch's "total capacity"), measured or from vendors' MiB figures. Where
// one class has several cards, the smallest total is kept, so an inferred class never claims more than there is.
// Resident threads, SMs x max threads per SM, are the class's largest card's (more blocks a reduction may be split
// over, so its staging buffers are never predicted smaller than they are): 2,048 a SM on data-centre GPUs and V100,
// 1,536 on consumer and workstation Ampere, Ada and Blackwell, 1,024 on Turing. AMD's launch rules differ (0).
constexpr GpuClass kClasses[] = {
    // Consumer cards first: without them an OOM on a 6 GB card was inferred to be on an 8 GB one, and "at least
    // 2.3 GiB held outside" was said where the request was larger than the whole GPU. A name sold with several
    // memory sizes (RTX 3060: 12 or 8 GB; 3080: 10 or 12; 4060 Ti: 8 or 16) is no catalogue name: --gpu then
    // asks for the size.
    {"4 GB (GTX 1650, T1000)", "4gb,gtx1650,t1000", 3800 * kMiB, 14336},
    {"6 GB (RTX 2060, GTX 1660)", "6gb,rtx2060,gtx1660,gtx1660ti,gtx1660super", 5750 * kMiB, 30720},
    {"8 GB (RTX 3070/4060)", "8gb,rtx3070,rtx3070ti,rtx3060ti,rtx4060,rtx2070,rtx2080,rtx2070super,rtx2080super",
     7800 * kMiB, 73728},
    {"10 GB (RTX 3080 10GB)", "10gb", 9800 * kMiB, 104448},
    {"11 GB (RTX 2080 Ti)", "11gb,rtx2080ti", 10800 * kMiB, 69632},
    {"12 GB (RTX 3060/4070)", "12gb,rtx4070,rtx4070ti,rtx4070super,rtx3080ti,rtx5070,a2000-12gb", 11800 * kMiB, 122880},
    {"16 GB (T4, V100 16GB, RTX 4080)",
     "16gb,t4,v100-16gb,rtx4080,rtx4080super,rtx4070tisuper,rtx5080,rtx5070ti,a4000,rtxa4000", 14930 * kMiB, 163840},
    {"20 GB (A4500)", "20gb,a4500", 19990 * kMiB, 86016},
    {"24 GB (A10, L4, A30)", "24gb,a10,a10g,l4,a30,a5000,rtxa5000", 22480 * kMiB, 122880},
    // PyTorch's OOM messages on these name 23.64-23.68 GiB (RTX 4090) and 23.70 GiB (RTX 3090) of total capacity:
    // with the class's 21.95 GiB, a job needing 22.6 GiB was a sure "does not fit" on a card it fits (an audit).
    {"24 GB (RTX 3090/4090)", "rtx3090,rtx3090ti,rtx4090", 24166 * kMiB, 196608},
    {"32 GB (V100 32GB, RTX 5090)", "32gb,v100-32gb,rtx5090", 31840 * kMiB, 261120},
    {"40 GB (A100 40GB)", "40gb,a100-40gb", 40330 * kMiB, 221184},
    {"48 GB (A40, A6000, L40S)", "48gb,a40,a6000,rtxa6000,l40,l40s,rtx6000ada", 45400 * kMiB, 218112},
    {"80 GB (A100 80GB, H100, H800)", "80gb,a100-80gb,h100,h800", 81040 * kMiB, 270336},
    {"94 GB (H100 NVL)", "94gb,h100nvl,h100-nvl", 95320 * kMiB, 270336},
    {"96 GB (H20, RTX PRO 6000)", "96gb,h20,rtxpro6000", 97250 * kMiB, 288768},
    {"141 GB (H200)", "141gb,h200", 143155 * kMiB, 270336},  // measured on an H200 (150,109,880,320 B)
    {"180 GB (B200)", "180gb,b200", 182600 * kMiB, 303104},
    {"192 GB (MI300X)", "192gb,mi300x", 196592 * kMiB, 0},
    {"288 GB (B300, MI355X)", "288gb,b300,mi355x", 275000 * kMiB, 327680},
};

// Names sold with several memory sizes, and the names that pick one: such a name alone is refused, never guessed
// (an audit: "v100" read as 32 GB and "a100" as 80 GB, and said FITS for jobs a 16 GB V100 or a 40 GB A100 cannot
// hold; the 16 GB V100 is the common cloud one).
constexpr std::pair<std::string_view, std::string_view> kSeveralSizes[] = {
    {"v100", "v100-16gb or v100-32gb"}, {"a100", "a100-40gb or a100-80gb"}, {"rtx3060", "12gb or 8gb"},
    {"rtx3080", "10gb or 12gb"},        {"rtx4060ti", "8gb or 16gb"},       {"a2000", "6gb or a2000-12gb"}};

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '_') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

}  // namespace

std::span<const GpuClass> gpu_classes() { return kClasses; }

namespace {
GpuCapacity named_capacity(const GpuClass& c) {
  return GpuCapacity{c.total_bytes, std::string(c.label), false, c.resident_threads};
}
}  // namespace

std::optional<GpuCapacity> infer_gpu_capacity(uint64_t accounted_bytes) {
  for (size_t k = 0; k < std::size(kClasses); ++k) {
    const GpuClass& c = kClasses[k];
    if (c.total_bytes < accounted_bytes + kMinContextBytes) continue;
    // The class is a lower bound (the GPU may be larger): the most resident threads of it and every class above.
    uint64_t threads = 0;
    for (size_t j = k; j < std::size(kClasses); ++j) threads = std::max(threads, kClasses[j].resident_threads);
    return GpuCapacity{c.total_bytes, std::string(c.label), true, threads};
  }
  return std::nullopt;
}

Result<GpuCapacity> parse_gpu_capacity(std::string_view text) {
  std::string t = lower(text);
  auto named = [](std::string_view name) -> const GpuClass* {
    for (const GpuClass& c : kClasses) {
      std::string_view names = c.names;
      while (!names.empty()) {
        const size_t comma = names.find(',');
        if (names.substr(0, comma) == name) return &c;
        names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
      }
    }
    return nullptr;
  };
  if (const GpuClass* c = named(t)) return named_capacity(*c);
  auto several = [&](std::string_view name) -> std::optional<Error> {
    for (const auto& [n, choices] : kSeveralSizes)
      if (n == name)
        return Error{"--gpu: '" + std::string(text) + "' is sold with several memory sizes; give which: " +
                     std::string(choices) + " (or the bytes torch.cuda.mem_get_info()[1] reports)"};
    return std::nullopt;
  };
  if (auto e = several(t)) return *e;
  // The name torch.cuda.get_device_name() or nvidia-smi reports ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
  // "NVIDIA GeForce RTX 4090"): its words, less the brand. A word that is a class's memory size ("80gb") picks that
  // class; else all the words joined ("rtx" "4070" "ti" "super") must be a catalogue name, or the first word or the
  // first two joined ("h100" "nvl") with only form-factor words after them ("pcie", "sxm5", "hbm3"). Any other
  // word may change the memory ("RTX 4070 Ti SUPER" has 16 GB, an "RTX 4070" 12; a "Laptop GPU" less than its
  // desktop namesake), so such a name is refused and the size asked for, never guessed.
  {
    std::vector<std::string> words;
    std::string w;
    for (char ch : std::string(text) + " ") {
      if (ch == ' ' || ch == '-' || ch == '_') {
        if (!w.empty() && w != "nvidia" && w != "tesla" && w != "geforce" && w != "quadro") words.push_back(w);
        w.clear();
      } else {
        w.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
      }
    }
    if (words.size() >= 2 || (words.size() == 1 && words[0] != t)) {
      for (const std::string& word : words)
        if (word.size() > 2 && word.compare(word.size() - 2, 2, "gb") == 0 && std::isdigit(static_cast<unsigned char>(word[0])))
          if (const GpuClass* c = named(word)) return named_capacity(*c);
      std::string all;
      for (const std::string& word : words) all += word;
      if (const GpuClass* c = named(all)) return named_capacity(*c);
      auto form_factor_only = [&](size_t from) {
        static constexpr std::string_view kForm[] = {"pcie", "sxm", "sxm2", "sxm4", "sxm5", "hbm2", "hbm2e", "hbm3",
                                                     "hbm3e", "gpu"};
        for (size_t k = from; k < words.size(); ++k)
          if (std::find(std::begin(kForm), std::end(kForm), words[k]) == std::end(kForm)) return false;
        return true;
      };
      if (words.size() >= 2 && form_factor_only(2))
        if (const GpuClass* c = named(words[0] + words[1])) return named_capacity(*c);
      if (!words.empty() && form_factor_only(1)) {
        if (const GpuClass* c = named(words[0])) return named_capacity(*c);
        if (auto e = several(words[0])) return *e;
      }
      if (!words.empty() && std::isalpha(static_cast<unsigned char>(words[0][0])))
        return Error{"--gpu: '" + std::string(text) + "': this model is not in the catalogue, or is sold with "
                     "several memory sizes; give its memory instead (--gpu 16GB, or the bytes "
                     "torch.cuda.mem_get_info()[1] reports)"};
    }
  }
  // A size: digits, optional fraction, optional unit (GB = 10^9, GiB = 2^30, none = bytes).
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  double scale = 0;
  if (unit.empty()) scale = 1;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "gib" || unit == "g") scale = 1073741824.0;
  else if (unit == "mib" || unit == "m") scale = 1048576.0;
  if (end == t.c_str() || scale == 0 || !(v > 0) || v * scale > 1e15)
    return Error{"--gpu: '" + std::string(text) + "' is neither a GPU name (h100, a100-40gb, 24gb, ...) nor a size "
                 "(85017493504, 79.18GiB, 80GB)"};
  // A bare number is bytes; one under a GiB is surely meant in GB ("--gpu 80" was taken as 80 bytes). The units
  // are suggested only for a number a GPU could have in them (an audit: "927512243GB" was offered).
  // A count of bytes under a GiB that was meant (a cap, a small test) is said with its unit (an audit: the message
  // did not say why 757281587 was refused, nor how to give it).
  if (unit.empty() && v < 1073741824.0) {
    char mib[48] = "";
    if (v > 1024) std::snprintf(mib, sizeof mib, "%.0fMiB", v / 1048576.0);
    return Error{"--gpu: '" + std::string(text) + "' would be " + std::string(text) +
                 " bytes, under 1 GiB, so a bare number is not taken as bytes: give " +
                 (v <= 1024 ? "a unit (" + std::string(text) + "GB, " + std::string(text) + "GiB), "
                            : "a unit (" + std::string(mib) + "), ") +
                 "the bytes torch.cuda.mem_get_info()[1] reports, or a name (h100)"};
  }
  return GpuCapacity{static_cast<uint64_t>(v * scale), "the GPU given", false};
}

}  // namespace allocscope
