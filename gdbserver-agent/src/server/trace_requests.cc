#include "server/trace_requests.h"

#include <algorithm>
#include <cerrno>

#include "common/hex.h"

namespace gdbtrace {
namespace {

// Longest 'M' action; frames hold 'M' blocks of at most 65535 bytes, so longer
// ranges become several blocks.
constexpr uint64_t kMaxMemoryAction = 16u << 20;

Error bad(std::string text) {
  return make_error(EINVAL, std::move(text));
}

// "N:ADDR:" at the front of S.
bool take_number_and_address(std::string_view& s, uint64_t& number, uint64_t& address) {
  return hex::take_u64(s, number) && hex::take_char(s, ':') && hex::take_u64(s, address) &&
         hex::take_char(s, ':');
}

// "X<len>,<hex>" at the front of S (the 'X' already consumed).
Result<std::vector<uint8_t>> take_bytecode(std::string_view& s) {
  uint64_t len = 0;
  if (!hex::take_u64(s, len) || !hex::take_char(s, ','))
    return bad("malformed agent expression (want X<len>,<bytes>)");
  if (len > AX_MAX_CODE_LEN)
    return bad("agent expression of " + std::to_string(len) + " bytes is over the limit of " +
               std::to_string(AX_MAX_CODE_LEN));
  if (s.size() < len * 2)
    return bad("agent expression shorter than its stated length");
  std::vector<uint8_t> code;
  if (!hex::decode(s.substr(0, len * 2), code))
    return bad("agent expression is not hex");
  s.remove_prefix(len * 2);
  return code;
}

// "R<mask>": gdb prints the mask most significant byte first; we keep bit N = register N.
Result<CollectRegisters> take_register_mask(std::string_view& s, const std::string& what) {
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
  std::reverse(r.mask.begin(), r.mask.end());
  s.remove_prefix(n);
  return r;
}

// "M[-]<basereg>,<offset>,<len>" ('M' consumed); basereg -1 = absolute address.
Result<CollectMemory> take_memory_range(std::string_view& s, const std::string& what,
                                        const VerifyEnv& env) {
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
  if (len == 0 || len > kMaxMemoryAction)
    return bad(what + ": M action length " + std::to_string(len) + " not in 1.." +
               std::to_string(kMaxMemoryAction));
  m.offset = int64_t(offset);
  m.length = uint32_t(len);
  return m;
}

} // namespace

Result<TracepointDefinition> parse_qtdp(std::string_view s, const VerifyEnv& env) {
  TracepointDefinition def;
  Tracepoint& tp = def.tp;
  uint64_t num = 0, addr = 0, step = 0, pass = 0;
  if (!take_number_and_address(s, num, addr))
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
      auto code = take_bytecode(s);
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
    def.more = true;
  if (!s.empty())
    return bad("malformed QTDP: trailing '" + std::string(s) + "'");
  return def;
}

Result<TracepointActions> parse_qtdp_actions(std::string_view s, const VerifyEnv& env) {
  uint64_t num = 0, addr = 0;
  if (!take_number_and_address(s, num, addr))
    return bad("malformed QTDP action packet: want QTDP:-<n>:<addr>:<actions>");
  TracepointActions a;
  a.number = uint32_t(num);
  a.address = addr;
  a.list = parse_action_list(s, a.number, env);
  return a;
}

Result<ActionList> parse_action_list(std::string_view s, uint32_t number, const VerifyEnv& env) {
  ActionList list;
  list.starts_stepping = hex::take_char(s, 'S');
  std::string what = "tracepoint " + std::to_string(number);
  while (!s.empty()) {
    std::string_view start = s;
    char kind = s[0];
    s.remove_prefix(1);
    switch (kind) {
    case 'R': {
      auto r = take_register_mask(s, what);
      if (!r)
        return r.error();
      list.actions.push_back(std::move(*r));
      break;
    }
    case 'M': {
      auto m = take_memory_range(s, what, env);
      if (!m)
        return m.error();
      list.actions.push_back(*m);
      break;
    }
    case 'X': {
      auto code = take_bytecode(s);
      if (!code)
        return bad(what + ": " + code.error().message);
      auto expr = verify_expr(std::move(*code), false, env, what + " action");
      if (!expr)
        return expr.error();
      list.actions.push_back(CollectExpr{std::move(*expr)});
      break;
    }
    case 'L':
      return bad(what + ": static tracepoint data (_sdata) is not supported; "
                        "gdbtrace has no static tracepoints");
    case '-':
      if (!s.empty())
        return bad(what + ": text after the '-' continuation mark");
      list.more = true;
      return list;
    default:
      return bad(what + ": unknown action '" + std::string(1, kind) + "'");
    }
    list.texts.emplace_back(start.substr(0, start.size() - s.size()));
  }
  return list;
}

Result<TracepointSource> parse_qtdpsrc(std::string_view s) {
  TracepointSource src;
  uint64_t num = 0, addr = 0, start = 0, slen = 0;
  if (!take_number_and_address(s, num, addr))
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

Result<TsvDefinition> parse_qtdv(std::string_view s) {
  uint64_t num = 0, value = 0, builtin = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, value) ||
      !hex::take_char(s, ':') || !hex::take_u64(s, builtin) || !hex::take_char(s, ':'))
    return bad("malformed QTDV: want QTDV:<n>:<value>:<builtin>:<name>");
  TsvDefinition tsv;
  if (!hex::decode_string(s, tsv.name))
    return bad("malformed QTDV: name is not hex");
  if (num == 0 || num > 0xffffffffu)
    return bad("trace state variable number out of range");
  tsv.number = uint32_t(num);
  tsv.initial = int64_t(value);
  tsv.builtin = builtin != 0;
  return tsv;
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> parse_qtro(std::string_view s) {
  std::vector<std::pair<uint64_t, uint64_t>> regions;
  while (hex::take_char(s, ':')) {
    uint64_t start = 0, end = 0;
    if (!hex::take_u64(s, start) || !hex::take_char(s, ',') || !hex::take_u64(s, end))
      return bad("malformed QTro: want QTro:<start>,<end>...");
    regions.emplace_back(start, end);
  }
  if (!s.empty())
    return bad("malformed QTro");
  return regions;
}

Result<TracepointRef> parse_tracepoint_ref(std::string_view s, std::string_view packet_name) {
  uint64_t num = 0, addr = 0;
  if (!hex::take_u64(s, num) || !hex::take_char(s, ':') || !hex::take_u64(s, addr))
    return bad("malformed " + std::string(packet_name));
  return TracepointRef{uint32_t(num), addr};
}

Result<FrameQuery> parse_qtframe(std::string_view s) {
  FrameQuery q;
  if (hex::take_prefix(s, "pc:")) {
    q.kind = FrameQuery::Pc;
    if (!hex::take_u64(s, q.a))
      return bad("malformed QTFrame:pc");
  } else if (bool inside = hex::take_prefix(s, "range:");
             inside || hex::take_prefix(s, "outside:")) {
    q.kind = inside ? FrameQuery::InRange : FrameQuery::OutsideRange;
    if (!hex::take_u64(s, q.a) || !hex::take_char(s, ':') || !hex::take_u64(s, q.b))
      return bad("malformed QTFrame range");
  } else if (hex::take_prefix(s, "tdp:")) {
    q.kind = FrameQuery::Tracepoint;
    if (!hex::take_u64(s, q.a))
      return bad("malformed QTFrame:tdp");
  } else {
    if (!hex::take_u64(s, q.a))
      return bad("malformed QTFrame");
    // gdb sends -1 as a 32-bit number: "tfind none".
    q.kind = int32_t(uint32_t(q.a)) == -1 ? FrameQuery::None : FrameQuery::Number;
  }
  return q;
}

Result<bool> parse_hex_flag(std::string_view s, std::string_view packet_name) {
  uint64_t v = 0;
  if (!hex::take_u64(s, v))
    return bad("malformed " + std::string(packet_name));
  return v != 0;
}

Result<std::optional<uint64_t>> parse_qtbuffer_size(std::string_view s) {
  if (s == "-1")
    return std::optional<uint64_t>();
  auto size = hex::parse_u64(s);
  if (!size)
    return bad("malformed QTBuffer:size");
  // Any size parses: the engine clamps what this machine cannot hold, with a console message.
  return std::optional<uint64_t>(*size);
}

Result<TraceNotes> parse_qtnotes(std::string_view s) {
  TraceNotes notes;
  while (!s.empty()) {
    std::optional<std::string>* field = nullptr;
    if (hex::take_prefix(s, "user:"))
      field = &notes.user;
    else if (hex::take_prefix(s, "notes:"))
      field = &notes.notes;
    else if (hex::take_prefix(s, "tstop:"))
      field = &notes.tstop;
    else
      break; // gdbserver ignores fields it does not know
    size_t semi = s.find(';');
    auto value = hex::decode_string(s.substr(0, semi));
    if (!value)
      return bad("malformed QTNotes: not hex");
    *field = std::move(*value);
    s.remove_prefix(semi == std::string_view::npos ? s.size() : semi + 1);
  }
  return notes;
}

Result<std::string> parse_qtsave(std::string_view s) {
  auto path = hex::decode_string(s);
  if (!path || path->empty())
    return bad("malformed QTSave");
  return *path;
}

Result<uint32_t> parse_qtv(std::string_view s) {
  uint64_t num = 0;
  if (!hex::take_u64(s, num))
    return bad("malformed qTV");
  // Numbers beyond 32 bits name no variable: keep them unknown, not truncated.
  return num > 0xffffffffu ? 0u : uint32_t(num);
}

Result<ByteRange> parse_byte_range(std::string_view s, std::string_view what) {
  ByteRange r;
  if (!hex::take_u64(s, r.offset) || !hex::take_char(s, ',') || !hex::take_u64(s, r.length))
    return bad("malformed " + std::string(what));
  return r;
}

} // namespace gdbtrace
