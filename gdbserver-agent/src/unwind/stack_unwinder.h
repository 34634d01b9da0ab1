// Unwinds the call stack of a trace frame with libdw, as perf's
// `--call-graph dwarf` does: the frame's 'R' block gives the registers at the
// hit, its 'M' blocks (the stack snapshot `monitor gdbtrace stacks on` adds,
// and anything else collected) are the only memory, and the DWARF CFI
// (.eh_frame / .debug_frame) of the process's modules says how to find each
// caller. Modules come from ProcessModules; libdw caches each module's CFI and
// symbols, and symbolized pcs are cached here, so a bulk request pays the ELF
// and DWARF reading once per module.
//
// Trust: a caller is reported only when its return address was read from the
// snapshot. When the unwind needs memory the frame does not hold (the stack
// is deeper than the snapshot, or the snapshot was cut at the end of the
// stack mapping) the stack ends there with status Truncated — never a guess.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace gdbtrace {

// A module (ELF file mapped by the process) that a stack went through: what a
// symbolizer needs to name its frames later, on another machine.
struct ModuleInfo {
  std::string path;     // as /proc/PID/maps names it
  std::string build_id; // hex, "" when the file has no NT_GNU_BUILD_ID note
  // "full": a .symtab (in the file, its separate debug file or .gnu_debugdata)
  // names every function; "dynamic": only .dynsym (exported functions);
  // "none": no symbol table at all; "unreadable": the file could not be opened
  // (deleted or replaced since it was mapped): no names, no offsets.
  const char* symbols = "none";
};

struct StackEntry {
  uint64_t pc = 0;      // the return address for callers, the hit's pc for the first
  std::string function; // symbol (demangled), "" when none covers the pc
  std::string module;   // file name of the module, "" when the pc is in none
  std::string source;   // "file:line" when debug info exists, else ""
  int module_id = -1;   // StackUnwinder::module(id); -1 when the pc is in no module
  // The looked-up address in the module's own ELF addresses (pc - load bias:
  // what addr2line, eu-addr2line, llvm-symbolizer and the symbol table use):
  // the hit's pc, or a return address - 1 (inside the call instruction, so it
  // names the caller even when the call is a function's last instruction).
  // Valid when module_id >= 0 and the module's ELF file could be read.
  uint64_t offset = 0;
  bool has_offset = false;
};

struct UnwoundStack {
  enum Status {
    Complete,   // reached the outermost frame (CFI marks the return address undefined)
    Truncated,  // needed stack memory the snapshot does not hold
    NoSnapshot, // the frame has no registers (stacks were off for it)
    Failed,     // libdw stopped for another reason (no CFI for a pc, ...): see error
  } status = NoSnapshot;
  std::string error;
  std::vector<StackEntry> entries; // innermost first
};

const char* stack_status_word(UnwoundStack::Status s); // "ok", "truncated", "nostack", "error"

class StackUnwinder {
public:
  StackUnwinder();
  ~StackUnwinder();
  StackUnwinder(const StackUnwinder&) = delete;
  StackUnwinder& operator=(const StackUnwinder&) = delete;

  // Reads the module list of PID while it lives; after it exits the last list
  // is kept. Errors only when no list was ever read.
  Result<void> refresh_modules(int pid);
  bool has_modules() const;

  // FRAME: one trace frame in the tfile layout; REGBLOCK_SIZE: its 'R' block size.
  UnwoundStack unwind(std::span<const uint8_t> frame, uint32_t regblock_size);

  // The module a StackEntry's module_id names (valid until the module list
  // changes, i.e. until the next refresh_modules).
  const ModuleInfo& module(int id) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace gdbtrace
