// Host (Linux x86-64) <-> gdb signal numbers (gdb's include/gdb/signals.def).
// The remote protocol always carries gdb numbers; the target uses host numbers.
#pragma once

namespace gdbtrace {

constexpr int kGdbSignalUnknown = 143;
constexpr int kGdbSignalLast = 152;

int gdb_signal_from_host(int host_signal); // kGdbSignalUnknown when unmapped
int host_signal_from_gdb(int gdb_signal);  // 0 when gdb's signal has no host equivalent
const char* host_signal_name(int host_signal);

} // namespace gdbtrace
