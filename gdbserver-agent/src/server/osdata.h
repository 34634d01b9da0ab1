// `info os` (qXfer:osdata:read): the host's processes, threads, file
// descriptors, sockets, System V IPC objects, kernel modules and CPUs as
// gdb's <osdata> tables, with the annexes, column names and order of
// gdbserver 13 (gdb/nat/linux-osdata.c), so `info os TYPE` prints the same.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace gdbtrace {

// One <osdata> document for ANNEX ("" or "types": the list of types);
// nullopt for an annex gdbserver does not know either.
std::optional<std::string> osdata_document(const std::string& annex);

// gdb reads a document in chunks; like gdbserver, a read at offset 0 takes
// a snapshot and later offsets page through that snapshot, so a process
// that appears between two chunks cannot tear the XML.
class OsDataSnapshots {
public:
  // The snapshot of ANNEX (refreshed when OFFSET is 0); nullopt for an
  // unknown annex.
  const std::string* read(const std::string& annex, uint64_t offset);

private:
  std::map<std::string, std::string> snapshots_;
};

} // namespace gdbtrace
