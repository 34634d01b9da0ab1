// Symbol lookup in the ELF files mapped into a process (see elf_symbols.h).
#include "target/elf_symbols.h"

#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target/proc_files.h"

namespace gdbtrace {
namespace {

// A read-only mapping of a whole file, unmapped on destruction.
class FileImage {
public:
  explicit FileImage(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      void* p = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const uint8_t*>(p);
        size_ = st.st_size;
      }
    }
    ::close(fd);
  }
  ~FileImage() {
    if (data_)
      munmap(const_cast<uint8_t*>(data_), size_);
  }
  FileImage(const FileImage&) = delete;
  FileImage& operator=(const FileImage&) = delete;

  // A T at OFFSET, or nullptr when the file is too short.
  template <typename T> const T* at(uint64_t offset, uint64_t count = 1) const {
    if (!data_ || offset > size_ || count > (size_ - offset) / sizeof(T))
      return nullptr;
    return reinterpret_cast<const T*>(data_ + offset);
  }
  const char* string(uint64_t table_offset, uint64_t table_size, uint64_t index) const {
    if (index >= table_size)
      return nullptr;
    const char* s = at<char>(table_offset + index, table_size - index);
    return s && std::memchr(s, 0, table_size - index) ? s : nullptr;
  }

private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// One ELF class's types: 64-bit objects, and 32-bit ones (an i386 process's
// libc, whose libthread_db descriptors libthread_db looks up by name).
template <class Ehdr, class Phdr, class Shdr, class Sym, unsigned char kClass> struct ElfClass {
  static bool matches(const Ehdr* eh) {
    return eh && std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
           eh->e_ident[EI_CLASS] == kClass && eh->e_shentsize == sizeof(Shdr) &&
           eh->e_phentsize == sizeof(Phdr);
  }

  // The link-time address the offset-0 mapping corresponds to: the first
  // PT_LOAD's page (0 for position-independent objects).
  static std::optional<uint64_t> first_load_page(const FileImage& f, const Ehdr& eh) {
    const auto* ph = f.at<Phdr>(eh.e_phoff, eh.e_phnum);
    if (!ph)
      return std::nullopt;
    for (unsigned i = 0; i < eh.e_phnum; i++)
      if (ph[i].p_type == PT_LOAD)
        return ph[i].p_vaddr & ~uint64_t(0xfff);
    return std::nullopt;
  }

  static std::optional<uint64_t> symbol_address(const FileImage& f, uint64_t base,
                                                std::string_view symbol) {
    const auto* eh = f.at<Ehdr>(0);
    if (!matches(eh))
      return std::nullopt;
    auto link_page = first_load_page(f, *eh);
    const auto* sh = f.at<Shdr>(eh->e_shoff, eh->e_shnum);
    if (!link_page || !sh)
      return std::nullopt;
    uint64_t bias = base - *link_page;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
      if ((sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_SYMTAB) ||
          sh[i].sh_link >= eh->e_shnum || sh[i].sh_entsize != sizeof(Sym))
        continue;
      const Shdr& strtab = sh[sh[i].sh_link];
      uint64_t count = sh[i].sh_size / sizeof(Sym);
      const auto* syms = f.at<Sym>(sh[i].sh_offset, count);
      if (!syms)
        continue;
      for (uint64_t k = 0; k < count; k++) {
        if (syms[k].st_shndx == SHN_UNDEF || syms[k].st_name == 0)
          continue;
        const char* name = f.string(strtab.sh_offset, strtab.sh_size, syms[k].st_name);
        if (name && symbol == name)
          return syms[k].st_shndx == SHN_ABS ? syms[k].st_value : syms[k].st_value + bias;
      }
    }
    return std::nullopt;
  }
};
using Elf64Class = ElfClass<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, Elf64_Sym, ELFCLASS64>;
using Elf32Class = ElfClass<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr, Elf32_Sym, ELFCLASS32>;

} // namespace

std::vector<MappedObject> parse_mapped_objects(std::string_view maps) {
  std::vector<MappedObject> out;
  for (const auto& m : procfs::parse_maps(maps)) {
    const std::string& path = m.path;
    if (path.empty() || path[0] != '/' || m.offset != 0)
      continue;
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0)
      continue;
    bool known = false;
    for (auto& o : out)
      if (o.path == path) {
        o.base = std::min(o.base, m.start);
        known = true;
      }
    if (!known)
      out.push_back({path, m.start});
  }
  return out;
}

std::optional<uint64_t> elf_symbol_address(const std::string& path, uint64_t base,
                                           std::string_view symbol) {
  FileImage f(path);
  if (auto a = Elf64Class::symbol_address(f, base, symbol))
    return a;
  return Elf32Class::symbol_address(f, base, symbol);
}

std::optional<uint64_t> find_mapped_symbol(pid_t pid, std::string_view symbol) {
  auto maps = procfs::read_file("/proc/" + std::to_string(pid) + "/maps");
  if (!maps)
    return std::nullopt;
  for (const auto& object : parse_mapped_objects(*maps))
    if (auto address = elf_symbol_address(object.path, object.base, symbol))
      return address;
  return std::nullopt;
}

} // namespace gdbtrace
