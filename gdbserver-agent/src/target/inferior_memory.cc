#include "target/inferior_memory.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <string>
#include <sys/ptrace.h>
#include <unistd.h>

namespace gdbtrace {
namespace {

Error memory_error(int e, const char* what, uint64_t address) {
  std::ostringstream s;
  s << "cannot " << what << " memory at 0x" << std::hex << address << ": " << std::strerror(e);
  return make_error(e, s.str());
}

// PTRACE_PEEK/POKEDATA move aligned 8-byte words. Walks [ADDRESS, +SIZE) a
// word at a time: each word is peeked, then VISIT(word_addr, word, skip, n,
// done) uses bytes [skip, skip+n) of it and returns 0 or an errno. The first
// failure ends the walk: a partial count, or the error when nothing was done.
template <typename Visit>
Result<size_t> walk_words(pid_t pid, uint64_t address, size_t size, const char* what, Visit visit) {
  size_t done = 0;
  while (done < size) {
    uint64_t at = address + done;
    uint64_t word_addr = at & ~7ull;
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, pid, (void*)word_addr, nullptr);
    int err = errno;
    size_t skip = at - word_addr;
    size_t n = std::min<size_t>(8 - skip, size - done);
    if (err == 0)
      err = visit(word_addr, word, skip, n, done);
    if (err != 0) {
      if (done > 0)
        break;
      return memory_error(err, what, address);
    }
    done += n;
  }
  return done;
}

} // namespace

void InferiorMemory::open(pid_t pid) {
  close();
  pid_ = pid;
  std::string path = "/proc/" + std::to_string(pid) + "/mem";
  fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0)
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

void InferiorMemory::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

Result<size_t> InferiorMemory::read(uint64_t address, std::span<uint8_t> out) {
  if (fd_ < 0)
    return peek(address, out);
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread64(fd_, out.data() + done, out.size() - done, address + done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (done > 0)
        break;
      if (n == 0)
        return memory_error(EIO, "read", address);
      return memory_error(errno, "read", address);
    }
    done += n;
  }
  return done;
}

Result<size_t> InferiorMemory::write(uint64_t address, std::span<const uint8_t> data) {
  if (fd_ < 0)
    return poke(address, data);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite64(fd_, data.data() + done, data.size() - done, address + done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EBADF) // opened read-only: write word by word
      return poke(address, data);
    if (n <= 0) {
      if (done > 0)
        break;
      return memory_error(n == 0 ? EIO : errno, "write", address);
    }
    done += n;
  }
  return done;
}

Result<size_t> InferiorMemory::peek(uint64_t address, std::span<uint8_t> out) {
  return walk_words(pid_, address, out.size(), "read",
                    [&](uint64_t, long& word, size_t skip, size_t n, size_t done) {
                      std::memcpy(out.data() + done, reinterpret_cast<uint8_t*>(&word) + skip, n);
                      return 0;
                    });
}

Result<size_t> InferiorMemory::poke(uint64_t address, std::span<const uint8_t> data) {
  return walk_words(pid_, address, data.size(), "write",
                    [&](uint64_t word_addr, long& word, size_t skip, size_t n, size_t done) {
                      std::memcpy(reinterpret_cast<uint8_t*>(&word) + skip, data.data() + done, n);
                      return ptrace(PTRACE_POKEDATA, pid_, (void*)word_addr, (void*)word) == 0
                                 ? 0
                                 : errno;
                    });
}

} // namespace gdbtrace
