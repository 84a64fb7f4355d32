// build_device_lifetimes with its replay split over `parts` (1 or 2) halves of the addresses, a core each (private to
// shared/src; lifetimes.cpp decides how many). Any `parts` gives the same answer: tests/shared/device_threads_test.cpp
// compares them on every kept snapshot.
#pragma once

#include "allocscope/lifetimes.h"

namespace allocscope::detail {

DeviceLifetimes build_device_lifetimes_in(const Snapshot& s, int64_t device, unsigned parts);

}  // namespace allocscope::detail
