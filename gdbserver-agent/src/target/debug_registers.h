// x86 debug registers (DR0-3, DR6, DR7) for hardware breakpoints and
// watchpoints. One DebugRegisters mirror per process; it is written into every
// thread of the process (new threads inherit nothing from the kernel).
#pragma once

#include <array>
#include <cstdint>
#include <sys/types.h>

#include "common/result.h"

namespace gdbtrace {

enum class DebugAccess { Execute, Write, ReadWrite };

struct DebugRegisters {
  std::array<uint64_t, 4> address{};
  std::array<int, 4> refs{}; // users of each slot (identical requests share one)
  uint64_t dr7 = 0;

  // A watched region [addr, addr+len) may need several slots (each slot covers
  // an aligned 1/2/4/8-byte span). All-or-nothing: "no free debug register".
  Result<void> insert(DebugAccess access, uint64_t addr, uint64_t len);
  Result<void> remove(DebugAccess access, uint64_t addr, uint64_t len);
  DebugAccess slot_access(unsigned slot) const;
  bool any_used() const { return refs[0] | refs[1] | refs[2] | refs[3]; }
};

// Write the mirror into thread TID (which must be ptrace-stopped).
Result<void> apply_debug_registers(pid_t tid, const DebugRegisters& regs);
// DR6 of a stopped thread; clear_dr6 resets the sticky status bits.
uint64_t read_dr6(pid_t tid);
void clear_dr6(pid_t tid);

// Whether this machine delivers debug-register traps at all. Some hypervisors
// accept DR0-DR7 writes but never raise the #DB (stock gdb and gdbserver then
// miss every hardware watchpoint silently). Found out once per process by a
// forked child stopping at a DR0 execute breakpoint (~1 ms), then cached.
bool debug_register_traps_delivered();
// The error a hardware breakpoint/watchpoint request gets on such a machine.
Error debug_registers_not_delivered_error();

constexpr uint64_t kDr6SingleStep = 1u << 14;

} // namespace gdbtrace
