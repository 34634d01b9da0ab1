#include "target_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

namespace gdbtrace::test {

std::string program_path(const std::string& name) {
  return std::string(TARGET_PROGRAMS_DIR) + "/" + name;
}

Pid launch(NativeTarget& target, const std::string& prog, std::vector<std::string> args,
           bool shell) {
  LaunchSpec spec;
  spec.program = program_path(prog);
  spec.args = std::move(args);
  spec.startup_with_shell = shell;
  auto pid = target.create_inferior(spec);
  EXPECT_TRUE(pid.ok()) << (pid.ok() ? "" : pid.error().message);
  return pid.ok() ? *pid : -1;
}

void continue_all(NativeTarget& target, int signal) {
  ResumeAction a{{-1, -1}, ResumeKind::Continue, signal};
  auto r = target.resume({a});
  ASSERT_TRUE(r.ok()) << r.error().message;
}

uint64_t symbol_address(const std::string& path, const std::string& symbol) {
  elf_version(EV_CURRENT);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return 0;
  uint64_t found = 0;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  for (Elf_Scn* scn = nullptr; elf && !found && (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
      continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Sym sym;
      gelf_getsym(data, i, &sym);
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (name && symbol == name) {
        found = sym.st_value;
        break;
      }
    }
  }
  if (elf)
    elf_end(elf);
  ::close(fd);
  return found;
}

EventWaiter::EventWaiter(asio::io_context& io, NativeTarget& target) : io_(io) {
  target.set_event_handler([this](const StopEvent& ev) { events_.push_back(ev); });
}

std::optional<StopEvent> EventWaiter::next(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (events_.empty() && std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_one_for(std::chrono::milliseconds(50));
  }
  if (events_.empty())
    return std::nullopt;
  StopEvent ev = events_.front();
  events_.pop_front();
  return ev;
}

std::optional<StopEvent> EventWaiter::next_of(StopKind kind, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto ev = next(left);
    if (!ev || ev->kind == kind)
      return ev;
  }
  return std::nullopt;
}

void EventWaiter::pump(std::chrono::milliseconds duration) {
  auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline) {
    io_.restart();
    io_.run_one_for(std::chrono::milliseconds(20));
  }
}

bool machine_delivers_debug_traps() {
  static const int answer = [] {
    FILE* f = popen(DR_PROBE_PATH, "r");
    char line[64] = {};
    bool read = f && fgets(line, sizeof line, f);
    int rc = f ? pclose(f) : -1;
    if (!read || rc != 0)
      return -1;
    return std::strncmp(line, "delivered", 9) == 0 ? 1 : 0;
  }();
  EXPECT_NE(answer, -1) << DR_PROBE_PATH << " could not tell";
  return answer == 1;
}

} // namespace gdbtrace::test
