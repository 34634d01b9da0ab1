// Tests of the Linux ptrace target against real child processes.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/native_target.h"
#include "target/proc_files.h"
#include "target_test_util.h"

extern char** environ;

namespace gdbtrace {
namespace {

using namespace std::chrono_literals;
using test::machine_delivers_debug_traps;
using test::program_path;
using test::symbol_address;

const ResumeAction kContinueAll{{-1, -1}, ResumeKind::Continue, 0};

void expect_refused_as_not_delivered(const Result<void>& r) {
  ASSERT_FALSE(r.ok()) << "accepted on a machine that never raises debug-register traps";
  EXPECT_NE(r.error().message.find("does not deliver debug-register traps"), std::string::npos)
      << r.error().message;
}

class TargetTest : public ::testing::Test {
protected:
  void SetUp() override {
    target = make_linux_target(io);
    waiter = std::make_unique<test::EventWaiter>(io, *target);
  }
  void TearDown() override {
    target.reset(); // kills what it started, detaches what it attached
  }

  Pid launch(const std::string& prog, std::vector<std::string> args, bool shell = false) {
    return test::launch(*target, prog, std::move(args), shell);
  }
  void continue_all(int signal = 0) { test::continue_all(*target, signal); }

  // Continues until the process exits; returns the exit status.
  int run_to_exit(Pid pid) {
    continue_all();
    auto ev = waiter->next(20s);
    EXPECT_TRUE(ev.has_value());
    if (!ev)
      return -1;
    EXPECT_EQ(ev->kind, StopKind::Exited) << "signal " << ev->signal;
    EXPECT_EQ(ev->thread.pid, pid);
    return ev->exit_status;
  }

  uint64_t pc_of(ThreadId t) {
    auto regs = target->read_registers(t);
    EXPECT_TRUE(regs.ok());
    return regs.ok() ? regs->pc() : 0;
  }

