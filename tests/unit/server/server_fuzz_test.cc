// Throws random, truncated, oversize and malformed packets at a real
// gdbtrace-server debugging a small program. The server must answer or drop
// them, never crash or hang, and still answer a well-formed '?' afterwards.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rsp/packet_codec.h"

using gdbtrace::rsp::frame_packet;

namespace {

class ServerProcess {
public:
  ServerProcess() {
    int err[2];
    if (pipe(err) != 0)
      return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(err[1], 2);
      close(err[0]);
      execl(GDBTRACE_SERVER_PATH, GDBTRACE_SERVER_PATH, "--once", "127.0.0.1:0", "/bin/sleep", "60",
            nullptr);
      _exit(127);
    }
    close(err[1]);
    err_fd_ = err[0];
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exited()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (err_fd_ >= 0)
      close(err_fd_);
  }
  // Reads stderr until "Listening on port N".
  int port() {
    std::string text;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{err_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0)
        continue;
      char buf[512];
      ssize_t n = read(err_fd_, buf, sizeof buf);
      if (n <= 0)
        break;
      text.append(buf, static_cast<size_t>(n));
      auto pos = text.find("Listening on port ");
      auto eol = text.find('\n', pos);
      if (pos != std::string::npos && eol != std::string::npos)
        return std::stoi(text.substr(pos + 18, eol - pos - 18));
    }
    ADD_FAILURE() << "server did not listen; stderr: " << text;
    return -1;
  }
  bool exited() {
    if (status_known_)
      return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      status_known_ = true;
      status_ = st;
    }
    return status_known_;
  }
  int status() const { return status_; }

private:
  pid_t pid_ = -1;
  int err_fd_ = -1;
  bool status_known_ = false;
  int status_ = 0;
};

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads whatever arrives within TIMEOUT_MS of silence.
std::string drain(int fd, int timeout_ms) {
  std::string out;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0)
      return out;
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0)
      return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// Packets that would end the session or resume/kill the tracee are not
// thrown: the test is about parsing, and must still find the process stopped.
bool harmless(const std::string& payload) {
  if (payload.empty())
    return true;
  static const char* kSkip[] = {"k",     "D",        "R",      "c",    "C",       "s",
                                "S",     "vCont;",   "vKill",  "vRun", "vAttach", "vFile",
                                "qRcmd", "QNonStop", "vCtrlC", "!",    "X",       "M",
                                "G",     "P",        "QT",     "Z",    "z"};
  for (const char* p : kSkip)
    if (payload.compare(0, strlen(p), p) == 0)
      return false;
  return true;
}

std::string random_payload(std::mt19937& rng) {
  static const std::vector<std::string> kSeeds = {"qSupported:multiprocess+;swbreak+",
                                                  "qXfer:features:read:target.xml:0,fff",
                                                  "qXfer:threads:read::0,fff",
                                                  "qXfer:auxv:read::0,100",
                                                  "qXfer:exec-file:read::0,100",
                                                  "qXfer:libraries-svr4:read::0,fff",
                                                  "qXfer:siginfo:read::0,80",
                                                  "m7ffff7fe4b70,40",
                                                  "p10",
                                                  "g",
                                                  "Hgp0.0",
                                                  "Hc-1",
                                                  "qC",
                                                  "qfThreadInfo",
                                                  "qsThreadInfo",
                                                  "qAttached:1",
                                                  "T1",
                                                  "vCont?",
                                                  "qTStatus",
                                                  "qTfV",
                                                  "qGdbtrace.status",
                                                  "QPassSignals:e;10",
                                                  "qSymbol::",
                                                  "QCatchSyscalls:1;3c",
                                                  "QEnvironmentHexEncoded:413d31",
                                                  "QSetWorkingDir:2f746d70",
                                                  "qXfer:traceframe-info:read::0,100",
                                                  "vStopped",
                                                  "qOffsets",
                                                  "QThreadEvents:1"};
  std::string s = kSeeds[rng() % kSeeds.size()];
  switch (rng() % 4) {
  case 0: // random bytes
    s.clear();
    for (int i = rng() % 64; i > 0; i--)
      s.push_back(static_cast<char>(rng() % 256));
    break;
  case 1: // truncate
    s.resize(rng() % (s.size() + 1));
    break;
  case 2: // flip characters
    for (int i = rng() % 4 + 1; i > 0 && !s.empty(); i--)
      s[rng() % s.size()] = static_cast<char>(rng() % 256);
    break;
  default: // append junk numbers / separators
    for (int i = rng() % 6; i > 0; i--)
      s += ",;:-x0f"[rng() % 7];
    s += std::to_string(rng());
  }
  // Keep the framing characters out of the payload: they are framing-level fuzz below.
  for (char& c : s)
    if (c == '$' || c == '#')
      c = '@';
  return s;
}

} // namespace

TEST(ServerFuzz, SurvivesGarbageAndStillAnswers) {
  ServerProcess server;
  int port = server.port();
  ASSERT_GT(port, 0);
  int fd = connect_to(port);
  ASSERT_GE(fd, 0);

  std::mt19937 rng(12345);
  int sent = 0;
  for (int i = 0; i < 1500; i++) {
    std::string wire;
    switch (rng() % 8) {
    case 0: // oversize packet (well over PacketSize)
      wire = frame_packet(std::string(20000 + rng() % 20000, 'a'), false);
      break;
    case 1: // frame with a wrong checksum
      wire = "$" + random_payload(rng) + "#00";
      break;
    case 2: // truncated frame, then line noise
      wire = "$" + random_payload(rng) + "#";
      wire += "\x01\x02+-";
      break;
    case 3: // interrupt byte while stopped
      wire = "\x03";
      break;
    default: {
      std::string payload = random_payload(rng);
      if (!harmless(payload))
        continue;
      wire = frame_packet(payload, false);
    }
    }
    ASSERT_EQ(write(fd, wire.data(), wire.size()), static_cast<ssize_t>(wire.size()));
    sent++;
    drain(fd, 2);
    ASSERT_FALSE(server.exited()) << "server died after " << sent << " packets, status "
                                  << server.status() << "; last: " << wire.substr(0, 200);
  }
  drain(fd, 200);
  // Resynchronise: whatever half-packet is pending is cut off by the next '$'.
  std::string q = frame_packet("?", false);
  ASSERT_EQ(write(fd, q.data(), q.size()), static_cast<ssize_t>(q.size()));
  std::string reply;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reply.find("$T") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    reply += drain(fd, 100);
  EXPECT_NE(reply.find("$T05"), std::string::npos) << reply.substr(0, 300);
  EXPECT_FALSE(server.exited());
  // --once: closing the connection ends the server, which kills its tracee.
  close(fd);
  auto exit_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server.exited() && std::chrono::steady_clock::now() < exit_deadline)
    usleep(20000);
  ASSERT_TRUE(server.exited()) << "server did not exit after the --once connection closed";
  EXPECT_TRUE(WIFEXITED(server.status()) && WEXITSTATUS(server.status()) == 0) << server.status();
}
