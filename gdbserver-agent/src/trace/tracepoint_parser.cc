#include "trace/tracepoint_parser.h"

#include <cerrno>
#include <memory>

namespace gdbtrace {
namespace {

Error bad(std::string text) {
  return make_error(EINVAL, std::move(text));
}

// The verifier's callbacks: the engine's TSV table in, the TSVs used out.
struct VerifyScope {
  const VerifyEnv& env;
  AgentExpr& expr;
};

int tsv_exists_thunk(void* opaque, uint32_t num) {
  auto* scope = static_cast<const VerifyScope*>(opaque);
  return scope->env.tsv_exists ? scope->env.tsv_exists(num) : 1;
}

void note_tsv_thunk(void* opaque, uint32_t num, uint32_t access) {
  auto* scope = static_cast<VerifyScope*>(opaque);
  auto& list = access == AX_TSV_WRITE ? scope->expr.tsvs_written : scope->expr.tsvs_read;
  auto at = std::lower_bound(list.begin(), list.end(), num);
  if (at == list.end() || *at != num)
    list.insert(at, num);
}

} // namespace

Result<AgentExpr> verify_expr(std::vector<uint8_t> code, bool is_condition, const VerifyEnv& env,
                              const std::string& what) {
  AgentExpr expr;
  VerifyScope scope{env, expr};
  auto scratch = std::make_unique<ax_verify_scratch>(); // keeps the per-pc depths
  ax_verify_ctx ctx{};
  ctx.num_regs = env.num_regs;
  ctx.tsv_exists = tsv_exists_thunk;
  ctx.note_tsv = note_tsv_thunk;
  ctx.opaque = &scope;
  ctx.allow_trace_ops = is_condition ? 0 : 1;
  ctx.scratch = scratch.get();
  uint32_t err_pc = 0;
  int rc = ax_verify(code.data(), uint32_t(code.size()), &ctx, &expr.info, &err_pc);
  if (rc != AX_OK)
    return bad(what + ": bytecode rejected: " + ax_strerror(rc) + " at byte " +
               std::to_string(err_pc));
  expr.depth.resize(code.size());
  for (uint32_t pc = 0; pc < code.size(); pc++)
    expr.depth[pc] = int16_t(ax_depth_before(scratch.get(), pc));
  expr.code = std::move(code);
  return expr;
}

} // namespace gdbtrace
