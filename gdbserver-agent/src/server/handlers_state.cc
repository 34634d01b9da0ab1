// Registers, memory and breakpoints. Reads go through state(): the live
// inferior, or the trace frame selected with tfind (the dispatcher chose);
// the packet table refuses writes while a frame is selected.
#include <cstring>
#include <vector>

#include "common/hex.h"
#include "server/gdb_server.h"
#include "server/packet_parsers.h"
#include "trace/trace_engine.h"

namespace gdbtrace {

// "Enn" with the errno: the only error form gdb accepts for g/p/m.
static std::string enn(const Error& e) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "E%02x", (e.code > 0 && e.code < 256) ? e.code : 1);
  return buf;
}

// Remote register REGNO of LAYOUT (the process's architecture) in hex.
static std::string register_hex(const RegisterBlock& regs, const RegisterLayout& layout,
                                unsigned regno) {
  unsigned size = layout.size(regno);
  if (!layout.valid(regs, regno))
    return std::string(size * 2, 'x'); // <unavailable>
  uint8_t value[16];
  layout.get(regs, regno, value);
  return hex::encode(std::span<const uint8_t>(value, size));
}

GdbServer::Reply GdbServer::handle_read_registers() {
  auto regs = state().registers();
  if (!regs)
    return enn(regs.error());
  RegisterLayout layout = register_layout();
  std::string out;
  for (unsigned r = 0; r < layout.count(); r++)
    out += register_hex(*regs, layout, r);
  return out;
}

GdbServer::Reply GdbServer::handle_write_registers(std::string_view packet) {
  ThreadId t = general_thread();
  if (t.tid <= 0)
    return "E01";
  auto bytes = hex::decode_string(packet.substr(1));
  if (!bytes)
    return "E.malformed G packet";
  RegisterLayout layout = register_layout();
  // gdb always sends the whole block; anything else is a malformed packet.
  if (bytes->size() != layout.bytes())
    return "E.G packet has the wrong size";
  RegisterBlock regs;
  for (unsigned r = 0; r < layout.count(); r++)
    layout.set(regs, r, bytes->data() + layout.offset(r));
  auto w = target_.write_registers(t, regs);
  return w ? "OK" : "E." + w.error().message;
}

GdbServer::Reply GdbServer::handle_read_register(std::string_view packet) {
  RegisterLayout layout = register_layout();
  auto regno = hex::parse_u64(packet.substr(1));
  if (!regno || *regno >= layout.count())
    return "E01";
  auto regs = state().registers();
  if (!regs)
    return enn(regs.error());
  return register_hex(*regs, layout, static_cast<unsigned>(*regno));
}

GdbServer::Reply GdbServer::handle_write_register(std::string_view packet) {
  RegisterLayout layout = register_layout();
  auto eq = packet.find('=');
  if (eq == std::string_view::npos)
    return "E.malformed P packet";
  auto regno = hex::parse_u64(packet.substr(1, eq - 1));
  auto value = hex::decode_string(packet.substr(eq + 1));
  if (!regno || *regno >= layout.count() || !value ||
      value->size() != layout.size(static_cast<unsigned>(*regno)))
    return "E.malformed P packet";
  ThreadId t = general_thread();
  if (t.tid <= 0)
    return "E01";
  RegisterBlock regs;
  layout.set(regs, static_cast<unsigned>(*regno), value->data());
  auto w = target_.write_registers(t, regs);
  return w ? "OK" : "E." + w.error().message;
}

GdbServer::Reply GdbServer::handle_read_memory(std::string_view packet) {
  auto range = parse_memory_range(packet.substr(1), false);
  if (!range)
    return "E.malformed m packet";
  // The hex reply must fit in one packet; gdb asks again for the rest.
  uint64_t len = std::min<uint64_t>(range->length, kPacketSize / 2 - 8);
  std::vector<uint8_t> buf(len);
  // In a trace frame, uncollected memory is an error, which gdb shows as <unavailable>.
  auto n = state().read_memory(range->address, buf);
  if (!n)
    return enn(n.error());
  if (*n == 0 && len > 0)
    return "E01";
  return hex::encode(std::span<const uint8_t>(buf.data(), *n));
}

GdbServer::Reply GdbServer::handle_write_memory(std::string_view packet, bool binary) {
  auto range = parse_memory_range(packet.substr(1), true);
  if (!range)
    return "E.malformed memory write packet";
  // X data arrives unescaped (the table's binary_data rows); M data is hex.
  auto data = binary ? std::optional<std::string>(range->data) : hex::decode_string(range->data);
  if (!data || data->size() != range->length)
    return "E.memory write length mismatch";
  if (data->empty())
    return "OK"; // gdb probes X support with a zero-length write
  Pid pid = general_thread().pid;
  if (pid <= 0)
    pid = current_pid();
  if (pid <= 0)
    return "E01";
  auto n = target_.write_memory(
      pid, range->address,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data->data()), data->size()));
  if (!n)
    return enn(n.error());
  return *n == data->size() ? "OK" : "E05";
}

