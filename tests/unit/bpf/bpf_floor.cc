// The kernel's own per-hit cost of N uprobe sites, without gdb or the stub:
// a bare BPF program (r0 = 0; exit) attached as the eBPF collector attaches
// its probes (one uprobe_multi link per site, a cookie each, filtered to the
// tracee's pid), then ARGV run. bench/tracepoints.sh takes the floor at 1,
// 1 000 and 10 000 sites from it, in the same rounds as the collector, so the
// collector's growth with the site count can be told from the kernel's
// (uprobe lookup by inode and offset, the breakpoint itself).
//   bpf_floor PATH OFFSET... -- ARGV...
// The tracee's output goes to ours; exits with the tracee's status, or 2.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bpf/bpf_insn.h"
#include "bpf/bpf_support.h"

namespace {

int fail(const std::string& why) {
  fprintf(stderr, "bpf_floor: %s\n", why.c_str());
  return 2;
}

// A child that waits for a byte on FD, then execs ARGV (its pid is known before
// the exec, so the links can be filtered to it as the collector's are).
pid_t start_waiting(char** argv, int fd) {
  pid_t pid = fork();
  if (pid == 0) {
    char go = 0;
    if (read(fd, &go, 1) != 1)
      _exit(127);
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

} // namespace

int main(int argc, char** argv) {
  using namespace gdbtrace;
  int sep = 1;
  while (sep < argc && std::string(argv[sep]) != "--")
    sep++;
  if (sep < 3 || sep + 1 >= argc)
    return fail("usage: bpf_floor PATH OFFSET... -- ARGV...");
  std::string path = argv[1];
  std::vector<uint64_t> offsets;
  for (int i = 2; i < sep; i++)
    offsets.push_back(strtoull(argv[i], nullptr, 0));
  auto prog = bpf::load_uprobe_program({bpf::mov64_imm(bpf::R0, 0), bpf::exit_insn()}, "gt_floor",
                                       false, true);
  if (!prog)
    return fail(prog.error().message);
  int go[2];
  if (pipe(go) != 0)
    return fail("pipe");
  pid_t child = start_waiting(argv + sep + 1, go[0]);
  close(go[0]);
  if (child < 0)
    return fail("fork");
  std::vector<UniqueFd> links;
  for (size_t i = 0; i < offsets.size(); i++) {
    auto link = bpf::attach_uprobe_link(prog->get(), path, offsets[i], child, path, i);
    if (!link) {
      close(go[1]);
      waitpid(child, nullptr, 0);
      return fail(link.error().message);
    }
    links.push_back(std::move(*link));
  }
  char byte = 1;
  if (write(go[1], &byte, 1) != 1)
    return fail("cannot start the tracee");
  close(go[1]);
  int st = 0;
  waitpid(child, &st, 0);
  bpf::close_concurrently(std::move(links));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