  asio::io_context io;
  std::unique_ptr<NativeTarget> target;
  std::unique_ptr<test::EventWaiter> waiter;
};

uint64_t auxv_entry(const std::string& auxv, uint64_t type) {
  for (size_t off = 0; off + 16 <= auxv.size(); off += 16) {
    uint64_t t, v;
    std::memcpy(&t, auxv.data() + off, 8);
    std::memcpy(&v, auxv.data() + off + 8, 8);
    if (t == type)
      return v;
  }
  return 0;
}

TEST_F(TargetTest, LaunchStopsAtFirstInstructionOfProgram) {
  for (bool shell : {false, true}) {
    Pid pid = launch("basic", {"loop", "1"}, shell);
    ASSERT_GT(pid, 0);
    auto exe = target->exec_file(pid);
    ASSERT_TRUE(exe.ok());
    EXPECT_EQ(*exe, program_path("basic")) << "shell=" << shell;
    // First instruction: the dynamic loader's entry point (AT_BASE + its e_entry),
    // i.e. nothing of the program has run yet.
    auto aux = target->auxv(pid);
    ASSERT_TRUE(aux.ok());
    uint64_t base = auxv_entry(*aux, AT_BASE);
    uint64_t pc = pc_of({pid, pid});
    EXPECT_GE(pc, base);
    EXPECT_LT(pc, base + 0x100000);
    uint64_t counter = symbol_address(program_path("basic"), "counter");
    long value = -1;
    ASSERT_TRUE(target->read_memory(pid, counter, {(uint8_t*)&value, 8}).ok());
    EXPECT_EQ(value, 0);
    EXPECT_FALSE(target->is_attached(pid));
    EXPECT_EQ(run_to_exit(pid), 7);
    EXPECT_TRUE(target->processes().empty());
  }
}

TEST_F(TargetTest, LaunchAppliesEnvironmentCwdAndArguments) {
  LaunchSpec spec;
  spec.program = program_path("basic");
  spec.startup_with_shell = false;
  spec.args = {"env", "GT_VAR", "hello"};
  spec.env_set = {"GT_VAR=hello"};
  Pid pid = *target->create_inferior(spec);
  EXPECT_EQ(run_to_exit(pid), 0);

  setenv("GT_GONE", "x", 1);
  spec.args = {"env", "GT_GONE", "-"};
  spec.env_set = {};
  spec.env_unset = {"GT_GONE"};
  pid = *target->create_inferior(spec);
  EXPECT_EQ(run_to_exit(pid), 0);

  spec = LaunchSpec{};
  spec.program = program_path("basic");
  spec.args = {"cwd", "/tmp"};
  spec.cwd = "/tmp";
  spec.startup_with_shell = true;
  pid = *target->create_inferior(spec);
  EXPECT_EQ(run_to_exit(pid), 0);

  // An argument with a space survives the shell (gdbserver escapes it).
  spec.args = {"args", "a b", "c"};
  spec.cwd = "";
  pid = *target->create_inferior(spec);
  EXPECT_EQ(run_to_exit(pid), 4);
}

TEST_F(TargetTest, LaunchThroughWrapperCountsItsExec) {
  LaunchSpec spec;
  spec.program = program_path("basic");
  spec.args = {"env", "WRAPPED", "yes"};
  spec.wrapper = {"/usr/bin/env", "WRAPPED=yes"};
  for (bool shell : {false, true}) {
    spec.startup_with_shell = shell;
    auto pid = target->create_inferior(spec);
    ASSERT_TRUE(pid.ok()) << pid.error().message;
    EXPECT_EQ(*target->exec_file(*pid), program_path("basic"));
    EXPECT_EQ(run_to_exit(*pid), 0);
  }
}

TEST_F(TargetTest, LaunchOfMissingProgramFailsWithText) {
  LaunchSpec spec;
  spec.program = "/nonexistent/program";
  spec.startup_with_shell = false;
  auto pid = target->create_inferior(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.error().message.find("No such file"), std::string::npos) << pid.error().message;
  spec.startup_with_shell = true;
  pid = target->create_inferior(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.error().message.find("exited with code 127"), std::string::npos)
      << pid.error().message;
}

TEST_F(TargetTest, RegistersReadAndWriteBack) {
  Pid pid = launch("basic", {"loop", "1"});
  ThreadId t{pid, pid};
  auto regs = target->read_registers(t);
  ASSERT_TRUE(regs.ok());
  EXPECT_TRUE(regs->valid.test(GT_RIP));
  EXPECT_TRUE(regs->valid.test(GT_FS_BASE));
  EXPECT_EQ(regs->get_u64(GT_CS), 0x33u); // 64-bit user code segment
  EXPECT_EQ(regs->get_u64(GT_FCTRL), 0x37fu);
  EXPECT_EQ(regs->get_u64(GT_MXCSR) & 0xffff, 0x1f80u);
  EXPECT_EQ(target->has_avx(), regs->valid.test(GT_YMM0H));

  RegisterBlock w;
  w.set_u64(GT_RBX, 0x1122334455667788ull);
  w.set_u64(GT_R12, 42);
  uint8_t xmm[16], ymmh[16];
  for (int i = 0; i < 16; i++) {
    xmm[i] = i + 1;
    ymmh[i] = 0xa0 + i;
  }
  std::memcpy(w.bytes.data() + gt_reg_offset(GT_XMM0 + 3), xmm, 16);
  w.valid.set(GT_XMM0 + 3);
  if (target->has_avx()) {
    std::memcpy(w.bytes.data() + gt_reg_offset(GT_YMM0H + 5), ymmh, 16);
    w.valid.set(GT_YMM0H + 5);
  }
  ASSERT_TRUE(target->write_registers(t, w).ok());
  auto back = target->read_registers(t);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->get_u64(GT_RBX), 0x1122334455667788ull);
  EXPECT_EQ(back->get_u64(GT_R12), 42u);
  EXPECT_EQ(back->pc(), regs->pc()); // untouched registers keep their values
  EXPECT_EQ(back->get_u64(GT_RSP), regs->get_u64(GT_RSP));
  EXPECT_EQ(std::memcmp(back->bytes.data() + gt_reg_offset(GT_XMM0 + 3), xmm, 16), 0);
  if (target->has_avx())
    EXPECT_EQ(std::memcmp(back->bytes.data() + gt_reg_offset(GT_YMM0H + 5), ymmh, 16), 0);
}

TEST_F(TargetTest, MemoryReadWriteAndPartialRead) {
  Pid pid = launch("basic", {"loop", "1"});
  uint64_t counter = symbol_address(program_path("basic"), "counter");
  ASSERT_NE(counter, 0u);
  long v = 0x5a5a5a5a12345678;
  auto w = target->write_memory(pid, counter, {(const uint8_t*)&v, 8});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, 8u);
  long back = 0;
  ASSERT_TRUE(target->read_memory(pid, counter, {(uint8_t*)&back, 8}).ok());
  EXPECT_EQ(back, v);

