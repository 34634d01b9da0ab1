// LinuxTarget: int3s taken out, on purpose or by the kernel behind our back,
// and put back.
//
// The kernel takes any int3 at the address of a uprobe for the uprobe's own
// (uprobes.c: verify_opcode, find_active_uprobe). So another program's uprobe
// on the instruction of one of our breakpoints (bpftrace, perf probe, another
// gdbtrace-server tracing the same executable) takes the breakpoint out:
//  - when that uprobe is unregistered, the kernel writes the file's instruction
//    back in every process that maps the file and has ever had a uprobe (ours
//    have, from our own eBPF or module tracepoints);
//  - while it is registered, a hit in our process runs the uprobe instead of
//    stopping the thread, and if the uprobe's filter refuses our process the
//    kernel writes the instruction back there too.
// The thread then runs through the breakpoint without a word (stock gdbserver's
// breakpoints go the same way). We cannot stop that, but we can see it: before
// each resume, and every 200 ms while a process with breakpoints runs, every
// int3 of ours is read back (a page at a time). One that holds its original
// byte again, with the same code after it as when it went in, is put back,
// and gdb's console says so, since hits while it was out were missed.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <string>

#include "common/hex.h"
#include "target/linux_target.h"

namespace gdbtrace {

namespace {

constexpr uint8_t kInt3 = 0xcc;
constexpr size_t kPage = 4096;
constexpr auto kBreakpointCheckPeriod = std::chrono::milliseconds(200);

// The first time, then at 10, 100, 1000 ... times: a uprobe that stays
// registered takes the int3 out at every hit, and gdb's console must not flood.
bool worth_telling(uint32_t times) {
  for (uint32_t at = 1; at <= times; at *= 10)
    if (at == times)
      return true;
  return false;
}

std::string rearm_notice(Pid pid, uint64_t address, uint32_t times) {
  std::string text = std::string("gdbtrace: the breakpoint at 0x") + hex::u64(address) +
                     " in process " + std::to_string(pid) +
                     " was taken out by the kernel (a uprobe of another program on that "
                     "instruction was removed, or hit there); put back";
  if (times > 1)
    text += " (" + std::to_string(times) + " times so far)";
  return text + ". Hits while it was out were missed.\n";
}

} // namespace

// Taken out on purpose (a vfork child shares the memory; a fork child gdb is
// not told about is let go) and put back.
void LinuxTarget::lift_all_int3(Process& p) {
  for (const auto& [addr, bp] : p.breakpoints)
    (void)p.memory.write(addr, std::span<const uint8_t>(&bp.original, 1));
}

void LinuxTarget::restore_all_int3(Process& p) {
  uint8_t int3 = kInt3;
  for (const auto& [addr, bp] : p.breakpoints)
    (void)p.memory.write(addr, std::span<const uint8_t>(&int3, 1));
}

// The code after the address is still what it was when the int3 went in: a
// library unloaded and another mapped at its place (gdb keeps such a
// breakpoint, disabled, until it is resolved again) must not get an int3.
// Our other int3s in the window may have come or gone since: not compared.
static bool same_code(const Process& p, const SwBreakpoint& bp, uint64_t address,
                      std::span<const uint8_t> now) {
  if (bp.code_len == 0)
    return false; // gdb wrote memory here since: no reference left
  size_t n = std::min<size_t>(bp.code_len, now.size());
  for (size_t i = 1; i < n; i++)
    if (now[i] != bp.code[i] && !p.breakpoints.count(address + i))
      return false;
  return true;
}

void LinuxTarget::rearm_wiped_int3(Process& p) {
  if (p.vfork_breakpoints_lifted)
    return; // taken out on purpose until the vfork child is gone
  // A page read at a time: thousands of ptrace tracepoints sit on a few pages.
  std::array<uint8_t, kPage> page;
  uint64_t page_at = 0;
  size_t page_len = 0;
  bool have_page = false;
  for (auto& [address, bp] : p.breakpoints) {
    uint64_t base = address & ~uint64_t(kPage - 1);
    if (!have_page || base != page_at) {
      auto r = p.memory.read(base, std::span<uint8_t>(page));
      page_at = base;
      page_len = r ? *r : 0;
      have_page = true;
    }
    if (address - base >= page_len)
      continue;
    uint8_t now = page[address - base];
    // Only the original byte is the kernel's doing; anything else was written
    // by the program itself (or gdb, which updates `original`): left alone.
    if (now == kInt3 || now != bp.original ||
        !same_code(
            p, bp, address,
            std::span<const uint8_t>(page).subspan(address - base, page_len - (address - base))))
      continue;
    uint8_t int3 = kInt3;
    if (!p.memory.write(address, std::span<const uint8_t>(&int3, 1)))
      continue;
    ++bp.rearmed;
    if (worth_telling(bp.rearmed) && notice_)
      notice_(rearm_notice(p.pid, address, bp.rearmed));
  }
}

// Armed at each resume; runs while some process with breakpoints has a thread
// running, and lapses when none has.
void LinuxTarget::check_breakpoints_later() {
  if (breakpoint_check_armed_)
    return;
  auto running_with_breakpoints = [](const Process& p) {
    if (p.breakpoints.empty())
      return false;
    for (const auto& [tid, l] : p.lwps)
      if (l.running && !l.zombie)
        return true;
    return false;
  };
  bool any = false;
  for (const auto& [pid, p] : procs_)
    any |= running_with_breakpoints(*p);
  if (!any)
    return;
  breakpoint_check_armed_ = true;
  breakpoint_check_.expires_after(kBreakpointCheckPeriod);
  std::weak_ptr<int> alive = life_;
  breakpoint_check_.async_wait([this, alive, running_with_breakpoints](const asio::error_code& ec) {
    if (ec || alive.expired())
      return;
    breakpoint_check_armed_ = false;
    for (auto& [pid, p] : procs_)
      if (running_with_breakpoints(*p))
        rearm_wiped_int3(*p);
    check_breakpoints_later();
  });
}

} // namespace gdbtrace
