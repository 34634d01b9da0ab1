#include "server/packet_table.h"

#include <cstring>

#include "rsp/packet_codec.h"

namespace gdbtrace {

void PacketTable::add(std::vector<PacketRow> rows) {
  for (auto& row : rows)
    rows_.push_back(std::move(row));
}

const PacketRow* PacketTable::find(std::string_view packet) const {
  const PacketRow* best = nullptr;
  for (const auto& row : rows_) {
    bool match =
        row.match == PacketRow::Match::Exact ? packet == row.name : packet.starts_with(row.name);
    if (match && (!best || row.name.size() > best->name.size()))
      best = &row;
  }
  return best;
}

std::string PacketTable::features() const {
  std::string out;
  for (const auto& row : rows_)
    if (!row.features.empty())
      out += (out.empty() ? "" : ";") + std::string(row.features);
  return out;
}

Reply PacketTable::run(const PacketRow& row, std::string_view packet) {
  std::string unescaped;
  if (row.binary_request) {
    // Names and headers before the data are hex and punctuation, never '}':
    // unescaping the whole packet leaves them as they are.
    auto raw = rsp::unescape_binary(packet);
    if (!raw)
      return std::string(row.bad_escape_reply);
    unescaped = std::move(*raw);
    packet = unescaped;
  }
  Reply reply = row.handler(Packet{packet, packet.substr(row.name.size())});
  if (!reply)
    return reply;
  if (reply->size() > 2 && reply->compare(0, 2, "E.") == 0) {
    // Error texts travel unescaped: keep framing and run-length characters out.
    for (size_t i = 2; i < reply->size(); i++)
      if (std::strchr("#$*}", (*reply)[i]))
        (*reply)[i] = '?';
    return reply;
  }
  if (row.binary_reply)
    return rsp::escape_binary(*reply);
  return reply;
}

Reply PacketTable::dispatch(std::string_view packet) const {
  const PacketRow* row = packet.empty() ? nullptr : find(packet);
  if (!row)
    return std::string(); // vMustReplyEmpty and anything unknown
  if (!around_)
    return run(*row, packet);
  return around_(*row, [&] { return run(*row, packet); });
}

} // namespace gdbtrace
