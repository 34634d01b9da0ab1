// libFuzzer target: every packet handler, reached the way gdb reaches them —
// bytes into an rsp::Connection attached to a real GdbServer with a real
// TraceEngine (ptrace collector) over a scripted fake target (a small memory
// image, one process, every other operation refused with an error).
//
// Input: packet payloads separated by '\n', each framed with a correct
// checksum, so mutations reach the handlers instead of dying in the framing
// (fuzz_rsp_codec covers that). Packet order is the fuzzer's: no handler may
// trust that gdb sent qTfV before qTsV, QTDP before QTDP:-, and so on.
//
// vFile and QTSave touch real files: LLVMFuzzerInitialize moves the process
// into a private mount namespace chrooted to an empty directory (root only),
// with the fuzz work directory ($GDBTRACE_FUZZ_WORKDIR: corpus and crash
// files) bind-mounted at its own path so libFuzzer can still write there, and
// this process's own /proc/PID for LeakSanitizer.
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "fake_target.h"
#include "rsp/connection.h"
#include "rsp/packet_codec.h"
#include "server/gdb_server.h"
#include "server/tdesc.h"
#include "trace/ptrace_collector.h"
#include "trace/trace_engine.h"

using namespace gdbtrace;

namespace {

// Hands the scripted bytes to the connection in one read, then stays silent
// (a gdb that waits for replies); replies are counted and dropped.
class ScriptTransport : public rsp::Transport {
public:
  ScriptTransport(asio::io_context& io, std::string input) : io_(io), input_(std::move(input)) {}
  void async_read_some(ReadHandler handler) override {
    if (delivered_)
      return; // no more bytes: the read never completes
    delivered_ = true;
    asio::post(io_, [this, handler] { handler({}, input_); });
  }
  std::error_code write_all(std::string_view data) override {
    written_ += data.size();
    return {};
  }
  void close() override {}

private:
  asio::io_context& io_;
  std::string input_;
  bool delivered_ = false;
  size_t written_ = 0;
};

void die(const char* what) {
  std::perror(what);
  std::abort();
}

void enter_sandbox() {
  std::string root = "/tmp/gdbtrace-fuzz-root-XXXXXX";
  if (!mkdtemp(root.data()))
    die("mkdtemp");
  if (unshare(CLONE_NEWNS) != 0)
    die("unshare(CLONE_NEWNS) (the server-packet fuzzer needs root for its sandbox)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    die("mount --make-rprivate /");
  // LeakSanitizer reads /proc/PID/task at exit: only this process's own
  // /proc directory is bound (and /proc/self links to it). Never all of /proc: through
  // /proc/PID/root of any other process (vFile:setfs:PID makes the stub prefix
  // paths with it) the fuzzer reached the host's files and truncated one.
  std::string own = "/proc/" + std::to_string(getpid());
  std::filesystem::create_directories(root + own);
  if (mount(own.c_str(), (root + own).c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    die("bind mount of /proc/PID");
  std::filesystem::create_directory_symlink(std::to_string(getpid()), root + "/proc/self");
  if (const char* work = std::getenv("GDBTRACE_FUZZ_WORKDIR")) {
    std::filesystem::create_directories(root + work);
    if (mount(work, (root + work).c_str(), nullptr, MS_BIND, nullptr) != 0)
      die("bind mount of GDBTRACE_FUZZ_WORKDIR");
  }
  if (chroot(root.c_str()) != 0 || chdir("/") != 0)
    die("chroot");
}

constexpr uint64_t kFuzzBufferSize = 64 * 1024;

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  enter_sandbox();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string framed;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view payload = rest.substr(0, nl);
    framed += rsp::frame_packet(payload, false);
    framed += '+';
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }

  // The target's memory image is read-only here (writes are refused), so it is
  // built once: filling it per input was a quarter of each execution. Its
  // trace breakpoints are the only state an input leaves, cleared here.
  static test::FakeTarget& target = *[] {
    auto* t = new test::FakeTarget;
    for (uint64_t a = 0x401000; a < 0x401100; ++a)
      t->memory[a] = static_cast<uint8_t>(a * 7);
    return t;
  }();
  target.trace_bps.clear();
  asio::io_context io;
  GdbServer* server_ptr = nullptr;
  TraceEngine::Hooks hooks;
  hooks.console = [&server_ptr](const std::string& text) {
    if (server_ptr)
      server_ptr->console(text);
  };
  hooks.current_pid = [] { return Pid{1}; };
  hooks.target_description = [](const RegisterLayout& layout, const std::vector<bool>& present) {
    return target_xml(layout, present);
  };
  TraceEngine engine(io, target, hooks);
  // A small buffer until an input asks for another (QTBuffer:size): ASan
  // poisons and scrubs the whole default 5 MB reservation at every QTStart and
  // free, which made most of the execution time; it also reaches "buffer full".
  (void)engine.set_buffer_size(kFuzzBufferSize);
  // A machine of 512 KB: QTBuffer:size beyond it is clamped as on any machine,
  // but the buffer QTStart then reserves stays small (a 12 GB reservation, half
  // of this VM, was reported as out-of-memory; with a 128 MB limit ASan's
  // poisoning of each freed reservation's shadow was 40 % of the run time, and
  // with 4 MB the pages QTStart prepares (TraceBuffer::prepare_at_start) cut
  // the execution rate to a quarter).
  engine.set_buffer_limit(512 << 10);
  engine.add_collector(make_ptrace_collector(target));
  ServerOptions options;
  options.multi = true;
  GdbServer server(io, target, &engine, options);
  server_ptr = &server;

  auto connection = std::make_shared<rsp::Connection>(
      std::make_unique<ScriptTransport>(io, std::move(framed)), GdbServer::kPacketSize);
  server.attach_connection(connection);
  // Bounded: each handler runs once per packet; timers (the engine's drain) stop with the scope.
  for (int i = 0; i < 10000 && io.poll_one() > 0; ++i) {
  }
  server_ptr = nullptr;
  return 0;
}
