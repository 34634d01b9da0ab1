// libFuzzer target: frames as a collector hands them to the engine (the
// kernel module's and the BPF program's rings are outside the stub's
// control), then everything that reads the trace buffer back: the tfind
// index (QTFrame by number, pc, tracepoint, range), the selected frame's
// registers, memory and traceframe-info, the bulk frame packet
// (qGdbtrace.frames), qTBuffer, target-side tsave (QTSave, to /dev/null) and
// qTStatus.
//
// Input: records [kind u8][len u16 little endian][len bytes]; kind even = a
// frame for the engine, kind odd = a packet for the tracepoint rows. A frame
// the engine accepts must read back as it was written.
#include <asio/io_context.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "abi/amd64_regs.h"
#include "common/hex.h"
#include "fake_target.h"
#include "server/packet_table.h"
#include "server/trace_protocol.h"
#include "trace/trace_engine.h"

using namespace gdbtrace;

namespace {

// Hands frames to the engine when it drains, like the module and eBPF collectors.
class ScriptedCollector : public Collector {
public:
  std::vector<std::vector<uint8_t>> pending;
  TraceContext* ctx = nullptr;
  std::string name() const override { return "scripted"; }
  unsigned caps() const override { return kProbesInKernel; }
  Result<void> check(const Tracepoint&) const override { return {}; }
  Result<void> install(Pid, const Tracepoint&, TraceContext& c) override {
    ctx = &c;
    return {};
  }
  Result<void> set_enabled(uint32_t, uint64_t, bool) override { return {}; }
  void remove_all() override {}
  void drain() override {
    for (auto& f : pending)
      if (ctx)
        ctx->append_frame(f, 0);
    pending.clear();
  }
  CollectorStats stats(uint32_t, uint64_t) const override { return {}; }
};

// QTSave may only write to /dev/null here: the fuzzer must not litter the disk.
bool harmless(std::string_view packet) {
  static const std::string dev_null = "QTSave:" + hex::encode(std::string_view("/dev/null"));
  return !packet.starts_with("QTSave:") || packet == dev_null;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  asio::io_context io;
  test::FakeTarget target;
  for (uint64_t a = 0x401000; a < 0x401040; ++a)
    target.memory[a] = static_cast<uint8_t>(a);
  TraceEngine::Hooks hooks;
  hooks.console = [](const std::string&) {};
  hooks.current_pid = [] { return Pid{1}; };
  TraceEngine engine(io, target, hooks);
  // A small buffer until an input asks for another (QTBuffer:size): ASan
  // poisons and scrubs the whole default 5 MB reservation at every QTStart and
  // free, which was half of each execution; it also reaches "buffer full".
  (void)engine.set_buffer_size(64 * 1024);
  engine.set_buffer_limit(128 << 20); // a small machine: see fuzz_server_packets.cc
  auto owned = std::make_unique<ScriptedCollector>();
  ScriptedCollector* collector = owned.get();
  engine.add_collector(std::move(owned));
  TraceProtocol protocol(engine, [](const std::string&) {});
  PacketTable packets;
  packets.add(protocol.rows());
  auto send = [&](std::string_view p) {
    if (harmless(p))
      (void)packets.dispatch(p);
  };
  for (auto p :
       {"QTinit", "QTDP:1:401000:E:0:0-", "QTDP:-1:401000:R01", "QTDP:2:401010:E:0:0", "QTStart"})
    send(p);

  std::vector<uint8_t> memory(4096);
  for (size_t off = 0; off + 3 <= size;) {
    uint8_t kind = data[off];
    size_t len = data[off + 1] | size_t(data[off + 2]) << 8;
    off += 3;
    len = std::min(len, size - off);
    std::string_view body(reinterpret_cast<const char*>(data) + off, len);
    off += len;
    if (kind % 2 == 0) {
      collector->pending.emplace_back(body.begin(), body.end());
      continue;
    }
    send(body);
    if (engine.frame_selected()) {
      (void)engine.frame_registers();
      uint64_t address = 0x401000 + (kind >> 1) * 8;
      (void)engine.frame_memory(address, std::span<uint8_t>(memory.data(), kind));
      (void)engine.traceframe_info_xml();
    }
  }
  send("qTStatus");
  send("QTStop");
  send("qGdbtrace.frames:0,100000");
  return 0;
}
