// build_device_lifetimes with its traced rows written by `parts` (1 or 2) cores, split by column (private to
// shared/src; lifetimes.cpp decides how many). Any `parts` gives the same answer: tests/shared/device_threads_test.cpp
// compares them on every kept snapshot.
#pragma once

#include "allocscope/lifetimes.h"

namespace allocscope::detail {

DeviceLifetimes build_device_lifetimes_in(const Snapshot& s, int64_t device, unsigned parts);

}  // namespace allocscope::detail
