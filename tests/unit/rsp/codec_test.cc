#include <gtest/gtest.h>

#include <random>

#include "rsp/packet_codec.h"

using namespace gdbtrace::rsp;
using Event = PacketDecoder::Event;

TEST(Codec, Checksum) {
  EXPECT_EQ(checksum("OK"), 0x9a);
  EXPECT_EQ(checksum(""), 0);
  EXPECT_EQ(frame_packet("OK", false), "$OK#9a");
  EXPECT_EQ(frame_packet("OK", false, '%'), "%OK#9a");
}

TEST(Codec, EscapesSpecialBytes) {
  std::string data("a$b#c}d*e", 9);
  std::string escaped = escape_binary(data);
  EXPECT_EQ(escaped, "a}\x04"
                     "b}\x03"
                     "c}]d}\x0a"
                     "e");
  EXPECT_EQ(unescape_binary(escaped), data);
  EXPECT_FALSE(unescape_binary("abc}")); // dangling escape
}

TEST(Codec, EscapeRoundTripAllBytes) {
  std::string all;
  for (int i = 0; i < 256; i++)
    all.push_back(static_cast<char>(i));
  auto esc = escape_binary(all);
  EXPECT_EQ(esc.find('$'), std::string::npos);
  EXPECT_EQ(esc.find('#'), std::string::npos);
  EXPECT_EQ(esc.find('*'), std::string::npos);
  EXPECT_EQ(unescape_binary(esc), all);
}

TEST(Codec, RunLengthMatchesGdbserver) {
  // gdbserver's reply for a register with 6 zero bytes + more zeros: "0*"..."
  EXPECT_EQ(run_length_encode("0000"), "0* "); // 3 repeats -> 3 + 29 = space
  EXPECT_EQ(run_length_encode("000"), "000");  // too short to pay off
  EXPECT_EQ(run_length_encode("c0e6ffffff7f0000"), "c0e6f*\"7f0* ");
  // 7 repeats would give '$' and 6 would give '#': shortened runs instead.
  std::string eight(8, 'a');
  std::string enc = run_length_encode(eight);
  EXPECT_EQ(enc.find('#'), std::string::npos);
  EXPECT_EQ(enc.find('$'), std::string::npos);
  EXPECT_EQ(run_length_decode(enc), eight);
  std::string seven(7, 'b');
  enc = run_length_encode(seven);
  EXPECT_EQ(enc.find('#'), std::string::npos);
  EXPECT_EQ(run_length_decode(enc), seven);
}

TEST(Codec, RunLengthRoundTripRandom) {
  std::mt19937 rng(42);
  for (int iter = 0; iter < 500; iter++) {
    std::string s;
    int n = rng() % 400;
    while (static_cast<int>(s.size()) < n)
      s.append(rng() % 120 + 1, "0fx"[rng() % 3]);
    std::string enc = run_length_encode(s);
    EXPECT_EQ(enc.find_first_of("#$"), std::string::npos);
    EXPECT_EQ(run_length_decode(enc), s) << s;
  }
}

static std::vector<Event> feed(PacketDecoder& d, std::string_view bytes) {
  std::vector<Event> out;
  d.feed(bytes, out);
  return out;
}

TEST(Decoder, PacketsAcksAndInterrupts) {
  PacketDecoder d(100);
  auto ev = feed(d, "+$qC#b4-\x03$?#3f");
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].kind, Event::Ack);
  EXPECT_EQ(ev[1].kind, Event::Packet);
  EXPECT_EQ(ev[1].payload, "qC");
  EXPECT_EQ(ev[2].kind, Event::Nack);
  EXPECT_EQ(ev[3].kind, Event::Interrupt);
  EXPECT_EQ(ev[4].payload, "?");
}

TEST(Decoder, SplitAcrossReads) {
  PacketDecoder d(100);
  EXPECT_TRUE(feed(d, "$q").empty());
  EXPECT_TRUE(feed(d, "C#b").empty());
  auto ev = feed(d, "4");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].payload, "qC");
}

TEST(Decoder, BadChecksum) {
  PacketDecoder d(100);
  auto ev = feed(d, "$qC#00$qC#zz");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, Event::BadChecksum);
  EXPECT_EQ(ev[1].kind, Event::BadChecksum);
}

TEST(Decoder, OversizeIsRejectedNotStored) {
  PacketDecoder d(16);
  std::string big(1000, 'a');
  auto ev = feed(d, frame_packet(big, false) + frame_packet("?", false));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, Event::Oversize);
  EXPECT_EQ(ev[1].kind, Event::Packet);
  EXPECT_EQ(ev[1].payload, "?");
}

TEST(Decoder, DollarRestartsATruncatedPacket) {
  PacketDecoder d(100);
  auto ev = feed(d, "$qSupp$?#3f");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].payload, "?");
}

TEST(Decoder, NoiseBetweenPacketsIgnored) {
  PacketDecoder d(100);
  auto ev = feed(d, "garbage\n$?#3f");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].payload, "?");
}

TEST(Decoder, BinaryPayloadKeptVerbatim) {
  PacketDecoder d(100);
  std::string payload = "X1000,2:" + escape_binary(std::string("\x23\x7d", 2));
  auto ev = feed(d, frame_packet(payload, false));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].payload, payload);
}