  // A read running off the end of the mapping returns what was readable.
  auto aux = target->auxv(pid);
  uint64_t stack_probe = 0;
  // The top of the stack mapping: find it in /proc/pid/maps.
  auto maps = procfs::read_file("/proc/" + std::to_string(pid) + "/maps");
  ASSERT_TRUE(maps.ok());
  auto pos = maps->find("[stack]");
  ASSERT_NE(pos, std::string::npos);
  auto line_start = maps->rfind('\n', pos);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  std::string range = maps->substr(line_start, maps->find(' ', line_start) - line_start);
  stack_probe = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
  std::vector<uint8_t> buf(64);
  auto r = target->read_memory(pid, stack_probe - 16, buf);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 16u);
  auto bad = target->read_memory(pid, 8, buf);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(bad.error().message.empty());
}

TEST_F(TargetTest, SoftwareBreakpointHitStepOverContinueToExit) {
  Pid pid = launch("basic", {"loop", "3"});
  uint64_t bp = symbol_address(program_path("basic"), "break_here");
  ASSERT_NE(bp, 0u);
  uint8_t before = 0;
  ASSERT_TRUE(target->read_memory(pid, bp, {&before, 1}).ok());
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, bp, 1).ok());
  uint8_t shown = 0;
  ASSERT_TRUE(target->read_memory(pid, bp, {&shown, 1}).ok());
  EXPECT_EQ(shown, before); // our int3 is hidden

  for (int hit = 0; hit < 3; hit++) {
    continue_all();
    auto ev = waiter->next();
    ASSERT_TRUE(ev.has_value());
    EXPECT_EQ(ev->kind, StopKind::Signalled);
    EXPECT_EQ(ev->signal, SIGTRAP);
    EXPECT_EQ(ev->reason, StopReason::SwBreak);
    EXPECT_EQ(pc_of(ev->thread), bp) << "hit " << hit;
  }
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Software, bp, 1).ok());
  EXPECT_EQ(run_to_exit(pid), 7);
}

TEST_F(TargetTest, WritesUnderABreakpointUpdateItsShadow) {
  Pid pid = launch("basic", {"loop", "1"});
  // A breakpoint on data makes the shadow visible without running anything.
  uint64_t watched = symbol_address(program_path("basic"), "watched");
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, watched + 2, 1).ok());
  auto raw_byte = [&](uint64_t addr) {
    int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY);
    uint8_t b = 0;
    EXPECT_EQ(pread(fd, &b, 1, addr), 1);
    ::close(fd);
    return b;
  };
  EXPECT_EQ(raw_byte(watched + 2), 0xcc);
  uint64_t v = 0x1122334455667788ull;
  ASSERT_TRUE(target->write_memory(pid, watched, {(const uint8_t*)&v, 8}).ok());
  uint64_t shown = 0;
  ASSERT_TRUE(target->read_memory(pid, watched, {(uint8_t*)&shown, 8}).ok());
  EXPECT_EQ(shown, v);
  EXPECT_EQ(raw_byte(watched + 2), 0xcc); // still inserted
  EXPECT_EQ(raw_byte(watched + 3), 0x55);
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Software, watched + 2, 1).ok());
  EXPECT_EQ(raw_byte(watched + 2), 0x66); // the new byte, not the old shadow
}

TEST_F(TargetTest, SingleStepAndRangeStep) {
  Pid pid = launch("basic", {"loop", "2"});
  uint64_t bp = symbol_address(program_path("basic"), "break_here");
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Software, bp, 1).ok());
  continue_all();
  auto ev = waiter->next();
  ASSERT_TRUE(ev && ev->reason == StopReason::SwBreak);
  ThreadId t = ev->thread;

  // Step from the breakpoint address itself: the original instruction runs.
  ASSERT_TRUE(target->resume({{t, ResumeKind::Step, 0}}).ok());
  ev = waiter->next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->reason, StopReason::SingleStep);
  uint64_t after_one = pc_of(t);
  EXPECT_GT(after_one, bp);
  EXPECT_LT(after_one, bp + 16);

  // Range-step through the rest of break_here's first instructions.
  ResumeAction range{t, ResumeKind::RangeStep, 0, bp, bp + 8};
  ASSERT_TRUE(target->resume({range}).ok());
  ev = waiter->next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->signal, SIGTRAP);
  uint64_t pc = pc_of(t);
  EXPECT_TRUE(pc < bp || pc >= bp + 8) << std::hex << pc;
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Software, bp, 1).ok());
  EXPECT_EQ(run_to_exit(pid), 7);
}

