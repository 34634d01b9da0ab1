#include "kmod/emulation_selftest.h"

#include <cstring>
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi/amd64_regs.h"
#include "kmod/module_session.h"
#include "trace/collector_probe_site.h"

// The self-test's probed function: its first instruction (48 83 c7 01) is one
// the module emulates; run once it returns 1, run twice (emulated +
// single-stepped) 2.
extern "C" long gdbtrace_kmod_emu_selftest_fn(long);
asm(".pushsection .text\n"
    ".globl gdbtrace_kmod_emu_selftest_fn\n"
    ".type gdbtrace_kmod_emu_selftest_fn, @function\n"
    "gdbtrace_kmod_emu_selftest_fn:\n"
    "  add $1, %rdi\n"
    "  mov %rdi, %rax\n"
    "  ret\n"
    ".size gdbtrace_kmod_emu_selftest_fn, .-gdbtrace_kmod_emu_selftest_fn\n"
    ".popsection\n");

namespace gdbtrace::kmod {

bool kernel_honours_emulation() {
  auto session = ModuleSession::open();
  if (!session || !session->init(GT_REGBLOCK_SIZE_NOAVX, 16))
    return false;
  const auto* fn = reinterpret_cast<const uint8_t*>(&gdbtrace_kmod_emu_selftest_fn);

  int go[2], res[2];
  if (::pipe2(go, O_CLOEXEC) != 0)
    return false;
  if (::pipe2(res, O_CLOEXEC) != 0) {
    ::close(go[0]);
    ::close(go[1]);
    return false;
  }
  pid_t child = ::fork();
  if (child == 0) {
    // The module probes only processes whose ptracer asks: the parent adds the
    // probe only after it read the ready byte that follows PTRACE_TRACEME (else,
    // on a slow machine, the probe request can come first and be refused).
    char c = ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == 0 ? 'r' : 'x';
    long r = -1;
    if (::write(res[1], &c, 1) == 1 && c == 'r' && ::read(go[0], &c, 1) == 1)
      r = gdbtrace_kmod_emu_selftest_fn(0);
    (void)!::write(res[1], &r, sizeof r);
    ::_exit(0);
  }
  ::close(go[0]);
  ::close(res[1]);
  bool honoured = false;
  char ready = 0;
  if (child > 0 && ::read(res[0], &ready, 1) == 1 && ready == 'r') {
    if (auto site = resolve_probe_site(child, reinterpret_cast<uint64_t>(fn))) {
      gdbtrace_probe_add req{};
      req.pid = child;
      req.fd = site->fd.get();
      req.offset = site->offset;
      req.address = reinterpret_cast<uint64_t>(fn);
      req.flags = GDBTRACE_PROBE_DISABLED | GDBTRACE_PROBE_EMULATE; // no frames, only the emulation
      auto id = session->add_probe(req);
      long r = 0;
      bool ran = ::write(go[1], "g", 1) == 1 && ::read(res[0], &r, sizeof r) == sizeof r;
      if (ran && id) {
        auto st = session->probe_status(*id);
        honoured = r == 1 && st && st->emulated == 1 && req.emu.op == GDBTRACE_EMU_ADD_IMM;
      }
    }
    ::close(go[1]);
    ::close(res[0]);
    int status;
    ::waitpid(child, &status, 0);
    return honoured;
  }
  ::close(go[1]); // the child's read ends: it exits
  ::close(res[0]);
  if (child > 0) {
    int status;
    ::waitpid(child, &status, 0);
  }
  return false;
}

} // namespace gdbtrace::kmod