Result<void> GdbServer::make_room_for_kernel_probe(Pid pid, uint64_t address) {
  GdbBreakpoint* bp = breakpoints_.find(pid, 0, address);
  if (!bp || bp->via_debug_register)
    return ok();
  // The debug register goes in first, so the breakpoint never lapses.
  if (auto r = target_.insert_breakpoint(pid, BreakpointType::Hardware, address, 1); !r)
    return make_error(r.error().code, "gdb's breakpoint there (it needs a debug register: " +
                                          r.error().message + ")");
  if (auto r = target_.remove_breakpoint(pid, BreakpointType::Software, address, 1); !r) {
    (void)target_.remove_breakpoint(pid, BreakpointType::Hardware, address, 1);
    return make_error(r.error().code, "gdb's breakpoint there (" + r.error().message + ")");
  }
  bp->via_debug_register = true;
  return ok();
}

// gdb shows only "Could not insert hardware breakpoints" (or "Cannot access
// memory") for a refused Z packet; the reason, a machine that never raises
// debug-register traps, reaches its console at the next resume, once.
void GdbServer::explain_refused_debug_register(const Error& error) {
  if (error.code != ENODEV || told_no_debug_traps_)
    return;
  told_no_debug_traps_ = true;
  console("gdbtrace: " + error.message + "\n");
}

GdbServer::Reply GdbServer::handle_breakpoint(std::string_view packet) {
  auto z = parse_z_packet(packet);
  if (!z)
    return "E." + z.error().message;
  Pid pid = general_thread().pid;
  if (pid <= 0)
    pid = current_pid();
  if (pid <= 0)
    return "E.no process";
  auto type = static_cast<BreakpointType>(z->type);

  if (!z->insert) {
    const GdbBreakpoint* existing = breakpoints_.find(pid, z->type, z->address);
    if (!existing)
      return "E.no breakpoint at this address";
    if (existing->via_debug_register)
      type = BreakpointType::Hardware;
    auto r = target_.remove_breakpoint(pid, type, z->address, z->kind);
    breakpoints_.remove(pid, z->type, z->address);
    return r ? "OK" : "E." + r.error().message;
  }

  GdbBreakpoint bp;
  bp.persist = z->persist;
  if ((!z->conditions.empty() || !z->commands.empty()) && z->type > 1)
    return "E.conditions and commands are only supported on code breakpoints";
  for (const auto& code : z->conditions) {
    auto expr = verify_breakpoint_expr(code, register_layout().count());
    if (!expr)
      return "E." + expr.error().message;
    bp.conditions.push_back(std::move(*expr));
  }
  for (const auto& code : z->commands) {
    auto expr = verify_breakpoint_expr(code, register_layout().count());
    if (!expr)
      return "E." + expr.error().message;
    bp.commands.push_back(std::move(*expr));
  }
  // An in-kernel collector's uprobe owns the int3 at a probed address and
  // would swallow the trap of a software breakpoint there: use a debug
  // register instead (it fires before the instruction, uprobe or not). Where
  // none can hold it (a machine without debug traps, all four in use), the
  // tracepoints there move to the ptrace collector, which shares the int3.
  if (z->type == 0 && engine_ && !breakpoints_.contains(pid, z->type, z->address))
    if (auto conflict = engine_->software_breakpoint_conflict(z->address)) {
      auto r = target_.insert_breakpoint(pid, BreakpointType::Hardware, z->address, z->kind);
      if (r) {
        bp.via_debug_register = true;
        breakpoints_.add(pid, z->type, z->address, std::move(bp));
        return "OK";
      }
      if (auto moved = engine_->move_to_trap_collector(z->address); !moved) {
        explain_refused_debug_register(r.error());
        return "E." + *conflict + " (it needs a debug register: " + r.error().message + "; " +
               moved.error().message + ")";
      }
    }
  // gdb re-sends Z0 for an inserted breakpoint to update its conditions (and
  // after shared libraries load): keep where it lives, or its z0 would later
  // look for an int3 that was never written.
  if (const GdbBreakpoint* existing = breakpoints_.find(pid, z->type, z->address))
    bp.via_debug_register = existing->via_debug_register;
  if (!breakpoints_.contains(pid, z->type, z->address)) {
    auto r = target_.insert_breakpoint(pid, type, z->address, z->kind);
    // "Not supported" is an empty reply: gdb then falls back (e.g. rwatch -> awatch).
    if (!r && (r.error().code == EOPNOTSUPP || r.error().code == ENOSYS))
      return "";
    if (!r) {
      explain_refused_debug_register(r.error());
      return "E." + r.error().message;
    }
  }
  breakpoints_.add(pid, z->type, z->address, std::move(bp));
  return "OK";
}

} // namespace gdbtrace
