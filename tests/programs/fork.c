/* Forks once: the child calls in_child() and exits 7, the parent calls in_parent() and waits. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

volatile int child_value = 0;
volatile int parent_value = 0;

void in_child(void) { child_value = 42; }
void in_parent(pid_t child) { parent_value = (int)child > 0; }

int main(void) {
  pid_t pid = fork();
  if (pid == 0) {
    in_child();
    printf("child: child_value=%d\n", child_value);
    fflush(stdout);
    _exit(7);
  }
  in_parent(pid);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("parent: child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
