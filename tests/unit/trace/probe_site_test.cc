// The probe-site resolver on this test process's own mappings.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "trace/collector_probe_site.h"

namespace {

using gdbtrace::resolve_probe_site;

extern "C" __attribute__((noinline)) int probe_site_test_fn(int x) {
  return x * 3 + 1;
}

std::string message(const gdbtrace::Result<gdbtrace::ProbeSite>& r) {
  return r ? std::string() : r.error().message;
}

TEST(ProbeSite, ResolvesOwnFunctionToTheMappedFileAndOffset) {
  auto addr = reinterpret_cast<uint64_t>(&probe_site_test_fn);
  auto site = resolve_probe_site(getpid(), addr);
  ASSERT_TRUE(site) << message(site);
  uint8_t file_bytes[8], mem_bytes[8];
  ASSERT_EQ(pread(site->fd.get(), file_bytes, 8, off_t(site->offset)), 8);
  std::memcpy(mem_bytes, reinterpret_cast<const void*>(addr), 8);
  EXPECT_EQ(std::memcmp(file_bytes, mem_bytes, 8), 0);
  // The path interfaces get names exactly the opened file.
  EXPECT_EQ(access(site->fd_path().c_str(), R_OK), 0);
}

TEST(ProbeSite, RefusesWhatAUprobeCannotTake) {
  int local = 0;
  EXPECT_NE(message(resolve_probe_site(getpid(), reinterpret_cast<uint64_t>(&local)))
                .find("not in executable memory"),
            std::string::npos);
  EXPECT_NE(message(resolve_probe_site(getpid(), 0x10)).find("not mapped"), std::string::npos);

  void* anon = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  EXPECT_NE(message(resolve_probe_site(getpid(), reinterpret_cast<uint64_t>(anon)))
                .find("not in a mapped file"),
            std::string::npos);
  munmap(anon, 4096);
}

// A page of a new temporary file (zeros: not ELF), mapped executable.
struct TempCodeMapping {
  char path[32] = "/tmp/probe_site_testXXXXXX";
  void* code = MAP_FAILED;
  TempCodeMapping() {
    int fd = mkstemp(path);
    if (fd >= 0 && ftruncate(fd, 4096) == 0)
      code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (fd >= 0)
      close(fd);
  }
  ~TempCodeMapping() {
    if (code != MAP_FAILED)
      munmap(code, 4096);
    unlink(path);
  }
  uint64_t address() const { return reinterpret_cast<uint64_t>(code); }
};

TEST(ProbeSite, RefusesADeletedFile) {
  TempCodeMapping m;
  ASSERT_NE(m.code, MAP_FAILED);
  unlink(m.path);
  auto r = resolve_probe_site(getpid(), m.address());
  EXPECT_NE(message(r).find("deleted"), std::string::npos) << message(r);
}

TEST(ProbeSite, RefusesAFileThatIsNotElf) {
  TempCodeMapping m;
  ASSERT_NE(m.code, MAP_FAILED);
  auto r = resolve_probe_site(getpid(), m.address());
  EXPECT_NE(message(r).find("not an ELF file"), std::string::npos) << message(r);
}

} // namespace
