// `monitor gdbtrace stream FILE`: frames written to a tfile as the run goes,
// checked byte-wise and by the real gdb reading the file (finished, and as a
// killed writer leaves it).
#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <linux/magic.h>
#include <sstream>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <asio.hpp>

#include "../strict_skip.h"
#include "abi/amd64_regs.h"
#include "abi/tframe.h"
#include "common/hex.h"
#include "fake_target.h"
#include "server/monitor.h"
#include "server/packet_table.h"
#include "server/tdesc.h"
#include "server/trace_protocol.h"
#include "trace/ptrace_collector.h"
#include "trace/trace_engine.h"
#include "trace/trace_stream.h"
#include "trace_test_util.h"

using namespace gdbtrace;
using gdbtrace::test::FakeTarget;
using gdbtrace::test::make_regs;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string run(const std::string& cmd) {
  return gdbtrace::test::run_command(cmd);
}

// What gdb says about the tfile PATH after COMMANDS.
std::string gdb_reads(const std::string& path, const std::string& commands) {
  return run("/usr/bin/gdb -nx -batch /bin/true -ex 'target tfile " + path + "' " + commands +
             " 2>&1");
}

class StreamTest : public gdbtrace::test::TraceTestBase {
protected:
  // TDESC: the engine has the server's target description hook, so a
  // streamed file's header can be padded (to a block multiple: direct writes).
  explicit StreamTest(bool tdesc = false) {
    if (tdesc) {
      TraceEngine::Hooks hooks;
      hooks.console = [this](const std::string& s) { console += s; };
      hooks.current_pid = [] { return Pid(1); };
      hooks.target_description = [](const RegisterLayout& layout,
                                    const std::vector<bool>& present) {
        return target_xml(layout, present);
      };
      engine = std::make_unique<TraceEngine>(io, target, hooks);
      engine->add_collector(make_ptrace_collector(target));
    } else {
      engine = gdbtrace::test::make_test_engine(io, target, console);
    }
    protocol =
        std::make_unique<TraceProtocol>(*engine, [this](const std::string& s) { console += s; });
    packets.add(protocol->rows());
    path = testing::TempDir() + "gdbtrace_stream_test_" + std::to_string(getpid()) + ".tf";
  }
  ~StreamTest() override { std::remove(path.c_str()); }
  std::string send(std::string_view packet) {
    return packets.dispatch(packet).value_or("<no reply>");
  }
  std::string monitor(const std::string& command) {
    auto r = run_monitor_command(command, engine.get());
    return r.error.empty() ? r.output : "error: " + r.error;
  }
  // A run of `collect $regs` at 0x401000 in a buffer of BUFFER bytes.
  void start(const char* buffer) {
    for (std::string p : {std::string("QTinit"), std::string("QTBuffer:size:") + buffer,
                          std::string("QTDP:1:401000:E:0:0-"), std::string("QTDP:-1:401000:R01"),
                          std::string("QTStart")})
      ASSERT_EQ(send(p), "OK") << p;
  }
  void hits(int from, int to) {
    for (int i = from; i < to; ++i) {
      auto regs = make_regs(0x401000);
      regs.set_u64(GT_RAX, uint64_t(i));
      target.hit(0x401000, regs);
    }
  }

  std::string path;
};

} // namespace

TEST_F(StreamTest, MonitorCommandIsListedAndShowsTheStream) {
  EXPECT_NE(monitor("gdbtrace help").find("gdbtrace stream [FILE | off]"), std::string::npos);
  EXPECT_EQ(monitor("gdbtrace stream"), "stream: off\n");
  EXPECT_NE(monitor("gdbtrace status").find("stream: off\n"), std::string::npos);
  EXPECT_EQ(monitor("gdbtrace stream /nonexistent-dir/x.tf").substr(0, 33),
            "gdbtrace: stream: cannot create /");
  EXPECT_EQ(monitor("gdbtrace stream"), "stream: off\n");
  std::ofstream(path) << "an earlier run";
  EXPECT_EQ(monitor("gdbtrace stream " + path), "stream: " + path + " (each tstart rewrites it)\n");
  EXPECT_EQ(slurp(path), "an earlier run"); // until tstart
  EXPECT_EQ(monitor("gdbtrace stream off"), "stream: off\n");
}

