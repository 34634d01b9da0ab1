/* Calls greet() from libgreet.so (linked; rpath points at the build directory). */
int greet(const char *who);
extern int greet_calls;

int main(void) {
  greet("world");
  greet("again");
  return greet_calls == 2 ? 0 : 1;
}
