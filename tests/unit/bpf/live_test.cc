// The eBPF collector on this kernel: the test process puts uprobes on its own
// probe sites (test_site.S loads known values into every general register),
// runs the generated programs and compares what they produce (frames, TSVs,
// errors) with the user-space agent-expression VM (ax_eval) on the same
// register state and memory.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <asio/io_context.hpp>

#include "bpf/bpf_collector.h"
#include "bpf_live_fixture.h"
#include "common/register_block.h"
#include "trace/frame.h"

// Register values test_site.S loads (gdb remote order; the rsp slot is unused)
// and the stack pointer it records at the probe.
extern "C" {
uint64_t site_regs[16];
uint64_t site_rsp;
}

namespace gdbtrace::test {
namespace {

// Memory the expressions read.
alignas(16) uint8_t test_mem[4096] = {0x01, 0x80, 0xff, 0x7f, 0x10, 0x32, 0x54, 0x76,
                                      0x98, 0xba, 0xdc, 0xfe, 0x11, 0x22, 0x33, 0x44};
const char test_str[] = "tracing strings";

void set_site_registers() {
  uint64_t* r = site_regs;
  r[GT_RAX] = 0x1111222233334444ull;
  r[GT_RBX] = uint64_t(-5);
  r[GT_RCX] = uint64_t(uintptr_t(test_mem));
  r[GT_RDX] = 0x8000000000000000ull;
  r[GT_RSI] = 7;
  r[GT_RDI] = 0;
  r[GT_RBP] = 0x7fffffff;
  r[GT_R8] = 64;
  r[GT_R9] = 65;
  r[GT_R10] = 3;
  r[GT_R11] = uint64_t(-1);
  r[GT_R12] = 0x123456789abcdef0ull;
  r[GT_R13] = 1;
  r[GT_R14] = 0xfffffffffffffff0ull;
  r[GT_R15] = uint64_t(uintptr_t(test_str));
}

// What the VM sees: the registers the site loaded plus the ones only the
// kernel knows (eflags, cs, ss, orig_rax, fs_base) taken from the BPF frame.
struct Reference {
  RegisterBlock regs;
  std::map<uint32_t, int64_t> tsvs;
  FrameBuilder* frame = nullptr;

  static int read_mem_cb(void*, uint64_t addr, void* buf, uint32_t len) {
    iovec local{buf, len}, remote{reinterpret_cast<void*>(addr), len};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    return n == ssize_t(len) ? AX_OK : AX_ERR_MEM;
  }
  static int read_reg_cb(void* o, uint32_t regno, uint64_t* v) {
    auto* self = static_cast<Reference*>(o);
    if (regno >= GT_NUM_REGS_AVX || !self->regs.valid.test(regno))
      return AX_ERR_REG_UNAVAILABLE;
    *v = self->regs.get_u64(regno);
    return AX_OK;
  }
  static int get_tsv_cb(void* o, uint32_t n, int64_t* v) {
    auto* self = static_cast<Reference*>(o);
    *v = self->tsvs[n];
    return AX_OK;
  }
  static int set_tsv_cb(void* o, uint32_t n, int64_t v) {
    static_cast<Reference*>(o)->tsvs[n] = v;
    return AX_OK;
  }
  // Same rules as the ptrace collector: unreadable memory is an error.
  static int trace_mem_cb(void* o, uint64_t addr, uint32_t len, int nz) {
    auto* self = static_cast<Reference*>(o);
    std::vector<uint8_t> bytes(len);
    if (len && read_mem_cb(o, addr, bytes.data(), len) != AX_OK)
      return AX_ERR_MEM;
    if (nz) {
      auto zero = std::find(bytes.begin(), bytes.end(), 0);
      if (zero != bytes.end())
        bytes.erase(zero + 1, bytes.end());
    }
    self->frame->add_memory(addr, bytes);
    return AX_OK;
  }
  static int trace_tsv_cb(void* o, uint32_t n) {
    auto* self = static_cast<Reference*>(o);
    self->frame->add_tsv(n, self->tsvs[n]);
    return AX_OK;
  }
  ax_env env() {
    return ax_env{.opaque = this,
                  .read_reg = read_reg_cb,
                  .read_mem = read_mem_cb,
                  .get_tsv = get_tsv_cb,
                  .set_tsv = set_tsv_cb,
                  .trace_mem = trace_mem_cb,
                  .trace_tsv = trace_tsv_cb,
                  .printf = nullptr,
                  .step_budget = 0};
  }
};

struct Outcome {
  std::vector<std::vector<uint8_t>> frames;
  std::string error; // ax_strerror text of the error, if any
  std::map<uint32_t, int64_t> tsvs;
};

class BpfLive : public BpfLiveFixture {
protected:
  void SetUp() override {
    BpfLiveFixture::SetUp();
    set_site_registers();
  }

