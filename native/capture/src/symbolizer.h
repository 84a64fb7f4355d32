// Dump-time symbolization: return addresses -> module, function (demangled) and offset, once per distinct address.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "source_lines.h"

namespace allocscope::capture {

struct Module {
  std::string path;      // as the loader reports it; the main program's real path
  uintptr_t bias = 0;    // load bias (runtime address - file address)
  uintptr_t lo = 0, hi = 0;  // lowest and highest mapped address of its PT_LOAD segments
};

struct Symbol {
  std::string function;  // demangled; "" when unknown
  int module = -1;       // index into modules(), -1 when the address is in no module
  uintptr_t offset = 0;  // from the function's start, or from the module's bias when the function is unknown
  std::string file;      // source file when debug info says so ("" otherwise)
  int line = 0;
};

// Takes the module map at construction (dl_iterate_phdr). Reads each module's ELF symbol table (.symtab, else
// .dynsym) from its file once, on first use, so static functions are named too; dladdr is the fallback. File and line
// come from DWARF through libdw when it is installed and the module has debug info.
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // `ip` is a return address: the call instruction is just before it.
  Symbol resolve(uintptr_t ip);
  const std::vector<Module>& modules() const { return modules_; }

 private:
  struct ElfSymbols;
  int module_of(uintptr_t addr) const;
  std::vector<Module> modules_;
  std::vector<std::unique_ptr<ElfSymbols>> symbols_;  // per module, loaded lazily
  std::unique_ptr<SourceLines> lines_;                 // file:line where DWARF exists (libdw, optional)
};

// abi::__cxa_demangle, or the input when it is not a mangled C++ name.
std::string demangle(const char* name);

}  // namespace allocscope::capture
