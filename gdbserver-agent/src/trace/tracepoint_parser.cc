#include "trace/tracepoint_parser.h"

#include <algorithm>
#include <cerrno>
#include <memory>

#include "trace/hex_util.h"

namespace gdbtrace {
namespace {

constexpr uint64_t kMaxMemoryAction = 16u << 20;

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

// "X<len>,<hex>" at the front of S (the 'X' already consumed).
Result<std::vector<uint8_t>> take_bytecode(std::string_view& s, std::string& hex_out) {
  uint64_t len = 0;
  if (!hex::take_u64(s, len) || !hex::take_char(s, ','))
    return bad("malformed agent expression (want X<len>,<bytes>)");
  if (len > AX_MAX_CODE_LEN)
    return bad("agent expression of " + std::to_string(len) + " bytes is over the limit of " +
               std::to_string(AX_MAX_CODE_LEN));
  if (s.size() < len * 2)
    return bad("agent expression shorter than its stated length");
  hex_out = std::string(s.substr(0, len * 2));
  std::vector<uint8_t> code;
  if (!hex::decode(hex_out, code))
    return bad("agent expression is not hex");
  s.remove_prefix(len * 2);
  return code;
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

Result<QtdpHeader> parse_qtdp_header(std::string_view s, const VerifyEnv& env) {
  QtdpHeader h;
  Tracepoint& tp = h.tp;
  uint64_t num = 0, addr = 0, step = 0, pass = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, addr) ||
      !hex::take_char(s, ':'))
    return bad("malformed QTDP: want QTDP:<n>:<addr>:E|D:<step>:<pass>");
  if (num == 0 || num > 0xffff)
    return bad("tracepoint number " + std::to_string(num) + " out of range (1..65535)");
  tp.number = uint32_t(num);
  tp.address = addr;
  if (s.empty() || (s[0] != 'E' && s[0] != 'D'))
    return bad("malformed QTDP: want E or D");
  tp.enabled = s[0] == 'E';
  s.remove_prefix(1);
  if (!hex::take_char(s, ':') || !hex::take_u64(s, step) || !hex::take_char(s, ':') ||
      !hex::take_u64(s, pass))
    return bad("malformed QTDP: want step and pass counts");
  tp.step_count = step;
  tp.pass_count = pass;
  std::string what = "tracepoint " + std::to_string(tp.number);
  while (hex::take_char(s, ':')) {
    if (hex::take_char(s, 'F')) {
      uint64_t len = 0;
      if (!hex::take_u64(s, len))
        return bad("malformed QTDP: F needs a length");
      tp.fast = true;
      tp.fast_min_len = uint32_t(len);
    } else if (hex::take_char(s, 'S')) {
      return bad(what + ": static tracepoints are not supported");
    } else if (hex::take_char(s, 'X')) {
      auto code = take_bytecode(s, h.condition_hex);
      if (!code)
        return code.error();
      auto expr = verify_expr(std::move(*code), true, env, what + " condition");
      if (!expr)
        return expr.error();
      tp.has_condition = true;
      tp.condition = std::move(*expr);
    } else {
      return bad("malformed QTDP: unknown field '" + std::string(s.substr(0, 1)) + "'");
    }
  }
  if (hex::take_char(s, '-'))
    h.more = true;
  if (!s.empty())
    return bad("malformed QTDP: trailing '" + std::string(s) + "'");
  return h;
}

Result<QtdpActions> split_qtdp_actions(std::string_view s) {
  QtdpActions a;
  uint64_t num = 0, addr = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, addr) ||
      !hex::take_char(s, ':'))
    return bad("malformed QTDP action packet: want QTDP:-<n>:<addr>:<actions>");
  a.number = uint32_t(num);
  a.address = addr;
  a.actions = s;
  return a;
}