  // Tracepoint NUMBER at bpf_test_probe collecting $regs.
  static Tracepoint regs_at_probe(uint32_t number) {
    Tracepoint tp;
    tp.number = number;
    tp.address = uint64_t(uintptr_t(bpf_test_probe));
    tp.actions.push_back(CollectRegisters{});
    return tp;
  }

  // Runs TP once in the kernel (one hit of bpf_test_probe).
  Outcome run_bpf(Tracepoint tp, const std::map<uint32_t, int64_t>& tsvs) {
    Outcome out;
    FakeContext ctx;
    ctx.tsvs = tsvs;
    tp.address = uint64_t(uintptr_t(bpf_test_probe));
    auto r = collector_->install(getpid(), tp, ctx);
    EXPECT_TRUE(r) << r.error().message;
    if (!r)
      return out;
    bpf_test_site();
    collector_->drain();
    // The engine falls back to its own value for TSVs the collector does not keep.
    for (auto& [n, v] : tsvs)
      out.tsvs[n] = collector_->tsv_value(n).value_or(ctx.tsvs[n]);
    collector_->remove_all();
    out.frames = ctx.frames;
    for (auto& s : ctx.stops)
      for (int st = -1; st >= -21; st--)
        if (s.find(std::string(": ") + ax_strerror(st) + " at") != std::string::npos)
          out.error = ax_strerror(st);
    if (!ctx.stops.empty() && out.error.empty())
      out.error = ctx.stops[0];
    return out;
  }

  // The same tracepoint in the VM; KERNEL_FRAME supplies eflags & co.
  Outcome run_vm(const Tracepoint& tp, const std::map<uint32_t, int64_t>& tsvs,
                 const std::vector<uint8_t>* kernel_frame) {
    Outcome out;
    Reference ref;
    ref.tsvs = tsvs;
    for (unsigned r = 0; r < 16; r++)
      ref.regs.set_u64(r, site_regs[r]);
    ref.regs.set_u64(GT_RSP, site_rsp);
    ref.regs.set_u64(GT_RIP, uint64_t(uintptr_t(bpf_test_probe)));
    if (kernel_frame) {
      FrameView view(*kernel_frame, GT_REGBLOCK_SIZE_AVX);
      if (auto rb = view.registers()) {
        for (unsigned r : {unsigned(GT_EFLAGS), unsigned(GT_CS), unsigned(GT_SS),
                           unsigned(GT_ORIG_RAX), unsigned(GT_FS_BASE)}) {
          uint64_t v = 0;
          memcpy(&v, rb->data + gt_reg_offset(r), gt_reg_size(r));
          ref.regs.set_u64(r, v);
        }
      }
    }
    ax_env env = ref.env();
    auto finish = [&](Outcome& o) {
      for (auto& [n, v] : tsvs)
        o.tsvs[n] = ref.tsvs[n];
      return o;
    };
    if (tp.has_condition) {
      uint64_t v = 0;
      int rc = ax_eval(tp.condition.code.data(), &tp.condition.info, &env, &v);
      if (rc != AX_OK)
        out.error = ax_strerror(rc);
      if (rc != AX_OK || !v)
        return finish(out);
    }
    FrameBuilder frame(uint16_t(tp.number));
    ref.frame = &frame;
    for (const auto& a : tp.actions) {
      if (std::holds_alternative<CollectRegisters>(a)) {
        std::vector<uint8_t> block(GT_REGBLOCK_SIZE_AVX, 0);
        for (unsigned r = 0; r < GT_NUM_REGS_AVX; r++)
          if (ref.regs.valid.test(r))
            memcpy(block.data() + gt_reg_offset(r), ref.regs.bytes.data() + gt_reg_offset(r),
                   gt_reg_size(r));
        frame.add_registers(block);
      } else if (auto* m = std::get_if<CollectMemory>(&a)) {
        uint64_t addr = uint64_t(m->offset) + (m->basereg >= 0 ? ref.regs.get_u64(m->basereg) : 0);
        std::vector<uint8_t> bytes(m->length);
        if (Reference::read_mem_cb(nullptr, addr, bytes.data(), m->length) == AX_OK)
          frame.add_memory(addr, bytes);
      } else {
        const auto& x = std::get<CollectExpr>(a);
        uint64_t ignored = 0;
        int rc = ax_eval(x.expr.code.data(), &x.expr.info, &env, &ignored);
        if (rc != AX_OK) {
          out.error = ax_strerror(rc);
          return finish(out);
        }
      }
    }
    auto bytes = frame.finish();
    out.frames.emplace_back(bytes.begin(), bytes.end());
    return finish(out);
  }

