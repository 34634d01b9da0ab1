#include "kmod/module_session.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace gdbtrace::kmod {

Result<ModuleSession> ModuleSession::open(const char* path) {
  UniqueFd fd(::open(path, O_RDWR | O_CLOEXEC));
  if (!fd) {
    int e = errno;
    std::string why = std::string(path) + ": " + std::strerror(e);
    if (e == ENOENT)
      why += " (gdbtrace.ko is not loaded)";
    else if (e == EACCES)
      why += " (root's by default; an administrator may grant a group with the udev rule "
             "60-gdbtrace.rules shipped with the module)";
    return make_error(e, why);
  }
  return ModuleSession(std::move(fd));
}

Result<void> ModuleSession::ioctl_checked(unsigned long cmd, void* arg, const char* what) const {
  if (::ioctl(fd_.get(), cmd, arg) != 0)
    return make_error(errno, std::string("gdbtrace.ko ") + what + ": " + std::strerror(errno));
  return ok();
}

Result<void> ModuleSession::init(uint32_t regblock_size, uint32_t ring_shift) {
  gdbtrace_init in{};
  in.version = GDBTRACE_UAPI_VERSION;
  in.regblock_size = regblock_size;
  in.ring_shift = ring_shift;
  if (::ioctl(fd_.get(), GDBTRACE_IOC_INIT, &in) != 0) {
    int e = errno;
    // ENOTTY: a module from before uapi 2 (other ioctl numbers).
    if (e == EPROTO || e == ENOTTY)
      return make_error(e, "gdbtrace.ko speaks another API version than this gdbtrace-server");
    if (e == EMFILE)
      return make_error(e, "gdbtrace.ko: this user already holds the most sessions it may (8)");
    return make_error(e, std::string("gdbtrace.ko session init: ") + std::strerror(e));
  }
  void* m = ::mmap(nullptr, in.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
  if (m == MAP_FAILED)
    return make_error(errno, std::string("mmap of the gdbtrace.ko rings: ") + std::strerror(errno));
  // Inferiors forked by this process must not inherit the rings.
  ::madvise(m, in.mmap_size, MADV_DONTFORK);
  init_ = in;
  map_ = Mapping(m, in.mmap_size);
  return ok();
}

Result<uint32_t> ModuleSession::add_probe(gdbtrace_probe_add& req) {
  if (::ioctl(fd_.get(), GDBTRACE_IOC_ADD, &req) != 0) {
    int e = errno;
    std::string why;
    switch (e) {
    case EPERM:
      why = "not permitted: gdbtrace.ko probes only processes this stub is the ptracer of";
      break;
    case EOPNOTSUPP:
      why = "the kernel module cannot run this bytecode (agent printf)";
      break;
    case EINVAL:
      why = "rejected by gdbtrace.ko (invalid probe, bytecode or address)";
      break;
    case ESTALE:
      why = "the process no longer maps this file at this address (exec or unmap?)";
      break;
    default:
      why = std::strerror(e);
    }
    return make_error(e, "gdbtrace.ko: " + why);
  }
  return req.id;
}

Result<void> ModuleSession::enable(uint32_t id, bool on) {
  gdbtrace_probe_enable e{id, on ? 1u : 0u};
  return ioctl_checked(GDBTRACE_IOC_ENABLE, &e, "enable");
}

Result<void> ModuleSession::start() {
  return ioctl_checked(GDBTRACE_IOC_START, nullptr, "start");
}
Result<void> ModuleSession::stop() {
  return ioctl_checked(GDBTRACE_IOC_STOP, nullptr, "stop");
}
Result<void> ModuleSession::remove_all() {
  return ioctl_checked(GDBTRACE_IOC_REMOVE_ALL, nullptr, "remove probes");
}

Result<gdbtrace_probe_status> ModuleSession::probe_status(uint32_t id) const {
  gdbtrace_probe_status st{};
  st.id = id;
  if (auto r = ioctl_checked(GDBTRACE_IOC_PROBE_STATUS, &st, "probe status"); !r)
    return r.error();
  return st;
}

Result<gdbtrace_session_status> ModuleSession::status() const {
  gdbtrace_session_status st{};
  if (auto r = ioctl_checked(GDBTRACE_IOC_STATUS, &st, "status"); !r)
    return r.error();
  return st;
}

Result<void> ModuleSession::define_tsv(uint32_t num, int64_t value) {
  gdbtrace_tsv t{num, GDBTRACE_TSV_DEFINE, value};
  return ioctl_checked(GDBTRACE_IOC_TSV_SET, &t, "define trace state variable");
}

Result<int64_t> ModuleSession::get_tsv(uint32_t num) const {
  gdbtrace_tsv t{num, 0, 0};
  if (auto r = ioctl_checked(GDBTRACE_IOC_TSV_GET, &t, "read trace state variable"); !r)
    return r.error();
  return int64_t(t.value);
}

bool ModuleSession::any_half_full() const {
  if (!map_.get())
    return false;
  for (uint32_t r = 0; r < init_.nr_rings; r++) {
    const auto* h = ring(r);
    uint64_t head = std::atomic_ref<const __u64>(h->head).load(std::memory_order_acquire);
    if (head - h->tail >= h->data_size / 2)
      return true;
  }
  return false;
}

size_t ModuleSession::drain(const std::function<bool(std::span<const uint8_t>)>& fn) {
  if (!map_.get())
    return 0;
  std::vector<uint64_t> tails(init_.nr_rings);
  for (uint32_t r = 0; r < init_.nr_rings; r++)
    tails[r] = ring(r)->tail;
  merge_.begin(tails);
  for (uint32_t r = 0; r < init_.nr_rings; r++) {
    auto* h = ring(r);
    const uint64_t size = h->data_size;
    const uint8_t* data = reinterpret_cast<uint8_t*>(h) + h->data_offset;
    uint64_t head = std::atomic_ref<__u64>(h->head).load(std::memory_order_acquire);
    uint64_t tail = tails[r];
    while (tail != head && head - tail <= size) {
      uint64_t off = tail % size;
      gdbtrace_record rec;
      std::memcpy(&rec, data + off, sizeof rec);
      if (rec.flags & GDBTRACE_REC_PAD) {
        tail += size - off;
        continue;
      }
      if (rec.len > size - off - sizeof rec)
        break; // cannot happen with a sane module; never read past the ring
      tail += (sizeof rec + rec.len + GDBTRACE_REC_ALIGN - 1) & ~uint64_t(GDBTRACE_REC_ALIGN - 1);
      merge_.add(r, rec.seq, data + off + sizeof rec, rec.len, tail);
    }
    merge_.scanned(r, tail);
  }
  size_t frames = merge_.hand_out([&](std::span<const uint8_t> r, uint64_t) { return fn(r); });
  for (uint32_t r = 0; r < init_.nr_rings; r++)
    std::atomic_ref<__u64>(ring(r)->tail).store(merge_.free_to(r), std::memory_order_release);
  return frames;
}

std::vector<uint64_t> ModuleSession::ring_drops() const {
  std::vector<uint64_t> out;
  if (!map_.get())
    return out;
  for (uint32_t r = 0; r < init_.nr_rings; r++)
    out.push_back(std::atomic_ref<__u64>(ring(r)->drops).load(std::memory_order_relaxed));
  return out;
}

} // namespace gdbtrace::kmod
