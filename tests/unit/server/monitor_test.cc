// Monitor commands come from a registry: `monitor help` lists it in
// gdbserver's wording (gdb's testsuite and our integration tests read it), and
// each command keeps the spellings it takes.
#include <gtest/gtest.h>

#include "server/monitor.h"

using namespace gdbtrace;

TEST(Monitor, HelpListsTheRegisteredCommands) {
  auto r = run_monitor_command("help", nullptr);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.output, "The following monitor commands are supported:\n"
                      "  set debug <0|1>\n"
                      "    Enable general debugging messages\n"
                      "  set remote-debug <0|1>\n"
                      "    Enable remote protocol debugging messages\n"
                      "  set debug-format option1[,option2,...]\n"
                      "    Add additional information to debugging messages\n"
                      "    Options: all, none, timestamp\n"
                      "  set libthread-db-search-path [PATH]\n"
                      "    Where to look for libthread_db (thread-local variables)\n"
                      "  exit\n"
                      "    Quit GDBserver\n"
                      "  gdbtrace help\n"
                      "    Tracepoint collectors, status and settings of gdbtrace\n");
}

TEST(Monitor, CommandsAndTheirArguments) {
  auto on = run_monitor_command("  set debug on \n", nullptr);
  EXPECT_EQ(on.set_debug, true);
  EXPECT_EQ(on.output, "Debug output enabled.\n");
  EXPECT_EQ(run_monitor_command("set debug 0", nullptr).set_debug, false);
  EXPECT_EQ(run_monitor_command("set remote-debug 1", nullptr).set_remote_debug, true);
  auto format = run_monitor_command("set debug-format timestamp", nullptr);
  EXPECT_EQ(format.set_debug_timestamps, true);
  EXPECT_EQ(format.output, "Timestamps will be added to debug output.\n");
  auto bad_format = run_monitor_command("set debug-format bogus", nullptr);
  EXPECT_EQ(bad_format.error.rfind("Unknown debug-format argument: \"bogus\"\n", 0), 0u);
  EXPECT_NE(bad_format.error.find("The following monitor commands"), std::string::npos);
  auto path = run_monitor_command("set libthread-db-search-path /x", nullptr);
  EXPECT_EQ(path.set_thread_db_search_path, "/x");
  EXPECT_TRUE(run_monitor_command("exit", nullptr).exit);
}

TEST(Monitor, UnknownFormsGetTheHelp) {
  for (const char* command : {"set debug", "set debug 2", "set debugx 1", "set debug-format",
                              "help me", "exit now", "gdbtrace status", "bogus"}) {
    auto r = run_monitor_command(command, nullptr); // no trace engine: no gdbtrace commands
    EXPECT_EQ(r.error.rfind("Unknown monitor command.\n\nThe following monitor commands", 0), 0u)
        << command;
    EXPECT_EQ(r.output, "") << command;
    EXPECT_FALSE(r.set_debug.has_value()) << command;
  }
}
