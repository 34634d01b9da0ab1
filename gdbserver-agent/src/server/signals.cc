#include "server/signals.h"

#include <csignal>
#include <cstring>

namespace gdbtrace {
namespace {

// gdb numbers from signals.def for the Linux signals with a fixed number.
struct Pair {
  int host;
  int gdb;
};
constexpr Pair kFixed[] = {
    {SIGHUP, 1},     {SIGINT, 2},   {SIGQUIT, 3},   {SIGILL, 4},   {SIGTRAP, 5},  {SIGABRT, 6},
    {SIGFPE, 8},     {SIGKILL, 9},  {SIGBUS, 10},   {SIGSEGV, 11}, {SIGSYS, 12},  {SIGPIPE, 13},
    {SIGALRM, 14},   {SIGTERM, 15}, {SIGURG, 16},   {SIGSTOP, 17}, {SIGTSTP, 18}, {SIGCONT, 19},
    {SIGCHLD, 20},   {SIGTTIN, 21}, {SIGTTOU, 22},  {SIGIO, 23},   {SIGXCPU, 24}, {SIGXFSZ, 25},
    {SIGVTALRM, 26}, {SIGPROF, 27}, {SIGWINCH, 28}, {SIGUSR1, 30}, {SIGUSR2, 31}, {SIGPWR, 32},
};

constexpr int kGdbRealtime33 = 45; // GDB_SIGNAL_REALTIME_33 .. _63 = 45 .. 75
constexpr int kGdbRealtime32 = 77;
constexpr int kGdbRealtime64 = 78; // _64 .. _127 = 78 .. 141

} // namespace

int gdb_signal_from_host(int host) {
  if (host == 0)
    return 0;
  for (auto p : kFixed)
    if (p.host == host)
      return p.gdb;
  // Real-time signals use their absolute number, as gdb does (SIGRTMIN is 34 with glibc).
  if (host == 32)
    return kGdbRealtime32;
  if (host >= 33 && host <= 63)
    return kGdbRealtime33 + (host - 33);
  if (host == 64)
    return kGdbRealtime64;
  return kGdbSignalUnknown;
}

int host_signal_from_gdb(int gdb) {
  if (gdb == 0)
    return 0;
  for (auto p : kFixed)
    if (p.gdb == gdb)
      return p.host;
  if (gdb == kGdbRealtime32)
    return 32;
  if (gdb >= kGdbRealtime33 && gdb <= kGdbRealtime33 + 30)
    return 33 + (gdb - kGdbRealtime33);
  if (gdb == kGdbRealtime64)
    return 64;
  return 0;
}

const char* host_signal_name(int host) {
  const char* name = sigabbrev_np(host);
  return name ? name : "unknown";
}

} // namespace gdbtrace
