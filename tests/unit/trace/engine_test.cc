// The trace engine driven packet by packet (through the server's tracepoint
// rows of the packet table, as gdbtrace-server dispatches them), with the real
// ptrace collector and agent-expression VM over a fake target whose trace
// breakpoints the test hits.
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include <asio.hpp>
#include <map>
#include <random>

#include "../strict_skip.h"
#include "common/hex.h"
#include "fake_target.h"
#include "rsp/packet_codec.h"
#include "server/monitor.h"
#include "server/packet_table.h"
#include "server/trace_protocol.h"
#include "trace/frame.h"
#include "trace/ptrace_collector.h"
#include "trace/trace_buffer.h"
#include "trace/trace_engine.h"
#include "trace_test_util.h"

using namespace gdbtrace;
using gdbtrace::test::FakeTarget;
using gdbtrace::test::make_regs;

namespace {

// The whole frame stream, as qTBuffer hands it out.
std::vector<uint8_t> frame_stream(TraceEngine& engine) {
  std::vector<uint8_t> out;
  engine.read_frame_stream(0, engine.frame_stream_size(), [&](std::span<const uint8_t> piece) {
    out.insert(out.end(), piece.begin(), piece.end());
    return true;
  });
  return out;
}

class EngineTest : public gdbtrace::test::TraceTestBase {
protected:
  EngineTest() {
    engine = gdbtrace::test::make_test_engine(io, target, console);
    use_engine(std::move(engine));
  }
  // Drives ENGINE (replacing the fixture's) through the tracepoint rows.
  void use_engine(std::unique_ptr<TraceEngine> e) {
    engine = std::move(e);
    protocol =
        std::make_unique<TraceProtocol>(*engine, [this](const std::string& s) { console += s; });
    packets = PacketTable();
    packets.add(protocol->rows());
  }
  std::string send(std::string_view packet) {
    EXPECT_TRUE(packets.find(packet)) << packet;
    if (!packets.find(packet))
      return "<not handled>";
    auto r = packets.dispatch(packet);
    EXPECT_TRUE(r.has_value()) << packet;
    return r.value_or("<no reply>");
  }
  std::string monitor(const std::string& command) {
    auto r = run_monitor_command(command, engine.get());
    return r.error.empty() ? r.output : "error: " + r.error;
  }
  void define(std::initializer_list<std::string_view> packets) {
    for (auto p : packets)
      ASSERT_EQ(send(p), "OK") << p;
  }
  void settle() {
    io.restart();
    io.poll();
  }
};

// reg 0 (rax); const8 3; equal; end
constexpr const char* kCondRaxIs3 = "X7,26000022031327";

} // namespace

TEST_F(EngineTest, NotOurPacket) {
  EXPECT_FALSE(packets.find("qSupported"));
  EXPECT_FALSE(packets.find("QThreadEvents:1")); // shares "QT" but is the server's
}

TEST_F(EngineTest, SupportedFeatures) {
  EXPECT_EQ(packets.features(), "ConditionalTracepoints+;InstallInTrace+;FastTracepoints+;"
                                "tracenz+;TracepointSource+;EnableDisableTracepoints+;"
                                "DisconnectedTracing+;QTBuffer:size+");
}

TEST_F(EngineTest, UploadReplaysDefinitionsAndSources) {
  define({"QTinit", "QTDV:2:5:0:6d79", std::string("QTDP:1:401000:E:0:3:") + kCondRaxIs3 + "-",
          "QTDP:-1:401000:R01-", "QTDP:-1:401000:M-1,2000,4",
          "QTDPsrc:1:401000:at:0:9:2a3078343031303030",
          "QTDPsrc:1:401000:cmd:0:c:636f6c6c6563742024726178"});
  EXPECT_EQ(send("qTfP"), std::string("T1:401000:E:0:3:") + kCondRaxIs3);
  EXPECT_EQ(send("qTsP"), "A1:401000:R01");
  EXPECT_EQ(send("qTsP"), "A1:401000:M-1,2000,4");
  EXPECT_EQ(send("qTsP"), "Z1:401000:at:0:9:2a3078343031303030");
  EXPECT_EQ(send("qTsP"), "Z1:401000:cmd:0:c:636f6c6c6563742024726178");
  EXPECT_EQ(send("qTsP"), "l");
  EXPECT_EQ(send("qTfV"), "2:5:0:6d79"); // newest first, as gdbserver
  EXPECT_EQ(send("qTsV"), "1:0:1:" + hex::encode("trace_timestamp"));
  EXPECT_EQ(send("qTsV"), "l");
  // Before any run, variables have no value.
  EXPECT_EQ(send("qTV:2"), "U");
}

TEST_F(EngineTest, IdenticalRedefinitionAcceptedDifferentRejected) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01-", "QTDP:-1:401000:SM-1,2000,4",
          "QTDPsrc:1:401000:at:0:1:78"});
  // gdb 13 re-sends the same definition after shared libraries load.
  define({"QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01-", "QTDP:-1:401000:SM-1,2000,4",
          "QTDPsrc:1:401000:at:0:1:78"});
  EXPECT_EQ(send("qTfP"), "T1:401000:E:0:0");
  EXPECT_EQ(send("qTsP"), "A1:401000:R01");
  EXPECT_EQ(send("qTsP"), "S1:401000:M-1,2000,4");
  EXPECT_EQ(send("qTsP"), "Z1:401000:at:0:1:78");
  EXPECT_EQ(send("qTsP"), "l");
  std::string r = send("QTDP:1:401000:E:0:5");
  EXPECT_EQ(r.substr(0, 2), "E.");
  EXPECT_NE(r.find("already defined differently"), std::string::npos);
  ASSERT_EQ(send("QTDP:1:401000:E:0:0-"), "OK");
  EXPECT_EQ(send("QTDP:-1:401000:R03").substr(0, 2), "E.");
}

TEST_F(EngineTest, BadBytecodeIsAnErrorReplyAndAConsoleMessage) {
  define({"QTinit"});
  std::string r = send("QTDP:1:401000:E:0:0:X2,ff27");
  EXPECT_EQ(r.substr(0, 2), "E.");
  EXPECT_NE(r.find("tracepoint 1 condition"), std::string::npos) << r;
  EXPECT_NE(console.find("tracepoint 1 condition"), std::string::npos);
  define({"QTDP:2:401000:E:0:0-"});
  EXPECT_EQ(send("QTDP:-2:401000:L").substr(0, 2), "E.");
  EXPECT_EQ(send("qTfP"), "l"); // the half-defined tracepoint 2 is gone
}

