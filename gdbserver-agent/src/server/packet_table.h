// The one table of the packets the server answers. A row names a packet, says
// how its name is matched, whether its reply is raw bytes (escaped here, never
// by a handler) and whether its request carries binary data (unescaped here,
// never by a handler), what qSupported advertises for it and whether it reads or
// writes inferior state (so the dispatcher can pick the live target or the
// selected trace frame once); the handler gets the packet and its arguments.
//
// A family of packets (vFile operations, qXfer objects) is a row per member,
// not one row with a handler that parses the rest again. A new packet is one
// row plus its handler. The qSupported reply is built from
// the rows, so a packet is advertised exactly when it is served.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gdbtrace {

// A reply payload, or nullopt when the reply comes later (a resume in all-stop
// mode answers with the next stop reply) or was already sent.
using Reply = std::optional<std::string>;

struct Packet {
  std::string_view text; // the whole payload, e.g. "QTFrame:pc:401136"
  std::string_view args; // what follows the row's name, e.g. "401136" for "QTFrame:pc:"
};

using PacketHandler = std::function<Reply(const Packet&)>;

struct PacketRow {
  enum class Match { Exact, Prefix };
  // What the packet does with the inferior's registers and memory.
  enum class State { None, Reads, Writes };

  std::string_view name;
  Match match = Match::Exact;
  bool binary_reply = false;
  std::string_view features; // ";"-separated qSupported entries, e.g. "QTBuffer:size+"
  State state = State::None;
  PacketHandler handler;
  // gdb reads this packet's reply with remote_get_noisy_reply, which prints
  // 'O' console packets that come before the reply (most QT*/qT* packets):
  // console text produced while it is handled reaches gdb at once.
  bool console_before_reply = false;
  // The request carries binary data (X, vFile:pwrite, qXfer writes): the table
  // unescapes the packet once, so handlers see raw bytes; a packet that ends in
  // a lone '}' gets BAD_ESCAPE_REPLY without reaching the handler.
  bool binary_request = false;
  std::string_view bad_escape_reply;

  // Rows read as sentences: PacketRow::prefix("vFile:pread:", h).binary(),
  // PacketRow::exact("QTStart", h), PacketRow::prefix("m", h).reads_state().
  static PacketRow exact(std::string_view name, PacketHandler handler) {
    return {name, Match::Exact, false, {}, State::None, std::move(handler), false, false, {}};
  }
  static PacketRow prefix(std::string_view name, PacketHandler handler) {
    return {name, Match::Prefix, false, {}, State::None, std::move(handler), false, false, {}};
  }
  PacketRow advertise(std::string_view qsupported_features) && {
    features = qsupported_features;
    return std::move(*this);
  }
  PacketRow binary() && {
    binary_reply = true;
    return std::move(*this);
  }
  PacketRow binary_data(std::string_view reply_when_malformed) && {
    binary_request = true;
    bad_escape_reply = reply_when_malformed;
    return std::move(*this);
  }
  PacketRow reads_state() && {
    state = State::Reads;
    return std::move(*this);
  }
  PacketRow prints_console() && {
    console_before_reply = true;
    return std::move(*this);
  }
  PacketRow writes_state() && {
    state = State::Writes;
    return std::move(*this);
  }
};

class PacketTable {
public:
  // What the server does around every handler run (pick the live target or the
  // trace frame for rows that read state, refuse writes in a frame, open the
  // console): RUN runs the row's handler. Tests leave it unset.
  using Around = std::function<Reply(const PacketRow& row, const std::function<Reply()>& run)>;

  void add(std::vector<PacketRow> rows);
  void set_around(Around around) { around_ = std::move(around); }

  // The row whose name matches PACKET, the longest name winning (so "QTDP:-"
  // beats "QTDP:", "QThreadEvents:" beats a shorter "QT..." row); nullptr when
  // none does.
  const PacketRow* find(std::string_view packet) const;

  // "f1+;f2+;..." from every row, in table order.
  std::string features() const;

  // find + run (through the Around hook when set): the one dispatch of the
  // server and the tests. The empty "unsupported" reply for an empty packet
  // or one no row matches.
  Reply dispatch(std::string_view packet) const;

  const std::vector<PacketRow>& rows() const { return rows_; }

private:
  // Runs ROW's handler on PACKET (unescaped first for binary_data rows) and
  // finishes the reply: error texts ("E.") lose the characters that would
  // break framing, binary replies are escaped.
  static Reply run(const PacketRow& row, std::string_view packet);

  std::vector<PacketRow> rows_;
  Around around_;
};

} // namespace gdbtrace
