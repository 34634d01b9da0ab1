// The packet table: longest-name matching, qSupported features from the rows,
// and the reply finishing (binary escaping, error texts) that only it does.
#include <gtest/gtest.h>

#include "server/packet_table.h"

using namespace gdbtrace;

namespace {

PacketRow row(std::string_view name, PacketRow::Match match, std::string reply, bool binary = false,
              std::string_view features = "") {
  return {name, match, binary, features, PacketRow::State::None, [reply, name](const Packet& p) {
            return Reply(reply + "|" + std::string(p.args));
          }};
}

} // namespace

TEST(PacketTable, LongestNameWins) {
  using M = PacketRow::Match;
  PacketTable t;
  t.add({row("QTDP:", M::Prefix, "define"), row("QTDP:-", M::Prefix, "actions"),
         row("QThreadEvents:", M::Prefix, "events"), row("qTfP", M::Exact, "first")});
  EXPECT_EQ(t.dispatch("QTDP:1:401000:E:0:0"), "define|1:401000:E:0:0");
  EXPECT_EQ(t.dispatch("QTDP:-1:401000:R01"), "actions|1:401000:R01");
  EXPECT_EQ(t.dispatch("QThreadEvents:1"), "events|1");
  EXPECT_EQ(t.dispatch("qTfP"), "first|");
  EXPECT_EQ(t.dispatch("qTfPx"), "");  // exact rows match only exactly
  EXPECT_EQ(t.dispatch("QTnone"), ""); // unknown: the empty "unsupported" reply
  EXPECT_EQ(t.find("QTnone"), nullptr);
}

TEST(PacketTable, FeaturesComeFromTheRows) {
  using M = PacketRow::Match;
  PacketTable t;
  t.add({row("QTDP:", M::Prefix, "", false, "ConditionalTracepoints+;tracenz+"),
         row("QTStart", M::Exact, ""),
         row("QTBuffer:size:", M::Prefix, "", false, "QTBuffer:size+")});
  EXPECT_EQ(t.features(), "ConditionalTracepoints+;tracenz+;QTBuffer:size+");
}

TEST(PacketTable, OnlyBinaryRowsAreEscapedAndErrorsStayText) {
  using M = PacketRow::Match;
  PacketTable t;
  t.add({{"bin", M::Exact, true, "", PacketRow::State::None,
          [](const Packet&) { return Reply(std::string("m}#$*\0", 6)); }},
         {"text", M::Exact, false, "", PacketRow::State::None,
          [](const Packet&) { return Reply("a}b"); }},
         {"binerr", M::Exact, true, "", PacketRow::State::None,
          [](const Packet&) { return Reply("E.bad # $ } * text"); }},
         {"later", M::Exact, false, "", PacketRow::State::None,
          [](const Packet&) { return Reply(); }}});
  EXPECT_EQ(t.dispatch("bin"), std::string("m}]}\x03}\x04}\x0a\0", 10));
  EXPECT_EQ(t.dispatch("text"), "a}b");
  EXPECT_EQ(t.dispatch("binerr"), "E.bad ? ? ? ? text");
  EXPECT_FALSE(t.dispatch("later")); // the reply comes later (or was sent)
}

TEST(PacketTable, BinaryDataRowsGetTheRequestUnescapedOnce) {
  PacketTable t;
  t.add({PacketRow::prefix("X", [](const Packet& p) {
           return Reply(std::string(p.args));
         }).binary_data("E.bad")});
  EXPECT_EQ(t.dispatch("X10,3:}]}\x03}\x04"), "10,3:}#$");
  EXPECT_EQ(t.dispatch("X10,1:a}"), "E.bad"); // a lone '}' never reaches the handler
}

// The server's dispatch is this one with its Around hook: it sees every row
// that matched, and the handler runs only when the hook runs it.
TEST(PacketTable, AroundHookWrapsEveryHandler) {
  PacketTable t;
  int runs = 0;
  t.add({PacketRow::exact("r",
                          [&](const Packet&) {
                            runs++;
                            return Reply("read");
                          })
             .reads_state(),
         PacketRow::exact("w", [&](const Packet&) {
           runs++;
           return Reply("wrote");
         }).writes_state()});
  t.set_around([](const PacketRow& row, const std::function<Reply()>& run) -> Reply {
    if (row.state == PacketRow::State::Writes)
      return "E.refused";
    return "[" + run().value_or("") + "]";
  });
  EXPECT_EQ(t.dispatch("r"), "[read]");
  EXPECT_EQ(t.dispatch("w"), "E.refused");
  EXPECT_EQ(t.dispatch("x"), ""); // no row: the hook is not asked
  EXPECT_EQ(t.dispatch(""), "");
  EXPECT_EQ(runs, 1);
}
