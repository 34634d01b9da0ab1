#include "kmod/probe_site.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace gdbtrace::kmod {

namespace {

struct MapsLine {
  uint64_t start = 0, end = 0, pgoff = 0, inode = 0;
  std::string perms, path;
};

bool parse_maps_line(const std::string& line, MapsLine& m) {
  char perms[8] = {};
  unsigned dev_major = 0, dev_minor = 0;
  int consumed = 0;
  if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n",
                  &m.start, &m.end, perms, &m.pgoff, &dev_major, &dev_minor, &m.inode,
                  &consumed) < 7)
    return false;
  m.perms = perms;
  m.path = consumed > 0 && size_t(consumed) <= line.size() ? line.substr(size_t(consumed)) : "";
  return true;
}

// The mapping's own file: map_files gives exactly the mapped inode (root only);
// otherwise the path inside the process' root, checked against the inode.
int open_mapped_file(int pid, const MapsLine& m) {
  char name[96];
  std::snprintf(name, sizeof name, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m.start, m.end);
  int fd = ::open(name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::string p = "/proc/" + std::to_string(pid) + "/root" + m.path;
    fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0)
    return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_ino != m.inode || !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = ESTALE;
    return -1;
  }
  return fd;
}

} // namespace

Result<ProbeSite> resolve_probe_site(int pid, uint64_t address) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps)
    return make_error(ESRCH, "cannot read /proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    MapsLine m;
    if (!parse_maps_line(line, m) || address < m.start || address >= m.end)
      continue;
    if (m.perms.size() < 3 || m.perms[2] != 'x')
      return make_error(EINVAL, "address is not in an executable mapping");
    if (m.inode == 0 || m.path.empty() || m.path[0] != '/')
      return make_error(EINVAL, "address is not in a file-backed mapping (uprobes need a file)");
    int fd = open_mapped_file(pid, m);
    if (fd < 0)
      return make_error(errno, "cannot open mapped file " + m.path + ": " + std::strerror(errno));
    return ProbeSite{fd, address - m.start + m.pgoff, m.path};
  }
  return make_error(EINVAL, "address is not mapped in process " + std::to_string(pid));
}

} // namespace gdbtrace::kmod
