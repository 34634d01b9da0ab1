#include "target/inferior_launch.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/open_file_limit.h"
#include "common/startup_affinity.h"

extern char** environ;

namespace gdbtrace {
namespace {

// gdbsupport's construct_inferior_arguments: backslash-escape shell specials.
std::string escape_argument(const std::string& arg) {
  static const char special[] = "\"!#$&*()\\|[]{}<>?'`~^; \t\n";
  if (arg.empty())
    return "''";
  std::string out;
  for (char c : arg) {
    if (c == '\n') {
      out += "'\n'";
      continue;
    }
    if (std::strchr(special, c))
      out += '\\';
    out += c;
  }
  return out;
}

// fork-inferior.c quotes the program name with '...' when it holds specials.
std::string quote_program(const std::string& prog) {
  if (prog.find_first_of("'!\"()$&;<> \n\t") == std::string::npos)
    return prog;
  std::string out = "'";
  for (char c : prog) {
    if (c == '\'')
      out += "'\\''";
    else if (c == '!')
      out += "\\!";
    else
      out += c;
  }
  return out + "'";
}

std::vector<std::string> build_environment(const LaunchSpec& spec) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    env.emplace_back(*e);
  auto drop = [&](const std::string& name) {
    std::erase_if(env, [&](const std::string& kv) {
      return kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 &&
             kv[name.size()] == '=';
    });
  };
  for (const auto& name : spec.env_unset)
    drop(name);
  for (const auto& kv : spec.env_set) {
    drop(kv.substr(0, kv.find('=')));
    env.push_back(kv);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void child_fail(int pipe_fd, int err) {
  (void)!::write(pipe_fd, &err, sizeof err);
  _exit(127);
}

// The foreground process group of the stub's terminal before the first
// program took it (-1: not taken, or no terminal).
pid_t original_foreground = -1;

// As gdbserver's post_fork_inferior: the program started last becomes the
// foreground process group of the terminal on the stub's stderr, so that it
// can read it and set its modes without SIGTTIN/SIGTTOU (it runs in a process
// group of its own). The stub ignores those two signals from then on: it may
// itself be in the background when it hands the terminal over.
void give_terminal_to(pid_t pgrp) {
  int fd = fileno(stderr);
  if (!isatty(fd))
    return;
  std::signal(SIGTTOU, SIG_IGN);
  std::signal(SIGTTIN, SIG_IGN);
  pid_t before = tcgetpgrp(fd);
  if (tcsetpgrp(fd, pgrp) == 0 && original_foreground == -1 && before > 0) {
    original_foreground = before;
    std::atexit(restore_terminal_foreground);
  }
}

} // namespace

void restore_terminal_foreground() {
  if (original_foreground > 0)
    (void)tcsetpgrp(fileno(stderr), original_foreground);
  original_foreground = -1;
}

std::string shell_command_line(const LaunchSpec& spec) {
  std::string cmd = "exec ";
  for (const auto& w : spec.wrapper)
    cmd += w + ' ';
  cmd += quote_program(spec.program);
  for (const auto& a : spec.args)
    cmd += ' ' + escape_argument(a);
  return cmd;
}

Result<pid_t> launch_inferior(const LaunchSpec& spec, const sigset_t& child_sigmask) {
  if (spec.program.empty())
    return make_error(EINVAL, "no program to run");

  // Everything the child needs is built before fork (only async-signal-safe calls after).
  std::vector<std::string> argv_strings;
  std::string exec_path;
  if (spec.startup_with_shell) {
    const char* shell = std::getenv("SHELL");
    exec_path = (shell && *shell) ? shell : "/bin/sh";
    argv_strings = {exec_path, "-c", shell_command_line(spec)};
  } else {
    argv_strings = spec.wrapper;
    argv_strings.push_back(spec.program);
    argv_strings.insert(argv_strings.end(), spec.args.begin(), spec.args.end());
    exec_path = argv_strings.front();
  }
  std::vector<std::string> env_strings = build_environment(spec);
  std::vector<char*> argv = c_strings(argv_strings);
  std::vector<char*> envp = c_strings(env_strings);

  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0)
    return make_error(errno, std::string("pipe: ") + std::strerror(errno));

  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    return make_error(e, std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::close(err_pipe[0]);
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0)
      child_fail(err_pipe[1], errno);
    setpgid(0, 0); // own process group, like gdbserver (^C goes to the stub, not the program)
    // The stub ignores them once it handed the terminal over (give_terminal_to);
    // an ignored signal stays ignored across exec.
    signal(SIGTTOU, SIG_DFL);
    signal(SIGTTIN, SIG_DFL);
    if (spec.disable_randomization) {
      int persona = personality(0xffffffff);
      if (persona != -1)
        personality(persona | ADDR_NO_RANDOMIZE);
    }
    if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0)
      child_fail(err_pipe[1], errno);
    sigprocmask(SIG_SETMASK, &child_sigmask, nullptr);
    restore_open_file_limit();  // the stub raised its own (common/open_file_limit.h)
    restore_startup_affinity(); // a run may have moved the stub (common/startup_affinity.h)
    execvpe(exec_path.c_str(), argv.data(), envp.data());
    child_fail(err_pipe[1], errno);
  }
  ::close(err_pipe[1]);

  // Each exec stops the child with SIGTRAP: shell, wrapper, then the program.
  int pending_execs = 1 + (spec.startup_with_shell ? 1 : 0) + (spec.wrapper.empty() ? 0 : 1);
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, __WALL) != pid) {
      int e = errno;
      ::close(err_pipe[0]);
      return make_error(e, std::string("waitpid: ") + std::strerror(e));
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      int child_errno = 0;
      bool exec_failed =
          ::read(err_pipe[0], &child_errno, sizeof child_errno) == sizeof child_errno;
      ::close(err_pipe[0]);
      if (exec_failed)
        return make_error(child_errno,
                          "cannot start " + exec_path + ": " + std::strerror(child_errno));
      if (WIFSIGNALED(status))
        return make_error(EIO, "During startup program terminated with signal " +
                                   std::string(strsignal(WTERMSIG(status))) + ".");
      if (WEXITSTATUS(status) != 0)
        return make_error(EIO, "During startup program exited with code " +
                                   std::to_string(WEXITSTATUS(status)) + ".");
      return make_error(EIO, "During startup program exited normally.");
    }
    int sig = WSTOPSIG(status);
    if (sig == SIGTRAP && --pending_execs == 0)
      break;
    // Let the shell/wrapper handle its own signals; SIGTRAP means an intermediate exec.
    ptrace(PTRACE_CONT, pid, nullptr, (void*)(long)(sig == SIGTRAP ? 0 : sig));
  }
  ::close(err_pipe[0]);
  give_terminal_to(pid);
  return pid;
}

} // namespace gdbtrace