  void compare(const Tracepoint& tp, std::map<uint32_t, int64_t> tsvs = {}) {
    tsvs.emplace(50, 0); // the value slot of expression cases
    Outcome k = run_bpf(tp, tsvs);
    Outcome v = run_vm(tp, tsvs, k.frames.empty() ? nullptr : &k.frames[0]);
    EXPECT_EQ(k.error, v.error);
    EXPECT_EQ(k.tsvs, v.tsvs);
    ASSERT_EQ(k.frames.size(), v.frames.size());
    for (size_t i = 0; i < k.frames.size(); i++)
      EXPECT_EQ(k.frames[i], v.frames[i]);
  }
};

Tracepoint expression_tp(const std::string& text) {
  Tracepoint tp;
  tp.number = 7;
  tp.actions.push_back(CollectRegisters{}); // also gives the VM eflags, cs, ss, orig_rax, fs_base
  tp.actions.push_back(CollectExpr{ax(text + " setv 50 end")});
  return tp;
}

std::string addr(const void* p) {
  return std::to_string(uintptr_t(p));
}

TEST_F(BpfLive, RegistersBlockMatchesTheSite) {
  Tracepoint tp;
  tp.number = 2;
  tp.actions.push_back(CollectRegisters{});
  Outcome k = run_bpf(tp, {});
  ASSERT_EQ(k.frames.size(), 1u);
  FrameView view(k.frames[0], GT_REGBLOCK_SIZE_AVX);
  EXPECT_EQ(view.tp_number(), 2);
  auto rb = view.registers();
  ASSERT_TRUE(rb);
  auto reg = [&](unsigned r) {
    uint64_t v = 0;
    memcpy(&v, rb->data + gt_reg_offset(r), gt_reg_size(r) > 8 ? 8 : gt_reg_size(r));
    return v;
  };
  for (unsigned r = 0; r < 16; r++)
    if (r != GT_RSP)
      EXPECT_EQ(reg(r), site_regs[r]) << "register " << r;
  EXPECT_EQ(reg(GT_RSP), site_rsp);
  EXPECT_EQ(reg(GT_RIP), uint64_t(uintptr_t(bpf_test_probe)));
  EXPECT_EQ(reg(GT_CS), 0x33u);
  EXPECT_EQ(reg(GT_SS), 0x2bu);
  EXPECT_EQ(reg(GT_ORIG_RAX), uint64_t(-1));
  EXPECT_TRUE(reg(GT_EFLAGS) & 0x2); // bit 1 is always set
  uint64_t fsbase = 0;
  asm volatile("mov %%fs:0, %0" : "=r"(fsbase)); // the TCB points to itself
  EXPECT_EQ(reg(GT_FS_BASE), fsbase);
  EXPECT_EQ(reg(GT_XMM0), 0u); // not available: zero, and reported so
  compare(tp);
}

TEST_F(BpfLive, ExpressionsMatchTheVm) {
  const char* cases[] = {
      "reg 0",
      "reg 1",
      "reg 2",
      "reg 3",
      "reg 4",
      "reg 5",
      "reg 6",
      "reg 7",
      "reg 8",
      "reg 9",
      "reg 10",
      "reg 11",
      "reg 12",
      "reg 13",
      "reg 14",
      "reg 15",
      "reg 16",
      "reg 17",
      "reg 18",
      "reg 19",
      "reg 57",
      "reg 58",
      "reg 1 reg 4 add",
      "reg 1 reg 4 sub",
      "reg 12 reg 1 mul",
      "reg 1 reg 10 div_signed",
      "reg 1 reg 10 div_unsigned",
      "reg 1 reg 10 rem_signed",
      "reg 1 reg 10 rem_unsigned",
      "reg 3 reg 11 div_signed",
      "reg 3 reg 11 rem_signed",
      "reg 12 reg 8 lsh",
      "reg 12 reg 9 lsh",
      "reg 12 reg 10 lsh",
      "reg 1 reg 8 rsh_signed",
      "reg 1 reg 10 rsh_signed",
      "reg 12 reg 10 rsh_signed",
      "reg 12 reg 8 rsh_unsigned",
      "reg 12 reg 10 rsh_unsigned",
      "reg 12 reg 11 rsh_unsigned",
      "reg 12 reg 0 bit_and",
      "reg 12 reg 0 bit_or",
      "reg 12 reg 0 bit_xor",
      "reg 4 const8 7 equal",
      "reg 4 const8 8 equal",
      "reg 1 reg 4 less_signed",
      "reg 1 reg 4 less_unsigned",
      "reg 5 log_not",
      "reg 4 log_not",
      "reg 12 bit_not",
      "reg 12 ext 8",
      "reg 12 ext 16",
      "reg 12 ext 32",
      "reg 12 ext 1",
      "reg 12 ext 63",
      "reg 12 ext 64",
      "reg 12 zero_ext 8",
      "reg 12 zero_ext 1",
      "reg 12 zero_ext 63",
      "const64 0xfedcba9876543210",
      "const32 0x80000000",
      "const16 0xffff",
      "const8 0xff",
      "const8 1 const8 2 const8 3 rot",
      "const8 1 const8 2 const8 3 rot pop",
      "const8 1 const8 2 const8 3 rot pop pop",
      "const8 1 const8 2 const8 3 pick 2",
      "const8 1 const8 2 swap sub",
      "reg 4 dup mul",
      "reg 2 ref8",
      "reg 2 const8 1 add ref8",
      "reg 2 ref16",
      "reg 2 ref32",
      "reg 2 ref64",
      "reg 2 const8 8 add ref64 const8 3 add",
      "reg 15 ref8 ext 8",
      "getv 5 const8 3 add",
      "getv 5 const16 1000 mul",
      "getv 5 const8 3 sub",
      // errors
      "reg 4 reg 5 div_signed",
      "reg 4 reg 5 rem_unsigned",
      "const8 16 ref32",
  };
  for (const char* c : cases) {
    SCOPED_TRACE(c);
    compare(expression_tp(c), {{5, 100}});
  }
}

TEST_F(BpfLive, BranchesMatchTheVm) {
  // reg 4 (7) != 0 -> jump to "const8 2"; else "const8 1".
  //  0 reg 4 | 3 if_goto 11 | 6 const8 1 | 8 goto 13 | 11 const8 2 | 13 setv 50 | 16 end
  compare(expression_tp("reg 4 if_goto 11 const8 1 goto 13 const8 2"));
  compare(expression_tp("reg 5 if_goto 11 const8 1 goto 13 const8 2"));
  // && as gdb emits it: a == 7 && b < 0.
  //  0 reg 4 | 3 const8 7 | 5 equal | 6 if_goto 14 | 9 const8 0 | 11 goto 20 | 14 reg 1 |
  //  17 const8 0 | 19 less_signed | 20 setv 50 | 23 end
  compare(expression_tp("reg 4 const8 7 equal if_goto 14 const8 0 goto 20 "
                        "reg 1 const8 0 less_signed"));
  compare(expression_tp("reg 4 const8 8 equal if_goto 14 const8 0 goto 20 "
                        "reg 1 const8 0 less_signed"));
}

TEST_F(BpfLive, TraceOpsMatchTheVm) {
  const char* cases[] = {
      "reg 2 trace_quick 8 pop",     "reg 2 trace16 40 pop",
      "reg 2 const16 48 trace",      "reg 2 reg 10 trace",
      "reg 15 const8 64 tracenz",    "reg 15 const8 4 tracenz",
      "reg 15 const8 15 tracenz",    "reg 15 const8 16 tracenz",
      "reg 15 reg 10 tracenz",       "tracev 5",
      "const8 16 trace_quick 4 pop", "reg 2 reg 11 trace",
      "const8 16 const8 4 tracenz",
  };
  for (const char* c : cases) {
    SCOPED_TRACE(c);
    Tracepoint tp;
    tp.number = 9;
    tp.actions.push_back(CollectExpr{ax(std::string(c) + " end")});
    compare(tp, {{5, -42}});
  }
}

TEST_F(BpfLive, MemoryActionsAndOrder) {
  Tracepoint tp;
  tp.number = 4;
  tp.actions.push_back(CollectMemory{-1, int64_t(uintptr_t(test_mem)), 16});
  tp.actions.push_back(CollectRegisters{});
  tp.actions.push_back(CollectMemory{GT_RCX, 8, 8});
  tp.actions.push_back(CollectMemory{-1, 16, 8}); // unreadable: left out, no error
  tp.actions.push_back(CollectExpr{ax("reg 15 const8 64 tracenz tracev 5 end")});
  tp.actions.push_back(CollectMemory{GT_R15, 0, 0});
  compare(tp, {{5, 77}});
}

TEST_F(BpfLive, ConditionsMatchTheVm) {
  const char* cases[] = {"reg 4 const8 7 equal",    "reg 4 const8 8 equal",
                         "const8 16 ref8",          "reg 5 reg 5 div_unsigned",
                         "getv 5 const8 100 equal", "reg 2 ref16 const16 0x8001 equal"};
  for (const char* c : cases) {
    SCOPED_TRACE(c);
    Tracepoint tp;
    tp.number = 5;
    tp.has_condition = true;
    tp.condition = ax(std::string(c) + " end", false);
    tp.actions.push_back(CollectRegisters{});
    compare(tp, {{5, 100}});
  }
}

TEST_F(BpfLive, TimestampIsOnTheEngineClock) {
  Tracepoint tp;
  tp.number = 6;
  tp.actions.push_back(CollectExpr{ax("tracev 1 end")});
  FakeContext ctx;
  tp.address = uint64_t(uintptr_t(bpf_test_probe));
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  int64_t before = ctx.trace_timestamp();
  bpf_test_site();
  int64_t after = ctx.trace_timestamp();
  collector_->drain();
  collector_->remove_all();
  ASSERT_EQ(ctx.frames.size(), 1u);
  int64_t ts = 0;
  FrameView(ctx.frames[0], 816).for_each([&](const FrameBlock& b) {
    if (b.type == 'V' && b.tsv == 1)
      ts = b.value;
    return true;
  });
  EXPECT_GE(ts, before - 2);
  EXPECT_LE(ts, after + 2);
}

TEST_F(BpfLive, EveryProbeSiteKind) {
  for (char* site : {bpf_test_probe, bpf_test_probe5, bpf_test_probe_rip}) {
    Tracepoint tp;
    tp.number = 8;
    tp.address = uint64_t(uintptr_t(site));
    tp.actions.push_back(CollectRegisters{});
    FakeContext ctx;
    ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
    for (int i = 0; i < 3; i++)
      bpf_test_site();
    collector_->drain();
    collector_->remove_all();
    ASSERT_EQ(ctx.frames.size(), 3u);
    auto rb = FrameView(ctx.frames[0], 816).registers();
    ASSERT_TRUE(rb);
    uint64_t rip = 0, rax = 0;
    memcpy(&rip, rb->data + gt_reg_offset(GT_RIP), 8);
    memcpy(&rax, rb->data + gt_reg_offset(GT_RAX), 8);
    EXPECT_EQ(rip, uint64_t(uintptr_t(site)));
    EXPECT_EQ(rax, site_regs[GT_RAX]);
    EXPECT_EQ(ctx.hits.count(8), 0u); // no pass count: no record_hit per frame
  }
}

TEST_F(BpfLive, PassCountStopsCollecting) {
  Tracepoint tp;
  tp.number = 11;
  tp.address = uint64_t(uintptr_t(bpf_test_probe));
  tp.pass_count = 3;
  tp.actions.push_back(CollectExpr{ax("getv 5 const8 1 add setv 5 pop end")});
  FakeContext ctx;
  ctx.pass_counts[11] = 3;
  ctx.tsvs[5] = 0;
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  for (int i = 0; i < 10; i++)
    bpf_test_site();
  collector_->drain();
  EXPECT_EQ(ctx.frames.size(), 3u);
  EXPECT_EQ(ctx.hits[11], 3u);
  EXPECT_EQ(collector_->tsv_value(5), 3); // hits past the pass count run no action
  EXPECT_EQ(ctx.stops.size(), 1u);
  uint64_t hits = collector_->stats(11, tp.address).hits;
  collector_->remove_all();
  EXPECT_EQ(collector_->stats(11, tp.address).hits, hits); // the counts outlive the run
  EXPECT_EQ(collector_->tsv_value(5), 3);                  // still answered after the run
}

TEST_F(BpfLive, DisabledTracepointCollectsNothing) {
  Tracepoint tp = regs_at_probe(12);
  FakeContext ctx;
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  ASSERT_TRUE(collector_->set_enabled(12, tp.address, false));
  bpf_test_site();
  collector_->drain();
  EXPECT_EQ(ctx.frames.size(), 0u);
  ASSERT_TRUE(collector_->set_enabled(12, tp.address, true));
  bpf_test_site();
  collector_->drain();
  EXPECT_EQ(ctx.frames.size(), 1u);
  EXPECT_FALSE(collector_->set_enabled(99, 0, true));
  collector_->remove_all();
}

TEST_F(BpfLive, ThreadsAllHitAndAtomicTsvAddsLoseNothing) {
  Tracepoint tp;
  tp.number = 13;
  tp.address = uint64_t(uintptr_t(bpf_test_probe));
  tp.actions.push_back(CollectExpr{ax("getv 5 const8 1 add setv 5 pop reg 4 trace_quick 0 end")});
  tp.pass_count = 1000000; // never reached: every hit, frame or drop, reaches record_hit
  FakeContext ctx;
  ctx.tsvs[5] = 1000;
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  constexpr int kThreads = 4, kCalls = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++)
    threads.emplace_back([] {
      for (int i = 0; i < kCalls; i++)
        bpf_test_site();
    });
  for (auto& t : threads)
    t.join();
  collector_->drain();
  EXPECT_EQ(collector_->tsv_value(5), 1000 + kThreads * kCalls);
  auto st = collector_->stats(13, tp.address);
  EXPECT_EQ(st.hits, uint64_t(kThreads * kCalls));
  EXPECT_EQ(ctx.frames.size() + st.drops, st.hits); // every hit is a frame or a drop
  EXPECT_EQ(ctx.hits[13], st.hits);                 // dropped hits still reach the engine's count
  collector_->remove_all();
}

TEST_F(BpfLive, OtherProcessesAreNotProbed) {
  Tracepoint tp = regs_at_probe(14);
  FakeContext ctx;
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 5; i++)
      bpf_test_site();
    _exit(site_regs[GT_RAX] == 0x1111222233334444ull ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  collector_->drain();
  EXPECT_EQ(ctx.frames.size(), 0u);
  bpf_test_site();
  collector_->drain();
  EXPECT_EQ(ctx.frames.size(), 1u);
  collector_->remove_all();
}

TEST_F(BpfLive, RemoveAllDetaches) {
  Tracepoint tp = regs_at_probe(15);
  FakeContext ctx;
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  bpf_test_site();
  collector_->remove_all(); // drains first: the frame is kept
  EXPECT_EQ(ctx.frames.size(), 1u);
  bpf_test_site();
  collector_->drain();
  EXPECT_EQ(ctx.frames.size(), 1u);
  EXPECT_EQ(collector_->stats(15, tp.address).hits, 1u);
}

TEST_F(BpfLive, UnmappedAddressIsAPlainError) {
  Tracepoint tp;
  tp.number = 16;
  tp.address = 0x10;
  FakeContext ctx;
  auto r = collector_->install(getpid(), tp, ctx);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not mapped"), std::string::npos) << r.error().message;
}

TEST_F(BpfLive, DescribeMentionsRegisterWrites) {
  EXPECT_NE(collector_->describe().find("register writes"), std::string::npos);
  EXPECT_NE(collector_->describe().find("single-steps"), std::string::npos);
}

} // namespace
} // namespace gdbtrace::test

