// Bytecode emitted by the real gdb (`maint agent` / `maint agent-eval` on this
// test binary, at bpf_gdb_target in gdb_target.c), run by the eBPF collector:
// values of arguments, locals through pointers, globals, and collected blocks
// must be the real ones; expressions over globals are also run in the VM.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <regex>

#include "bpf_live_fixture.h"
#include "trace/frame.h"

extern "C" {
struct gdb_rec {
  int a;
  long b;
  char name[12];
  short arr[5];
};
extern struct gdb_rec gdb_global;
extern int gdb_ints[6];
extern int* gdb_ptr;
extern const char* gdb_str;
extern unsigned char gdb_bytes[4];
long bpf_gdb_target(int x, long y, struct gdb_rec* r);
}

namespace gdbtrace::test {
namespace {

constexpr int kX = 5;
constexpr long kY = -7000000000L;

struct GdbCode {
  uint64_t scope = 0;
  std::vector<uint8_t> code;
};

std::string self_exe() {
  char buf[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// One gdb run for all expressions; COMMAND is "agent" or "agent-eval".
std::vector<GdbCode> gdb_bytecode(const std::string& command,
                                  const std::vector<std::string>& exprs) {
  std::string cmd = "/usr/bin/gdb -nx -batch";
  for (const auto& e : exprs)
    cmd += " -ex 'maint " + command + " -at bpf_gdb_target, " + e + "'";
  cmd += " " + self_exe() + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f)
    return {};
  std::vector<GdbCode> out;
  std::map<std::string, uint8_t> ops;
  for (int op = 1; op < 0x40; op++)
    if (const char* n = ax_op_name(uint8_t(op)))
      ops[n] = uint8_t(op);
  std::regex scope_re(R"(^Scope: (0x[0-9a-f]+))"), op_re(R"(^\s*\d+\s+([a-z_0-9]+)\s*(\S*)\s*$)");
  char line[512];
  while (fgets(line, sizeof line, f)) {
    std::cmatch m;
    std::string l(line);
    if (!l.empty() && l.back() == '\n')
      l.pop_back();
    if (std::regex_search(l.c_str(), m, scope_re)) {
      out.push_back({std::stoull(m[1].str(), nullptr, 16), {}});
    } else if (!out.empty() && std::regex_match(l.c_str(), m, op_re) && ops.count(m[1].str())) {
      uint8_t op = ops[m[1].str()];
      out.back().code.push_back(op);
      int n = operand_bytes(op);
      uint64_t v = n ? std::stoull(m[2].str(), nullptr, 0) : 0;
      for (int i = n - 1; i >= 0; i--)
        out.back().code.push_back(uint8_t(v >> (8 * i)));
    }
  }
  pclose(f);
  return out;
}

class GdbBytecode : public BpfLiveFixture {
protected:
  void SetUp() override {
    BpfLiveFixture::SetUp();
    if (IsSkipped())
      return;
    if (access("/usr/bin/gdb", X_OK) != 0)
      GDBTRACE_SKIP("no-gdb") << "no /usr/bin/gdb";
  }

  // Installs CODE (with "setv 50" spliced before the final end when VALUE) at
  // SCOPE, calls the target once, returns the frame and TSV 50.
  std::pair<std::vector<uint8_t>, std::optional<int64_t>> run(const GdbCode& g, bool value) {
    std::vector<uint8_t> code = g.code;
    if (value && !code.empty() && code.back() == 0x27) {
      code.pop_back();
      code.insert(code.end(), {0x2d, 0, 50, 0x27}); // setv 50; end
    }
    Tracepoint tp;
    tp.number = 21;
    tp.address = g.scope;
    tp.actions.push_back(CollectRegisters{});
    tp.actions.push_back(CollectExpr{verified(code, true)});
    FakeContext ctx;
    ctx.tsvs[50] = 0;
    auto r = collector_->install(getpid(), tp, ctx);
    EXPECT_TRUE(r) << r.error().message;
    volatile long result = bpf_gdb_target(kX, kY, &gdb_global);
    (void)result;
    collector_->drain();
    auto tsv = collector_->tsv_value(50);
    collector_->remove_all();
    EXPECT_TRUE(ctx.stops.empty()) << ctx.stops[0];
    EXPECT_EQ(ctx.frames.size(), 1u);
    return {ctx.frames.empty() ? std::vector<uint8_t>{} : ctx.frames[0], tsv};
  }
};

TEST_F(GdbBytecode, ValuesOfArgumentsLocalsAndGlobals) {
  struct Case {
    const char* expr;
    int64_t expect;
  } cases[] = {
      {"x", kX},
      {"y", kY},
      {"x + y", kX + kY},
      {"r->a", gdb_global.a},
      {"r->b", gdb_global.b},
      {"r->arr[3]", gdb_global.arr[3]},
      {"r->name[1]", gdb_global.name[1]},
      {"gdb_global.b / x", gdb_global.b / kX},
      {"gdb_ints[3]", gdb_ints[3]},
      {"*gdb_ptr", *gdb_ptr},
      {"gdb_ptr[-1] * 2", gdb_ptr[-1] * 2},
      {"gdb_bytes[1]", gdb_bytes[1]},
      {"(signed char) gdb_bytes[1]", -128},
      {"x > 3 && y < 0", 1},
      {"x > 5 || gdb_ints[0] == 10", 1},
      {"gdb_global.arr[1] < 0 ? x : -x", kX},
      {"gdb_str[4]", 'o'},
      {"((long) x << 40) >> 38", int64_t(kX) << 2},
      {"(x << 40) >> 38", 0}, // int arithmetic: gdb truncates to 32 bits (ext 32)
      {"sizeof(gdb_global)", int64_t(sizeof(gdb_rec))},
  };
  std::vector<std::string> exprs;
  for (auto& c : cases)
    exprs.push_back(c.expr);
  auto codes = gdb_bytecode("agent-eval", exprs);
  ASSERT_EQ(codes.size(), exprs.size()) << "gdb did not compile every expression";
  for (size_t i = 0; i < codes.size(); i++) {
    SCOPED_TRACE(cases[i].expr);
    auto [frame, tsv] = run(codes[i], true);
    ASSERT_TRUE(tsv);
    // gdb leaves values in their C type's width: compare as that width.
    EXPECT_EQ(*tsv, cases[i].expect);
  }
}

// The bytes of the 'M' block at ADDR, if the frame has one.
std::optional<std::vector<uint8_t>> block_at(const std::vector<uint8_t>& frame, uint64_t addr) {
  std::optional<std::vector<uint8_t>> out;
  FrameView(frame, GT_REGBLOCK_SIZE_AVX).for_each([&](const FrameBlock& b) {
    if (b.type == 'M' && b.address == addr)
      out.emplace(b.data, b.data + b.length);
    return true;
  });
  return out;
}

TEST_F(GdbBytecode, CollectedBlocks) {
  auto codes = gdb_bytecode(
      "agent", {"gdb_global", "*gdb_ptr@3", "r->name", "*r", "gdb_str", "gdb_ints[2]", "x"});
  ASSERT_EQ(codes.size(), 7u);
  auto bytes = [](const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    return std::vector<uint8_t>(b, b + n);
  };
  auto expect_block = [&](size_t i, const void* p, size_t n) {
    auto [frame, tsv] = run(codes[i], false);
    auto blk = block_at(frame, uint64_t(uintptr_t(p)));
    ASSERT_TRUE(blk) << "no block at the expected address, case " << i;
    EXPECT_EQ(*blk, bytes(p, n)) << "case " << i;
  };
  expect_block(0, &gdb_global, sizeof gdb_global);
  expect_block(1, gdb_ptr, 3 * sizeof(int));
  expect_block(2, gdb_global.name, sizeof gdb_global.name);
  expect_block(3, &gdb_global, sizeof gdb_global);
  expect_block(4, &gdb_str, sizeof gdb_str);
  expect_block(5, &gdb_ints[2], sizeof(int));
  // x lives in the target's frame: one 4-byte block holding 5.
  auto [frame, tsv] = run(codes[6], false);
  int blocks = 0;
  FrameView(frame, GT_REGBLOCK_SIZE_AVX).for_each([&](const FrameBlock& b) -> bool {
    if (b.type == 'M') {
      blocks++;
      int v = 0;
      EXPECT_EQ(b.length, 4u);
      if (b.length == 4)
        memcpy(&v, b.data, 4);
      EXPECT_EQ(v, kX);
    }
    return true;
  });
  EXPECT_EQ(blocks, 1);
}

} // namespace
} // namespace gdbtrace::test
