// Moving one thread's x86-64 registers between ptrace and the 'g' layout.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include "common/register_block.h"
#include "common/result.h"

namespace gdbtrace::x86 {

// CPUID says AVX and the OS enabled the YMM state (XCR0 bits 1 and 2).
bool cpu_has_avx();

// GETREGS + GETFPREGS (+ NT_X86_XSTATE for the ymm high halves when AVX).
// RAW, if given, receives the PTRACE_GETREGS block the general registers came from.
Result<RegisterBlock> read_registers(pid_t tid, bool avx, user_regs_struct* raw = nullptr);
// Writes back only the registers marked valid in REGS.
Result<void> write_registers(pid_t tid, const RegisterBlock& regs, bool avx);

Result<uint64_t> read_pc(pid_t tid);
Result<void> write_pc(pid_t tid, uint64_t pc);

} // namespace gdbtrace::x86
