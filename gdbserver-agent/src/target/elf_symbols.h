// Addresses of named symbols in the ELF objects mapped into a process (the
// executable and its shared libraries, as /proc/pid/maps lists them), read
// from each file's .dynsym and .symtab. libthread_db needs glibc's
// _thread_db_* descriptors and nptl_version; gdbserver asks gdb for them
// (qSymbol), we read them ourselves so that a TLS request needs no round trip.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace gdbtrace {

struct MappedObject {
  std::string path;
  uint64_t base = 0; // lowest address of its offset-0 mapping
};

// The files mapped from offset 0, one entry each (from /proc/PID/maps text).
std::vector<MappedObject> parse_mapped_objects(std::string_view maps);

// SYMBOL's run-time address in the object at PATH loaded at BASE (nullopt if
// the file has no defined symbol of that name or cannot be read).
std::optional<uint64_t> elf_symbol_address(const std::string& path, uint64_t base,
                                           std::string_view symbol);

// The first mapped object of PID defining SYMBOL.
std::optional<uint64_t> find_mapped_symbol(pid_t pid, std::string_view symbol);

} // namespace gdbtrace
