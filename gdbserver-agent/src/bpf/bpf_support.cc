#include "bpf/bpf_support.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bpf/bpf_insn.h"

namespace gdbtrace::bpf {
namespace {

// Last lines of a verifier log (the reason is at the end).
std::string log_tail(const std::string& log, size_t lines) {
  std::vector<std::string> all;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);)
    if (!l.empty())
      all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); i++)
    out += "\n  " + all[i];
  return out;
}

// Byte offset of member NAME in struct TYPE_ID, looking into anonymous members.
std::optional<uint32_t> member_offset(const btf* b, uint32_t type_id, const char* name) {
  const btf_type* t = btf__type_by_id(b, type_id);
  if (!t || (!btf_is_struct(t) && !btf_is_union(t)))
    return std::nullopt;
  const btf_member* m = btf_members(t);
  for (uint16_t i = 0; i < btf_vlen(t); i++, m++) {
    const char* n = btf__name_by_offset(b, m->name_off);
    uint32_t bits = btf_member_bit_offset(t, i);
    if (n && strcmp(n, name) == 0)
      return bits / 8;
    if (!n || !*n) {
      if (auto inner = member_offset(b, btf__resolve_type(b, m->type), name))
        return bits / 8 + *inner;
    }
  }
  return std::nullopt;
}

// Offsets in task_struct of thread.fsbase and thread.ptrace_dr7, from vmlinux BTF.
struct TaskThreadOffsets {
  std::optional<uint32_t> fsbase, ptrace_dr7;
};

TaskThreadOffsets find_task_thread_offsets() {
  TaskThreadOffsets result;
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux || libbpf_get_error(vmlinux))
    return result;
  int task = btf__find_by_name_kind(vmlinux, "task_struct", BTF_KIND_STRUCT);
  int ts = btf__find_by_name_kind(vmlinux, "thread_struct", BTF_KIND_STRUCT);
  if (task > 0 && ts > 0) {
    uint32_t thread = member_offset(vmlinux, uint32_t(task), "thread").value_or(UINT32_MAX);
    auto in_thread = [&](const char* name) -> std::optional<uint32_t> {
      auto m = member_offset(vmlinux, uint32_t(ts), name);
      if (thread == UINT32_MAX || !m)
        return std::nullopt;
      return thread + *m;
    };
    result.fsbase = in_thread("fsbase");
    result.ptrace_dr7 = in_thread("ptrace_dr7");
  }
  btf__free(vmlinux);
  return result;
}

Result<int> read_uprobe_pmu_type() {
  std::ifstream f("/sys/bus/event_source/devices/uprobe/type");
  int type = -1;
  if (!(f >> type))
    return make_error(ENOTSUP, "this kernel has no uprobe perf PMU "
                               "(/sys/bus/event_source/devices/uprobe/type missing: "
                               "CONFIG_UPROBE_EVENTS off?)");
  return type;
}

// BPF_TRACE_UPROBE_MULTI and its link_create attributes (uapi of Linux 6.6;
// the libbpf headers this builds with predate them).
constexpr uint32_t kAttachUprobeMulti = 48;
struct UprobeMultiLinkAttr {
  uint32_t prog_fd, target_fd, attach_type, flags;
  uint64_t path, offsets, ref_ctr_offsets, cookies;
  uint32_t cnt, multi_flags, pid;
};
union LinkCreateAttr {
  UprobeMultiLinkAttr link;
  uint8_t bytes[128]; // the kernel checks that what it does not know is zero
};

} // namespace

Result<UniqueFd> attach_uprobe_link(int prog_fd, const std::string& path, uint64_t offset, int pid,
                                    const std::string& shown_path, uint64_t cookie) {
  LinkCreateAttr attr{};
  uint64_t offsets[1] = {offset};
  uint64_t cookies[1] = {cookie};
  attr.link.cookies = uint64_t(uintptr_t(cookies));
  attr.link.prog_fd = uint32_t(prog_fd);
  attr.link.attach_type = kAttachUprobeMulti;
  attr.link.path = uint64_t(uintptr_t(path.c_str()));
  attr.link.offsets = uint64_t(uintptr_t(offsets));
  attr.link.cnt = 1;
  attr.link.pid = uint32_t(pid);
  int fd = int(syscall(SYS_bpf, BPF_LINK_CREATE, &attr, sizeof attr));
  if (fd < 0)
    return make_error(errno, explain_errno(errno, "uprobe on " + shown_path + " offset " +
                                                      std::to_string(offset)));
  return UniqueFd(fd);
}

namespace {

struct CloserShare {
  std::vector<UniqueFd>* fds;
  size_t first, step;
};

void* close_share(void* arg) {
  auto* share = static_cast<CloserShare*>(arg);
  for (size_t i = share->first; i < share->fds->size(); i += share->step)
    (*share->fds)[i].reset();
  return nullptr;
}

} // namespace

