#include "target/debug_registers.h"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <string>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace gdbtrace {
namespace {

struct Span {
  uint64_t addr;
  unsigned len; // 1, 2, 4 or 8, addr aligned to len
};

// Split [addr, addr+len) into naturally aligned pieces the hardware can watch
// (the same decomposition gdb's x86-dregs.c does).
std::vector<Span> split_region(uint64_t addr, uint64_t len) {
  std::vector<Span> spans;
  while (len > 0) {
    unsigned size = 8;
    while (size > 1 && (addr % size != 0 || size > len))
      size /= 2;
    spans.push_back({addr, size});
    addr += size;
    len -= size;
  }
  return spans;
}

uint64_t rw_bits(DebugAccess a) {
  switch (a) {
  case DebugAccess::Execute:
    return 0;
  case DebugAccess::Write:
    return 1;
  case DebugAccess::ReadWrite:
    return 3;
  }
  return 0;
}

uint64_t len_bits(unsigned len) {
  switch (len) {
  case 1:
    return 0;
  case 2:
    return 1;
  case 8:
    return 2;
  default:
    return 3; // 4
  }
}

// The DR7 control nibble of one slot: RW in the low two bits, LEN above.
uint64_t control(DebugAccess a, unsigned len) {
  return rw_bits(a) | (len_bits(len) << 2);
}

uint64_t slot_control(uint64_t dr7, unsigned slot) {
  return (dr7 >> (16 + 4 * slot)) & 0xf;
}

constexpr uint64_t kLocalExact = 1u << 8; // DR7.LE, as gdb sets it

size_t dr_offset(int n) {
  return offsetof(struct user, u_debugreg) + n * sizeof(long);
}

} // namespace

Result<void> DebugRegisters::insert(DebugAccess access, uint64_t addr, uint64_t len) {
  if (len == 0)
    return make_error(EINVAL, "zero-length watchpoint");
  auto spans = split_region(addr, access == DebugAccess::Execute ? 1 : len);
  DebugRegisters next = *this;
  for (const auto& s : spans) {
    uint64_t ctl = control(access, s.len);
    int found = -1, free_slot = -1;
    for (int i = 0; i < 4; i++) {
      if (next.refs[i] > 0 && next.address[i] == s.addr && slot_control(next.dr7, i) == ctl)
        found = i;
      else if (next.refs[i] == 0 && free_slot < 0)
        free_slot = i;
    }
    if (found < 0 && free_slot < 0)
      return make_error(ENOSPC, "no free debug register (x86 has 4; this request needs " +
                                    std::to_string(spans.size()) + ")");
    int slot = found >= 0 ? found : free_slot;
    if (found < 0) {
      next.address[slot] = s.addr;
      next.dr7 &= ~(0xfull << (16 + 4 * slot));
      next.dr7 |= ctl << (16 + 4 * slot);
      next.dr7 |= 1ull << (2 * slot); // local enable
    }
    next.refs[slot]++;
  }
  next.dr7 |= kLocalExact;
  *this = next;
  return ok();
}

Result<void> DebugRegisters::remove(DebugAccess access, uint64_t addr, uint64_t len) {
  auto spans = split_region(addr, access == DebugAccess::Execute ? 1 : (len ? len : 1));
  DebugRegisters next = *this;
  for (const auto& s : spans) {
    uint64_t ctl = control(access, s.len);
    int found = -1;
    for (int i = 0; i < 4; i++)
      if (next.refs[i] > 0 && next.address[i] == s.addr && slot_control(next.dr7, i) == ctl)
        found = i;
    if (found < 0)
      return make_error(ENOENT, "no such hardware breakpoint/watchpoint");
    if (--next.refs[found] == 0) {
      next.address[found] = 0;
      next.dr7 &= ~(0xfull << (16 + 4 * found));
      next.dr7 &= ~(3ull << (2 * found));
    }
  }
  if (!next.any_used())
    next.dr7 = 0;
  *this = next;
  return ok();
}

DebugAccess DebugRegisters::slot_access(unsigned slot) const {
  switch (slot_control(dr7, slot) & 3) {
  case 0:
    return DebugAccess::Execute;
  case 1:
    return DebugAccess::Write;
  default:
    return DebugAccess::ReadWrite;
  }
}

Result<void> apply_debug_registers(pid_t tid, const DebugRegisters& regs) {
  auto poke = [&](int n, uint64_t v) -> Result<void> {
    if (ptrace(PTRACE_POKEUSER, tid, (void*)dr_offset(n), (void*)v) != 0) {
      int e = errno;
      return make_error(e, "cannot set debug register DR" + std::to_string(n) + " of thread " +
                               std::to_string(tid) + ": " + std::strerror(e));
    }
    return ok();
  };
  // Disable first so the kernel never validates a half-updated combination.
  if (auto r = poke(7, 0); !r)
    return r;
  for (int i = 0; i < 4; i++)
    if (auto r = poke(i, regs.address[i]); !r)
      return r;
  return poke(7, regs.dr7);
}

uint64_t read_dr6(pid_t tid) {
  errno = 0;
  long v = ptrace(PTRACE_PEEKUSER, tid, (void*)dr_offset(6), nullptr);
  return errno ? 0 : static_cast<uint64_t>(v);
}

void clear_dr6(pid_t tid) {
  ptrace(PTRACE_POKEUSER, tid, (void*)dr_offset(6), nullptr);
}

} // namespace gdbtrace

namespace gdbtrace {
namespace {

// The probe child's breakpoint target: a real call the compiler cannot drop.
__attribute__((noinline)) void debug_register_probe_target() {
  asm volatile("" ::: "memory");
}

bool probe_debug_register_traps() {
  pid_t child = fork();
  if (child < 0)
    return true; // cannot tell: keep hardware breakpoints on, as before
  if (child == 0) {
    // Only async-signal-safe calls here: the parent may have threads.
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == 0) {
      raise(SIGSTOP);
      debug_register_probe_target();
    }
    _exit(0);
  }
  int status = 0;
  bool trapped = false;
  if (waitpid(child, &status, __WALL) == child && WIFSTOPPED(status)) {
    DebugRegisters regs;
    auto target = reinterpret_cast<uint64_t>(&debug_register_probe_target);
    if (regs.insert(DebugAccess::Execute, target, 1) && apply_debug_registers(child, regs) &&
        ptrace(PTRACE_CONT, child, nullptr, nullptr) == 0 &&
        waitpid(child, &status, __WALL) == child)
      trapped = WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP && (read_dr6(child) & 1);
  }
  kill(child, SIGKILL);
  while (waitpid(child, &status, __WALL) == child && !WIFEXITED(status) && !WIFSIGNALED(status)) {
  }
  return trapped;
}

} // namespace

bool debug_register_traps_delivered() {
  static const bool delivered = probe_debug_register_traps();
  return delivered;
}

Error debug_registers_not_delivered_error() {
  return Error{ENODEV, "this machine does not deliver debug-register traps (its hypervisor accepts "
                       "DR0-DR7 but never raises them), so a hardware breakpoint or watchpoint "
                       "would never fire; for watchpoints use 'set can-use-hw-watchpoints 0'"};
}

} // namespace gdbtrace
