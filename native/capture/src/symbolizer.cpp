// ELF symbol tables read straight from the loaded modules' files, so no addr2line and no per-frame process.
#include "symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace allocscope::capture {

struct Symbolizer::ElfSymbols {
  struct Sym { uintptr_t addr; uint64_t size; uint32_t name; };  // file addresses; name = offset into names
  std::vector<Sym> syms;  // sorted by addr
  std::string names;
  bool loaded = false;
};

std::string demangle(const char* name) {
  if (!name || !*name) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status == 0 && d) {
    std::string s = d;
    std::free(d);
    return s;
  }
  std::free(d);
  return name;
}

namespace {

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

Symbolizer::Symbolizer() {
  struct Ctx { std::vector<Module>* mods; bool first; } ctx{&modules_, true};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* c = static_cast<Ctx*>(data);
        Module m;
        m.path = info->dlpi_name ? info->dlpi_name : "";
        if (c->first && m.path.empty()) m.path = self_exe();  // the main program comes first with no name
        c->first = false;
        m.bias = info->dlpi_addr;
        m.lo = UINTPTR_MAX;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          m.lo = std::min<uintptr_t>(m.lo, info->dlpi_addr + ph.p_vaddr);
          m.hi = std::max<uintptr_t>(m.hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        if (m.lo != UINTPTR_MAX) c->mods->push_back(std::move(m));
        return 0;
      },
      &ctx);
  symbols_.resize(modules_.size());
  lines_ = std::make_unique<SourceLines>();
}

Symbolizer::~Symbolizer() = default;

int Symbolizer::module_of(uintptr_t addr) const {
  for (size_t i = 0; i < modules_.size(); ++i)
    if (addr >= modules_[i].lo && addr < modules_[i].hi) return static_cast<int>(i);
  return -1;
}

namespace {

// A bounds-checked view into the mapped file (it could be anything).
template <typename T>
const T* at(const uint8_t* base, size_t size, uint64_t off, uint64_t count = 1) {
  if (off > size || count > (size - off) / sizeof(T)) return nullptr;
  return reinterpret_cast<const T*>(base + off);
}

}  // namespace

Symbol Symbolizer::resolve(uintptr_t ip) {
  Symbol s;
  const uintptr_t addr = ip ? ip - 1 : 0;
  s.module = module_of(addr);
  if (s.module >= 0 && lines_) lines_->lookup(addr, &s.file, &s.line);
  if (s.module < 0) {
    s.offset = ip;
    return s;
  }
  const Module& m = modules_[s.module];
  auto& es = symbols_[s.module];
  if (!es) {
    es = std::make_unique<ElfSymbols>();
    es->loaded = true;
    const int fd = open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > static_cast<off_t>(sizeof(Elf64_Ehdr))) {
      const size_t size = static_cast<size_t>(st.st_size);
      void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map != MAP_FAILED) {
        const auto* base = static_cast<const uint8_t*>(map);
        const auto* eh = at<Elf64_Ehdr>(base, size, 0);
        if (eh && std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
            eh->e_shentsize == sizeof(Elf64_Shdr)) {
          const auto* sh = at<Elf64_Shdr>(base, size, eh->e_shoff, eh->e_shnum);
          // Prefer the full .symtab (static functions); fall back to .dynsym (stripped libraries).
          for (uint32_t want : {uint32_t(SHT_SYMTAB), uint32_t(SHT_DYNSYM)}) {
            if (!sh || !es->syms.empty()) break;
            for (int i = 0; i < eh->e_shnum; ++i) {
              if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
              const Elf64_Shdr& strsh = sh[sh[i].sh_link];
              const auto* syms = at<Elf64_Sym>(base, size, sh[i].sh_offset, sh[i].sh_size / sizeof(Elf64_Sym));
              const auto* strs = at<char>(base, size, strsh.sh_offset, strsh.sh_size);
              if (!syms || !strs) continue;
              const size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
              for (size_t k = 0; k < count; ++k) {
                const Elf64_Sym& y = syms[k];
                if (ELF64_ST_TYPE(y.st_info) != STT_FUNC || y.st_value == 0 || y.st_name >= strsh.sh_size) continue;
                const char* name = strs + y.st_name;
                const size_t len = strnlen(name, strsh.sh_size - y.st_name);
                es->syms.push_back({y.st_value, y.st_size, static_cast<uint32_t>(es->names.size())});
                es->names.append(name, len);
                es->names.push_back('\0');
              }
            }
          }
          std::sort(es->syms.begin(), es->syms.end(),
                    [](const ElfSymbols::Sym& a, const ElfSymbols::Sym& b) { return a.addr < b.addr; });
        }
        munmap(map, size);
      }
    }
    if (fd >= 0) close(fd);
  }
  const uintptr_t file_addr = addr - m.bias;
  auto it = std::upper_bound(es->syms.begin(), es->syms.end(), file_addr,
                             [](uintptr_t a, const ElfSymbols::Sym& y) { return a < y.addr; });
  if (it != es->syms.begin()) {
    --it;
    // A symbol of size 0 (hand-written assembly) is taken as covering up to the next symbol.
    if (it->size == 0 || file_addr < it->addr + it->size) {
      s.function = demangle(es->names.c_str() + it->name);
      s.offset = ip - (m.bias + it->addr);
      return s;
    }
  }
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(addr), &info) && info.dli_sname) {
    s.function = demangle(info.dli_sname);
    s.offset = ip - reinterpret_cast<uintptr_t>(info.dli_saddr);
    return s;
  }
  s.offset = ip - m.bias;
  return s;
}

}  // namespace allocscope::capture
