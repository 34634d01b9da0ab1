#include "server/vfile.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/hex.h"
#include "server/packet_parsers.h"

namespace gdbtrace {

int fileio_errno(int e) {
  switch (e) {
  case EPERM:
    return 1;
  case ENOENT:
    return 2;
  case EINTR:
    return 4;
  case EBADF:
    return 9;
  case EACCES:
    return 13;
  case EFAULT:
    return 14;
  case EBUSY:
    return 16;
  case EEXIST:
    return 17;
  case ENODEV:
    return 19;
  case ENOTDIR:
    return 20;
  case EISDIR:
    return 21;
  case EINVAL:
    return 22;
  case ENFILE:
    return 23;
  case EMFILE:
    return 24;
  case EFBIG:
    return 27;
  case ENOSPC:
    return 28;
  case ESPIPE:
    return 29;
  case EROFS:
    return 30;
  case ENAMETOOLONG:
    return 91;
  default:
    return 9999;
  }
}

static std::string fail(int host_errno) {
  return "F-1," + hex::u64(static_cast<uint64_t>(fileio_errno(host_errno)));
}
static std::string fail_inval() {
  return fail(EINVAL);
}

// gdb's open flags and mode bits (File-I/O "Open Flags" / "mode_t Values").
static int host_open_flags(uint64_t f) {
  int flags = 0;
  switch (f & 3) {
  case 0:
    flags = O_RDONLY;
    break;
  case 1:
    flags = O_WRONLY;
    break;
  case 2:
    flags = O_RDWR;
    break;
  default:
    return -1;
  }
  if (f & 0x8)
    flags |= O_APPEND;
  if (f & 0x200)
    flags |= O_CREAT;
  if (f & 0x400)
    flags |= O_TRUNC;
  if (f & 0x800)
    flags |= O_EXCL;
  return flags | O_CLOEXEC;
}

VFileServer::~VFileServer() {
  close_all();
}

void VFileServer::close_all() {
  for (auto& [fd, host] : fds_)
    ::close(host);
  fds_.clear();
  fs_pid_ = 0;
}

// One packet-table row per operation ("vFile:open:PATH,FLAGS,MODE"): the
// operation name is matched by the table, not here. pread and readlink and
// fstat replies carry raw bytes (the table escapes them); pwrite data arrives
// unescaped. An operation we do not serve matches no row: the empty reply.
std::vector<PacketRow> VFileServer::rows() {
  auto op = [this](std::string (VFileServer::*f)(std::string_view)) {
    return [this, f](const Packet& p) { return Reply((this->*f)(p.args)); };
  };
  return {
      PacketRow::prefix("vFile:open:", op(&VFileServer::open)),
      PacketRow::prefix("vFile:close:", op(&VFileServer::close)),
      PacketRow::prefix("vFile:pread:", op(&VFileServer::pread)).binary(),
      PacketRow::prefix("vFile:pwrite:", op(&VFileServer::pwrite)).binary_data("F-1,16"), // EINVAL
      PacketRow::prefix("vFile:fstat:", op(&VFileServer::fstat)).binary(),
      PacketRow::prefix("vFile:unlink:", op(&VFileServer::unlink)),
      PacketRow::prefix("vFile:readlink:", op(&VFileServer::readlink)).binary(),
      PacketRow::prefix("vFile:setfs:", op(&VFileServer::setfs)),
  };
}

std::string VFileServer::host_path(const std::string& path) const {
  if (fs_pid_ == 0)
    return path;
  // A process in another mount namespace sees its files under /proc/PID/root.
  struct stat ours {
  }, theirs{};
  std::string ns = "/proc/" + std::to_string(fs_pid_) + "/ns/mnt";
  if (::stat("/proc/self/ns/mnt", &ours) == 0 && ::stat(ns.c_str(), &theirs) == 0 &&
      ours.st_ino == theirs.st_ino)
    return path;
  return "/proc/" + std::to_string(fs_pid_) + "/root" + path;
}

std::string VFileServer::open(std::string_view args) {
  auto parts = split(args, ',');
  if (parts.size() != 3)
    return fail_inval();
  auto path = hex::decode_string(parts[0]);
  auto flags = hex::parse_u64(parts[1]);
  auto mode = hex::parse_u64(parts[2]);
  if (!path || !flags || !mode || path->find('\0') != std::string::npos)
    return fail_inval();
  int host_flags = host_open_flags(*flags);
  if (host_flags < 0)
    return fail_inval();
  int fd = ::open(host_path(*path).c_str(), host_flags, static_cast<mode_t>(*mode & 0777));
  if (fd < 0)
    return fail(errno);
  fds_[fd] = fd;
  return "F" + hex::u64(static_cast<uint64_t>(fd));
}

std::string VFileServer::close(std::string_view args) {
  auto fd = hex::parse_u64(args);
  if (!fd || !fds_.count(static_cast<int>(*fd)))
    return fail(EBADF);
  ::close(fds_[static_cast<int>(*fd)]);
  fds_.erase(static_cast<int>(*fd));
  return "F0";
}

std::string VFileServer::pread(std::string_view args) {
  auto parts = split(args, ',');
  if (parts.size() != 3)
    return fail_inval();
  auto fd = hex::parse_u64(parts[0]);
  auto count = hex::parse_u64(parts[1]);
  auto offset = hex::parse_u64(parts[2]);
  if (!fd || !count || !offset)
    return fail_inval();
  if (!fds_.count(static_cast<int>(*fd)))
    return fail(EBADF);
  // The reply must fit in a packet even after escaping; gdb asks again for the rest.
  std::vector<char> buf(std::min<uint64_t>(*count, 8192));
  ssize_t n =
      ::pread(fds_[static_cast<int>(*fd)], buf.data(), buf.size(), static_cast<off_t>(*offset));
  if (n < 0)
    return fail(errno);
  return "F" + hex::u64(static_cast<uint64_t>(n)) + ";" +
         std::string(buf.data(), static_cast<size_t>(n));
}

std::string VFileServer::pwrite(std::string_view args) {
  // fd,offset,DATA — DATA is binary (already unescaped by the packet table).
  auto c1 = args.find(',');
  if (c1 == std::string_view::npos)
    return fail_inval();
  auto c2 = args.find(',', c1 + 1);
  if (c2 == std::string_view::npos)
    return fail_inval();
  auto fd = hex::parse_u64(args.substr(0, c1));
  auto offset = hex::parse_u64(args.substr(c1 + 1, c2 - c1 - 1));
  if (!fd || !offset)
    return fail_inval();
  if (!fds_.count(static_cast<int>(*fd)))
    return fail(EBADF);
  std::string_view data = args.substr(c2 + 1);
  ssize_t n =
      ::pwrite(fds_[static_cast<int>(*fd)], data.data(), data.size(), static_cast<off_t>(*offset));
  if (n < 0)
    return fail(errno);
  return "F" + hex::u64(static_cast<uint64_t>(n));
}

static void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string VFileServer::fstat(std::string_view args) {
  auto fd = hex::parse_u64(args);
  if (!fd || !fds_.count(static_cast<int>(*fd)))
    return fail(EBADF);
  struct stat st {};
  if (::fstat(fds_[static_cast<int>(*fd)], &st) != 0)
    return fail(errno);
  // struct gdb stat: big-endian, 32-bit fields except size/blksize/blocks.
  std::string out;
  put_be(out, st.st_dev, 4);
  put_be(out, st.st_ino, 4);
  put_be(out, st.st_mode, 4);
  put_be(out, st.st_nlink, 4);
  put_be(out, st.st_uid, 4);
  put_be(out, st.st_gid, 4);
  put_be(out, st.st_rdev, 4);
  put_be(out, static_cast<uint64_t>(st.st_size), 8);
  put_be(out, static_cast<uint64_t>(st.st_blksize), 8);
  put_be(out, static_cast<uint64_t>(st.st_blocks), 8);
  put_be(out, static_cast<uint64_t>(st.st_atime), 4);
  put_be(out, static_cast<uint64_t>(st.st_mtime), 4);
  put_be(out, static_cast<uint64_t>(st.st_ctime), 4);
  return "F" + hex::u64(out.size()) + ";" + out;
}

std::string VFileServer::unlink(std::string_view args) {
  auto path = hex::decode_string(args);
  if (!path || path->find('\0') != std::string::npos)
    return fail_inval();
  if (::unlink(host_path(*path).c_str()) != 0)
    return fail(errno);
  return "F0";
}

std::string VFileServer::readlink(std::string_view args) {
  auto path = hex::decode_string(args);
  if (!path || path->find('\0') != std::string::npos)
    return fail_inval();
  char buf[4096];
  ssize_t n = ::readlink(host_path(*path).c_str(), buf, sizeof buf);
  if (n < 0)
    return fail(errno);
  return "F" + hex::u64(static_cast<uint64_t>(n)) + ";" + std::string(buf, static_cast<size_t>(n));
}

std::string VFileServer::setfs(std::string_view args) {
  auto pid = hex::parse_u64(args);
  if (!pid || *pid > 0x7fffffff)
    return fail_inval();
  if (*pid != 0 && ::access(("/proc/" + std::to_string(*pid)).c_str(), F_OK) != 0)
    return fail(ESRCH);
  fs_pid_ = static_cast<int>(*pid);
  return "F0";
}

} // namespace gdbtrace
