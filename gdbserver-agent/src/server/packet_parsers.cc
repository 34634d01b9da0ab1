#include "server/packet_parsers.h"

#include "common/hex.h"

namespace gdbtrace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// One id component: "-1" (all), or a hex number that fits a pid.
static std::optional<int> parse_id_part(std::string_view text) {
  if (text == "-1")
    return -1;
  auto v = hex::parse_u64(text);
  if (!v || *v > 0x7fffffff)
    return std::nullopt;
  return static_cast<int>(*v);
}

std::optional<ThreadId> parse_thread_id(std::string_view text, Pid default_pid) {
  if (text.empty())
    return std::nullopt;
  if (text[0] == 'p') {
    text.remove_prefix(1);
    auto dot = text.find('.');
    auto pid = parse_id_part(text.substr(0, dot));
    if (!pid)
      return std::nullopt;
    if (dot == std::string_view::npos)
      return ThreadId{*pid, -1};
    auto tid = parse_id_part(text.substr(dot + 1));
    if (!tid)
      return std::nullopt;
    return ThreadId{*pid, *tid};
  }
  auto tid = parse_id_part(text);
  if (!tid)
    return std::nullopt;
  if (*tid == -1)
    return ThreadId{-1, -1};
  if (*tid == 0)
    return ThreadId{0, 0};
  return ThreadId{default_pid, *tid};
}

std::string format_thread_id(ThreadId thread, bool multiprocess) {
  auto part = [](int v) { return v < 0 ? std::string("-1") : hex::u64(static_cast<uint64_t>(v)); };
  if (!multiprocess)
    return part(thread.tid);
  return "p" + part(thread.pid) + "." + part(thread.tid);
}

std::optional<std::vector<VContAction>> parse_vcont(std::string_view text, Pid default_pid) {
  if (text.empty() || text[0] != ';')
    return std::nullopt;
  std::vector<VContAction> actions;
  for (auto item : split(text.substr(1), ';')) {
    if (item.empty())
      return std::nullopt;
    VContAction action;
    std::string_view spec = item, thread;
    if (auto colon = item.find(':'); colon != std::string_view::npos) {
      spec = item.substr(0, colon);
      thread = item.substr(colon + 1);
      auto id = parse_thread_id(thread, default_pid);
      if (!id)
        return std::nullopt;
      action.thread = *id;
    }
    char op = spec[0];
    std::string_view arg = spec.substr(1);
    switch (op) {
    case 'c':
    case 's':
    case 't':
      if (!arg.empty())
        return std::nullopt;
      action.kind = op == 'c'   ? ResumeKind::Continue
                    : op == 's' ? ResumeKind::Step
                                : ResumeKind::Stop;
      break;
    case 'C':
    case 'S': {
      auto sig = hex::parse_u64(arg);
      if (!sig || *sig > 255)
        return std::nullopt;
      action.kind = op == 'C' ? ResumeKind::Continue : ResumeKind::Step;
      action.gdb_signal = static_cast<int>(*sig);
      break;
    }
    case 'r': {
      auto comma = arg.find(',');
      if (comma == std::string_view::npos)
        return std::nullopt;
      auto start = hex::parse_u64(arg.substr(0, comma));
      auto end = hex::parse_u64(arg.substr(comma + 1));
      if (!start || !end)
        return std::nullopt;
      action.kind = ResumeKind::RangeStep;
      action.range_start = *start;
      action.range_end = *end;
      break;
    }
    default:
      return std::nullopt;
    }
    actions.push_back(action);
  }
  return actions;
}

// Parses "X<len>,<hex bytes>" at the front of TEXT, consuming it.
static std::optional<std::string> take_agent_expr(std::string_view& text) {
  if (text.empty() || text[0] != 'X')
    return std::nullopt;
  auto comma = text.find(',');
  if (comma == std::string_view::npos)
    return std::nullopt;
  auto len = hex::parse_u64(text.substr(1, comma - 1));
  if (!len || *len > 0x10000 || text.size() < comma + 1 + *len * 2)
    return std::nullopt;
  auto bytes = hex::decode_string(text.substr(comma + 1, *len * 2));
  if (!bytes)
    return std::nullopt;
  text.remove_prefix(comma + 1 + *len * 2);
  return bytes;
}