// A buffer of 2000 bytes holds two 823-byte frames: the run goes on past it,
// the file gets every frame, the buffer the newest, and gdb reads them all.
TEST_F(StreamTest, FileHoldsEveryFrameWhileTheBufferKeepsTheNewest) {
  monitor("gdbtrace stream " + path);
  start("2000");
  EXPECT_EQ(console, ""); // gdb's testsuite expects nothing at tstart
  hits(0, 10);
  EXPECT_TRUE(engine->running());
  engine->stream_settle(); // the status counts the frames the writer has written
  EXPECT_NE(monitor("gdbtrace status").find("stream: " + path + ", writing: 10 frames"),
            std::string::npos)
      << monitor("gdbtrace status");
  hits(10, 20);
  ASSERT_EQ(send("QTStop"), "OK");
  std::string st = send("qTStatus");
  EXPECT_NE(st.find(";tcreated:14;"), std::string::npos) << st;
  uint64_t held = engine->frame_count(); // compact frames: a few fit
  ASSERT_GT(held, 0u);
  ASSERT_LT(held, 20u);
  ASSERT_EQ(send("QTFrame:" + hex::u64(held - 1)), "F" + hex::u64(held - 1) + "T1");
  EXPECT_EQ(engine->frame_registers().get_u64(GT_RAX), 19u);

  std::string file = slurp(path);
  ASSERT_EQ(file.substr(0, 8), "\x7fTRACE0\n");
  EXPECT_NE(file.find(";tframes:14;"), std::string::npos); // 20, in hex
  EXPECT_EQ(file.substr(file.size() - 4), std::string(4, '\0'));
  EXPECT_NE(file.find(";gdbtrace_hits:14;gdbtrace_drops:0;"), std::string::npos);
  StreamReport s = engine->stream_report();
  EXPECT_FALSE(s.writing);
  EXPECT_EQ(s.frames, 20u);
  EXPECT_EQ(s.bytes, file.size());
  if (access("/usr/bin/gdb", X_OK) != 0)
    GTEST_SKIP() << "no /usr/bin/gdb";
  std::string out = gdb_reads(path, "-ex tstatus -ex 'tfind 19' -ex 'print $rax' -ex 'tfind 0' "
                                    "-ex 'print $rax' -ex 'info tracepoints'");
  EXPECT_NE(out.find("Collected 20 trace frames"), std::string::npos) << out;
  EXPECT_NE(out.find("$1 = 19"), std::string::npos) << out;
  EXPECT_NE(out.find("$2 = 0"), std::string::npos) << out;
  EXPECT_NE(out.find("already hit 20 times"), std::string::npos) << out;
}

// What a killed stub leaves (no end marker, the header of the last write):
// gdb reads every frame written; its status names the unfinished run.
TEST_F(StreamTest, KilledWritersFileIsReadableUpToItsLastFrame) {
  monitor("gdbtrace stream " + path);
  start("2000");
  hits(0, 5);
  (void)send("qTStatus"); // drains: the frames so far go to the writer
  engine->stream_settle();
  std::string copy = path + ".killed";
  { std::ofstream(copy, std::ios::binary) << slurp(path); }
  size_t header = slurp(path).find("\n\n") + 2;
  EXPECT_EQ(slurp(copy).size(), header + 5 * 823); // no end marker yet
  ASSERT_EQ(send("QTStop"), "OK");
  if (access("/usr/bin/gdb", X_OK) != 0) {
    std::remove(copy.c_str());
    GTEST_SKIP() << "no /usr/bin/gdb";
  }
  std::string out = gdb_reads(copy, "-ex tstatus -ex 'tfind 4' -ex 'print $rax'");
  std::remove(copy.c_str());
  EXPECT_NE(out.find("Collected 5 trace frames"), std::string::npos) << out;
  EXPECT_NE(out.find("the run had not ended"), std::string::npos) << out;
  EXPECT_NE(out.find("$1 = 4"), std::string::npos) << out;
}

// Streaming turned on during a run takes the frames the buffer holds, and
// turned off ends the file cleanly while the run goes on in the buffer.
TEST_F(StreamTest, OnAndOffDuringARun) {
  start("100000");
  hits(0, 3);
  EXPECT_NE(monitor("gdbtrace stream " + path).find("writing: 3 frames"), std::string::npos);
  hits(3, 5);
  EXPECT_EQ(monitor("gdbtrace stream off"), "stream: off\n");
  hits(5, 7);
  EXPECT_TRUE(engine->running());
  std::string file = slurp(path);
  EXPECT_EQ(file.substr(file.size() - 4), std::string(4, '\0'));
  EXPECT_NE(file.find(hex::encode("streaming stopped by `monitor gdbtrace stream off`")),
            std::string::npos);
  std::string st = send("qTStatus");
  EXPECT_NE(st.find("tframes:7;"), std::string::npos) << st;
  EXPECT_EQ(st.find("circular:1"), std::string::npos) << st;
}