TEST_F(TargetTest, WriteWatchpointReportsAddress) {
  Pid pid = launch("basic", {"loop", "2"});
  uint64_t watched = symbol_address(program_path("basic"), "watched");
  if (!machine_delivers_debug_traps()) {
    expect_refused_as_not_delivered(
        target->insert_breakpoint(pid, BreakpointType::WriteWatch, watched, 8));
    EXPECT_EQ(run_to_exit(pid), 7);
    return;
  }
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::WriteWatch, watched, 8).ok());
  continue_all();
  auto ev = waiter->next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->signal, SIGTRAP);
  EXPECT_EQ(ev->reason, StopReason::Watch);
  EXPECT_EQ(ev->watch_address, watched);
  long v = 0;
  ASSERT_TRUE(target->read_memory(pid, watched, {(uint8_t*)&v, 8}).ok());
  EXPECT_EQ(v, 1); // the write has happened (x86 traps after it)
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::WriteWatch, watched, 8).ok());
  EXPECT_EQ(run_to_exit(pid), 7);
}

TEST_F(TargetTest, HardwareBreakpointAndDebugRegisterExhaustion) {
  Pid pid = launch("basic", {"loop", "2"});
  uint64_t fn = symbol_address(program_path("basic"), "break_here");
  if (!machine_delivers_debug_traps()) {
    expect_refused_as_not_delivered(
        target->insert_breakpoint(pid, BreakpointType::Hardware, fn, 1));
    EXPECT_EQ(run_to_exit(pid), 7);
    return;
  }
  ASSERT_TRUE(target->insert_breakpoint(pid, BreakpointType::Hardware, fn, 1).ok());
  continue_all();
  auto ev = waiter->next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->reason, StopReason::HwBreak);
  EXPECT_EQ(pc_of(ev->thread), fn);
  // Continuing from a hardware breakpoint must not re-trigger at once.
  continue_all();
  ev = waiter->next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->reason, StopReason::HwBreak);

  uint64_t watched = symbol_address(program_path("basic"), "watched");
  // 3 free slots; an unaligned 16-byte region needs more.
  auto r = target->insert_breakpoint(pid, BreakpointType::AccessWatch, watched + 1, 16);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no free debug register"), std::string::npos);
  EXPECT_FALSE(target->insert_breakpoint(pid, BreakpointType::ReadWatch, watched, 4).ok());
  ASSERT_TRUE(target->remove_breakpoint(pid, BreakpointType::Hardware, fn, 1).ok());
  EXPECT_EQ(run_to_exit(pid), 7);
}

TEST_F(TargetTest, KillRemovesTheProcess) {
  Pid pid = launch("basic", {"spin"});
  continue_all();
  waiter->pump(50ms);
  ASSERT_TRUE(target->kill(pid).ok());
  EXPECT_TRUE(target->processes().empty());
  EXPECT_FALSE(procfs::thread_exists(pid, pid));
  EXPECT_FALSE(target->kill(pid).ok());
}

TEST_F(TargetTest, InterruptReportsSigint) {
  Pid pid = launch("basic", {"spin"});
  continue_all();
  waiter->pump(50ms);
  ASSERT_TRUE(target->interrupt(pid).ok());
  auto ev = waiter->next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->kind, StopKind::Signalled);
  EXPECT_EQ(ev->signal, SIGINT);
  EXPECT_EQ(ev->thread.pid, pid);
  // Stopped for real: the counter does not move.
  uint64_t counter = symbol_address(program_path("basic"), "counter");
  long a = 0, b = 0;
  ASSERT_TRUE(target->read_memory(pid, counter, {(uint8_t*)&a, 8}).ok());
  waiter->pump(30ms);
  ASSERT_TRUE(target->read_memory(pid, counter, {(uint8_t*)&b, 8}).ok());
  EXPECT_EQ(a, b);
  // gdb does not pass its SIGINT: continuing runs on.
  continue_all();
  waiter->pump(30ms);
  long c = 0;
  ASSERT_TRUE(target->read_memory(pid, counter, {(uint8_t*)&c, 8}).ok());
  EXPECT_GT(c, b);
}

} // namespace
} // namespace gdbtrace
