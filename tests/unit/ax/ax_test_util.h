// Helpers for the agent-expression tests: a bytecode assembler and a fake
// target (memory, registers, trace state variables) behind struct ax_env.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "abi/amd64_regs.h"
#include "ax/ax.h"

namespace axtest {

// Opcodes, spelled as in gdb's ax.def.
enum Op : uint8_t {
  add = 0x02,
  sub,
  mul,
  div_signed,
  div_unsigned,
  rem_signed,
  rem_unsigned,
  lsh,
  rsh_signed,
  rsh_unsigned,
  trace,
  trace_quick,
  log_not,
  bit_and,
  bit_or,
  bit_xor,
  bit_not,
  equal,
  less_signed,
  less_unsigned,
  ext,
  ref8,
  ref16,
  ref32,
  ref64,
  ref_float,
  ref_double,
  ref_long_double,
  l_to_d,
  d_to_l,
  if_goto,
  goto_,
  const8,
  const16,
  const32,
  const64,
  reg,
  end,
  dup_,
  pop,
  zero_ext,
  swap,
  getv,
  setv,
  tracev,
  tracenz,
  trace16,
  invalid2,
  pick,
  rot,
  printf_
};

// Builds bytecode; operands big-endian as gdb emits them.
struct Asm {
  std::vector<uint8_t> code;
  Asm& op(uint8_t o) {
    code.push_back(o);
    return *this;
  }
  Asm& u8(uint8_t v) {
    code.push_back(v);
    return *this;
  }
  Asm& u16(uint16_t v) { return u8(v >> 8).u8(v & 0xff); }
  Asm& c8(uint8_t v) { return op(const8).u8(v); }
  Asm& c16(uint16_t v) { return op(const16).u16(v); }
  Asm& c32(uint32_t v) { return op(const32).u16(v >> 16).u16(v & 0xffff); }
  Asm& c64(uint64_t v) {
    op(const64);
    for (int i = 7; i >= 0; i--)
      u8(uint8_t(v >> (8 * i)));
    return *this;
  }
  Asm& op1(uint8_t o, uint8_t a) { return op(o).u8(a); }
  Asm& op2(uint8_t o, uint16_t a) { return op(o).u16(a); }
  Asm& printf(const std::string& fmt, uint8_t nargs) {
    op(printf_).u8(nargs).u16(uint16_t(fmt.size() + 1));
    for (char c : fmt)
      u8(uint8_t(c));
    return u8(0);
  }
  uint16_t here() const { return uint16_t(code.size()); }
};

inline std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// A fake process: memory segments, registers, trace state variables, and a
// log of what the program collected or printed.
struct FakeTarget {
  std::map<uint64_t, std::vector<uint8_t>> mem; // segment start -> bytes
  uint64_t regs[GT_NUM_REGS_AVX] = {};
  std::map<uint32_t, int64_t> tsv;
  struct Collected {
    uint64_t addr;
    uint32_t len;
    int nz;
  };
  std::vector<Collected> collected;
  std::vector<uint32_t> traced_tsv;
  std::vector<std::string> printed;
  int trace_result = 0; // what trace_mem returns

  void map(uint64_t addr, std::vector<uint8_t> bytes) { mem[addr] = std::move(bytes); }
  void map_str(uint64_t addr, const std::string& s) {
    std::vector<uint8_t> b(s.begin(), s.end());
    b.push_back(0);
    map(addr, b);
  }
  void map_u64(uint64_t addr, uint64_t v) {
    std::vector<uint8_t> b;
    for (int i = 0; i < 8; i++)
      b.push_back(uint8_t(v >> (8 * i)));
    map(addr, b);
  }

  static FakeTarget* self(void* o) { return static_cast<FakeTarget*>(o); }
  static int read_mem(void* o, uint64_t addr, void* buf, uint32_t len) {
    for (auto& [start, bytes] : self(o)->mem) {
      if (addr >= start && addr - start <= bytes.size() && len <= bytes.size() - (addr - start)) {
        std::copy_n(bytes.begin() + (addr - start), len, static_cast<uint8_t*>(buf));
        return 0;
      }
    }
    return AX_ERR_MEM;
  }
  static int read_reg(void* o, uint32_t regno, uint64_t* v) {
    if (regno >= GT_NUM_REGS_AVX || gt_reg_size(regno) > 8)
      return AX_ERR_REG_UNAVAILABLE;
    *v = self(o)->regs[regno];
    return 0;
  }
  static int get_tsv(void* o, uint32_t n, int64_t* v) {
    auto it = self(o)->tsv.find(n);
    if (it == self(o)->tsv.end())
      return AX_ERR_BAD_TSV;
    *v = it->second;
    return 0;
  }
  static int set_tsv(void* o, uint32_t n, int64_t v) {
    self(o)->tsv[n] = v;
    return 0;
  }
  static int trace_mem(void* o, uint64_t addr, uint32_t len, int nz) {
    self(o)->collected.push_back({addr, len, nz});
    return self(o)->trace_result;
  }
  static int trace_tsv(void* o, uint32_t n) {
    self(o)->traced_tsv.push_back(n);
    return 0;
  }
  static int printf_cb(void* o, const char* fmt, uint32_t fmt_len, uint32_t nargs,
                       const uint64_t* args) {
    char out[512];
    int n = ax_format(out, sizeof out, fmt, fmt_len, nargs, args, read_mem, o);
    if (n < 0)
      return n;
    self(o)->printed.emplace_back(out, size_t(n));
    return 0;
  }

  ax_env env(uint32_t budget = 0) {
    ax_env e{};
    e.opaque = this;
    e.read_reg = read_reg;
    e.read_mem = read_mem;
    e.get_tsv = get_tsv;
    e.set_tsv = set_tsv;
    e.trace_mem = trace_mem;
    e.trace_tsv = trace_tsv;
    e.printf = printf_cb;
    e.step_budget = budget;
    return e;
  }

  // Verifier context matching this target: AVX registers, tsvs that exist.
  static int tsv_exists(void* o, uint32_t n) { return self(o)->tsv.count(n) != 0; }
  ax_verify_ctx vctx(bool allow_trace = true) {
    ax_verify_ctx c{};
    c.num_regs = GT_NUM_REGS_AVX;
    c.tsv_exists = tsv_exists;
    c.opaque = this;
    c.allow_trace_ops = allow_trace;
    return c;
  }
};

// Verify then evaluate; returns the first error or AX_OK.
struct AxRun {
  int verify = AX_OK, eval = AX_OK;
  uint32_t err_pc = 0;
  uint64_t result = 0;
  ax_verified info{};
};

inline AxRun run_ax(FakeTarget& t, const std::vector<uint8_t>& code, bool allow_trace = true,
                    uint32_t budget = 0) {
  AxRun r;
  ax_verify_ctx ctx = t.vctx(allow_trace);
  r.verify = ax_verify(code.data(), uint32_t(code.size()), &ctx, &r.info, &r.err_pc);
  if (r.verify != AX_OK)
    return r;
  ax_env env = t.env(budget);
  r.eval = ax_eval(code.data(), &r.info, &env, &r.result);
  return r;
}

} // namespace axtest
