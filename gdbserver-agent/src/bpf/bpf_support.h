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
  std::optional<uint32_t> task_fsbase_offset; // thread.fsbase in task_struct (vmlinux BTF)
  std::string kernel_release;
};

Result<KernelSupport> probe_kernel_support();

// Load a uprobe program; the error carries the verifier's reason and the tail
// of its log.
Result<UniqueFd> load_uprobe_program(const std::vector<bpf_insn>& insns, const char* name,
                                     bool sleepable = false);

// errno from bpf()/perf_event_open() in words a user can act on.
std::string explain_errno(int err, const std::string& what);

} // namespace gdbtrace::bpf