Result<bool> parse_actions(std::string_view s, bool& stepping, Tracepoint& tp,
                           const VerifyEnv& env) {
  if (hex::take_char(s, 'S'))
    stepping = true;
  std::string what = "tracepoint " + std::to_string(tp.number);
  auto& actions = stepping ? tp.step_actions : tp.actions;
  auto& texts = stepping ? tp.step_action_texts : tp.action_texts;
  while (!s.empty()) {
    std::string_view start = s;
    char kind = s[0];
    s.remove_prefix(1);
    switch (kind) {
    case 'R': {
      size_t n = 0;
      while (n < s.size() && hex::digit(s[n]) >= 0)
        ++n;
      std::string digits(s.substr(0, n));
      if (digits.empty())
        return bad(what + ": R action without a register mask");
      if (digits.size() % 2)
        digits.insert(digits.begin(), '0');
      CollectRegisters r;
      if (!hex::decode(digits, r.mask))
        return bad(what + ": bad register mask");
      // gdb prints the mask most significant byte first; we keep bit N = register N.
      std::reverse(r.mask.begin(), r.mask.end());
      s.remove_prefix(n);
      actions.push_back(std::move(r));
      break;
    }
    case 'M': {
      bool negative = hex::take_char(s, '-');
      uint64_t basereg = 0, offset = 0, len = 0;
      if (!hex::take_u64(s, basereg) || !hex::take_char(s, ',') || !hex::take_u64(s, offset) ||
          !hex::take_char(s, ',') || !hex::take_u64(s, len))
        return bad(what + ": malformed M action (want M<basereg>,<offset>,<len>)");
      CollectMemory m;
      m.basereg = negative ? -int(basereg) : int(basereg);
      if (m.basereg < -1 || m.basereg >= int(env.num_regs))
        return bad(what + ": M action base register " + std::to_string(m.basereg) +
                   " is not a register (0.." + std::to_string(env.num_regs - 1) + ")");
      // Frames hold 'M' blocks of at most 65535 bytes; longer ranges become several blocks.
      if (len == 0 || len > kMaxMemoryAction)
        return bad(what + ": M action length " + std::to_string(len) + " not in 1.." +
                   std::to_string(kMaxMemoryAction));
      m.offset = int64_t(offset);
      m.length = uint32_t(len);
      actions.push_back(m);
      break;
    }
    case 'X': {
      std::string ignored;
      auto code = take_bytecode(s, ignored);
      if (!code)
        return Error{EINVAL, what + ": " + code.error().message};
      auto expr = verify_expr(std::move(*code), false, env, what + " action");
      if (!expr)
        return expr.error();
      actions.push_back(CollectExpr{std::move(*expr)});
      break;
    }
    case 'L':
      return bad(what + ": static tracepoint data (_sdata) is not supported; "
                        "gdbtrace has no static tracepoints");
    case '-':
      if (!s.empty())
        return bad(what + ": text after the '-' continuation mark");
      return true;
    default:
      return bad(what + ": unknown action '" + std::string(1, kind) + "'");
    }
    texts.emplace_back(start.substr(0, start.size() - s.size()));
  }
  return false;
}

Result<QtdpSource> parse_qtdp_source(std::string_view s) {
  QtdpSource src;
  uint64_t num = 0, addr = 0, start = 0, slen = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, addr) ||
      !hex::take_char(s, ':'))
    return bad("malformed QTDPsrc");
  size_t colon = s.find(':');
  if (colon == std::string_view::npos)
    return bad("malformed QTDPsrc: no type");
  src.type = std::string(s.substr(0, colon));
  s.remove_prefix(colon + 1);
  if (!hex::take_u64(s, start) || !hex::take_char(s, ':') || !hex::take_u64(s, slen) ||
      !hex::take_char(s, ':'))
    return bad("malformed QTDPsrc");
  if (!hex::decode_string(s, src.text))
    return bad("malformed QTDPsrc: source is not hex");
  src.number = uint32_t(num);
  src.address = addr;
  return src;
}

} // namespace gdbtrace