TEST_F(EngineTest, ConditionCollectAndFrameSelection) {
  uint8_t data[4] = {1, 2, 3, 4};
  target.poke(0x2000, data, 4);
  uint8_t ro[2] = {0xaa, 0xbb};
  target.poke(0x3000, ro, 2);
  define({"QTinit", std::string("QTDP:1:401000:E:0:0:") + kCondRaxIs3 + "-", "QTDP:-1:401000:R01-",
          "QTDP:-1:401000:M-1,2000,4", "QTStart"});
  EXPECT_TRUE(engine->running());
  auto regs = make_regs(0x401000);
  EXPECT_FALSE(target.hit(0x401000, regs)); // rax = 0x1000: condition false
  regs.set_u64(GT_RAX, 3);
  EXPECT_FALSE(target.hit(0x401000, regs));
  EXPECT_EQ(send("qTStatus").substr(0, 24), "T1;tnotrun:0;tframes:1;t");
  EXPECT_EQ(send("qTP:1:401000"), "V1:" + hex::u64(6 + 1 + 816 + 1 + 10 + 4));
  ASSERT_EQ(send("QTStop"), "OK");
  EXPECT_FALSE(engine->running());
  EXPECT_TRUE(target.trace_bps.empty()); // traps removed
  EXPECT_EQ(send("qTStatus").substr(0, 23), "T0;tstop::0;tframes:1;t");

  EXPECT_FALSE(engine->frame_selected());
  EXPECT_EQ(send("QTFrame:0"), "F0T1");
  EXPECT_TRUE(engine->frame_selected());
  RegisterBlock fr = engine->frame_registers();
  EXPECT_EQ(fr.get_u64(GT_RAX), 3u);
  EXPECT_EQ(fr.pc(), 0x401000u);
  EXPECT_TRUE(fr.valid.test(GT_RBX));

  uint8_t out[8] = {};
  auto n = engine->frame_memory(0x2000, {out, 8});
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 4u); // only what the block holds; gdb asks again for the rest
  EXPECT_EQ(out[3], 4);
  n = engine->frame_memory(0x2002, {out, 1});
  ASSERT_TRUE(n);
  EXPECT_EQ(out[0], 3);
  // Not collected and not read-only: unavailable.
  EXPECT_FALSE(engine->frame_memory(0x3000, {out, 2}));
  // Starts before a collected block: the gap is unavailable too.
  EXPECT_FALSE(engine->frame_memory(0x1ffe, {out, 4}));
  ASSERT_EQ(send("QTro:3000,3fff"), "OK");
  n = engine->frame_memory(0x3000, {out, 2});
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(out[1], 0xbb);
  EXPECT_EQ(engine->traceframe_info_xml(),
            "<traceframe-info>\n<memory start=\"0x2000\" length=\"0x4\"/>\n</traceframe-info>\n");
  EXPECT_EQ(send("QTFrame:1"), "F-1");
  EXPECT_EQ(send("QTFrame:ffffffff"), "OK");
  EXPECT_FALSE(engine->frame_selected());
}

TEST_F(EngineTest, FrameWithoutRegistersStillHasThePc) {
  uint8_t data[4] = {1, 2, 3, 4};
  target.poke(0x2000, data, 4);
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:M-1,2000,4", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  ASSERT_EQ(send("QTFrame:0"), "F0T1");
  RegisterBlock r = engine->frame_registers();
  EXPECT_TRUE(r.valid.test(GT_RIP));
  EXPECT_EQ(r.pc(), 0x401000u);
  EXPECT_FALSE(r.valid.test(GT_RAX));
}

TEST_F(EngineTest, BufferBytesAreTheFrames) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  target.hit(0x401000, make_regs(0x401000));
  std::string first = send("qTBuffer:0,400");
  ASSERT_EQ(first.size(), 1024u * 2);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(hex::decode(first, bytes));
  EXPECT_EQ(bytes[0], 1);
  EXPECT_EQ(bytes[1], 0);
  EXPECT_EQ(get_le<uint32_t>(&bytes[2]), 817u);
  EXPECT_EQ(bytes[6], 'R');
  std::string rest = send("qTBuffer:400,7d0");
  EXPECT_EQ(rest.size(), (2 * 823 - 1024) * 2u);
  EXPECT_EQ(send("qTBuffer:" + hex::u64(2 * 823) + ",10"), "l");
  EXPECT_EQ(send("qTBuffer:" + hex::u64(2 * 823 + 1) + ",10").substr(0, 2), "E.");
  auto raw = rsp::unescape_binary(send("qGdbtrace.frames:0,10")).value_or("?");
  ASSERT_EQ(raw.size(), 17u);
  EXPECT_EQ(raw[0], 'm');
  EXPECT_EQ(raw.substr(1), std::string(reinterpret_cast<char*>(bytes.data()), 16));
  EXPECT_EQ(send("qGdbtrace.frames:" + hex::u64(823) + ",10000")[0], 'l');
}

TEST_F(EngineTest, PassCountStopsTheRun) {
  define({"QTinit", "QTDP:1:401000:E:0:2-", "QTDP:-1:401000:R01", "QTStart"});
  auto regs = make_regs(0x401000);
  target.hit(0x401000, regs);
  target.hit(0x401000, regs);
  target.hit(0x401000, regs); // a stop is pending: not collected
  settle();
  EXPECT_FALSE(engine->running());
  EXPECT_EQ(send("qTStatus").substr(0, 29), "T0;tpasscount:1;tframes:2;tcr");
}

