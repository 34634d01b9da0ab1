#include "trace/ax_target.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "trace/collector.h"
#include "trace/frame.h"

namespace gdbtrace {
namespace {

// gdb's printf output per evaluation, as gdbserver bounds it.
constexpr size_t kMaxPrintfOutput = 8192;

AxTargetScope& scope_of(void* opaque) {
  return *static_cast<AxTargetScope*>(opaque);
}

// REGNO is gdb's remote number in the process's layout (i386: eax is 0, its
// value the 32-bit register).
int read_reg(void* opaque, uint32_t regno, uint64_t* value) {
  auto& s = scope_of(opaque);
  RegisterLayout layout = s.target.register_layout(s.pid);
  if (regno >= layout.count() || !layout.valid(s.regs, regno))
    return AX_ERR_REG_UNAVAILABLE;
  uint8_t bytes[16] = {};
  layout.get(s.regs, regno, bytes);
  uint64_t v = 0;
  std::memcpy(&v, bytes, layout.size(regno) < 8 ? layout.size(regno) : 8);
  *value = v;
  return AX_OK;
}

int read_mem(void* opaque, uint64_t addr, void* buf, uint32_t len) {
  auto& s = scope_of(opaque);
  auto r = s.target.read_memory(s.pid, addr, {static_cast<uint8_t*>(buf), len});
  return r && *r == len ? AX_OK : AX_ERR_MEM;
}

int get_tsv(void* opaque, uint32_t num, int64_t* value) {
  auto v = scope_of(opaque).tsvs->get_tsv(num);
  if (!v)
    return AX_ERR_BAD_TSV;
  *value = *v;
  return AX_OK;
}

int set_tsv(void* opaque, uint32_t num, int64_t value) {
  scope_of(opaque).tsvs->set_tsv(num, value);
  return AX_OK;
}

// Like gdbserver: what is readable of the range is collected, tracenz up to
// and including the first NUL.
int trace_mem(void* opaque, uint64_t addr, uint32_t len, int nz) {
  auto& s = scope_of(opaque);
  std::vector<uint8_t> bytes(len);
  auto r = s.target.read_memory(s.pid, addr, bytes);
  if (!r || *r == 0)
    return AX_ERR_MEM;
  bytes.resize(*r);
  if (nz) {
    auto zero = std::find(bytes.begin(), bytes.end(), 0);
    if (zero != bytes.end())
      bytes.erase(zero + 1, bytes.end());
  }
  s.frame->add_memory(addr, bytes);
  return AX_OK;
}

int trace_tsv(void* opaque, uint32_t num) {
  auto& s = scope_of(opaque);
  auto v = s.tsvs->get_tsv(num);
  if (!v)
    return AX_ERR_BAD_TSV;
  s.frame->add_tsv(num, *v);
  return AX_OK;
}

// gdb sends the format text raw (escapes unprocessed): ax_format renders it the
// way gdbserver does, %s strings read through the tracee's memory.
int do_printf(void* opaque, const char* fmt, uint32_t fmt_len, uint32_t nargs,
              const uint64_t* args) {
  char out[kMaxPrintfOutput];
  int n = ax_format(out, sizeof out, fmt, fmt_len, nargs, args, read_mem, opaque);
  if (n < 0)
    return n;
  scope_of(opaque).print(std::string(out, size_t(n)));
  return AX_OK;
}

} // namespace

int ax_eval_on_target(const AgentExpr& expr, AxTargetScope& scope, uint64_t* result) {
  ax_env env{};
  env.opaque = &scope;
  env.read_reg = read_reg;
  env.read_mem = read_mem;
  if (scope.tsvs) {
    env.get_tsv = get_tsv;
    env.set_tsv = set_tsv;
  }
  if (scope.frame) // the VM fails trace ops without these (conditions)
    env.trace_mem = trace_mem;
  if (scope.frame && scope.tsvs)
    env.trace_tsv = trace_tsv;
  if (scope.print)
    env.printf = do_printf;
  return ax_eval(expr.code.data(), &expr.info, &env, result);
}

} // namespace gdbtrace
