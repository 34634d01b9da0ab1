#include <gtest/gtest.h>

#include <csignal>

#include "server/signals.h"

using namespace gdbtrace;

TEST(Signals, GdbNumbersFromSignalsDef) {
  EXPECT_EQ(gdb_signal_from_host(SIGTRAP), 5);
  EXPECT_EQ(gdb_signal_from_host(SIGSEGV), 11);
  EXPECT_EQ(gdb_signal_from_host(SIGBUS), 10);
  EXPECT_EQ(gdb_signal_from_host(SIGUSR1), 30);
  EXPECT_EQ(gdb_signal_from_host(SIGUSR2), 31);
  EXPECT_EQ(gdb_signal_from_host(SIGCHLD), 20);
  EXPECT_EQ(gdb_signal_from_host(SIGSTOP), 17);
  EXPECT_EQ(gdb_signal_from_host(SIGCONT), 19);
  EXPECT_EQ(gdb_signal_from_host(SIGSYS), 12);
  EXPECT_EQ(gdb_signal_from_host(SIGIO), 23);
  EXPECT_EQ(gdb_signal_from_host(SIGPWR), 32);
  EXPECT_EQ(gdb_signal_from_host(32), 77); // GDB_SIGNAL_REALTIME_32
  EXPECT_EQ(gdb_signal_from_host(34), 46); // GDB_SIGNAL_REALTIME_34
  EXPECT_EQ(gdb_signal_from_host(64), 78); // GDB_SIGNAL_REALTIME_64
  EXPECT_EQ(gdb_signal_from_host(SIGSTKFLT), kGdbSignalUnknown);
}

TEST(Signals, RoundTrip) {
  for (int host = 1; host <= 64; host++) {
    if (host == SIGSTKFLT)
      continue;
    EXPECT_EQ(host_signal_from_gdb(gdb_signal_from_host(host)), host) << host;
  }
  EXPECT_EQ(host_signal_from_gdb(0), 0);
  EXPECT_EQ(host_signal_from_gdb(7), 0); // GDB_SIGNAL_EMT: none on Linux
}