TEST_F(EngineTest, FullBufferStopsTheRun) {
  define({"QTinit", "QTBuffer:size:400", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  EXPECT_EQ(send("QTBuffer:size:800").substr(0, 2), "E."); // not during a run
  auto regs = make_regs(0x401000);
  target.hit(0x401000, regs); // 823 of 0x400 bytes
  target.hit(0x401000, regs); // full
  settle();
  EXPECT_FALSE(engine->running());
  EXPECT_EQ(send("qTStatus").substr(0, 22), "T0;tfull:0;tframes:1;t");
}

// A size beyond the limit (half the machine's memory, or what set_buffer_limit
// says) is clamped with a console message, not refused.
TEST_F(EngineTest, OversizedBufferIsClampedWithAMessage) {
  engine->set_buffer_limit(1000);
  EXPECT_EQ(send("QTBuffer:size:100000"), "OK");
  EXPECT_NE(console.find("more than half of this machine's memory; using 1000 bytes"),
            std::string::npos)
      << console;
  EXPECT_NE(send("qTStatus").find(";tsize:3e8;"), std::string::npos);
}

// A frame the full buffer refuses is one drop: the engine counts it, the
// ptrace collector does not count it again (it used to, and status showed 2).
TEST_F(EngineTest, FullBufferDropIsCountedOnce) {
  define({"QTinit", "QTBuffer:size:400", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  auto regs = make_regs(0x401000);
  target.hit(0x401000, regs); // 823 of 0x400 bytes
  target.hit(0x401000, regs); // refused: the buffer is full
  settle();
  std::string json;
  ASSERT_TRUE(hex::decode_string(send("qGdbtrace.status"), json));
  EXPECT_NE(
      json.find("\"hits\":2,\"frames\":1,\"bytes\":823,\"drops\":1,\"after_stop\":0,\"errors\":0"),
      std::string::npos)
      << json;
  EXPECT_NE(monitor("gdbtrace status").find("hits 2, frames 1, drops 1, after stop 0, errors 0"),
            std::string::npos);
  EXPECT_EQ(send("qTP:1:401000"), "V2:337"); // hits and frame bytes, hex
}

// Every hit is a frame, a drop or a hit after the stop, in every report: the
// hit after the one the full buffer refused still reaches the trap (the
// engine removes the traps once the callback returns) and is counted as such.
TEST_F(EngineTest, HitsAreFramesDropsOrHitsAfterTheStop) {
  define({"QTinit", "QTBuffer:size:400", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  auto regs = make_regs(0x401000);
  target.hit(0x401000, regs); // 823 of 0x400 bytes
  target.hit(0x401000, regs); // refused: the buffer is full, the stop is pending
  target.hit(0x401000, regs); // before the stop is applied: a hit after the stop
  settle();
  EXPECT_NE(monitor("gdbtrace status").find("hits 3, frames 1, drops 1, after stop 1, errors 0"),
            std::string::npos)
      << monitor("gdbtrace status");
  std::string json;
  ASSERT_TRUE(hex::decode_string(send("qGdbtrace.status"), json));
  EXPECT_NE(json.find("\"hits\":3,\"frames\":1,\"bytes\":823,\"drops\":1,\"after_stop\":1"),
            std::string::npos)
      << json;
  EXPECT_EQ(send("qTStatus").substr(0, 9), "T0;tfull:");
}

// A number with two locations (one QTDP each): each location counts its own
// hits and frames. gdb's `info tracepoints` sums qTP over the locations, so a
// per-number count on each would multiply.
TEST_F(EngineTest, CountsArePerLocation) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTDP:1:402000:E:0:0-",
          "QTDP:-1:402000:R01", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  for (int i = 0; i < 3; i++)
    target.hit(0x402000, make_regs(0x402000));
  EXPECT_EQ(send("qTP:1:401000"), "V1:337");
  EXPECT_EQ(send("qTP:1:402000"), "V3:9a5");
  std::string status = monitor("gdbtrace status");
  EXPECT_NE(status.find("tracepoint 1 at 0x401000: backend ptrace, hits 1, frames 1,"),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("tracepoint 1 at 0x402000: backend ptrace, hits 3, frames 3,"),
            std::string::npos)
      << status;
}

// A frame without an 'R' block shows, as its pc, the location that collected
// it, not the number's first location.
TEST_F(EngineTest, FrameWithoutRegistersShowsItsOwnLocation) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:M-1,500000,4", "QTDP:1:402000:E:0:0-",
          "QTDP:-1:402000:M-1,500000,4", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  target.hit(0x402000, make_regs(0x402000));
  EXPECT_EQ(send("QTFrame:1"), "F1T1");
  EXPECT_EQ(engine->frame_registers().get_u64(GT_RIP), 0x402000u);
  EXPECT_EQ(send("QTFrame:pc:401000"), "F-1"); // searching forward from frame 1
  EXPECT_EQ(send("QTFrame:0"), "F0T1");
  EXPECT_EQ(engine->frame_registers().get_u64(GT_RIP), 0x401000u);
}

// gdb sends the upload and frame packets in a fixed order, but a hostile or
// confused client need not: every one answers sanely on its own.
TEST_F(EngineTest, PacketsOutOfOrderAnswerSanely) {
  // Fresh engine, nothing asked before: {packet, reply or its first two characters}.
  const std::pair<const char*, const char*> fresh[] = {
      {"qTsV", "l"}, // no qTfV before it (this crashed the server)
      {"qTsP", "l"},
      {"qTsV", "l"},
      {"QTFrame:0", "F-1"},
      {"QTFrame:pc:401000", "F-1"},
      {"qTV:1", "U"},
      {"qTBuffer:0,10", "l"},
      {"qTP:1:401000", "E."},
      {"QTDP:-1:401000:R01", "E."}, // actions before the definition
      {"QTDPsrc:1:401000:at:0:1:61", "E."},
      {"QTEnable:1:401000", "E."},
      {"QTStop", "OK"},
      {"qTfSTM", "E."},
      {"qTsSTM", "E."},
  };
  for (auto [packet, want] : fresh) {
    std::string reply = send(packet);
    EXPECT_EQ(std::string_view(want) == "E." ? reply.substr(0, 2) : reply, want) << packet;
  }

  // An upload interrupted by QTinit continues from its snapshot, then ends.
  define({"QTDV:2:5:0:6d79", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01"});
  EXPECT_EQ(send("qTfV"), "2:5:0:6d79");
  EXPECT_EQ(send("qTfP").substr(0, 9), "T1:401000");
  ASSERT_EQ(send("QTinit"), "OK");
  EXPECT_EQ(send("qTsV"), "l"); // QTinit ended the upload
  EXPECT_EQ(send("qTsP"), "l");
  define({"QTDV:2:5:0:6d79"});
  EXPECT_EQ(send("qTfV").substr(0, 1), "2");
  define({"QTDV:3:0:0:6e"}); // defined mid-upload: not in this upload's snapshot
  EXPECT_EQ(send("qTsV"), "1:0:1:" + hex::encode("trace_timestamp"));
  EXPECT_EQ(send("qTsV"), "l");
  EXPECT_EQ(send("qTsV"), "l"); // past the end stays at the end
}

TEST_F(EngineTest, CircularBufferKeepsNewest) {
  define({"QTinit", "QTBuffer:size:1000", "QTBuffer:circular:1", "QTDP:1:401000:E:0:0-",
          "QTDP:-1:401000:R01", "QTStart"});
  for (int i = 0; i < 10; ++i) {
    auto regs = make_regs(0x401000);
    regs.set_u64(GT_RAX, i);
    target.hit(0x401000, regs);
  }
  settle();
  EXPECT_TRUE(engine->running());
  std::string st = send("qTStatus");
  EXPECT_NE(st.find("tframes:4;tcreated:a;"), std::string::npos) << st;
  EXPECT_NE(st.find("circular:1"), std::string::npos);
  ASSERT_EQ(send("QTFrame:0"), "F0T1");
  EXPECT_EQ(engine->frame_registers().get_u64(GT_RAX), 6u);
}

TEST_F(EngineTest, TsvArithmeticTevalAndTracev) {
  // teval $x = $x + 1: getv 2; const8 1; add; setv 2; pop; end
  // collect $x:        tracev 2; end
  define({"QTinit", "QTDV:2:5:0:78", "QTDP:1:401000:E:0:0-",
          "QTDP:-1:401000:XB,2c00022201022d00022927-", "QTDP:-1:401000:X4,2e000227", "QTStart"});
  EXPECT_EQ(send("qTV:2"), "V5");
  for (int i = 0; i < 3; ++i)
    target.hit(0x401000, make_regs(0x401000));
  EXPECT_EQ(send("qTV:2"), "V8");
  ASSERT_EQ(send("QTFrame:0"), "F0T1");
  EXPECT_EQ(send("qTV:2"), "V6"); // the value the first frame recorded
  EXPECT_EQ(engine->traceframe_info_xml(),
            "<traceframe-info>\n<tvar id=\"2\"/>\n</traceframe-info>\n");
  EXPECT_EQ(send("qTV:1"), "U"); // not collected in this frame
  ASSERT_EQ(send("QTFrame:ffffffff"), "OK");
  // $trace_timestamp reads the clock.
  EXPECT_NE(send("qTV:1"), "V0");
  ASSERT_EQ(send("QTStop"), "OK");
  EXPECT_EQ(send("qTV:2"), "V8"); // last value stays readable after the run
}

TEST_F(EngineTest, NegativeTsvValue) {
  define({"QTinit", "QTDV:2:fffffffffffffffe:0:78", "QTDP:1:401000:E:0:0-",
          "QTDP:-1:401000:X4,2e000227", "QTStart"});
  EXPECT_EQ(send("qTV:2"), "Vfffffffffffffffe");
}

TEST_F(EngineTest, AgentPrintfReachesConsole) {
  // const8 7 (arg); const8 0 (channel); const8 0 (function); printf 1 "hi %d\n"; end
  define({"QTinit", "QTDP:1:401000:E:0:0-",
          "QTDP:-1:401000:X12,2207220022003401000768692025640a0027", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  EXPECT_NE(console.find("hi 7\n"), std::string::npos) << console;
}

TEST_F(EngineTest, AgentPrintfEscapesAndStrings) {
  // gdb sends the format raw: "%s=%d\n" with a backslash-n; %s reads the tracee.
  const char name[] = "count";
  target.poke(0x3000, name, sizeof name);
  // const8 42; const32 0x3000 (gdb pushes the last argument first); const8 0 (channel);
  // const8 0 (function); printf nargs=2, u16 length, "%s=%d\\n" NUL; end
  std::string fmt = "%s=%d\\n";
  std::string code = "222a"
                     "2400003000"
                     "2200"
                     "2200"
                     "3402"
                     "00" +
                     hex::encode(std::string(1, char(fmt.size() + 1))) + hex::encode(fmt) + "00" +
                     "27";
  define({"QTinit", "QTDP:1:401000:E:0:0-",
          "QTDP:-1:401000:X" + hex::u64(code.size() / 2) + "," + code, "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  EXPECT_NE(console.find("count=42\n"), std::string::npos) << console;
}

TEST_F(EngineTest, WhileSteppingCollectsEachStep) {
  define(
      {"QTinit", "QTDP:3:402000:E:2:0-", "QTDP:-3:402000:R01-", "QTDP:-3:402000:SR01", "QTStart"});
  EXPECT_TRUE(target.hit(0x402000, make_regs(0x402000)));     // step once more
  EXPECT_TRUE(target.hit(0x402000, make_regs(0x402004), 1));  // and again
  EXPECT_FALSE(target.hit(0x402000, make_regs(0x402008), 2)); // done
  EXPECT_NE(send("qTStatus").find("tframes:3;"), std::string::npos);
  // tfind pc / range / outside / tracepoint walk forward from the current frame.
  EXPECT_EQ(send("QTFrame:pc:402004"), "F1T3");
  EXPECT_EQ(send("QTFrame:pc:402004"), "F-1");
  EXPECT_EQ(send("QTFrame:ffffffff"), "OK");
  EXPECT_EQ(send("QTFrame:range:402001:402008"), "F1T3");
  EXPECT_EQ(send("QTFrame:range:402001:402008"), "F2T3");
  EXPECT_EQ(send("QTFrame:ffffffff"), "OK");
  EXPECT_EQ(send("QTFrame:outside:402001:402008"), "F0T3");
  EXPECT_EQ(send("QTFrame:outside:402001:402008"), "F-1");
  EXPECT_EQ(send("QTFrame:tdp:3"), "F1T3");
  EXPECT_EQ(send("QTFrame:tdp:4"), "F-1");
  EXPECT_EQ(engine->frame_registers().pc(), 0x402004u);
}

TEST_F(EngineTest, EnableDisableDuringRun) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  auto regs = make_regs(0x401000);
  target.hit(0x401000, regs);
  ASSERT_EQ(send("QTDisable:1:401000"), "OK");
  target.hit(0x401000, regs);
  ASSERT_EQ(send("QTEnable:1:401000"), "OK");
  target.hit(0x401000, regs);
  EXPECT_NE(send("qTStatus").find("tframes:2;"), std::string::npos);
  EXPECT_EQ(send("QTEnable:9:401000").substr(0, 2), "E.");
}

TEST_F(EngineTest, TracepointAddedDuringRunIsInstalledAtOnce) {
  define({"QTinit", "QTDP:1:401000:E:0:0", "QTStart"});
  EXPECT_EQ(target.trace_bps.count(0x405000), 0u);
  define({"QTDP:2:405000:E:0:0-"});
  EXPECT_EQ(target.trace_bps.count(0x405000), 0u); // not until its last packet
  define({"QTDP:-2:405000:R01"});
  EXPECT_EQ(target.trace_bps.count(0x405000), 1u);
  target.hit(0x405000, make_regs(0x405000));
  EXPECT_EQ(send("QTFrame:tdp:2"), "F0T2");
}

TEST_F(EngineTest, DisconnectedTracingKeepsRunning) {
  define({"QTinit", "QTDP:1:401000:E:0:0", "QTDisconnected:1", "QTStart"});
  engine->on_disconnect();
  EXPECT_TRUE(engine->running());
  EXPECT_NE(send("qTStatus").find("disconn:1"), std::string::npos);
  define({"QTDisconnected:0"});
  engine->on_disconnect();
  EXPECT_FALSE(engine->running());
  EXPECT_EQ(send("qTStatus").substr(0, 19), "T0;tdisconnected:0;");
}

TEST_F(EngineTest, EvaluationErrorStopsWithTerror) {
  // ref32 of an unmapped address: const32 0xdead0000; ref32; end (no trace)
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:X7,24dead00001927", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  settle();
  EXPECT_FALSE(engine->running());
  std::string st = send("qTStatus");
  EXPECT_EQ(st.substr(0, 10), "T0;terror:") << st;
  EXPECT_NE(st.find(":1;tframes:0;"), std::string::npos) << st;
}

TEST_F(EngineTest, NotesAndStopNote) {
  define({"QTinit", "QTNotes:user:6a6f65;notes:6869;", "QTNotes:tstop:627965;",
          "QTDP:1:401000:E:0:0", "QTStart", "QTStop"});
  std::string st = send("qTStatus");
  EXPECT_EQ(st.substr(0, 19), "T0;tstop:627965:0;t");
  EXPECT_NE(st.find("username:6a6f65;notes:6869:"), std::string::npos) << st;
}

TEST_F(EngineTest, StatusJsonAndMonitor) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  std::string json;
  ASSERT_TRUE(hex::decode_string(send("qGdbtrace.status"), json));
  EXPECT_NE(json.find("\"running\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"number\":1,\"address\":\"0x401000\",\"enabled\":true"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"backend\":\"ptrace\",\"hits\":1,\"frames\":1"), std::string::npos) << json;
  std::string mon = monitor("gdbtrace status");
  EXPECT_NE(mon.find("tracepoint 1 at 0x401000: backend ptrace, hits 1, frames 1"),
            std::string::npos)
      << mon;
  EXPECT_NE(monitor("gdbtrace backend").find("ptrace: "), std::string::npos);
  EXPECT_NE(monitor("gdbtrace backend nosuch").find("no backend 'nosuch'"), std::string::npos);
  EXPECT_NE(monitor("gdbtrace frob").find("gdbtrace: unknown command"), std::string::npos);
  for (const char* help : {"gdbtrace help", "gdbtrace", "gdbtrace frob"}) {
    std::string text = monitor(help);
    for (const char* sub : {"gdbtrace status", "gdbtrace backend", "gdbtrace stacks", "ptrace: "})
      EXPECT_NE(text.find(sub), std::string::npos) << help << ": " << text;
  }
  EXPECT_NE(monitor("gdbtracex").find("error: Unknown gdbtrace command"), std::string::npos);
}

// `monitor gdbtrace stacks on BYTES`: every hit also records the registers
// and the stack from $sp as ordinary 'R' and 'M' blocks, cut where the memory
// ends (no error, no filler); gdb's definition, as uploaded, is unchanged.
TEST_F(EngineTest, StacksAddRegistersAndSnapshotFromSp) {
  EXPECT_EQ(monitor("gdbtrace stacks"), "stacks: off\n");
  EXPECT_NE(monitor("gdbtrace stacks on 10").find("must be 256..65536"), std::string::npos);
  EXPECT_NE(monitor("gdbtrace stacks on lots").find("not a number"), std::string::npos);
  EXPECT_EQ(monitor("gdbtrace stacks on 1024"), "stacks: on, 1024 bytes from $sp per hit\n");
  RegisterBlock regs = make_regs(0x401000);
  uint64_t sp = regs.get_u64(GT_RSP);
  std::vector<uint8_t> stack(700);
  for (size_t i = 0; i < stack.size(); ++i)
    stack[i] = uint8_t(i * 7);
  target.poke(sp, stack.data(), stack.size()); // the "mapping" ends 700 bytes above $sp
  define({"QTinit", "QTDP:1:401000:E:0:0", "QTStart"});
  target.hit(0x401000, regs);
  EXPECT_EQ(send("qTfP"), "T1:401000:E:0:0");
  EXPECT_EQ(send("qTsP"), "l"); // no actions of ours in gdb's definition

  auto frame = frame_stream(*engine);
  FrameView view(frame, GT_REGBLOCK_SIZE_AVX);
  ASSERT_TRUE(view.registers());
  std::vector<uint8_t> snapshot;
  uint64_t next = sp;
  view.for_each([&](const FrameBlock& b) {
    if (b.type == GT_TFRAME_MEM) {
      EXPECT_EQ(b.address, next);
      snapshot.insert(snapshot.end(), b.data, b.data + b.length);
      next += b.length;
    }
    return true;
  });
  EXPECT_EQ(snapshot, stack);
  std::string json;
  ASSERT_TRUE(hex::decode_string(send("qGdbtrace.status"), json));
  EXPECT_NE(json.find("\"stacks\":1024"), std::string::npos) << json;
  EXPECT_NE(json.find("\"errors\":0"), std::string::npos) << json; // the cut is no error
  EXPECT_NE(monitor("gdbtrace status").find("stacks: on, 1024 bytes"), std::string::npos);
  EXPECT_EQ(monitor("gdbtrace stacks off"), "stacks: off\n");
}

TEST_F(EngineTest, StacksPacketFraming) {
  define({"QTinit", "QTDP:1:401000:E:0:0", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  target.hit(0x401000, make_regs(0x401000));
  // Stacks were off: the frames have no registers, and say so.
  EXPECT_EQ(send("qGdbtrace.stacks:0,1"), "mF0 T1 nostack\n");
  EXPECT_EQ(send("qGdbtrace.stacks:1,5"), "lF1 T1 nostack\n");
  EXPECT_EQ(send("qGdbtrace.stacks:0,10"), "lF0 T1 nostack\nF1 T1 nostack\n");
  EXPECT_EQ(send("qGdbtrace.stacks:2,1"), "l");
  EXPECT_EQ(send("qGdbtrace.stacks:9,1").substr(0, 2), "E.");
  EXPECT_EQ(send("qGdbtrace.stacks:zz").substr(0, 2), "E.");
}

// qGdbtrace.frames.file: the frame stream written into an empty file the
// plugin made; anything but an existing, empty regular file is refused.
TEST_F(EngineTest, FramesFileWritesOnlyIntoAnEmptyRegularFile) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  std::vector<uint8_t> expected = frame_stream(*engine);
  char path[] = "/tmp/gdbtrace-frames-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string hexpath = hex::encode(std::string(path));
  EXPECT_EQ(send("qGdbtrace.frames.file:0;" + hexpath), "F" + hex::u64(expected.size()));
  std::vector<uint8_t> got(expected.size() + 1);
  EXPECT_EQ(pread(fd, got.data(), got.size(), 0), ssize_t(expected.size()));
  got.resize(expected.size());
  EXPECT_EQ(got, expected);
  // Now it is not empty: refused, and left as it is.
  EXPECT_EQ(send("qGdbtrace.frames.file:0;" + hexpath).substr(0, 2), "E.");
  std::string link = std::string(path) + ".link";
  ASSERT_EQ(symlink(path, link.c_str()), 0);
  EXPECT_EQ(send("qGdbtrace.frames.file:0;" + hex::encode(link)).substr(0, 2), "E.");
  unlink(link.c_str());
  close(fd);
  unlink(path);
  EXPECT_EQ(send("qGdbtrace.frames.file:0;" + hexpath).substr(0, 2), "E."); // gone: no create
  EXPECT_EQ(send("qGdbtrace.frames.file:0").substr(0, 2), "E.");
  EXPECT_EQ(send("qGdbtrace.frames.file:zz;2f").substr(0, 2), "E.");
  EXPECT_EQ(send("qGdbtrace.frames.file:ffff;" + hexpath).substr(0, 2), "E.");
}

// Hits count per run, as gdbserver's do (reset at tstart), and stay readable after tstop.
TEST_F(EngineTest, HitsAreCountedPerRun) {
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  target.hit(0x401000, make_regs(0x401000));
  target.hit(0x401000, make_regs(0x401000));
  ASSERT_EQ(send("QTStop"), "OK");
  EXPECT_NE(monitor("gdbtrace status").find("tracepoint 1 at 0x401000: backend ptrace, hits 2,"),
            std::string::npos)
      << monitor("gdbtrace status");
  ASSERT_EQ(send("QTStart"), "OK");
  target.hit(0x401000, make_regs(0x401000));
  std::string mon = monitor("gdbtrace status");
  EXPECT_NE(mon.find("tracepoint 1 at 0x401000: backend ptrace, hits 1, frames 1"),
            std::string::npos)
      << mon;
  ASSERT_EQ(send("QTStop"), "OK");
}

// gdb stops sending actions when it cannot compile one ("collect main" in
// gdb.trace/mi-trace-unavailable.exp) and leaves the definition open; like
// gdbserver, the run starts with the actions that arrived, and the console says so.
TEST_F(EngineTest, IncompleteDefinitionRunsWithTheActionsItGot) {
  define({"QTinit", "QTDP:1:401000:E:0:0-"});
  EXPECT_EQ(send("QTStart"), "OK");
  EXPECT_TRUE(engine->running());
  EXPECT_NE(console.find("tracepoint 1: gdb sent no further actions"), std::string::npos)
      << console;
}

TEST_F(EngineTest, StaticTracepointsAreRefused) {
  EXPECT_EQ(send("qTfSTM").substr(0, 2), "E.");
  EXPECT_EQ(send("qTMinFTPILen"), "1");
}

TEST_F(EngineTest, UndefinedTsvRefusedAtStart) {
  // gdb sends QTDV after the tracepoints, so the reference is checked at QTStart.
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:X4,2e000927"});
  std::string r = send("QTStart");
  EXPECT_EQ(r.substr(0, 2), "E.");
  EXPECT_NE(r.find("tracepoint 1 action"), std::string::npos) << r;
  EXPECT_FALSE(engine->running());
  define({"QTDV:9:0:0:79", "QTStart"});
  EXPECT_TRUE(engine->running());
}

namespace {
// A collector like the kernel ones: refuses while-stepping, keeps frames until drained,
// has no FPU registers.
class FakeKernelCollector : public Collector {
public:
  std::vector<std::vector<uint8_t>> pending; // frames of ADDRESS, in hit order
  uint64_t address = 0x401000;               // the location the pending frames were taken at
  TraceContext* ctx = nullptr;
  bool removes_one = false;           // offers uninstall() (kRemovesOneProbe), like eBPF
  std::map<uint32_t, uint64_t> hits;  // per installed tracepoint number (at ADDRESS)
  std::map<uint32_t, uint64_t> drops; // frames a full ring had no room for, likewise
  bool stamps = false;                // kStampsHits: pending_ns[i] is pending[i]'s hit time
  std::vector<uint64_t> pending_ns;
  std::optional<uint64_t> only_at; // takes only tracepoints at this address
  std::string name() const override { return "fakekernel"; }
  unsigned caps() const override {
    return kProbesInKernel | (removes_one ? unsigned(kRemovesOneProbe) : 0u) |
           (stamps ? unsigned(kStampsHits) : 0u);
  }
  Result<void> check(const Tracepoint& tp) const override {
    if (tp.step_count)
      return make_error(EINVAL, "while-stepping needs the ptrace collector");
    if (only_at && tp.address != *only_at)
      return make_error(EINVAL, "not this fake's address");
    return {};
  }
  Result<void> install(Pid, const Tracepoint& tp, TraceContext& c) override {
    ctx = &c;
    std::vector<bool> valid(GT_NUM_REGS_AVX, false);
    for (unsigned i = 0; i <= GT_GS; ++i)
      valid[i] = true;
    c.set_register_availability(tp.number, valid);
    return {};
  }
  Result<void> set_enabled(uint32_t, uint64_t, bool) override { return {}; }
  void remove_all() override {}
  Result<CollectorStats> uninstall(uint32_t tp, uint64_t) override {
    if (!removes_one)
      return Collector::uninstall(tp, 0);
    drain();
    CollectorStats s;
    s.hits = hits[tp];
    hits.erase(tp);
    return s;
  }
  int drains = 0;
  void drain() override {
    ++drains;
    for (size_t i = 0; i < pending.size(); i++) {
      if (stamps)
        ctx->next_hit_time(pending_ns.at(i));
      ctx->append_frame(pending[i], address);
    }
    pending.clear();
    pending_ns.clear();
  }
  CollectorStats stats(uint32_t tp, uint64_t at) const override {
    CollectorStats s;
    if (auto it = hits.find(tp); it != hits.end() && at == address)
      s.hits = it->second;
    if (auto it = drops.find(tp); it != drops.end() && at == address)
      s.drops = it->second;
    return s;
  }
};
} // namespace

class KernelEngineTest : public EngineTest {
protected:
  // A fresh engine with the kernel-like collector, preferred over ptrace when WITH_PTRACE.
  FakeKernelCollector* use_kernel_engine(bool with_ptrace) {
    auto kernel = std::make_unique<FakeKernelCollector>();
    auto* k = kernel.get();
    TraceEngine::Hooks hooks;
    hooks.console = [this](const std::string& s) { console += s; };
    hooks.current_pid = [] { return Pid(1); };
    auto eng = std::make_unique<TraceEngine>(io, target, hooks);
    eng->add_collector(std::move(kernel));
    if (with_ptrace)
      eng->add_collector(make_ptrace_collector(target));
    use_engine(std::move(eng));
    return k;
  }
};

TEST_F(KernelEngineTest, FallbackMessageDrainAndRegisterAvailability) {
  auto* k = use_kernel_engine(true);
  for (auto p : {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTDP:2:402000:E:1:0-",
                 "QTDP:-2:402000:R01-", "QTDP:-2:402000:SR01", "QTStart"})
    ASSERT_EQ(send(p), "OK") << p;
  EXPECT_NE(
      console.find(
          "tracepoint 2: fakekernel: while-stepping needs the ptrace collector; using ptrace"),
      std::string::npos)
      << console;
  EXPECT_EQ(target.trace_bps.count(0x401000), 0u); // tracepoint 1 went to the kernel collector
  EXPECT_EQ(target.trace_bps.count(0x402000), 1u);
  // Collector::caps(), not the name, says whose int3 a gdb breakpoint would collide with.
  auto conflict = engine->software_breakpoint_conflict(0x401000);
  ASSERT_TRUE(conflict);
  EXPECT_NE(conflict->find("fakekernel"), std::string::npos) << *conflict;
  EXPECT_FALSE(engine->software_breakpoint_conflict(0x402000)); // ptrace: the trap is the stub's
  // The kernel collector's frame arrives when the engine drains (qTStatus drains first).
  FrameBuilder f(1);
  auto regs = make_regs(0x401000);
  f.add_registers({regs.bytes.data(), GT_REGBLOCK_SIZE_AVX});
  auto bytes = f.finish();
  k->pending.emplace_back(bytes.begin(), bytes.end());
  EXPECT_NE(send("qTStatus").find("tframes:1;"), std::string::npos);
  ASSERT_EQ(send("QTFrame:0"), "F0T1");
  RegisterBlock r = engine->frame_registers();
  EXPECT_TRUE(r.valid.test(GT_RIP));
  EXPECT_EQ(r.pc(), 0x401000u);
  EXPECT_FALSE(r.valid.test(GT_XMM0)); // the collector said it has no FPU/SSE state
  // While running, the engine also drains by itself once a second (QTFrame does
  // not drain: gdb refuses tfind while a trace runs).
  k->pending.emplace_back(bytes.begin(), bytes.end());
  EXPECT_EQ(send("QTFrame:1"), "F-1");
  io.restart();
  io.run_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(send("QTFrame:1"), "F1T1");
  EXPECT_NE(monitor("gdbtrace backend ptrace").find("backend selection: ptrace"),
            std::string::npos);
}

// Two collectors that stamp their hits (eBPF and the jump pad) drain one after
// the other; their frames are numbered in hit order all the same, as one buffer
// would number them (gdb's trace-break.exp: tfind looks forward from frame 0).
TEST_F(KernelEngineTest, FramesOfTwoStampingCollectorsAreNumberedInHitOrder) {
  auto first = std::make_unique<FakeKernelCollector>();
  auto second = std::make_unique<FakeKernelCollector>();
  auto *a = first.get(), *b = second.get();
  a->only_at = a->address = 0x401000;
  b->only_at = b->address = 0x402000;
  TraceEngine::Hooks hooks;
  hooks.console = [this](const std::string& s) { console += s; };
  hooks.current_pid = [] { return Pid(1); };
  auto eng = std::make_unique<TraceEngine>(io, target, hooks);
  eng->add_collector(std::move(first));
  eng->add_collector(std::move(second));
  use_engine(std::move(eng));
  for (auto p : {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTDP:2:402000:E:0:0-",
                 "QTDP:-2:402000:R01", "QTStart"})
    ASSERT_EQ(send(p), "OK") << p;
  auto frame_of = [](uint16_t tp, uint64_t pc) {
    FrameBuilder f(tp);
    auto regs = make_regs(pc);
    f.add_registers({regs.bytes.data(), GT_REGBLOCK_SIZE_AVX});
    auto bytes = f.finish();
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  };
  auto hit = [&](FakeKernelCollector* c, uint16_t tp, uint64_t ns) {
    c->pending.push_back(frame_of(tp, c->address));
    c->pending_ns.push_back(ns);
  };
  // Without stamps the engine can only keep drain order: a's frames first.
  hit(a, 1, 100);
  hit(b, 2, 200);
  hit(a, 1, 300);
  EXPECT_NE(send("qTStatus").find("tframes:3;"), std::string::npos);
  EXPECT_EQ(send("QTFrame:1"), "F1T1");
  // Stamped, the same hits come out as they hit: 1, 2, 1.
  a->stamps = b->stamps = true;
  hit(a, 1, 1100);
  hit(b, 2, 1200);
  hit(a, 1, 1300);
  hit(b, 2, 1250);
  EXPECT_NE(send("qTStatus").find("tframes:7;"), std::string::npos);
  EXPECT_EQ(send("QTFrame:3"), "F3T1");
  EXPECT_EQ(send("QTFrame:4"), "F4T2");
  EXPECT_EQ(send("QTFrame:5"), "F5T2");
  EXPECT_EQ(send("QTFrame:6"), "F6T1");
  // The held frames were stored like any: the pc of each is its own location's.
  ASSERT_EQ(send("QTFrame:0"), "F0T1");
  EXPECT_EQ(send("QTFrame:pc:402000"), "F2T2"); // the unstamped round: 1, 1, 2
}

// A ptrace hit appends its own frame and leaves the kernel collector's ring
// alone (draining it at every hit cost each ptrace hit in proportion to the
// kernel probes); the kernel frames enter at the next drain, after it.
TEST_F(KernelEngineTest, PtraceHitDoesNotDrainKernelRings) {
  auto* k = use_kernel_engine(true);
  // Tracepoint 2 steps: the kernel collector refuses while-stepping, ptrace takes it.
  for (auto p : {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTDP:2:402000:E:1:0-",
                 "QTDP:-2:402000:R01-", "QTDP:-2:402000:SR01", "QTStart"})
    ASSERT_EQ(send(p), "OK") << p;
  FrameBuilder f(1);
  auto regs = make_regs(0x401000);
  f.add_registers({regs.bytes.data(), GT_REGBLOCK_SIZE_AVX});
  auto bytes = f.finish();
  k->pending.emplace_back(bytes.begin(), bytes.end()); // hit first, still in its ring
  ASSERT_EQ(target.trace_bps.count(0x402000), 1u);     // tracepoint 2 is ptrace's
  target.hit(0x402000, make_regs(0x402000));
  EXPECT_EQ(k->pending.size(), 1u) << "the ptrace hit drained the kernel ring";
  // Buffer order is arrival order: the ptrace frame, then the drained kernel frame.
  EXPECT_NE(send("qTStatus").find("tframes:2;"), std::string::npos);
  EXPECT_EQ(send("QTFrame:0"), "F0T2");
  EXPECT_EQ(send("QTFrame:1"), "F1T1");
}

// gdb's tstatus sends one qTP per location: each drained every kernel
// collector, whose drain costs in proportion to its probes. While the process
// stays stopped (the same stopped_epoch), one drain serves them all.
TEST_F(KernelEngineTest, CountsDrainOnceWhileTheProcessStaysStopped) {
  auto* k = use_kernel_engine(true);
  for (auto p : {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"})
    ASSERT_EQ(send(p), "OK") << p;
  int before = k->drains;
  target.epoch.reset(); // running: every read drains
  send("qTP:1:401000");
  send("qTP:1:401000");
  EXPECT_EQ(k->drains, before + 2);
  target.epoch = 7; // stopped
  send("qTP:1:401000");
  send("qTP:1:401000");
  EXPECT_EQ(k->drains, before + 3);
  // A frame produced before the stop is counted by the first read at this epoch.
  FrameBuilder f(1);
  auto regs = make_regs(0x401000);
  f.add_registers({regs.bytes.data(), GT_REGBLOCK_SIZE_AVX});
  auto bytes = f.finish();
  k->pending.emplace_back(bytes.begin(), bytes.end());
  k->hits[1] = 1;
  target.epoch = 8;                                    // resumed and stopped again
  EXPECT_EQ(send("qTP:1:401000").rfind("V1:", 0), 0u); // hits 1 (hex), then bytes
  EXPECT_EQ(k->drains, before + 4);
  EXPECT_TRUE(k->pending.empty());
}

// A kernel collector's frames (registers 0-23 only) are stored compactly: tfree
// counts the stored bytes, while qTBuffer, the frame selection and its
// registers see the tfile frames the collector handed over, mixed in hit order
// with a ptrace frame stored whole.
TEST_F(KernelEngineTest, CompactFramesReadBackAsTheCollectorsFrames) {
  auto* k = use_kernel_engine(true);
  for (auto p : {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTDP:2:402000:E:1:0-",
                 "QTDP:-2:402000:R01-", "QTDP:-2:402000:SR01", "QTStart"})
    ASSERT_EQ(send(p), "OK") << p;
  std::vector<uint8_t> stream;
  auto kernel_frame = [&](uint64_t rdi) {
    auto regs = make_regs(0x401000);
    regs.set_u64(GT_RDI, rdi);
    std::vector<uint8_t> block(GT_REGBLOCK_SIZE_AVX, 0); // zeros where it has no register
    std::memcpy(block.data(), regs.bytes.data(), gt_reg_offset(GT_GS) + gt_reg_size(GT_GS));
    FrameBuilder f(1);
    f.add_registers(block);
    f.add_memory(0x601000, std::vector<uint8_t>{1, 2, 3});
    auto bytes = f.finish();
    k->pending.emplace_back(bytes.begin(), bytes.end());
    stream.insert(stream.end(), bytes.begin(), bytes.end());
  };
  kernel_frame(7);
  kernel_frame(8);
  k->drain(); // in hit order before the ptrace frame
  target.hit(0x402000, make_regs(0x402000));
  kernel_frame(9);
  std::string status = send("qTStatus"); // drains
  ASSERT_NE(status.find("tframes:4;"), std::string::npos) << status;
  // Three compact frames (6 + 'r' of 24 u64 + 14 of 'M') and one whole ptrace frame.
  size_t whole = stream.size() / 3;
  size_t stored = 3 * (6 + 1 + 24 * 8 + 14);
  std::string hex_stream;
  for (std::string chunk;
       (chunk = send("qTBuffer:" + hex::u64(hex_stream.size() / 2) + ",7d0")) != "l";)
    hex_stream += chunk;
  std::vector<uint8_t> got;
  ASSERT_TRUE(hex::decode(hex_stream, got));
  // The ptrace frame sits between the second and third kernel frame.
  size_t ptrace_size = got.size() - stream.size();
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + long(2 * whole)),
            std::vector<uint8_t>(stream.begin(), stream.begin() + long(2 * whole)));
  EXPECT_EQ(std::vector<uint8_t>(got.end() - long(whole), got.end()),
            std::vector<uint8_t>(stream.end() - long(whole), stream.end()));
  EXPECT_NE(
      status.find("tfree:" + hex::u64(TraceBuffer::kDefaultSize - stored - ptrace_size) + ";"),
      std::string::npos)
      << status;
  // Frame 3 (the third kernel frame): its registers, with the others unavailable.
  ASSERT_EQ(send("QTFrame:3"), "F3T1");
  RegisterBlock r = engine->frame_registers();
  EXPECT_EQ(r.get_u64(GT_RDI), 9u);
  EXPECT_EQ(r.pc(), 0x401000u);
  EXPECT_TRUE(r.valid.test(GT_GS));
  EXPECT_FALSE(r.valid.test(GT_FS_BASE));
  EXPECT_FALSE(r.valid.test(GT_XMM0));
  // The ptrace frame keeps every register.
  ASSERT_EQ(send("QTFrame:2"), "F2T2");
  EXPECT_TRUE(engine->frame_registers().valid.test(GT_XMM0));
}

// Malformed and random packets get an error reply (or are not ours); nothing crashes
// (this suite also runs under ASan/UBSan).
TEST_F(EngineTest, GarbageNeverCrashes) {
  const char* bad[] = {"QTDP:",
                       "QTDP:-",
                       "QTDP:-1",
                       "QTDP:-1:401000",
                       "QTDP:1:401000:E:0:0:X",
                       "QTDP:1:401000:E:0:0:Xffffffff,00",
                       "QTDPsrc:",
                       "QTDPsrc:1:2:at",
                       "QTDV:",
                       "QTDV:1:2:3:zz",
                       "QTro:1",
                       "QTro:1,",
                       "QTEnable:",
                       "QTFrame:",
                       "QTFrame:pc:",
                       "QTFrame:range:1",
                       "QTFrame:tdp:ffffffffffffffffff",
                       "qTP:",
                       "qTV:",
                       "qTBuffer:",
                       "qTBuffer:1",
                       "QTBuffer:size:zz",
                       "QTBuffer:size:ffffffffffffffff",
                       "QTNotes:user:zz;",
                       "QTNotes:user:61",
                       "QTSave:",
                       "QTSave:2f",
                       "qGdbtrace.frames:",
                       "qGdbtrace.frames:1,",
                       "QTDisconnected:",
                       "QTBuffer:circular:"};
  for (const char* p : bad) {
    std::string r = send(p);
    EXPECT_TRUE(r.substr(0, 1) == "E" || r == "OK" || r == "F-1") << p << " -> " << r;
  }
  std::mt19937 rng(7);
  const std::string prefixes[] = {"QTDP:", "QTDP:-1:401000:", "QTFrame:", "qTBuffer:",
                                  "QTro:", "QTNotes:",        "QTDV:",    "qGdbtrace.frames:"};
  define({"QTinit", "QTDP:1:401000:E:0:0-"});
  for (int i = 0; i < 3000; ++i) {
    std::string p = prefixes[rng() % std::size(prefixes)];
    int n = int(rng() % 24);
    for (int k = 0; k < n; ++k)
      p.push_back("0123456789abcdefXRMSL:,-;"[rng() % 25]);
    (void)packets.dispatch(p);
  }
}

// gdb's breakpoint where the kernel collects, and no debug register for it:
// the tracepoints there move to ptrace with their frames and counts, or the
// engine says why not and changes nothing.
TEST_F(KernelEngineTest, TracepointsMoveToTheTrapCollectorOnlyWhenEverythingAllows) {
  auto* k = use_kernel_engine(true);
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  k->hits[1] = 5;
  FrameBuilder f(1);
  auto regs = make_regs(0x401000);
  f.add_registers({regs.bytes.data(), GT_REGBLOCK_SIZE_AVX});
  auto bytes = f.finish();
  k->pending.emplace_back(bytes.begin(), bytes.end());

  auto refused = engine->move_to_trap_collector(0x401000);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("fakekernel removes its probes only all at once"),
            std::string::npos)
      << refused.error().message;
  EXPECT_TRUE(engine->software_breakpoint_conflict(0x401000));
  EXPECT_EQ(target.trace_bps.count(0x401000), 0u);

  k->removes_one = true;
  monitor("gdbtrace backend fakekernel");
  refused = engine->move_to_trap_collector(0x401000);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("chose its collector"), std::string::npos)
      << refused.error().message;
  EXPECT_TRUE(engine->software_breakpoint_conflict(0x401000));
  monitor("gdbtrace backend auto");

  ASSERT_TRUE(engine->move_to_trap_collector(0x401000));
  EXPECT_FALSE(engine->software_breakpoint_conflict(0x401000));
  EXPECT_EQ(target.trace_bps.count(0x401000), 1u);       // the ptrace collector's breakpoint
  EXPECT_TRUE(engine->move_to_trap_collector(0x402000)); // nothing there: nothing to do
  EXPECT_NE(send("qTStatus").find("tframes:1;"), std::string::npos); // drained before the move
  auto report = engine->report();
  ASSERT_EQ(report.tracepoints.size(), 1u);
  EXPECT_EQ(report.tracepoints[0].backend, "ptrace");
  EXPECT_EQ(report.tracepoints[0].note,
            "moved from fakekernel during the run: gdb's breakpoint here needs the int3");
  EXPECT_EQ(console.find("moved"), std::string::npos)
      << console;                            // the status says it, not the console
  EXPECT_EQ(report.tracepoints[0].hits, 5u); // the kernel's hits carried over
}

TEST_F(KernelEngineTest, TracepointsUsingTraceStateVariablesStayInTheKernel) {
  auto* k = use_kernel_engine(true);
  k->removes_one = true;
  // getv $9: the kernel collector keeps $9 for this run; ptrace would start from the initial value.
  define(
      {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:X4,2e000927", "QTDV:9:0:0:79", "QTStart"});
  auto refused = engine->move_to_trap_collector(0x401000);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("trace state variables"), std::string::npos)
      << refused.error().message;
  EXPECT_TRUE(engine->software_breakpoint_conflict(0x401000));
}

TEST_F(KernelEngineTest, MalformedFramesFromACollectorAreRefusedAndCounted) {
  auto* k = use_kernel_engine(false);
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"});
  FrameBuilder good(1);
  auto regs = make_regs(0x401000);
  good.add_registers({regs.bytes.data(), GT_REGBLOCK_SIZE_AVX});
  auto bytes = good.finish();
  std::vector<uint8_t> ok(bytes.begin(), bytes.end());
  std::vector<uint8_t> truncated(ok.begin(), ok.end() - 10); // header says more than there is
  std::vector<uint8_t> bad_tag = ok;
  bad_tag[6] = 'Q'; // no such block
  k->pending = {truncated, bad_tag, ok};
  EXPECT_NE(send("qTStatus").find("tframes:1;"), std::string::npos);
  EXPECT_NE(monitor("gdbtrace status").find("frames 1, drops 0, after stop 0, errors 2"),
            std::string::npos)
      << monitor("gdbtrace status");
}

TEST_F(KernelEngineTest, KernelAndPtraceTracepointsNeverShareAnAddress) {
  use_kernel_engine(true);
  // Tracepoint 2 needs ptrace (while-stepping), at the address the kernel collector probes for
  // tracepoint 1: the uprobe would swallow its trap, so QTStart refuses with the reason.
  define({"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTDP:2:401000:E:1:0-",
          "QTDP:-2:401000:R01-", "QTDP:-2:401000:SR01"});
  std::string reply = send("QTStart");
  EXPECT_EQ(reply.rfind("E.", 0), 0u) << reply;
  EXPECT_NE(
      reply.find("ptrace cannot share the address with tracepoint 1 (collected by fakekernel)"),
      std::string::npos)
      << reply;
  EXPECT_FALSE(engine->running());
  EXPECT_EQ(target.trace_bps.count(0x401000), 0u); // no ptrace int3 under the kernel's probe
}

// Frames a collector dropped (a full ring) leave a marker in the streamed file
// after the frames drained when the drop was seen: a frame of the tracepoint
// holding only $gdbtrace_dropped, the count. gdb reads the file, frame for
// frame; the status line counts the markers.
TEST_F(KernelEngineTest, StreamMarksWhereFramesWereDropped) {
  auto* k = use_kernel_engine(false);
  std::string path =
      testing::TempDir() + "gdbtrace_marker_test_" + std::to_string(getpid()) + ".tf";
  ASSERT_EQ(monitor("gdbtrace stream " + path), "stream: " + path + " (each tstart rewrites it)\n");
  for (auto p : {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTStart"})
    ASSERT_EQ(send(p), "OK") << p;
  auto kernel_frames = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      auto regs = make_regs(0x401000);
      regs.set_u64(GT_RDI, uint64_t(i));
      std::vector<uint8_t> block(GT_REGBLOCK_SIZE_AVX, 0);
      std::memcpy(block.data(), regs.bytes.data(), gt_reg_offset(GT_GS) + gt_reg_size(GT_GS));
      FrameBuilder f(1);
      f.add_registers(block);
      auto bytes = f.finish();
      k->pending.emplace_back(bytes.begin(), bytes.end());
    }
    k->hits[1] = uint64_t(to) + k->drops[1];
  };
  kernel_frames(0, 3);
  send("qTStatus"); // drains: frames 0-2, no drop yet
  kernel_frames(3, 5);
  k->drops[1] = 7;    // the ring was full after frame 4
  usleep(120 * 1000); // past the interval between looks at the drops
  send("qTStatus");   // frames 3, 4, then the marker
  kernel_frames(5, 6);
  ASSERT_EQ(send("QTStop"), "OK");
  std::ifstream f(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  EXPECT_NE(file.find("\ntsv 7fffffff:0:0:" + hex::encode("gdbtrace_dropped") + "\n"),
            std::string::npos);
  EXPECT_NE(file.find(";tframes:7;"), std::string::npos); // 6 frames and the marker
  EXPECT_NE(file.find(";gdbtrace_hits:d;gdbtrace_drops:7;"), std::string::npos);
  EXPECT_NE(file.find(";gdbtrace_drop_markers:1"), std::string::npos);
  // The marker: tracepoint 1, one 'V' block (u32 0x7fffffff, i64 7), after frame 4.
  std::string marker("\x01\x00\x0d\x00\x00\x00V\xff\xff\xff\x7f\x07\0\0\0\0\0\0\0", 19);
  ASSERT_NE(file.find(marker), std::string::npos);
  if (access("/usr/bin/gdb", X_OK) != 0)
    GDBTRACE_SKIP("no-gdb") << "no /usr/bin/gdb";
  std::ofstream(path, std::ios::binary) << file;
  std::string out = gdbtrace::test::run_command(
      "/usr/bin/gdb -nx -batch /bin/true -ex 'target tfile " + path +
      "' -ex tstatus -ex 'tfind 4' -ex 'output $rdi' -ex 'echo \\n' -ex 'tfind 5' "
      "-ex 'output $gdbtrace_dropped' -ex 'echo \\n' -ex 'tfind 6' -ex 'output $rdi' 2>&1");
  std::remove(path.c_str());
  // tcreated counts the frames the collectors made; the buffer (file) holds the marker too.
  EXPECT_NE(out.find("Buffer contains 7 trace frames (of 6 created total)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Found trace frame 4, tracepoint 1\n4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Found trace frame 5, tracepoint 1\n7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Found trace frame 6, tracepoint 1\n5"), std::string::npos) << out;
}
