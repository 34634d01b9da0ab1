// Removing thousands of the eBPF collector's probes during a run, without gdb
// or the stub: a child stopped at the exec of PROG, a probe (`collect` of 8
// bytes) installed in one batch at each ADDRESS, then each removed with
// uninstall() (what the engine does when gdb moves a tracepoint to ptrace),
// timed. Not a test: the figures for docs/benchmarks.md (issue 30).
//   bpf_remove_bench PROG ADDRESS...   (addresses as `nm PROG` prints them)
// prints "probes=N install_s=X remove_s=Y remove_us_per_probe=Z remove_cpu_s=C": the wall time is
// mostly the kernel's wait for a grace period as each link closes (asleep); the CPU time
// (user + system) is the collector's own work and the kernel's unregistering.
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <asio/io_context.hpp>

#include "bpf/bpf_collector.h"
#include "bpf_test_util.h"

namespace {

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int fail(const std::string& why) {
  fprintf(stderr, "bpf_remove_bench: %s\n", why.c_str());
  return 2;
}

// Where PROG's first mapping starts in PID (its load base, for a PIE).
uint64_t load_base(int pid, const std::string& prog) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  char real[4096] = {};
  std::string path = realpath(prog.c_str(), real) ? real : prog;
  while (std::getline(maps, line))
    if (line.size() >= path.size() &&
        line.compare(line.size() - path.size(), path.size(), path) == 0)
      return std::stoull(line.substr(0, line.find('-')), nullptr, 16);
  return 0;
}

bool is_pie(const std::string& prog) {
  Elf64_Ehdr h{};
  std::ifstream f(prog, std::ios::binary);
  return f.read(reinterpret_cast<char*>(&h), sizeof h) && h.e_type == ET_DYN;
}

} // namespace

int main(int argc, char** argv) {
  using namespace gdbtrace;
  using clock = std::chrono::steady_clock;
  if (argc < 3)
    return fail("usage: bpf_remove_bench PROG ADDRESS...");
  pid_t child = fork();
  if (child == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    execl(argv[1], argv[1], "0", nullptr);
    _exit(127);
  }
  int st = 0;
  if (child < 0 || waitpid(child, &st, 0) != child || !WIFSTOPPED(st))
    return fail("cannot start " + std::string(argv[1]));
  uint64_t base = is_pie(argv[1]) ? load_base(child, argv[1]) : 0;
  asio::io_context io;
  test::FakeContext ctx;
  ctx.capacity = 64000000;
  auto c = make_bpf_collector(io);
  if (!c)
    return fail(c.error().message);
  auto& collector = **c;
  static volatile uint64_t sink = 0;
  std::vector<Tracepoint> tps(size_t(argc - 2));
  for (size_t i = 0; i < tps.size(); i++) {
    tps[i].number = uint32_t(i + 1);
    tps[i].address = base + strtoull(argv[i + 2], nullptr, 16);
    tps[i].actions.emplace_back(CollectMemory{-1, int64_t(uintptr_t(&sink)), 8});
  }
  auto t0 = clock::now();
  collector.begin_install_batch();
  for (const auto& tp : tps)
    if (auto r = collector.install(child, tp, ctx); !r)
      return fail("tracepoint " + std::to_string(tp.number) + ": " + r.error().message);
  if (auto r = collector.end_install_batch(); !r)
    return fail(r.error().message);
  auto t1 = clock::now();
  double cpu0 = cpu_s();
  for (const auto& tp : tps)
    if (auto r = collector.uninstall(tp.number, tp.address); !r)
      return fail(r.error().message);
  auto t2 = clock::now();
  double cpu = cpu_s() - cpu0;
  collector.remove_all();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto s = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  printf("probes=%zu install_s=%.2f remove_s=%.3f remove_us_per_probe=%.1f remove_cpu_s=%.3f\n",
         tps.size(), s(t1 - t0), s(t2 - t1), s(t2 - t1) * 1e6 / double(tps.size()), cpu);
  return 0;
}
