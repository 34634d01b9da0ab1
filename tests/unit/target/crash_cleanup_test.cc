// The crash path of gdbtrace-server (target/crash_cleanup): run() on the
// published table, against real children of this test, traced with raw
// ptrace as the stub would have left them when it crashed.
#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target/crash_cleanup.h"

namespace gdbtrace {
namespace {

volatile int site_calls = 0;
// Bytes the many-breakpoint test publishes as int3 sites (the child's copy is
// at the same address; it never touches them).
volatile uint8_t scratch[20000];

__attribute__((noinline)) void probe_site() {
  site_calls = site_calls + 1;
}

// A child that calls probe_site 200 times over ~0.4 s and exits 0 if every
// call happened (it dies of SIGTRAP if our int3 is left behind).
pid_t start_child() {
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 200; i++) {
      probe_site();
      usleep(2000);
    }
    _exit(site_calls == 200 ? 0 : 1);
  }
  return pid;
}

uint8_t read_byte(pid_t pid, uint64_t address) {
  uint8_t byte = 0;
  int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY);
  EXPECT_EQ(pread(fd, &byte, 1, static_cast<off_t>(address)), 1);
  close(fd);
  return byte;
}

void write_byte(pid_t pid, uint64_t address, uint8_t byte) {
  int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR);
  ASSERT_EQ(pwrite(fd, &byte, 1, static_cast<off_t>(address)), 1);
  close(fd);
}

// Attaches, plants an int3 at probe_site, lets the child run into it: the
// child ends up in an uncollected SIGTRAP stop with its pc one past the int3.
uint8_t trap_child_at_site(pid_t pid) {
  EXPECT_EQ(ptrace(PTRACE_ATTACH, pid, nullptr, nullptr), 0);
  int st = 0;
  EXPECT_EQ(waitpid(pid, &st, __WALL), pid);
  auto site = reinterpret_cast<uint64_t>(&probe_site);
  uint8_t original = read_byte(pid, site);
  write_byte(pid, site, 0xcc);
  EXPECT_EQ(ptrace(PTRACE_CONT, pid, nullptr, nullptr), 0);
  // Wait for the trap without reaping it: the status stays in the kernel.
  siginfo_t si{};
  EXPECT_EQ(waitid(P_PID, pid, &si, WSTOPPED | WNOWAIT | __WALL), 0);
  EXPECT_EQ(si.si_status, SIGTRAP);
  return original;
}

void publish(pid_t pid, bool attached, uint8_t original) {
  crash_cleanup::Publisher table;
  table.begin();
  table.add_process({pid, attached});
  table.add_breakpoint({pid, reinterpret_cast<uint64_t>(&probe_site), original});
  table.commit();
}

// A child stopped on our int3 at probe_site, published as ATTACHED or started;
// ORIGINAL gets the byte the int3 replaced.
pid_t trapped_child_in_table(bool attached, uint8_t& original) {
  pid_t pid = start_child();
  if (pid <= 0)
    return pid;
  original = trap_child_at_site(pid);
  publish(pid, attached, original);
  return pid;
}

TEST(CrashCleanupTest, AttachedProcessIsRestoredRewoundDetachedAndRunsOn) {
  uint8_t original = 0;
  pid_t pid = trapped_child_in_table(true, original);
  ASSERT_GT(pid, 0);

  crash_cleanup::run();

  EXPECT_EQ(read_byte(pid, reinterpret_cast<uint64_t>(&probe_site)), original);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st)) << "status 0x" << std::hex << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << "a call of probe_site was lost or repeated";
  crash_cleanup::Publisher empty; // leave no entry behind for the other tests
  empty.begin();
  empty.commit();
}

TEST(CrashCleanupTest, StartedProcessIsKilled) {
  uint8_t original = 0;
  pid_t pid = trapped_child_in_table(false, original);
  ASSERT_GT(pid, 0);

  crash_cleanup::run();

  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, __WALL), pid);
  while (WIFSTOPPED(st)) { // the collected trap stop, then the kill
    ptrace(PTRACE_CONT, pid, nullptr, nullptr);
    ASSERT_EQ(waitpid(pid, &st, __WALL), pid);
  }
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status 0x" << std::hex << st;
}

// Thousands of int3s published one at a time (as ptrace tracepoints insert
// them), some removed again: every one still in the table gets its byte back,
// beyond the 8 192 the table held before, and none that was removed does.
TEST(CrashCleanupTest, ManyBreakpointsPublishedOneByOneAreAllRestored) {
  uint8_t original = 0;
  pid_t pid = trapped_child_in_table(true, original);
  ASSERT_GT(pid, 0);
  auto at = [](int i) { return reinterpret_cast<uint64_t>(&scratch[i]); };
  const int n = int(sizeof scratch);
  for (int i = 0; i < n; i++)
    crash_cleanup::breakpoint_set({pid, at(i), 0x5a});
  for (int i = 0; i < n; i += 3) // removed: its entry's place goes to the last one
    crash_cleanup::breakpoint_removed(pid, at(i));
  crash_cleanup::breakpoint_set({pid, at(1), 0x6b}); // a write under the int3
  EXPECT_EQ(crash_cleanup::dropped(), 0u);

  crash_cleanup::run();

  EXPECT_EQ(read_byte(pid, reinterpret_cast<uint64_t>(&probe_site)), original);
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    uint8_t want = i % 3 == 0 ? 0 : i == 1 ? 0x6b : 0x5a;
    wrong += read_byte(pid, at(i)) != want;
  }
  EXPECT_EQ(wrong, 0);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status 0x" << std::hex << st;
  crash_cleanup::Publisher empty;
  empty.begin();
  empty.commit();
}

TEST(CrashCleanupTest, TableBeyondCapacityCountsWhatItDropped) {
  crash_cleanup::Publisher table;
  table.begin();
  for (int i = 0; i < 300; i++)
    table.add_process({100000 + i, true});
  table.commit();
  EXPECT_EQ(crash_cleanup::dropped(), 300u - 256u);
  table.begin();
  table.commit();
  EXPECT_EQ(crash_cleanup::dropped(), 0u);
}

} // namespace
} // namespace gdbtrace