namespace gdbtrace::test {
namespace {

// Whether a BPF program with this name is loaded anywhere on the system.
bool program_loaded(const std::string& name) {
  uint32_t id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0)
      continue;
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    bool match = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && name == info.name;
    close(fd);
    if (match)
      return true;
  }
  return false;
}

TEST_F(BpfLive, FullRingBufferDropsWholeFrames) {
  auto made = make_bpf_collector(io_);
  ASSERT_TRUE(made) << made.error().message;
  auto& small = *made;
  Tracepoint tp = regs_at_probe(30);
  tp.actions.push_back(CollectMemory{-1, int64_t(uintptr_t(test_mem)), 4000});
  // A pass count (never reached): dropped hits count toward it (record_hit).
  // Without one they are only in the stats (record_hit feeds pass counts only).
  tp.pass_count = 1000000;
  FakeContext ctx;
  ctx.capacity = 1 << 20; // the smallest rings: 1 MB per CPU
  ASSERT_TRUE(small->install(getpid(), tp, ctx));
  EXPECT_NE(small->describe().find("per-CPU rings of 1024 KB"), std::string::npos)
      << small->describe();
  for (int i = 0; i < 1000; i++)
    bpf_test_site(); // no draining meanwhile: the ring fills up
  small->drain();
  auto st = small->stats(30, tp.address);
  EXPECT_EQ(st.hits, 1000u);
  EXPECT_GT(st.drops, 0u);
  EXPECT_EQ(ctx.frames.size() + st.drops, st.hits); // every hit is a frame or a drop
  EXPECT_EQ(ctx.hits[30], 1000u);
  for (const auto& f : ctx.frames) { // every frame complete and well-formed
    int blocks = 0;
    EXPECT_TRUE(FrameView(f, 816).for_each([&](const FrameBlock&) { return ++blocks > 0; }));
    EXPECT_EQ(blocks, 2);
  }
  small->remove_all();
}

