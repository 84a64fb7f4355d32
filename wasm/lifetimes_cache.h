// Lifetimes are built once per file on first use and shared by every timeline method.
#pragma once

#include "allocscope/lifetimes.h"
#include "methods.h"

namespace allocscope::wasm {

// nullptr when the file has no such device.
const DeviceLifetimes* lifetimes_of(Loaded& f, int64_t device);

}  // namespace allocscope::wasm
