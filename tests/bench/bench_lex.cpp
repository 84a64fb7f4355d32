// What a split of the file over two cores would pay before it could start its half (docs/loader.md, "Trace entries
// decoded ahead on the second core", says why that split was not built): a walk of the pickle's opcodes that only steps over each one's argument and counts the memo stores, as a
// worker must do up to its split point to know the memo's size and each slot's kind. Timed against the real
// parse+model (load_snapshot) of the same bytes in the same run, best of N each.
// usage: bench_lex [FILE (default: the 1M-event fixture)] [RUNS=5]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "allocscope/loader.h"

using namespace allocscope;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Walk {
  uint64_t ops = 0, memo_stores = 0, strings_stored = 0;
  bool ok = false;
  uint64_t stopped_at = 0;
};

// Protocol 2-4 opcodes as PyTorch's snapshots use them; anything else stops the walk (a split would give up there).
Walk walk(const uint8_t* b, size_t n) {
  Walk w;
  const uint8_t* p = b;
  const uint8_t* const e = b + n;
  uint8_t prev = 0;
  auto u32 = [](const uint8_t* q) {
    uint32_t x;
    std::memcpy(&x, q, 4);
    return x;
  };
  while (p < e) {
    const uint8_t op = *p;
    ++w.ops;
    size_t len = 1;
    bool store = false;
    switch (op) {
      case 0x80: len = 2; break;                         // PROTO
      case 0x95: len = 9; break;                         // FRAME
      case 'h': case 'K': len = 2; break;                // BINGET, BININT1
      case 'j': case 'J': len = 5; break;                // LONG_BINGET, BININT
      case 'M': len = 3; break;                          // BININT2
      case 'G': len = 9; break;                          // BINFLOAT
      case 0x8a: case 0x8c: case 'U': case 'C':          // LONG1, SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
        if (e - p < 2) return w.stopped_at = p - b, w;
        len = 2 + p[1];
        break;
      case 'X': case 'B': case 'T':                      // BINUNICODE, BINBYTES, BINSTRING
        if (e - p < 5) return w.stopped_at = p - b, w;
        len = 5 + u32(p + 1);
        break;
      case 0x94: store = true; break;                    // MEMOIZE
      case 'q': len = 2, store = true; break;            // BINPUT
      case 'r': len = 5, store = true; break;            // LONG_BINPUT
      case '}': case ']': case ')': case '(': case 'u': case 'e': case 'a': case 's': case 't': case 'N':
      case 0x88: case 0x89: case 0x85: case 0x86: case 0x87: case 0x8f: case 0x90: case 0x93: case 'R':
      case '0': case '1': case '2':
        break;
      case '.':
        w.ok = true;
        w.stopped_at = p - b;
        return w;
      default: return w.stopped_at = p - b, w;
    }
    if (store) {
      ++w.memo_stores;
      // What a slot holds is read off the opcode before the store: a string, or a container's start.
      w.strings_stored += prev == 0x8c || prev == 'X';
    } else {
      prev = op;
    }
    p += len;
  }
  w.stopped_at = n;
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : std::string(ALLOCSCOPE_FIXTURES) + "/gpt2_big_1M.pickle.gz";
  const int runs = std::max(1, argc > 2 ? std::atoi(argv[2]) : 5);
  auto file = read_file(path);
  if (!file.ok()) return std::fprintf(stderr, "bench_lex: %s\n", file.error().describe().c_str()), 1;
  std::vector<uint8_t> raw = std::move(file).value();
  if (is_gzip(raw)) {
    auto g = gunzip(raw);
    if (!g.ok()) return std::fprintf(stderr, "bench_lex: %s\n", g.error().describe().c_str()), 1;
    raw = std::move(g).value();
  }
  double best_walk = 1e9, best_load = 1e9;
  Walk w;
  for (int r = 0; r < runs; ++r) {
    double t = now();
    w = walk(raw.data(), raw.size());
    best_walk = std::min(best_walk, now() - t);
    t = now();
    auto s = load_snapshot(raw);
    best_load = std::min(best_load, now() - t);
    if (!s.ok()) return std::fprintf(stderr, "bench_lex: %s\n", s.error().describe().c_str()), 1;
  }
  if (!w.ok) std::printf("walk stopped at byte %llu (an opcode it does not step over)\n",
                         static_cast<unsigned long long>(w.stopped_at));
  std::printf("%s: %.1f MB, %llu opcodes, %llu memo stores (%llu strings)\n", path.c_str(), raw.size() / 1e6,
              static_cast<unsigned long long>(w.ops), static_cast<unsigned long long>(w.memo_stores),
              static_cast<unsigned long long>(w.strings_stored));
  std::printf("opcode walk (lengths only): best %.1f ms (%.2f ns per opcode)\n", best_walk * 1e3,
              best_walk * 1e9 / static_cast<double>(std::max<uint64_t>(w.ops, 1)));
  std::printf("parse+model (load_snapshot): best %.1f ms; the walk is %.0f%% of it\n", best_load * 1e3,
              100.0 * best_walk / best_load);
  return 0;
}