// Tracepoint NUMBER at bpf_test_probe collecting the 8 bytes at WORD.
Tracepoint collecting_word(uint32_t number, const void* word) {
  Tracepoint tp;
  tp.number = number;
  tp.address = uint64_t(uintptr_t(bpf_test_probe));
  tp.actions.push_back(CollectMemory{-1, int64_t(uintptr_t(word)), 8});
  return tp;
}

// FRAMES hold one 8-byte memory block each, a count the hits made 0, 1, ...:
// there are N of them and they come in that order.
void expect_counted_in_order(const std::vector<std::vector<uint8_t>>& frames, uint64_t n) {
  ASSERT_EQ(frames.size(), n);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t seen = ~0ull;
    FrameView(frames[i], 816).for_each([&](const FrameBlock& b) {
      if (b.type == 'M' && b.length == 8)
        memcpy(&seen, b.data, 8);
      return true;
    });
    ASSERT_EQ(seen, i) << "frame " << i << " out of hit order";
  }
}

// Two threads on two CPUs hit the site strictly in turn; each hit collects the
// turn number. Their frames sit in two rings, and come out in hit order.
TEST_F(BpfLive, PerCpuRingsMergeInHitOrder) {
  if (std::thread::hardware_concurrency() < 2)
    GDBTRACE_SKIP("one-cpu") << "needs two CPUs";
  static std::atomic<uint64_t> turn;
  turn = 0;
  Tracepoint tp = collecting_word(32, &turn);
  FakeContext ctx;
  ctx.capacity = 64 << 20;
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  // Half the 64 MB buffer over the possible CPUs, a power of two of at least 1 MB each; above
  // 4 MB, a first ring of 4 MB and an overflow ring of the share.
  size_t ncpu = size_t(libbpf_num_possible_cpus()), want = 1024;
  while (want * 2 <= (64u << 10) / 2 / ncpu)
    want *= 2;
  std::string rings =
      want > 4096 ? "per-CPU rings of 4096 KB and, when one is full, of " + std::to_string(want) +
                        " KB (" + std::to_string(2 * ncpu)
                  : std::to_string(ncpu) + " per-CPU rings of " + std::to_string(want) + " KB";
  EXPECT_NE(collector_->describe().find(rings), std::string::npos) << collector_->describe();
  constexpr uint64_t kHits = 400;
  auto player = [](int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    for (uint64_t t; (t = turn.load()) < kHits;) {
      if (t % 2 != uint64_t(cpu))
        continue;
      bpf_test_site();
      turn.store(t + 1);
    }
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  collector_->drain();
  expect_counted_in_order(ctx.frames, kHits);
  collector_->remove_all();
}

// One CPU hits faster than nothing drains: its 4 MB first ring fills and the
// rest goes to its overflow ring. Every hit is a frame, none dropped, and the
// frames of the two rings come out in hit order.
TEST_F(BpfLive, AFullFirstRingOverflows) {
  static uint64_t count;
  count = 0;
  Tracepoint tp = collecting_word(33, &count);
  FakeContext ctx;
  ctx.capacity = size_t(libbpf_num_possible_cpus()) << 24; // 8 MB a CPU: 4 MB + 8 MB overflow
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  ASSERT_NE(collector_->describe().find("when one is full, of 8192 KB"), std::string::npos)
      << collector_->describe();
  cpu_set_t set, old;
  sched_getaffinity(0, sizeof old, &old);
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);
  constexpr uint64_t kHits = 100000; // ~56-byte records: 4 MB holds ~75 000
  for (; count < kHits; count++)
    bpf_test_site();
  sched_setaffinity(0, sizeof old, &old);
  collector_->drain();
  EXPECT_EQ(collector_->stats(33, tp.address).drops, 0u);
  expect_counted_in_order(ctx.frames, kHits);
  collector_->remove_all();
}

