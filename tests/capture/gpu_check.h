// Shared by the GPU test programs (gpu_test.cpp and gpu_ptsz.cpp, which must be separate files: the latter is compiled
// for the per-thread default stream): what a scenario did, and a check that stops the program on any CUDA error.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

// What a scenario did, for the checks: name -> value.
using Facts = std::map<std::string, uint64_t>;

// A CUDA runtime or driver call that must succeed (both return 0 on success).
#define CK(x)                                                                              \
  do {                                                                                     \
    auto _e = (x);                                                                         \
    if (_e != 0) {                                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, int(_e));     \
      std::exit(3);                                                                        \
    }                                                                                      \
  } while (0)
