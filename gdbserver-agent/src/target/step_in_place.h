// Executing the instruction under one of our int3s without lifting the int3,
// so the other threads keep running (lifting it for a single-step means
// stopping them all first: gdbserver's way, which makes every hit stop the
// whole process).
//
// The instruction is emulated on the thread's registers: with the recipes
// gdbtrace.ko uses at a uprobe (shared/x86/emulate.c, gt_emu_decode/apply, built
// into the stub as gdbtrace_emulate), and the two kinds the kernel's uprobes
// emulate themselves so the module never needed them (nop, push reg).
// Anything else is not executed here: the caller lifts the int3 and steps.
#pragma once

#include <cstdint>
#include <span>
#include <sys/types.h>
#include <sys/user.h>

namespace gdbtrace {

enum class InPlace {
  Done,       // REGS advanced past the instruction, its memory effect done
  Unsupported // not an instruction emulated here (or its memory access faulted): REGS untouched
};

// INSN: the original bytes at REGS.rip (up to 16, int3s already replaced by
// their shadows); REGS of a 64-bit thread (a compat-mode one is declined). Memory operands are read
// and written in process PID with process_vm_readv/writev, which honour the page protections as the
// CPU would (a store to a read-only page is declined, and the CPU then faults on it).
InPlace execute_in_place(std::span<const uint8_t> insn, user_regs_struct& regs, pid_t pid);

} // namespace gdbtrace
