// DrainPlacement: the drain thread moves to the CPUs the traced process's
// threads may not use, stays where it is when they may use every CPU, and gets
// its own mask back after the run. The "traced process" is a forked child
// pinned with sched_setaffinity, as `taskset -c 0` would.
#include "trace/drain_placement.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../strict_skip.h"

namespace gdbtrace {
namespace {

cpu_set_t own_mask() {
  cpu_set_t s;
  sched_getaffinity(0, sizeof s, &s);
  return s;
}

// A child that sleeps until killed, its mask set to MASK.
pid_t pinned_child(const cpu_set_t& mask) {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  EXPECT_EQ(sched_setaffinity(pid, sizeof mask, &mask), 0);
  return pid;
}

void end_child(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(DrainPlacement, MovesOffThePinnedTraceeCpuAndBack) {
  const cpu_set_t own = own_mask();
  if (!CPU_ISSET(0, &own) || CPU_COUNT(&own) < 2)
    GDBTRACE_SKIP("one-cpu") << "needs CPU 0 and another CPU to move the drain to";
  cpu_set_t cpu0;
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  pid_t child = pinned_child(cpu0);
  DrainPlacement placement;
  placement.place(child);
  cpu_set_t during = own_mask();
  cpu_set_t expected = own;
  CPU_CLR(0, &expected);
  EXPECT_TRUE(CPU_EQUAL(&during, &expected)) << format_cpu_list(during);
  EXPECT_EQ(placement.where(),
            "drain: on CPUs " + format_cpu_list(expected) + ", off the traced threads' CPUs 0");
  placement.restore();
  cpu_set_t after = own_mask();
  EXPECT_TRUE(CPU_EQUAL(&after, &own)) << format_cpu_list(after);
  EXPECT_EQ(placement.where().rfind("drain (last run): on CPUs ", 0), 0u) << placement.where();
  end_child(child);
}

TEST(DrainPlacement, StaysWhenTheTraceeMayUseEveryCpu) {
  const cpu_set_t own = own_mask();
  pid_t child = pinned_child(own);
  DrainPlacement placement;
  placement.place(child);
  cpu_set_t during = own_mask();
  EXPECT_TRUE(CPU_EQUAL(&during, &own)) << format_cpu_list(during);
  EXPECT_NE(placement.where().find("no spare CPU"), std::string::npos) << placement.where();
  placement.restore();
  end_child(child);
}

// Sharing the traced threads' CPUs, the drain runs at real-time priority for
// the run (root may), its threads and children do not inherit it, and its own
// policy is back after the run.
TEST(DrainPlacement, RaisesThePriorityWhenSharingCpusAndPutsItBack) {
  const cpu_set_t own = own_mask();
  const int before = sched_getscheduler(0);
  pid_t child = pinned_child(own);
  DrainPlacement placement;
  placement.place(child);
  if (geteuid() != 0) {
    EXPECT_NE(placement.where().find("real-time priority refused"), std::string::npos)
        << placement.where();
    placement.restore();
    end_child(child);
    GDBTRACE_SKIP("not-root") << "only root may raise the drain to real-time priority";
  }
  EXPECT_EQ(sched_getscheduler(0), SCHED_FIFO | SCHED_RESET_ON_FORK);
  sched_param p{};
  sched_getparam(0, &p);
  EXPECT_EQ(p.sched_priority, 1);
  EXPECT_NE(placement.where().find("no spare CPU); at real-time priority (SCHED_FIFO 1)"),
            std::string::npos)
      << placement.where();
  pid_t forked = fork(); // a program the stub starts during the run
  if (forked == 0)
    _exit(sched_getscheduler(0) == SCHED_OTHER ? 0 : 1);
  int status = -1;
  waitpid(forked, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  placement.restore();
  EXPECT_EQ(sched_getscheduler(0), before);
  end_child(child);
}

TEST(DrainPlacement, FormatsCpuLists) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int cpu : {0, 1, 2, 5, 7, 8})
    CPU_SET(cpu, &s);
  EXPECT_EQ(format_cpu_list(s), "0-2,5,7-8");
}

} // namespace
} // namespace gdbtrace
