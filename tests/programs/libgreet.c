/* Shared library for `info sharedlibrary` and pending breakpoints (see main_uses_libgreet.c). */
#include <stdio.h>

int greet_calls;

int greet(const char *who) {
  greet_calls++;
  return printf("hello, %s (%d)\n", who, greet_calls);
}
