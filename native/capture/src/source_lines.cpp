// libdwfl over dlopen: the handful of functions and the one struct we need are declared here (ABI-stable since
// elfutils 0.122), so no elfutils headers are needed to build.
#include "source_lines.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace allocscope::capture {
namespace {

using Dwarf_Addr = uint64_t;
using Dwarf_Word = uint64_t;
struct Dwfl;
struct Dwfl_Module;
struct Dwfl_Line;
using FindElf = int (*)(Dwfl_Module*, void**, const char*, Dwarf_Addr, char**, void**);
using FindDebuginfo = int (*)(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, uint32_t, char**);
struct Dwfl_Callbacks {
  FindElf find_elf;
  FindDebuginfo find_debuginfo;
  void* section_address;
  char** debuginfo_path;
};

struct Api {
  Dwfl* (*begin)(const Dwfl_Callbacks*) = nullptr;
  void (*end)(Dwfl*) = nullptr;
  void (*report_begin)(Dwfl*) = nullptr;
  int (*linux_proc_report)(Dwfl*, pid_t) = nullptr;
  int (*report_end)(Dwfl*, void*, void*) = nullptr;
  Dwfl_Module* (*addrmodule)(Dwfl*, Dwarf_Addr) = nullptr;
  Dwfl_Line* (*module_getsrc)(Dwfl_Module*, Dwarf_Addr) = nullptr;
  const char* (*lineinfo)(Dwfl_Line*, Dwarf_Addr*, int*, int*, Dwarf_Word*, Dwarf_Word*) = nullptr;
  Dwfl_Callbacks callbacks{};
  bool ok = false;
};

const Api& api() {
  static const Api a = [] {
    Api x;
    void* h = dlopen("libdw.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) return x;
    auto sym = [h](auto* fp, const char* name) {
      *fp = reinterpret_cast<std::remove_reference_t<decltype(*fp)>>(dlsym(h, name));
      return *fp != nullptr;
    };
    x.ok = sym(&x.begin, "dwfl_begin") && sym(&x.end, "dwfl_end") && sym(&x.report_begin, "dwfl_report_begin") &&
           sym(&x.linux_proc_report, "dwfl_linux_proc_report") && sym(&x.report_end, "dwfl_report_end") &&
           sym(&x.addrmodule, "dwfl_addrmodule") && sym(&x.module_getsrc, "dwfl_module_getsrc") &&
           sym(&x.lineinfo, "dwfl_lineinfo") && sym(&x.callbacks.find_elf, "dwfl_linux_proc_find_elf") &&
           sym(&x.callbacks.find_debuginfo, "dwfl_standard_find_debuginfo");
    return x;
  }();
  return a;
}

}  // namespace

SourceLines::SourceLines() {
  if (const char* e = std::getenv("ALLOCSCOPE_LINES"); e && std::strcmp(e, "0") == 0) return;
  const Api& a = api();
  if (!a.ok) return;
  Dwfl* d = a.begin(&a.callbacks);
  if (!d) return;
  a.report_begin(d);
  if (a.linux_proc_report(d, getpid()) != 0 || a.report_end(d, nullptr, nullptr) != 0) {
    a.end(d);
    return;
  }
  dwfl_ = d;
}

SourceLines::~SourceLines() {
  if (dwfl_) api().end(static_cast<Dwfl*>(dwfl_));
}

bool SourceLines::lookup(uintptr_t addr, std::string* file, int* line) {
  if (!dwfl_) return false;
  const Api& a = api();
  Dwfl_Module* m = a.addrmodule(static_cast<Dwfl*>(dwfl_), addr);
  if (!m) return false;
  Dwfl_Line* l = a.module_getsrc(m, addr);
  if (!l) return false;
  int ln = 0;
  const char* f = a.lineinfo(l, nullptr, &ln, nullptr, nullptr, nullptr);
  if (!f || !*f) return false;
  *file = f;
  *line = ln;
  return true;
}

}  // namespace allocscope::capture
