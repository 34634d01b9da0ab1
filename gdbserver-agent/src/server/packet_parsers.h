// Parsers for the structured packets gdb sends. Each returns nullopt (or an
// Error) on malformed input; handlers turn that into an error reply.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "target/native_target.h"

namespace gdbtrace {

// Thread ids: "pPID.TID", "pPID" (all threads), "p-1", "-1" (all), "0" (any),
// or a bare "TID" (pid taken from DEFAULT_PID). -1 means all, 0 means any.
std::optional<ThreadId> parse_thread_id(std::string_view text, Pid default_pid);
std::string format_thread_id(ThreadId thread, bool multiprocess);

struct VContAction {
  ResumeKind kind = ResumeKind::Continue;
  int gdb_signal = 0;
  ThreadId thread{-1, -1}; // default: every thread not named elsewhere
  uint64_t range_start = 0, range_end = 0;
};
// "vCont;c;s:p1.2;C05:p1.3;r1000,1010:p1.1;t" (payload after "vCont").
std::optional<std::vector<VContAction>> parse_vcont(std::string_view actions, Pid default_pid);

struct ZPacket {
  bool insert = true;
  int type = 0;
  uint64_t address = 0;
  int kind = 0;
  std::vector<std::string> conditions; // bytecode of each "X len,bytes" condition
  bool persist = false;
  std::vector<std::string> commands; // bytecode of each command (agent dprintf)
};
Result<ZPacket> parse_z_packet(std::string_view packet);

// qSupported:feature+;feature-;name=value — the names gdb marked '+'.
std::set<std::string> parse_qsupported(std::string_view packet);

// vRun;hexprog;hexarg... — program (may be empty) and arguments.
std::optional<std::vector<std::string>> parse_vrun(std::string_view packet);

struct XferRequest {
  std::string object, annex;
  uint64_t offset = 0, length = 0;
};
// qXfer:OBJECT:read:ANNEX:OFFSET,LENGTH
std::optional<XferRequest> parse_qxfer_read(std::string_view packet);

struct MemoryRange {
  uint64_t address = 0, length = 0;
  std::string_view data; // after ':' for M/X
};
// "ADDR,LEN" or "ADDR,LEN:DATA" (the text after the packet letter).
std::optional<MemoryRange> parse_memory_range(std::string_view text, bool with_data);

// Splits S on SEP (keeps empty fields).
std::vector<std::string_view> split(std::string_view s, char sep);

} // namespace gdbtrace
