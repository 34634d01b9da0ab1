// Emulation of the probed instruction by the tracepoint's own BPF program.
//
// Since Linux 6.19 (upstream 7384893d970e) a uprobe BPF program may store to
// its pt_regs context, and a uprobe handler that moves regs->ip makes the
// kernel skip its out-of-line single-step (upstream 4363264111e1, which the
// module already relies on): the ~11 µs of that step become a few stores.
// The recipes are the module's: gt_emu_decode (shared/x86/emulate.c) decodes the
// instruction and the code emitted here does what gt_emu_apply does, for the
// recipes a BPF program can carry out. Stores are not among them (a BPF
// program cannot write the tracee's memory safely), so store sites keep the
// kernel's single-step.
//
// The emitted code declines (jumps to OUT with the registers untouched, and
// the kernel single-steps as before) unless every condition for a faithful
// emulation holds at that hit: ip is still the probe address (no other
// consumer moved it), the trap flag is clear (a debugger single-stepping the
// thread must see exactly this instruction executed), the code is 64-bit, no
// hardware breakpoint or watchpoint is armed in the thread (ptrace_dr7 == 0:
// a watchpoint on a loaded address must fire), the collector's per-probe flag
// says this program is the last one run at the address (the others must see
// the registers from before the instruction), and a load's memory is readable
// without a fault.
#pragma once

#include <cstdint>
#include <optional>

#include "bpf/bpf_asm.h"

extern "C" {
#include "x86/emulate.h"
}

namespace gdbtrace::bpf {

// Whether the generated program can carry out recipe E (not a store, not "none").
bool bpf_can_emulate(const gdbtrace_emu& e);

struct EmulationSite {
  uint64_t address = 0; // the probe address (regs->ip at the hit)
  gdbtrace_emu recipe{};
  // Offset of thread.ptrace_dr7 in task_struct (vmlinux BTF). Required: without
  // it the program cannot tell whether a watchpoint is armed.
  uint32_t task_dr7_offset = 0;
  // The collector's "this program emulates" flag: a u64 in map FLAG_MAP_FD's
  // value at FLAG_OFFSET (BPF_PSEUDO_MAP_VALUE). -1: no flag (tests).
  int flag_map_fd = -1;
  uint32_t flag_offset = 0;
};

// Emits the emulation of SITE for the pt_regs pointed to by REGS (a callee-saved
// register, unchanged), using R0-R5 and the 8 bytes at R10+SCRATCH. Falls
// through when the instruction was emulated (ip moved on), jumps to OUT when not.
void emit_emulation(Assembler& a, const EmulationSite& site, uint8_t regs, int16_t scratch,
                    int out);

} // namespace gdbtrace::bpf
