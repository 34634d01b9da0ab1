#include "bpf/uprobe_location.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gdbtrace::bpf {
namespace {

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

// True when OFFSET lies inside the file bytes of an executable PT_LOAD.
Result<void> check_executable_offset(const std::string& path, uint64_t offset) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error(errno, "cannot open " + path + ": " + strerror(errno));
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
      if (!gelf_getphdr(elf, int(i), &ph))
        continue;
      if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && offset >= ph.p_offset &&
          offset < ph.p_offset + ph.p_filesz) {
        result = ok();
        break;
      }
    }
  }
  if (elf)
    elf_end(elf);
  close(fd);
  return result;
}

} // namespace

Result<UprobeLocation> resolve_uprobe_location(int pid, uint64_t address) {
  std::string maps_path = "/proc/" + std::to_string(pid) + "/maps";
  std::ifstream maps(maps_path);
  if (!maps)
    return make_error(ESRCH, "cannot read " + maps_path + " (process gone?)");
  std::string line;
  while (std::getline(maps, line)) {
    // start-end perms offset dev inode path
    uint64_t start, end, pgoff;
    char perms[8] = {};
    int path_at = 0;
    if (sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %n", &start, &end,
               perms, &pgoff, &path_at) < 4)
      continue;
    if (address < start || address >= end)
      continue;
    std::string path = path_at > 0 ? line.substr(size_t(path_at)) : "";
    if (perms[2] != 'x')
      return make_error(EINVAL, "address " + hex(address) + " is not in executable memory");
    if (path.empty() || path[0] != '/')
      return make_error(EINVAL, "address " + hex(address) +
                                    " is not in a mapped file (JIT or anonymous code cannot be "
                                    "probed with a uprobe)");
    if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0)
      return make_error(ENOENT, path + ": the mapped file was deleted; cannot place a uprobe");
    // Reach the file through the process's root (containers, chroots).
    std::string via_root = "/proc/" + std::to_string(pid) + "/root" + path;
    if (access(via_root.c_str(), R_OK) == 0)
      path = via_root;
    UprobeLocation loc{path, address - start + pgoff};
    if (auto r = check_executable_offset(path, loc.offset); !r)
      return r.error();
    return loc;
  }
  return make_error(EFAULT,
                    "address " + hex(address) + " is not mapped in process " + std::to_string(pid));
}

} // namespace gdbtrace::bpf