Result<ZPacket> parse_z_packet(std::string_view packet) {
  auto bad = [] { return make_error(EINVAL, "malformed breakpoint packet"); };
  ZPacket z;
  if (packet.size() < 2 || (packet[0] != 'Z' && packet[0] != 'z'))
    return bad();
  z.insert = packet[0] == 'Z';
  if (packet[1] < '0' || packet[1] > '4' || packet.size() < 3 || packet[2] != ',')
    return bad();
  z.type = packet[1] - '0';
  std::string_view rest = packet.substr(3);
  auto semi = rest.find(';');
  std::string_view head = rest.substr(0, semi);
  auto comma = head.find(',');
  if (comma == std::string_view::npos)
    return bad();
  auto addr = hex::parse_u64(head.substr(0, comma));
  auto kind = hex::parse_u64(head.substr(comma + 1));
  if (!addr || !kind || *kind > 64)
    return bad();
  z.address = *addr;
  z.kind = static_cast<int>(*kind);
  if (semi == std::string_view::npos)
    return z;

  // Options: ";X..,..X..,.." conditions then ";cmds:P,X..,..X..,..".
  std::string_view opts = rest.substr(semi + 1);
  while (!opts.empty()) {
    if (opts[0] == ';') {
      opts.remove_prefix(1);
    } else if (opts[0] == 'X') {
      auto expr = take_agent_expr(opts);
      if (!expr)
        return make_error(EINVAL, "malformed breakpoint condition");
      z.conditions.push_back(std::move(*expr));
    } else if (opts.substr(0, 5) == "cmds:") {
      opts.remove_prefix(5);
      auto c = opts.find(',');
      if (c == std::string_view::npos)
        return make_error(EINVAL, "malformed breakpoint commands");
      z.persist = opts.substr(0, c) == "1";
      opts.remove_prefix(c + 1);
      while (!opts.empty() && opts[0] == 'X') {
        auto expr = take_agent_expr(opts);
        if (!expr)
          return make_error(EINVAL, "malformed breakpoint command");
        z.commands.push_back(std::move(*expr));
      }
    } else {
      return make_error(EINVAL, "unknown breakpoint option");
    }
  }
  return z;
}

std::set<std::string> parse_qsupported(std::string_view packet) {
  std::set<std::string> features;
  auto colon = packet.find(':');
  if (colon == std::string_view::npos)
    return features;
  for (auto f : split(packet.substr(colon + 1), ';'))
    if (!f.empty() && f.back() == '+')
      features.emplace(f.substr(0, f.size() - 1));
  return features;
}

std::optional<std::vector<std::string>> parse_vrun(std::string_view packet) {
  if (packet.substr(0, 5) != "vRun;")
    return std::nullopt;
  std::vector<std::string> out;
  for (auto part : split(packet.substr(5), ';')) {
    auto decoded = hex::decode_string(part);
    if (!decoded)
      return std::nullopt;
    out.push_back(std::move(*decoded));
  }
  return out;
}

std::optional<XferRequest> parse_qxfer_read(std::string_view packet) {
  // qXfer:object:read:annex:offset,length
  auto parts = split(packet, ':');
  if (parts.size() != 5 || parts[0] != "qXfer" || parts[2] != "read")
    return std::nullopt;
  auto comma = parts[4].find(',');
  if (comma == std::string_view::npos)
    return std::nullopt;
  auto offset = hex::parse_u64(parts[4].substr(0, comma));
  auto length = hex::parse_u64(parts[4].substr(comma + 1));
  if (!offset || !length)
    return std::nullopt;
  return XferRequest{std::string(parts[1]), std::string(parts[3]), *offset, *length};
}

std::optional<MemoryRange> parse_memory_range(std::string_view text, bool with_data) {
  MemoryRange range;
  auto comma = text.find(',');
  if (comma == std::string_view::npos)
    return std::nullopt;
  std::string_view len_text = text.substr(comma + 1);
  if (with_data) {
    auto colon = len_text.find(':');
    if (colon == std::string_view::npos)
      return std::nullopt;
    range.data = len_text.substr(colon + 1);
    len_text = len_text.substr(0, colon);
  }
  auto addr = hex::parse_u64(text.substr(0, comma));
  auto len = hex::parse_u64(len_text);
  if (!addr || !len)
    return std::nullopt;
  range.address = *addr;
  range.length = *len;
  return range;
}

} // namespace gdbtrace