// A write that fails (here the file size limit, as a full disk would) stops
// the stream with a console message; the file is cut back to its last whole
// frame and still ends cleanly, and the run goes on in the buffer.
TEST_F(StreamTest, WriteErrorStopsTheStreamWithoutATornFrame) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  monitor("gdbtrace stream " + path);
  start("400"); // two frames, stored compactly (823 bytes each in the file)
  size_t header = slurp(path).size();
  rlimit small = old;
  small.rlim_cur = header + 823 * 3 + 100; // three whole frames and part of a fourth
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  hits(0, 2);
  (void)send("qTStatus"); // written: two frames
  engine->stream_settle();
  hits(2, 6);
  (void)send("qTStatus"); // four more do not fit
  engine->stream_settle();
  (void)send("qTStatus"); // the writer's error is told at the next flush
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(console.find("gdbtrace: streaming stopped: cannot write " + path), std::string::npos)
      << console;
  size_t at = console.find("holds the first ");
  ASSERT_NE(at, std::string::npos) << console;
  size_t written = std::stoul(console.substr(at + 16));
  EXPECT_GE(written, 2u);
  EXPECT_LE(written, 3u); // the limit leaves room for three
  std::string file = slurp(path);
  EXPECT_EQ(file.size(), header + written * 823 + 4); // whole frames, then the end marker
  EXPECT_EQ(file.substr(file.size() - 4), std::string(4, '\0'));
  EXPECT_NE(monitor("gdbtrace status").find("stopped early: cannot write"), std::string::npos);
  // The buffer, linear again, fills: the run stops as gdb expects.
  hits(6, 9);
  (void)send("qTStatus");
  EXPECT_FALSE(engine->running());
}

// A tracepoint defined during a streamed run goes into the file's header
// before any of its frames, in room the header keeps in tdesc lines. Without
// a target description there is nothing gdb would skip to keep room with: the
// tracepoint is refused with an error gdb shows, so the file never holds a
// frame of a tracepoint its header does not define.
TEST_F(StreamTest, TracepointDefinedDuringTheRunIsRefusedWhenTheHeaderHasNoRoom) {
  monitor("gdbtrace stream " + path);
  start("100000");
  std::string reply = send("QTDP:2:402000:E:0:0");
  EXPECT_EQ(reply.substr(0, 2), "E.") << reply;
  EXPECT_NE(reply.find("no room left"), std::string::npos) << reply;
  EXPECT_NE(console.find("tracepoint 2 at 0x402000 not installed"), std::string::npos) << console;
  hits(0, 2);
  ASSERT_EQ(send("QTStop"), "OK");
  std::string file = slurp(path);
  EXPECT_EQ(file.find("tp T2:"), std::string::npos);
  EXPECT_NE(file.find(";tframes:2;"), std::string::npos);
}

// How many of the COUNT blocks of PATH from AT (a block multiple) the page cache holds.
size_t cached_blocks(const std::string& path, size_t at, size_t count) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  size_t len = count * TraceStream::kBlock;
  void* map = fd < 0 ? MAP_FAILED : mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, off_t(at));
  size_t cached = 0;
  if (map != MAP_FAILED) {
    std::vector<unsigned char> in(count);
    if (mincore(map, len, in.data()) == 0)
      for (unsigned char b : in)
        cached += b & 1;
    munmap(map, len);
  }
  if (fd >= 0)
    close(fd);
  return cached;
}

