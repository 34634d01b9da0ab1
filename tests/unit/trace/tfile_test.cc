// The tfile writer, checked textually and by the real gdb reading what we write.
#include <gtest/gtest.h>

#include <asio.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "../strict_skip.h"
#include "common/hex.h"
#include "fake_target.h"
#include "server/packet_table.h"
#include "server/trace_protocol.h"
#include "trace/ptrace_collector.h"
#include "trace/tfile_writer.h"
#include "trace/trace_engine.h"
#include "trace_test_util.h"

using namespace gdbtrace;

namespace {

std::string run(const std::string& cmd) {
  return gdbtrace::test::run_command(cmd);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

} // namespace

TEST(TfileWriter, HeaderLines) {
  Tracepoint tp;
  tp.number = 2;
  tp.address = 0x401136;
  tp.pass_count = 3;
  tp.action_texts = {"R01", "M-1,2000,4"};
  tp.step_action_texts = {"R01"};
  tp.step_count = 1;
  tp.source = {"*0x401136"};
  tp.source_types = {"at"};
  TfileContents c;
  c.regblock_size = 816;
  c.status.ever_ran = true;
  c.status.reason = TraceStopReason::Requested;
  c.status.frames = 1;
  c.status.created = 1;
  c.status.size = 0x100;
  c.status.free = 0x10;
  c.tsvs.push_back({1, 0, true, "trace_timestamp"});
  c.tracepoints.push_back({&tp, 5, 0x33});
  EXPECT_EQ(tfile_header(c), "\x7fTRACE0\n"
                             "R 330\n"
                             "status 0;tstop::0;tframes:1;tcreated:1;tfree:10;tsize:100\n"
                             "tsv 1:0:1:74726163655f74696d657374616d70\n"
                             "tp T2:401136:E:1:3\n"
                             "tp A2:401136:R01\n"
                             "tp A2:401136:M-1,2000,4\n"
                             "tp S2:401136:R01\n"
                             "tp Z2:401136:at:0:9:2a3078343031313336\n"
                             "tp V2:401136:5:33\n"
                             "\n");
}

// QTSave writes a tfile that a fresh gdb opens with `target tfile` and shows the
// same registers and memory the engine recorded.
TEST(TfileWriter, GdbReadsWhatQtSaveWrites) {
  if (access("/usr/bin/gdb", X_OK) != 0)
    GDBTRACE_SKIP("no-gdb") << "no /usr/bin/gdb";
  asio::io_context io;
  test::FakeTarget target;
  TraceEngine::Hooks hooks;
  hooks.current_pid = [] { return Pid(1); };
  TraceEngine engine(io, target, hooks);
  engine.add_collector(make_ptrace_collector(target));
  TraceProtocol protocol(engine, nullptr);
  PacketTable packets;
  packets.add(protocol.rows());
  uint8_t data[4] = {0xde, 0xad, 0xbe, 0xef};
  target.poke(0x2000, data, 4);
  auto src = [](const char* type, const std::string& s) {
    return std::string("QTDPsrc:1:401000:") + type + ":0:" + hex::u64(s.size()) + ":" +
           hex::encode(s);
  };
  for (std::string p :
       {std::string("QTinit"), std::string("QTDP:1:401000:E:0:0-"),
        std::string("QTDP:-1:401000:R01-"), std::string("QTDP:-1:401000:M-1,2000,4"),
        src("at", "*0x401000"), src("cmd", "collect $regs"),
        src("cmd", "collect *(unsigned char (*)[4]) 0x2000"), src("cmd", "end"),
        std::string("QTStart")})
    ASSERT_EQ(packets.dispatch(p).value_or("?"), "OK") << p;
  for (uint64_t rax : {0x1111, 0x2222}) {
    auto regs = test::make_regs(0x401000);
    regs.set_u64(GT_RAX, rax);
    target.hit(0x401000, regs);
  }
  ASSERT_EQ(packets.dispatch("QTStop").value_or("?"), "OK");
  std::string path = testing::TempDir() + "gdbtrace_tfile_test.tf";
  ASSERT_EQ(packets.dispatch("QTSave:" + hex::encode(path)).value_or("?"), "OK");
  std::string file = slurp(path);
  ASSERT_EQ(file.substr(0, 8), "\x7fTRACE0\n");
  EXPECT_EQ(file.substr(file.size() - 4), std::string(4, '\0'));

  std::string out = run("/usr/bin/gdb -nx -batch /bin/true -ex 'target tfile " + path +
                        "' -ex 'tstatus' -ex 'tfind 1' -ex 'print/x $rax' -ex 'print/x $pc'"
                        " -ex 'x/4xb 0x2000' -ex 'tfind 0' -ex 'print/x $rax' -ex 'tdump' 2>&1");
  EXPECT_NE(out.find("Collected 2 trace frames"), std::string::npos) << out;
  EXPECT_NE(out.find("Found trace frame 1, tracepoint 1"), std::string::npos) << out;
  EXPECT_NE(out.find("$1 = 0x2222"), std::string::npos) << out;
  EXPECT_NE(out.find("$2 = 0x401000"), std::string::npos) << out;
  EXPECT_NE(out.find("0xde\t0xad\t0xbe\t0xef"), std::string::npos) << out;
  EXPECT_NE(out.find("$3 = 0x1111"), std::string::npos) << out;
  EXPECT_NE(out.find("rbx            0x2000"), std::string::npos) << out; // tdump of $regs
  std::remove(path.c_str());
}
