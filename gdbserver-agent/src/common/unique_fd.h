// RAII owners of file descriptors and memory mappings. Kernel attachments hang
// off them (a BPF program, map or perf event; a /dev/gdbtrace session; the
// mapped file a uprobe is placed on): closing the last fd releases the object,
// so a crash of the stub (even SIGKILL) leaves nothing attached to the tracee.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <utility>

namespace gdbtrace {

class UniqueFd {
public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }
  void reset() {
    if (fd_ >= 0)
      close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }
  // Gives up ownership (the caller closes).
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

private:
  int fd_ = -1;
};

class Mapping {
public:
  Mapping() = default;
  Mapping(void* p, size_t n) : p_(p), n_(n) {}
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = o.n_;
    }
    return *this;
  }
  ~Mapping() { reset(); }
  void reset() {
    if (p_)
      munmap(p_, n_);
    p_ = nullptr;
  }
  void* get() const { return p_; }
  size_t size() const { return n_; }

private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

} // namespace gdbtrace
