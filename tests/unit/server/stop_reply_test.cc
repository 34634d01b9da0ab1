#include <gtest/gtest.h>

#include <csignal>

#include "server/stop_reply.h"

using namespace gdbtrace;

static StopEvent event(StopKind kind, int sig = 0) {
  StopEvent e;
  e.kind = kind;
  e.thread = {0x5dbd, 0x5dbe};
  e.signal = sig;
  return e;
}

TEST(StopReply, Signals) {
  StopReplyOptions o;
  o.multiprocess = true;
  o.swbreak = true;
  o.core = 1;
  auto e = event(StopKind::Signalled, SIGTRAP);
  e.reason = StopReason::SwBreak;
  EXPECT_EQ(format_stop_reply(e, o), "T05swbreak:;thread:p5dbd.5dbe;core:1;");
  o.swbreak = false; // gdb did not ask for swbreak: no reason
  EXPECT_EQ(format_stop_reply(e, o), "T05thread:p5dbd.5dbe;core:1;");
  EXPECT_EQ(format_stop_reply(event(StopKind::Signalled, SIGUSR1), o),
            "T1ethread:p5dbd.5dbe;core:1;");
}

TEST(StopReply, ExpeditedRegisters) {
  RegisterBlock regs;
  regs.set_u64(GT_RIP, 0x401000);
  regs.set_u64(GT_RSP, 0x7ffe0000);
  StopReplyOptions o;
  o.regs = &regs;
  EXPECT_EQ(format_stop_reply(event(StopKind::Signalled, SIGINT), o),
            "T0207:0000fe7f00000000;10:0010400000000000;thread:5dbe;");
}

TEST(StopReply, Watchpoints) {
  StopReplyOptions o;
  auto e = event(StopKind::Signalled, SIGTRAP);
  e.reason = StopReason::AWatch;
  e.watch_address = 0x601040;
  EXPECT_EQ(format_stop_reply(e, o), "T05awatch:601040;thread:5dbe;");
  e.reason = StopReason::Watch;
  EXPECT_EQ(format_stop_reply(e, o), "T05watch:601040;thread:5dbe;");
}

TEST(StopReply, ExitsAndEvents) {
  StopReplyOptions o;
  o.multiprocess = true;
  auto ex = event(StopKind::Exited);
  ex.exit_status = 3;
  EXPECT_EQ(format_stop_reply(ex, o), "W03;process:5dbd");
  EXPECT_EQ(format_stop_reply(event(StopKind::Terminated, SIGKILL), o), "X09;process:5dbd");
  EXPECT_EQ(format_stop_reply(event(StopKind::ThreadExited), o), "w00;p5dbd.5dbe");
  EXPECT_EQ(format_stop_reply(event(StopKind::NoResumed), o), "N");
  auto f = event(StopKind::Forked);
  f.child = {0x100, 0x100};
  EXPECT_EQ(format_stop_reply(f, o), "T05fork:p100.100;thread:p5dbd.5dbe;");
  auto x = event(StopKind::Execd);
  x.exec_path = "/bin/ls";
  EXPECT_EQ(format_stop_reply(x, o), "T05exec:2f62696e2f6c73;thread:p5dbd.5dbe;");
  auto s = event(StopKind::SyscallEntry);
  s.syscall_number = 60;
  EXPECT_EQ(format_stop_reply(s, o), "T05syscall_entry:3c;thread:p5dbd.5dbe;");
  EXPECT_EQ(format_stop_reply(event(StopKind::VForkDone), o), "T05vforkdone:;thread:p5dbd.5dbe;");
  EXPECT_EQ(format_stop_reply(event(StopKind::ThreadCreated), o), "T05create:;thread:p5dbd.5dbe;");
}
