#include "server/breakpoints.h"

namespace gdbtrace {

bool BreakpointTable::contains(Pid pid, int type, uint64_t address) const {
  return entries_.count({pid, type, address}) != 0;
}

const GdbBreakpoint* BreakpointTable::find(Pid pid, int type, uint64_t address) const {
  auto it = entries_.find({pid, type, address});
  return it == entries_.end() ? nullptr : &it->second;
}

GdbBreakpoint* BreakpointTable::find(Pid pid, int type, uint64_t address) {
  auto it = entries_.find({pid, type, address});
  return it == entries_.end() ? nullptr : &it->second;
}

void BreakpointTable::add(Pid pid, int type, uint64_t address, GdbBreakpoint bp) {
  entries_[{pid, type, address}] = std::move(bp);
}

void BreakpointTable::remove(Pid pid, int type, uint64_t address) {
  entries_.erase({pid, type, address});
}

void BreakpointTable::remove_process(Pid pid) {
  std::erase_if(entries_, [pid](const auto& e) { return std::get<0>(e.first) == pid; });
}

const GdbBreakpoint* BreakpointTable::find_conditional(Pid pid, uint64_t address) const {
  for (int type : {0, 1}) {
    auto it = entries_.find({pid, type, address});
    if (it != entries_.end() && (!it->second.conditions.empty() || !it->second.commands.empty()))
      return &it->second;
  }
  return nullptr;
}

Result<AgentExpr> verify_breakpoint_expr(const std::string& code, unsigned num_regs) {
  AgentExpr expr;
  expr.code.assign(code.begin(), code.end());
  ax_verify_ctx ctx{};
  ctx.num_regs = num_regs;
  ctx.allow_trace_ops = 0;
  uint32_t err_pc = 0;
  int rc = ax_verify(expr.code.data(), static_cast<uint32_t>(expr.code.size()), &ctx, &expr.info,
                     &err_pc);
  if (rc != AX_OK)
    return make_error(EINVAL, std::string("bad agent expression: ") + ax_strerror(rc) +
                                  " at offset " + std::to_string(err_pc));
  return expr;
}

namespace {

// What ax_eval's callbacks need: the stopped thread's registers and memory.
struct EvalContext {
  NativeTarget* target;
  ThreadId thread;
  const RegisterBlock* regs;
  std::string output;
};

int read_reg(void* opaque, uint32_t regno, uint64_t* value) {
  auto* ctx = static_cast<EvalContext*>(opaque);
  if (regno >= GT_NUM_REGS_AVX || !ctx->regs->valid.test(regno))
    return AX_ERR_REG_UNAVAILABLE;
  *value = ctx->regs->get_u64(regno);
  return AX_OK;
}

int read_mem(void* opaque, uint64_t addr, void* buf, uint32_t len) {
  auto* ctx = static_cast<EvalContext*>(opaque);
  auto n = ctx->target->read_memory(ctx->thread.pid, addr,
                                    std::span<uint8_t>(static_cast<uint8_t*>(buf), len));
  return n.ok() && *n == len ? AX_OK : AX_ERR_MEM;
}

int do_printf(void* opaque, const char* fmt, uint32_t fmt_len, uint32_t nargs,
              const uint64_t* args) {
  auto* ctx = static_cast<EvalContext*>(opaque);
  // ax_format processes gdb's raw escapes (\n) and reads %s strings through read_mem.
  std::string buf(8192, '\0');
  int n = ax_format(buf.data(), static_cast<uint32_t>(buf.size()), fmt, fmt_len, nargs, args,
                    read_mem, opaque);
  if (n < 0)
    return n;
  ctx->output.append(buf.data(), static_cast<size_t>(n));
  return AX_OK;
}

int run(const AgentExpr& expr, EvalContext& ctx, uint64_t* result) {
  ax_env env{};
  env.opaque = &ctx;
  env.read_reg = read_reg;
  env.read_mem = read_mem;
  env.printf = do_printf;
  return ax_eval(expr.code.data(), &expr.info, &env, result);
}

} // namespace

BreakpointVerdict evaluate_breakpoint(const GdbBreakpoint& bp, NativeTarget& target,
                                      ThreadId thread, const RegisterBlock& regs) {
  EvalContext ctx{&target, thread, &regs, {}};
  bool triggered = bp.conditions.empty();
  for (const auto& cond : bp.conditions) {
    uint64_t value = 0;
    int rc = run(cond, ctx, &value);
    if (rc != AX_OK || value != 0) {
      triggered = true;
      break;
    }
  }
  BreakpointVerdict verdict;
  if (!triggered) {
    verdict.stop = false;
    return verdict;
  }
  // Commands (dprintf) print and let the thread go on, as gdbserver does:
  // a breakpoint with commands is never reported to gdb.
  for (const auto& cmd : bp.commands) {
    uint64_t ignored = 0;
    int rc = run(cmd, ctx, &ignored);
    if (rc != AX_OK)
      ctx.output += std::string("dprintf failed: ") + ax_strerror(rc) + "\n";
  }
  verdict.stop = bp.commands.empty();
  verdict.output = std::move(ctx.output);
  return verdict;
}

} // namespace gdbtrace
