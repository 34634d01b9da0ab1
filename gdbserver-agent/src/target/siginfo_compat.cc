#include "target/siginfo_compat.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sys/ptrace.h>
#include <vector>

namespace gdbtrace {
namespace {

constexpr size_t kSiginfoSize = 128;

// One union field: offset and size in the 64-bit and the i386 layout. Signed
// fields (clock_t, long) are sign-extended on the way to 64 bits.
struct Field {
  unsigned native, native_size, compat, compat_size;
  bool is_signed = false;
};

// si_signo, si_errno, si_code: the same 12 bytes in both layouts.
constexpr Field kHeader{0, 12, 0, 12};
constexpr Field kPid{16, 4, 12, 4}, kUid{20, 4, 16, 4}, kSigval{24, 8, 20, 4};
constexpr Field kTimerId{16, 4, 12, 4}, kOverrun{20, 4, 16, 4};
constexpr Field kStatus{24, 4, 20, 4}, kUtime{32, 8, 24, 4, true}, kStime{40, 8, 28, 4, true};
constexpr Field kAddr{16, 8, 12, 4}, kAddrLsb{24, 2, 16, 2}, kLower{32, 8, 20, 4},
    kUpper{40, 8, 24, 4};
constexpr Field kBand{16, 8, 12, 4, true}, kFd{24, 4, 16, 4};

// The union member gdb shows, chosen as amd64-linux-siginfo.c chooses it.
std::vector<Field> fields_of(int signo, int code) {
  if (code == SI_TIMER)
    return {kTimerId, kOverrun, kSigval};
  if (code == SI_USER)
    return {kPid, kUid};
  if (code == SEGV_BNDERR && signo == SIGSEGV)
    return {kAddr, kAddrLsb, kLower, kUpper};
  if (code < 0)
    return {kPid, kUid, kSigval};
  switch (signo) {
  case SIGCHLD:
    return {kPid, kUid, kStatus, kUtime, kStime};
  case SIGILL:
  case SIGFPE:
  case SIGSEGV:
  case SIGBUS:
    return {kAddr, kAddrLsb};
  case SIGPOLL:
    return {kBand, kFd};
  default:
    return {kPid, kUid, kSigval};
  }
}

} // namespace

std::string siginfo_to_compat(const siginfo_t& native) {
  const auto* in = reinterpret_cast<const uint8_t*>(&native);
  std::string out(kSiginfoSize, '\0');
  std::memcpy(out.data(), in, kHeader.native_size);
  for (const Field& f : fields_of(native.si_signo, native.si_code))
    std::memcpy(out.data() + f.compat, in + f.native, f.compat_size); // the low bytes
  return out;
}

siginfo_t siginfo_from_compat(std::string_view data) {
  uint8_t in[kSiginfoSize] = {};
  std::memcpy(in, data.data(), std::min(data.size(), kSiginfoSize));
  siginfo_t native;
  std::memset(&native, 0, sizeof native);
  auto* out = reinterpret_cast<uint8_t*>(&native);
  std::memcpy(out, in, kHeader.native_size);
  for (const Field& f : fields_of(native.si_signo, native.si_code)) {
    bool negative = f.is_signed && (in[f.compat + f.compat_size - 1] & 0x80);
    std::memset(out + f.native, negative ? 0xff : 0, f.native_size);
    std::memcpy(out + f.native, in + f.compat, f.compat_size);
  }
  return native;
}

Result<std::string> read_thread_siginfo(pid_t tid, bool i386) {
  siginfo_t si{};
  if (ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si) != 0)
    return make_error(errno, std::string("PTRACE_GETSIGINFO: ") + std::strerror(errno));
  if (i386)
    return siginfo_to_compat(si); // gdb reads it with the program's own layout
  return std::string(reinterpret_cast<const char*>(&si), sizeof si);
}

Result<void> write_thread_siginfo(pid_t tid, bool i386, std::string_view data) {
  siginfo_t si{};
  if (ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si) != 0)
    return make_error(errno, std::string("PTRACE_GETSIGINFO: ") + std::strerror(errno));
  if (i386) {
    // Over the compat image of what the thread has, so bytes gdb did not send stay.
    std::string compat = siginfo_to_compat(si);
    compat.replace(0, std::min(data.size(), compat.size()), data.substr(0, compat.size()));
    si = siginfo_from_compat(compat);
  } else {
    std::memcpy(&si, data.data(), std::min(data.size(), sizeof si));
  }
  if (ptrace(PTRACE_SETSIGINFO, tid, nullptr, &si) != 0)
    return make_error(errno, std::string("PTRACE_SETSIGINFO: ") + std::strerror(errno));
  return ok();
}

} // namespace gdbtrace