// Whether PATH's file system keeps files in the page cache itself (tmpfs,
// ramfs: a fresh machine's /tmp is often tmpfs), where an O_DIRECT write
// cannot leave the page cache.
bool memory_backed(const std::string& path) {
  struct statfs fs {};
  return statfs(path.c_str(), &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

class DirectStreamTest : public StreamTest {
protected:
  DirectStreamTest() : StreamTest(true) {}
};

// With a target description the header is padded to whole blocks and frames
// go to the disk with O_DIRECT in whole blocks (so the page cache does not
// hold them); a flush writes the partial block after them directly too,
// padded with zeros (gdb's end marker), and the next write covers that block
// again. After every flush's write the file holds every frame drained, and
// gdb reads a copy taken then (what SIGKILL would leave).
TEST_F(DirectStreamTest, WholeBlocksGoDirectAndTheFileIsReadableAtEveryFlush) {
  monitor("gdbtrace stream " + path);
  start("100000"); // holds the run: the stream is written at each qTStatus only
  size_t header = slurp(path).find("\n\n") + 2;
  ASSERT_EQ(slurp(path).size(), header);
  EXPECT_EQ(header % TraceStream::kBlock, 0u) << header; // padded: frames start on a block
  EXPECT_GE(header, TraceStream::kHeaderRoom);
  hits(0, 3);
  (void)send("qTStatus"); // drains; 3 frames (2469 bytes): one block, padded
  engine->stream_settle();
  ASSERT_TRUE(engine->stream_report().direct) << "the test directory takes no O_DIRECT writes";
  const bool cached_by_fs = memory_backed(path); // tmpfs: every write is in the page cache
  if (!cached_by_fs) {
    EXPECT_EQ(cached_blocks(path, header, 1), 0u);
  }
  std::string file = slurp(path);
  EXPECT_EQ(file.size(), header + TraceStream::kBlock);
  EXPECT_EQ(file.substr(header + 3 * 823), std::string(TraceStream::kBlock - 3 * 823, '\0'));
  EXPECT_NE(file.find(";tframes:3;"), std::string::npos);
  hits(3, 13); // 13 frames, 10 699 bytes: the first block again, two more
  (void)send("qTStatus");
  engine->stream_settle();
  if (!cached_by_fs) {
    EXPECT_EQ(cached_blocks(path, header, 3), 0u);
  }
  file = slurp(path);
  EXPECT_EQ(file.size(), header + 3 * TraceStream::kBlock);
  EXPECT_EQ(file.substr(header + 13 * 823).find_first_not_of('\0'), std::string::npos);
  EXPECT_NE(file.find(";tframes:d;"), std::string::npos);
  std::string copy = path + ".killed";
  { std::ofstream(copy, std::ios::binary) << file; }
  hits(13, 20);
  ASSERT_EQ(send("QTStop"), "OK");
  file = slurp(path);
  EXPECT_EQ(file.size(), header + 20 * 823 + 4); // every frame, then the end marker
  EXPECT_EQ(file.substr(file.size() - 4), std::string(4, '\0'));
  EXPECT_NE(file.find(";tframes:14;"), std::string::npos);
  StreamReport s = engine->stream_report();
  EXPECT_EQ(s.frames, 20u);
  EXPECT_EQ(s.bytes, file.size());
  if (access("/usr/bin/gdb", X_OK) != 0) {
    std::remove(copy.c_str());
    GDBTRACE_SKIP("no-gdb") << "no /usr/bin/gdb";
  }
  std::string killed = gdb_reads(copy, "-ex tstatus -ex 'tfind 12' -ex 'print $rax'");
  std::remove(copy.c_str());
  EXPECT_NE(killed.find("Collected 13 trace frames"), std::string::npos) << killed;
  EXPECT_NE(killed.find("the run had not ended"), std::string::npos) << killed;
  EXPECT_NE(killed.find("$1 = 12"), std::string::npos) << killed;
  std::string out = gdb_reads(path, "-ex tstatus -ex 'tfind 19' -ex 'print $rax' -ex 'tfind 0' "
                                    "-ex 'print $rax'");
  EXPECT_NE(out.find("Collected 20 trace frames"), std::string::npos) << out;
  EXPECT_NE(out.find("$1 = 19"), std::string::npos) << out;
  EXPECT_NE(out.find("$2 = 0"), std::string::npos) << out;
}

// A drain of more than a direct write's 8 MB: the whole blocks go to the disk
// on the writer's thread while the rest is staged (frames cut between the two
// stages), and the file holds every frame, counted, in order.
TEST_F(DirectStreamTest, AWriteOnTheWritersThreadKeepsEveryFrameInOrder) {
  monitor("gdbtrace stream " + path);
  start("20000000");           // holds the run: one drain at the qTStatus writes it all
  constexpr int kHits = 12000; // 9.9 MB of 823-byte frames
  hits(0, kHits);
  (void)send("qTStatus");
  engine->stream_settle();
  ASSERT_TRUE(engine->stream_report().direct) << "the test directory takes no O_DIRECT writes";
  size_t header = slurp(path).find("\n\n") + 2;
  std::string file = slurp(path);
  const size_t frames_end = header + size_t(kHits) * 823; // then zeros to the block's end
  ASSERT_EQ(file.size(), (frames_end + TraceStream::kBlock - 1) & ~(TraceStream::kBlock - 1));
  EXPECT_EQ(file.find_first_not_of('\0', frames_end), std::string::npos);
  EXPECT_NE(file.find(";tframes:" + hex::u64(kHits) + ";"), std::string::npos);
  for (int i = 0; i < kHits; i += 997) { // each frame's rax is its hit number
    size_t at = header + size_t(i) * 823;
    ASSERT_EQ(gt_tframe_size(reinterpret_cast<const uint8_t*>(file.data() + at)), 817u) << i;
    uint64_t rax;
    std::memcpy(&rax, file.data() + at + 7 + gt_reg_offset(GT_RAX), 8);
    EXPECT_EQ(rax, uint64_t(i));
  }
  ASSERT_EQ(send("QTStop"), "OK");
  EXPECT_EQ(engine->stream_report().frames, uint64_t(kHits));
  if (access("/usr/bin/gdb", X_OK) != 0)
    GDBTRACE_SKIP("no-gdb") << "no /usr/bin/gdb";
  std::string out = gdb_reads(path, "-ex tstatus -ex 'tfind 11999' -ex 'print $rax'");
  EXPECT_NE(out.find("Collected 12000 trace frames"), std::string::npos) << out;
  EXPECT_NE(out.find("$1 = 11999"), std::string::npos) << out;
}