// Every CPU busy with a thread hitting the site (4 MB first rings, 8 MB
// overflow rings): a wake at a first ring's mark finds no idle CPU, so a linear
// run leaves its frames staged (a drain would take a CPU from a traced thread)
// until an overflow ring passes its own mark; a streamed run drains at each
// wake. Either way every hit is a frame, in hit order per thread.
void hit_on_every_cpu_while_serving(asio::io_context& io, uint64_t hits_per_cpu) {
  int ncpu = libbpf_num_possible_cpus();
  std::atomic<int> running{ncpu};
  std::vector<std::thread> hitters;
  for (int cpu = 0; cpu < ncpu; cpu++)
    hitters.emplace_back([&, cpu] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof set, &set);
      for (uint64_t i = 0; i < hits_per_cpu; i++)
        bpf_test_site();
      running--;
    });
  while (running > 0) // the stub's io thread: the rings' wakes are handled here
    io.run_for(std::chrono::milliseconds(1));
  for (auto& t : hitters)
    t.join();
  io.poll();
}

TEST_F(BpfLive, NoIdleCpuLeavesALinearRunStagedUntilTheOverflowMark) {
  if (std::thread::hardware_concurrency() < 2)
    GDBTRACE_SKIP("one-cpu") << "needs two CPUs";
  size_t ncpu = size_t(libbpf_num_possible_cpus());
  auto run = [&](bool unbounded, uint64_t hits_per_cpu, size_t& staged_frames) {
    auto made = make_bpf_collector(io_);
    ASSERT_TRUE(made) << made.error().message;
    auto& c = *made;
    Tracepoint tp = regs_at_probe(34);
    FakeContext ctx;
    ctx.capacity = ncpu << 25; // 16 MB a CPU: 4 MB + 8 MB overflow rings (streamed: larger)
    ctx.unbounded = unbounded;
    ASSERT_TRUE(c->install(getpid(), tp, ctx));
    hit_on_every_cpu_while_serving(io_, hits_per_cpu);
    staged_frames = ctx.frames.size(); // what the wakes drained during the run
    c->drain();
    auto st = c->stats(34, tp.address);
    EXPECT_EQ(st.drops, 0u);
    EXPECT_EQ(ctx.frames.size(), hits_per_cpu * ncpu);
    std::string d = c->describe();
    bool deferred = d.find("ring wake-ups of the run left the frames staged") != std::string::npos;
    EXPECT_EQ(deferred, !unbounded) << d;
    c->remove_all();
  };
  // `collect $regs` records are ~250 bytes: 12 000 a CPU pass the 2 MB mark of
  // the first ring and stay below its 4 MB.
  size_t drained_during = 0;
  run(false, 12000, drained_during);
  EXPECT_EQ(drained_during, 0u) << "a wake drained with no idle CPU";
  run(true, 12000, drained_during);
  EXPECT_GT(drained_during, 0u) << "a streamed run's wake left the frames staged";
  // 80 000 a CPU fill the first ring and pass half the overflow ring: that wake
  // drains (were it missed, the 12 MB of rings would drop frames).
  run(false, 80000, drained_during);
  EXPECT_GT(drained_during, 0u) << "the overflow ring's mark did not drain";
}

