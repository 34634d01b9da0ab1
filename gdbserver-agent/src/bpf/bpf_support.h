// What this kernel lets the eBPF collector do, found out at start-up by trying
// (loading tiny programs, creating a ring buffer), and the plain-words text for
// the errors users meet.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace gdbtrace::bpf {

struct KernelSupport {
  int uprobe_pmu_type = -1; // /sys/bus/event_source/devices/uprobe/type
  bool ctx_writes = false;  // uprobe programs may store to pt_regs (6.19+)
  bool sleepable = false;   // sleepable uprobe programs: bpf_copy_from_user pages memory in
  // BPF uprobe_multi links (Linux 6.6+): attach without a perf event; detaching
  // many at once shares the kernel's grace period (see attach_uprobe_link).
  bool uprobe_multi = false;
  std::optional<uint32_t> task_fsbase_offset; // thread.fsbase in task_struct (vmlinux BTF)
  std::optional<uint32_t> task_dr7_offset;    // thread.ptrace_dr7 in task_struct (vmlinux BTF)
  std::string kernel_release;
};

Result<KernelSupport> probe_kernel_support();

// Load a uprobe program; the error carries the verifier's reason and the tail
// of its log.
// LINK: for a uprobe_multi link (else for a perf-event uprobe).
Result<UniqueFd> load_uprobe_program(const std::vector<bpf_insn>& insns, const char* name,
                                     bool sleepable = false, bool link = false);

// A uprobe_multi link of PROG_FD at OFFSET in the file PATH, for the threads of
// process PID only. Closing it removes the uprobe; the kernel waits for a grace
// period per close, which concurrent closes share (close_concurrently).
// SHOWN_PATH: the file's name for error texts.
Result<UniqueFd> attach_uprobe_link(int prog_fd, const std::string& path, uint64_t offset, int pid,
                                    const std::string& shown_path, uint64_t cookie = 0);

// Closes FDS from many threads (up to 4096, each a share): every uprobe detach
// waits for an RCU-tasks grace period (tens to hundreds of ms on a busy
// machine), and waiters that overlap share one, so 200 probes go in ~one grace
// period instead of 200, and 10 000 in ~3.
void close_concurrently(std::vector<UniqueFd> fds);

// errno from bpf()/perf_event_open() in words a user can act on.
std::string explain_errno(int err, const std::string& what);

} // namespace gdbtrace::bpf
