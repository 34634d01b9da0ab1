// Helpers for the eBPF collector tests: a text assembler for agent
// expressions, verification, and a TraceContext that records what it gets.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "abi/amd64_regs.h"
#include "abi/ax_opcodes.h"
#include "ax/ax.h"
#include "trace/collector.h"
#include "trace/tracepoint.h"
#include "trace/tracepoint_parser.h"

namespace gdbtrace::test {

// Operand bytes of opcode OP (abi/ax_opcodes.def); printf is not assembled here.
inline int operand_bytes(uint8_t op) {
  return ax_opinfo(op)->operand_bytes;
}

// "const8 5 const8 7 add end" -> bytecode. Operands are decimal or 0x hex.
inline std::vector<uint8_t> ax_asm(const std::string& text) {
  std::map<std::string, uint8_t> ops;
  for (int op = 1; op < 0x40; op++)
    if (const char* n = ax_op_name(uint8_t(op)))
      ops[n] = uint8_t(op);
  std::istringstream in(text);
  std::vector<uint8_t> code;
  std::string word;
  while (in >> word) {
    auto it = ops.find(word);
    if (it == ops.end()) {
      ADD_FAILURE() << "unknown op " << word;
      return {};
    }
    code.push_back(it->second);
    int n = operand_bytes(it->second);
    if (n) {
      std::string v;
      in >> v;
      uint64_t value = std::stoull(v, nullptr, 0);
      for (int i = n - 1; i >= 0; i--)
        code.push_back(uint8_t(value >> (8 * i)));
    }
  }
  return code;
}

// CODE verified the way QTDP bytecode is (verify_expr keeps the verifier's report).
inline AgentExpr verified(const std::vector<uint8_t>& code, bool allow_trace) {
  auto e = verify_expr(code, !allow_trace, VerifyEnv{GT_NUM_REGS_AVX, {}}, "test expression");
  EXPECT_TRUE(e) << e.error().message;
  return e ? *e : AgentExpr{};
}

inline AgentExpr ax(const std::string& text, bool allow_trace = true) {
  return verified(ax_asm(text), allow_trace);
}

class FakeContext : public TraceContext {
public:
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint64_t> frame_addresses; // the location append_frame was given, per frame
  std::map<uint32_t, int64_t> tsvs;
  std::map<uint32_t, uint64_t> hits;
  std::map<uint32_t, uint64_t> pass_counts;
  std::map<uint32_t, std::vector<bool>> availability;
  std::vector<std::string> stops;
  bool stop_pending = false;
  uint32_t regblock = GT_REGBLOCK_SIZE_AVX;
  size_t capacity = 0;    // the trace buffer the collector sizes its rings from
  bool unbounded = false; // a streamed or circular run (TraceContext::unbounded_run)

  bool append_frame(std::span<const uint8_t> f, uint64_t address) override {
    frames.emplace_back(f.begin(), f.end());
    frame_addresses.push_back(address);
    return true;
  }
  uint32_t register_block_size() const override { return regblock; }
  size_t buffer_capacity() const override { return capacity; }
  bool unbounded_run() const override { return unbounded; }
  void set_register_availability(uint32_t tp, const std::vector<bool>& v) override {
    availability[tp] = v;
  }
  std::optional<int64_t> get_tsv(uint32_t n) override {
    if (n == 1)
      return trace_timestamp();
    auto it = tsvs.find(n);
    if (it == tsvs.end())
      return std::nullopt;
    return it->second;
  }
  void set_tsv(uint32_t n, int64_t v) override { tsvs[n] = v; }
  int64_t trace_timestamp() override {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  }
  void record_hit(uint32_t tp) override {
    if (++hits[tp] >= pass_counts[tp] && pass_counts[tp])
      request_stop(TraceStopReason::PassCount, "pass count", tp);
  }
  bool collecting() const override { return !stop_pending; }
  void request_stop(TraceStopReason, std::string text, uint32_t = 0) override {
    stops.push_back(text);
    stop_pending = true;
  }
  void console(const std::string&) override {}
  std::map<std::pair<uint32_t, uint64_t>, Tracepoint> definitions; // what definition() answers
  std::optional<Tracepoint> definition(uint32_t tp, uint64_t address) const override {
    auto it = definitions.find({tp, address});
    return it == definitions.end() ? std::nullopt : std::optional<Tracepoint>(it->second);
  }
};

} // namespace gdbtrace::test
