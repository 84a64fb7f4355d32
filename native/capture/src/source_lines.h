// Optional file:line for return addresses, read from DWARF through elfutils' libdw when it is installed (libdw1 on
// Debian/Ubuntu). Loaded with dlopen at dump time only, so it is neither a build nor a run-time requirement.
#pragma once

#include <cstdint>
#include <string>

namespace allocscope::capture {

class SourceLines {
 public:
  SourceLines();   // reports this process's modules to libdw (if available and ALLOCSCOPE_LINES is not 0)
  ~SourceLines();
  SourceLines(const SourceLines&) = delete;
  SourceLines& operator=(const SourceLines&) = delete;

  bool available() const { return dwfl_ != nullptr; }
  // File and line of the instruction at `addr` (pass return address - 1); false when there is no debug info.
  bool lookup(uintptr_t addr, std::string* file, int* line);

 private:
  void* dwfl_ = nullptr;
};

}  // namespace allocscope::capture
