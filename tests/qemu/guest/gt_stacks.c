// tests/programs/bench_stacks.c for the guest (static, -O2, no frame pointers like every guest
// program): main -> path_a -> common -> leaf x300, main -> path_b -> common -> leaf x700, for the
// module collector's call stacks (gdb_session.sh, check gdb_stacks_two_paths).
#include "../../programs/bench_stacks.c"
