#include "trace/collector_probe_site.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "target/proc_files.h"

namespace gdbtrace {
namespace {

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

using procfs::MapsEntry;

Result<MapsEntry> find_mapping(int pid, uint64_t address) {
  auto maps = procfs::read_maps(pid);
  if (!maps)
    return make_error(ESRCH, "cannot read /proc/" + std::to_string(pid) + "/maps (process gone?)");
  for (auto& m : *maps)
    if (address >= m.start && address < m.end)
      return std::move(m);
  return make_error(EFAULT,
                    "address " + hex(address) + " is not mapped in process " + std::to_string(pid));
}

// The mapping's own file: map_files gives exactly the mapped inode (root
// only); otherwise the path inside the process's root (containers, chroots),
// accepted only when it is still the mapped inode (same device and inode).
Result<UniqueFd> open_mapped_file(int pid, const MapsEntry& m) {
  char name[96];
  std::snprintf(name, sizeof name, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m.start, m.end);
  UniqueFd fd(::open(name, O_RDONLY | O_CLOEXEC));
  if (!fd) {
    std::string via_root = "/proc/" + std::to_string(pid) + "/root" + m.path;
    fd = UniqueFd(::open(via_root.c_str(), O_RDONLY | O_CLOEXEC));
  }
  if (!fd)
    return make_error(errno, "cannot open mapped file " + m.path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != m.inode ||
      st.st_dev != m.dev)
    return make_error(ESTALE, m.path + " is no longer the file the process maps");
  return fd;
}

// OFFSET must lie inside the file bytes of an executable PT_LOAD of FD's ELF.
Result<void> check_executable_offset(int fd, const std::string& path, uint64_t offset) {
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  Result<void> result = make_error(EINVAL, "address is not in an executable segment of " + path +
                                               " (offset " + hex(offset) + ")");
  size_t n = 0;
  if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &n) != 0) {
    result = make_error(EINVAL, path + " is not an ELF file");
  } else {
    for (size_t i = 0; i < n; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
          offset >= ph.p_offset && offset < ph.p_offset + ph.p_filesz) {
        result = ok();
        break;
      }
    }
  }
  if (elf)
    elf_end(elf);
  return result;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace

std::string ProbeSite::fd_path() const {
  return "/proc/self/fd/" + std::to_string(fd.get());
}

Result<ProbeSite> resolve_probe_site(int pid, uint64_t address) {
  auto m = find_mapping(pid, address);
  if (!m)
    return m.error();
  if (m->perms.size() < 3 || m->perms[2] != 'x')
    return make_error(EINVAL, "address " + hex(address) + " is not in executable memory");
  if (m->inode == 0 || m->path.empty() || m->path[0] != '/')
    return make_error(EINVAL, "address " + hex(address) +
                                  " is not in a mapped file (JIT or anonymous code cannot be "
                                  "probed with a uprobe)");
  if (ends_with(m->path, " (deleted)"))
    return make_error(ENOENT, m->path + ": the mapped file was deleted; cannot place a uprobe");
  auto fd = open_mapped_file(pid, *m);
  if (!fd)
    return fd.error();
  ProbeSite site{std::move(*fd), address - m->start + m->offset, m->path};
  if (auto r = check_executable_offset(site.fd.get(), site.path, site.offset); !r)
    return r.error();
  return site;
}

bool is_plt_stub(int pid, uint64_t address) {
  auto site = resolve_probe_site(pid, address);
  if (!site)
    return false;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(site->fd.get(), ELF_C_READ, nullptr);
  if (!elf)
    return false;
  bool plt = false;
  size_t strndx = 0;
  if (elf_kind(elf) == ELF_K_ELF && elf_getshdrstrndx(elf, &strndx) == 0) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn && !plt; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
        continue;
      const char* name = elf_strptr(elf, strndx, sh.sh_name);
      if (!name || (std::strcmp(name, ".plt") != 0 && std::strcmp(name, ".plt.sec") != 0 &&
                    std::strcmp(name, ".plt.got") != 0))
        continue;
      plt = site->offset >= sh.sh_offset && site->offset < sh.sh_offset + sh.sh_size;
    }
  }
  elf_end(elf);
  return plt;
}

} // namespace gdbtrace
