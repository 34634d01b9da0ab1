/* mt_sched linked statically: threads without a dynamic loader or shared libc. */
#include "mt_sched.c"
