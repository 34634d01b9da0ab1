// Host I/O (vFile:*) packets: gdb reads the inferior's executable and
// libraries through these ("Reading /lib/... from remote target").
//
// Files are opened in the filesystem of the process selected by vFile:setfs
// (through /proc/PID/root when it lives in another mount namespace).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/packet_table.h"

namespace gdbtrace {

class VFileServer {
public:
  ~VFileServer();
  // The packet-table rows of the vFile operations; they use this object.
  std::vector<PacketRow> rows();
  void close_all();

private:
  std::string open(std::string_view args);
  std::string close(std::string_view args);
  std::string pread(std::string_view args);
  std::string pwrite(std::string_view args);
  std::string fstat(std::string_view args);
  std::string unlink(std::string_view args);
  std::string readlink(std::string_view args);
  std::string setfs(std::string_view args);
  std::string host_path(const std::string& path) const;

  std::map<int, int> fds_; // gdb-visible fd -> host fd (same number; tracks ownership)
  int fs_pid_ = 0;         // 0: our own filesystem
};

// gdb's File-I/O errno numbers (gdb manual, "Errno Values").
int fileio_errno(int host_errno);

} // namespace gdbtrace
