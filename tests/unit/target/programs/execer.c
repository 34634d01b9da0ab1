/* Target unit tests: execs itself with "after"; the new image exits 5. */
#include <string.h>
#include <unistd.h>

void before_exec(void) {}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "after") == 0)
    return 5;
  before_exec();
  execl("/proc/self/exe", argv[0], "after", (char*)0);
  return 1;
}