TEST_F(BpfLive, KilledCollectorLeavesNothingBehind) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child == 0) {
    asio::io_context io;
    auto c = make_bpf_collector(io);
    FakeContext ctx;
    Tracepoint tp;
    tp.number = 31;
    tp.address = uint64_t(uintptr_t(bpf_test_probe));
    tp.actions.push_back(CollectRegisters{});
    char ok = c && (*c)->install(parent, tp, ctx) ? 'y' : 'n';
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_TRUE(program_loaded("gdbtrace_tp31"));
  for (int i = 0; i < 10; i++)
    bpf_test_site(); // probed by the child's collector
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !(gone = !program_loaded("gdbtrace_tp31")); i++)
    usleep(20000);
  EXPECT_TRUE(gone) << "the program outlived the killed collector";
  for (int i = 0; i < 10; i++)
    bpf_test_site(); // the tracee keeps running normally
  EXPECT_EQ(site_regs[GT_RAX], 0x1111222233334444ull);
  close(ready[0]);
  close(ready[1]);
}

} // namespace
} // namespace gdbtrace::test

namespace gdbtrace::test {
namespace {

TEST_F(BpfLive, MemoryNotPagedInYetIsRead) {
  if (collector_->describe().find("sleepable programs") == std::string::npos)
    GDBTRACE_SKIP("no-sleepable-uprobes")
        << "kernel without sleepable uprobe programs: " << collector_->describe();
  // A file page the process has never touched: a non-sleepable program's
  // bpf_probe_read_user cannot fault it in, bpf_copy_from_user can.
  int fd = open("/proc/self/exe", O_RDONLY);
  ASSERT_GE(fd, 0);
  auto* page = static_cast<uint8_t*>(mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0));
  close(fd);
  ASSERT_NE(page, MAP_FAILED);
  Tracepoint tp;
  tp.number = 32;
  tp.address = uint64_t(uintptr_t(bpf_test_probe));
  tp.actions.push_back(CollectMemory{-1, int64_t(uintptr_t(page)), 4});
  tp.actions.push_back(CollectExpr{ax("const64 " + addr(page + 8) + " ref32 setv 50 end")});
  FakeContext ctx;
  ctx.tsvs[50] = 0;
  ASSERT_TRUE(collector_->install(getpid(), tp, ctx));
  bpf_test_site();
  collector_->drain();
  auto v = collector_->tsv_value(50);
  collector_->remove_all();
  ASSERT_EQ(ctx.frames.size(), 1u);
  EXPECT_TRUE(ctx.stops.empty());
  std::vector<uint8_t> expect(page, page + 4); // "\x7fELF", read only now
  int blocks = 0;
  FrameView(ctx.frames[0], 816).for_each([&](const FrameBlock& b) {
    blocks++;
    EXPECT_EQ(std::vector<uint8_t>(b.data, b.data + b.length), expect);
    return true;
  });
  EXPECT_EQ(blocks, 1);
  uint32_t word;
  memcpy(&word, page + 8, 4);
  EXPECT_EQ(v, int64_t(word));
  munmap(page, 4096);
}

} // namespace
} // namespace gdbtrace::test
