// Shared by the live eBPF tests: the probe sites of test_site.S and a fixture
// that creates the collector (skipping, with the kernel's reason, where BPF
// or uprobes are not usable; failing instead under CI=true or GDBTRACE_STRICT=1:
// tests/unit/strict_skip.h).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <asio/io_context.hpp>
#include <memory>

#include "../strict_skip.h"
#include "bpf/bpf_collector.h"
#include "bpf_test_util.h"

extern "C" {
extern uint64_t site_regs[16];
extern uint64_t site_rsp;
void bpf_test_site();
extern char bpf_test_probe[], bpf_test_probe5[], bpf_test_probe_rip[];
}

namespace gdbtrace::test {

class BpfLiveFixture : public ::testing::Test {
protected:
  void SetUp() override {
    auto c = make_bpf_collector(io_);
    if (!c)
      GDBTRACE_SKIP("no-ebpf") << "eBPF collector unavailable here: " << c.error().message;
    collector_ = std::move(*c);
  }
  asio::io_context io_;
  std::unique_ptr<Collector> collector_;
};

} // namespace gdbtrace::test