void close_concurrently(std::vector<UniqueFd> fds) {
  if (fds.size() <= 1)
    return; // the destructor closes it
  // Up to kMaxClosers threads, each closing every kMaxClosers-th fd: 10 000
  // links close in ~3 rounds of shared grace periods without a thread each (a
  // thread limit, e.g. a container's pids.max, would otherwise make the rest
  // close one after another, a grace period each). The threads only wait in
  // close(): 64 KB stacks.
  constexpr size_t kMaxClosers = 4096;
  size_t nthreads = std::min(fds.size(), kMaxClosers);
  std::vector<CloserShare> shares(nthreads);
  std::vector<pthread_t> closers;
  closers.reserve(nthreads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (size_t t = 0; t < nthreads; t++) {
    shares[t] = CloserShare{&fds, t, nthreads};
    pthread_t th;
    if (pthread_create(&th, &attr, close_share, &shares[t]) != 0)
      break; // no thread left: what the started ones do not close closes below
    closers.push_back(th);
  }
  pthread_attr_destroy(&attr);
  for (pthread_t th : closers)
    pthread_join(th, nullptr);
  if (closers.size() < nthreads)
    for (auto& fd : fds)
      fd.reset();
}

std::string explain_errno(int err, const std::string& what) {
  std::string s = what + ": " + strerror(err);
  if (err == EPERM || err == EACCES)
    s += " (needs root or CAP_BPF + CAP_PERFMON; check kernel.unprivileged_bpf_disabled and "
         "kernel.perf_event_paranoid)";
  else if (err == ENOSYS)
    s += " (kernel built without BPF syscall support)";
  else if (err == ENOENT)
    s += " (file or kernel feature missing)";
  else if (err == 524) // the kernel's ENOTSUPP
    s += " (the kernel cannot place a uprobe on this instruction)";
  else if (err == EMFILE)
    s += " (too many open files: every eBPF tracepoint holds one; raise the hard limit, "
         "ulimit -Hn, which the stub takes as its own at start)";
  return s;
}

Result<UniqueFd> load_uprobe_program(const std::vector<bpf_insn>& insns, const char* name,
                                     bool sleepable, bool link) {
  LIBBPF_OPTS(bpf_prog_load_opts, opts,
              .expected_attach_type = bpf_attach_type(link ? kAttachUprobeMulti : 0),
              .prog_flags = sleepable ? BPF_F_SLEEPABLE : 0u, .log_level = 0);
  int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, name, "GPL", insns.data(), insns.size(), &opts);
  // The log buffer only for a refused program: a megabyte cleared per load was
  // a large part of tstart with thousands of tracepoints.
  std::string log;
  if (fd < 0 && errno != EPERM && errno != EMFILE) {
    log.assign(1 << 20, '\0');
    opts.log_level = 1;
    opts.log_size = uint32_t(log.size());
    opts.log_buf = log.data();
    fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, name, "GPL", insns.data(), insns.size(), &opts);
  }
  if (fd >= 0)
    return UniqueFd(fd);
  int err = errno;
  std::string text = explain_errno(err, "the kernel refused the BPF program");
  log.resize(strnlen(log.data(), log.size()));
  if (!log.empty())
    text += "; verifier log (end):" + log_tail(log, 6);
  return make_error(err, text);
}

Result<KernelSupport> probe_kernel_support() {
  KernelSupport ks;
  utsname u{};
  uname(&u);
  ks.kernel_release = u.release;
  auto type = read_uprobe_pmu_type();
  if (!type)
    return type.error();
  ks.uprobe_pmu_type = *type;

  // A program that only returns: can we load BPF at all?
  std::vector<bpf_insn> trivial{mov64_imm(R0, 0), exit_insn()};
  auto loaded = load_uprobe_program(trivial, "gdbtrace_probe");
  if (!loaded)
    return make_error(loaded.error().code, "eBPF unusable: " + loaded.error().message);

  // Sleepable uprobe programs can read user memory that is not paged in yet.
  std::vector<bpf_insn> copies{st_imm(BPF_DW, R10, -8, 0), mov64_reg(R1, R10),
                               alu64_imm(BPF_ADD, R1, -8), mov64_imm(R2, 8),
                               ldx(BPF_DW, R3, R1, 0),     call(BPF_FUNC_copy_from_user),
                               mov64_imm(R0, 0),           exit_insn()};
  ks.sleepable = bool(load_uprobe_program(copies, "gdbtrace_sprobe", true));
  // uprobe_multi links (Linux 6.6+). Kernels before them accept the attach type when loading
  // and refuse only the link (EINVAL): try one on a path that is not a regular file, which a
  // kernel with these links refuses with EBADF (libbpf's probe_uprobe_multi_link does the same).
  if (auto multi = load_uprobe_program(trivial, "gdbtrace_mprobe", ks.sleepable, true)) {
    auto link = attach_uprobe_link(multi->get(), "/", 0, 0, "/");
    ks.uprobe_multi = !link && link.error().code == EBADF;
  }

  // Can a uprobe program write registers (pt_regs->ip)? Upstream 7384893d970e, Linux 6.19.
  // Tried as the collector's programs are loaded (sleepable, for a uprobe_multi link).
  std::vector<bpf_insn> writes{ldx(BPF_DW, R2, R1, 128), stx(BPF_DW, R1, 128, R2), mov64_imm(R0, 0),
                               exit_insn()};
  ks.ctx_writes =
      bool(load_uprobe_program(writes, "gdbtrace_wprobe", ks.sleepable, ks.uprobe_multi));

  UniqueFd rb(bpf_map_create(BPF_MAP_TYPE_RINGBUF, "gdbtrace_probe", 0, 0, 4096, nullptr));
  if (!rb)
    return make_error(errno, explain_errno(errno, "cannot create a BPF ring buffer "
                                                  "(needs Linux 5.8+)"));
  auto offsets = find_task_thread_offsets();
  ks.task_fsbase_offset = offsets.fsbase;
  ks.task_dr7_offset = offsets.ptrace_dr7;
  return ks;
}

} // namespace gdbtrace::bpf
