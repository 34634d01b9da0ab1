#include "target/proc_files.h"

#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sstream>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace gdbtrace::procfs {
namespace {

std::string task_path(pid_t pid, pid_t tid, const char* leaf) {
  return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/" + leaf;
}

// Fields of /proc/.../stat after the parenthesised comm (which may hold spaces).
std::vector<std::string> stat_fields_after_comm(pid_t pid, pid_t tid) {
  auto text = read_file(task_path(pid, tid, "stat"));
  if (!text)
    return {};
  auto close = text->rfind(')');
  if (close == std::string::npos)
    return {};
  std::istringstream in(text->substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; in >> f;)
    fields.push_back(f);
  return fields;
}

} // namespace

Result<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return make_error(e, "cannot open " + path + ": " + std::strerror(e));
  }
  std::string data;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return make_error(e, "cannot read " + path + ": " + std::strerror(e));
    }
    if (n == 0)
      break;
    data.append(buf, n);
  }
  ::close(fd);
  return data;
}

std::vector<pid_t> task_ids(pid_t pid) {
  std::vector<pid_t> ids;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d)
    return ids;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
      ids.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return ids;
}

std::string thread_name(pid_t pid, pid_t tid) {
  auto text = read_file(task_path(pid, tid, "comm"));
  if (!text)
    return {};
  std::string name = *text;
  while (!name.empty() && name.back() == '\n')
    name.pop_back();
  return name;
}

int thread_core(pid_t pid, pid_t tid) {
  // "processor" is field 39 of stat; after the comm we start at field 3.
  auto f = stat_fields_after_comm(pid, tid);
  return f.size() > 36 ? std::atoi(f[36].c_str()) : -1;
}

char thread_state(pid_t pid, pid_t tid) {
  auto f = stat_fields_after_comm(pid, tid);
  return f.empty() ? 0 : f[0][0];
}

bool thread_exists(pid_t pid, pid_t tid) {
  return ::access(task_path(pid, tid, "stat").c_str(), F_OK) == 0;
}

Result<std::string> exe_path(pid_t pid) {
  std::string link = "/proc/" + std::to_string(pid) + "/exe";
  char buf[PATH_MAX];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n < 0) {
    int e = errno;
    return make_error(e, "cannot read " + link + ": " + std::strerror(e));
  }
  return std::string(buf, n);
}

Result<bool> exe_is_i386(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/exe";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return make_error(e, "cannot open " + path + ": " + std::strerror(e));
  }
  Elf32_Ehdr header{}; // e_ident and e_machine sit at the same offsets in both classes
  ssize_t n = ::pread(fd, &header, sizeof header, 0);
  ::close(fd);
  if (n < static_cast<ssize_t>(sizeof header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return make_error(ENOEXEC, path + " is not an ELF file");
  return header.e_ident[EI_CLASS] == ELFCLASS32 && header.e_machine == EM_386;
}

std::optional<MapsEntry> parse_maps_line(std::string_view line) {
  std::string text(line); // sscanf needs the terminating NUL
  MapsEntry m;
  char perms[8] = {};
  unsigned dev_major = 0, dev_minor = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n",
                  &m.start, &m.end, perms, &m.offset, &dev_major, &dev_minor, &m.inode,
                  &consumed) < 7)
    return std::nullopt;
  m.dev = makedev(dev_major, dev_minor);
  m.perms = perms;
  // %n is not counted in sscanf's result: 0 when the line ends at the inode.
  m.path = consumed > 0 && size_t(consumed) <= text.size() ? text.substr(size_t(consumed)) : "";
  return m;
}

std::vector<MapsEntry> parse_maps(std::string_view text) {
  std::vector<MapsEntry> out;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    if (auto m = parse_maps_line(text.substr(0, eol)))
      out.push_back(std::move(*m));
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
  }
  return out;
}

Result<std::vector<MapsEntry>> read_maps(pid_t pid) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/maps");
  if (!text)
    return text.error();
  return parse_maps(*text);
}

} // namespace gdbtrace::procfs
