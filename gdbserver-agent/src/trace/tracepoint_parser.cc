#include "trace/tracepoint_parser.h"

#include <cerrno>

namespace gdbtrace {
namespace {

Error bad(std::string text) {
  return make_error(EINVAL, std::move(text));
}

int tsv_exists_thunk(void* opaque, uint32_t num) {
  auto* env = static_cast<const VerifyEnv*>(opaque);
  return env->tsv_exists ? env->tsv_exists(num) : 1;
}

} // namespace

Result<AgentExpr> verify_expr(std::vector<uint8_t> code, bool is_condition, const VerifyEnv& env,
                              const std::string& what) {
  ax_verify_ctx ctx{};
  ctx.num_regs = env.num_regs;
  ctx.tsv_exists = tsv_exists_thunk;
  ctx.opaque = const_cast<VerifyEnv*>(&env);
  ctx.allow_trace_ops = is_condition ? 0 : 1;
  AgentExpr expr;
  uint32_t err_pc = 0;
  int rc = ax_verify(code.data(), uint32_t(code.size()), &ctx, &expr.info, &err_pc);
  if (rc != AX_OK)
    return bad(what + ": bytecode rejected: " + ax_strerror(rc) + " at byte " +
               std::to_string(err_pc));
  expr.code = std::move(code);
  return expr;
}

} // namespace gdbtrace
