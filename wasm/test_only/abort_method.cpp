// Test-only (linked into allocscope_wasm_capped, never into the site's module): a method that stops the core the way
// a bug would, so the browser tests can check the worker's message for an abort that is not out of memory.
// {"method": "test_abort", "id": N, "kind": "abort" | "trap"}: std::abort() (the "Aborted()" path assertions and
// std::terminate take) or a trap (what an out-of-bounds access or unreachable code gives).
#include <cstdlib>

#include "../methods.h"

namespace allocscope::wasm {
namespace {

Answer test_abort(const Request& r, std::span<Loaded* const>) {
  if (r.str("kind") == "trap") __builtin_trap();
  std::abort();
}

const RegisterMethod r1({"test_abort", test_abort});

}  // namespace
}  // namespace allocscope::wasm
