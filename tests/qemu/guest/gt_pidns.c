// Guest test of issue 26's container case, run by init.sh as an unprivileged
// user (the device through its group) inside new user, pid and mount
// namespaces (`unshare -rpf --mount-proc`), with the pid of a same-user
// process outside them as argument:
//  - ADD takes pid numbers of the caller's pid namespace: its tracee, pid 2
//    here, is probed and hit (a module resolving pids in the initial
//    namespace finds some other process there, which the caller does not
//    trace: EPERM);
//  - a process outside the namespace has no number in it: ADD naming its
//    global pid is ESRCH (the initial namespace's lookup finds it: EPERM).
// Prints "ok NAME" / "FAIL NAME: why"; exit status = number of failures.
#include "gt_util.h"

static struct gdbtrace_action regs_action = {.kind = GDBTRACE_ACT_REGS};

static void test_in_namespace(void) {
  CHECK(getpid() == 1, "not the init of a new pid namespace (pid %d)", getpid());
  struct session s;
  int r = open_session(&s, 16);
  CHECK(r == 0, "open as uid %d in the namespace: %s", getuid(), strerror(-r));
  struct child c = start_child(call_probe_fn, 3);
  struct gdbtrace_probe_add a;
  r = add_at(&s, c.pid, NULL, (uintptr_t)probe_fn, 0, &regs_action, 1, &a);
  int started = r == 0 && ioctl(s.fd, GDBTRACE_IOC_START) == 0;
  int rc = release_child(c);
  struct gdbtrace_probe_status st = probe_status(&s, a.id);
  close_session(&s);
  CHECK(r == 0, "ADD of our tracee, pid %d in the namespace: %s", c.pid, strerror(-r));
  CHECK(started, "start");
  CHECK(rc == 0, "tracee exit %d", rc);
  CHECK(st.hits == 3 && st.frames == 3, "hits %llu, frames %llu", (unsigned long long)st.hits,
        (unsigned long long)st.frames);
  OK();
}

static void test_outside_unreachable(pid_t outside) {
  CHECK(kill(outside, 0) == -1 && errno == ESRCH, "pid %d (outside) is visible in the namespace",
        outside);
  struct session s;
  CHECK(open_session(&s, 16) == 0, "open");
  int r = add_at(&s, outside, "/bin/busybox", 0x1000, 0, &regs_action, 1, NULL);
  close_session(&s);
  CHECK(r == -ESRCH, "ADD naming pid %d (outside the namespace): %s, not ESRCH", outside,
        strerror(-r));
  OK();
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 2) {
    fprintf(stderr, "usage: gt_pidns OUTSIDE_PID (in new user+pid+mount namespaces)\n");
    return 2;
  }
  test_in_namespace();
  test_outside_unreachable((pid_t)atoi(argv[1]));
  printf("gt_pidns: %d failure(s)\n", failures);
  return failures != 0;
}
