// Per-hit cost of the eBPF collector without gdb or the stub: probes this
// process's own site (test_site.c: loads 15 registers, then a `nop`) and times
// the calls. Used by bench/ebpf.sh next to a tracefs uprobe on the same nop.
//   bpf_bench untraced|sink|regs N
// prints "ns_per_iter=X frames=F drops=D"; the time spent draining the ring
// (done here every 4096 calls, in the stub it runs on its own) is not counted.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include <asio/io_context.hpp>

#include "bpf/bpf_collector.h"
#include "bpf_test_util.h"

extern "C" {
uint64_t site_regs[16];
uint64_t site_rsp;
void bpf_test_site();
extern char bpf_test_probe[];
}

namespace {
volatile uint64_t sink_value = 42;
}

int main(int argc, char** argv) {
  using namespace gdbtrace;
  using clock = std::chrono::steady_clock;
  std::string mode = argc > 1 ? argv[1] : "untraced";
  long n = argc > 2 ? atol(argv[2]) : 100000;
  asio::io_context io;
  test::FakeContext ctx;
  ctx.capacity = 400000000; // bench/'s `set trace-buffer-size`: the rings the stub would have
  std::unique_ptr<Collector> collector;
  const uint64_t tp_address = uint64_t(uintptr_t(bpf_test_probe));
  if (mode != "untraced") {
    auto c = make_bpf_collector(io);
    if (!c) {
      fprintf(stderr, "bpf_bench: %s\n", c.error().message.c_str());
      return 2;
    }
    collector = std::move(*c);
    Tracepoint tp;
    tp.number = 1;
    tp.address = tp_address;
    if (mode == "regs")
      tp.actions.push_back(CollectRegisters{});
    else
      tp.actions.push_back(CollectMemory{-1, int64_t(uintptr_t(&sink_value)), 8});
    if (auto r = collector->install(getpid(), tp, ctx); !r) {
      fprintf(stderr, "bpf_bench: %s\n", r.error().message.c_str());
      return 2;
    }
  }
  clock::duration drain_time{};
  auto start = clock::now();
  for (long i = 0; i < n; i++) {
    bpf_test_site();
    if (collector && (i & 4095) == 4095) {
      auto d0 = clock::now();
      collector->drain();
      ctx.frames.clear(); // keep memory flat; stats() has the counts (frames = hits - drops)
      ctx.frame_addresses.clear();
      drain_time += clock::now() - d0;
    }
  }
  auto total = clock::now() - start - drain_time;
  CollectorStats st;
  if (collector) {
    collector->drain();
    st = collector->stats(1, tp_address);
    collector->remove_all();
  }
  double ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(total).count()) / n;
  printf("mode=%s n=%ld ns_per_iter=%.1f frames=%llu drops=%llu\n", mode.c_str(), n, ns,
         (unsigned long long)(st.hits - st.drops), (unsigned long long)st.drops);
  return 0;
}
