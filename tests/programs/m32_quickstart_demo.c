/* The quick-start demo program (demo.c, scripts/demo.sh) built as an i386 program (gcc -m32, by
   the m32_ naming rule): DEMO=m32_quickstart_demo scripts/demo.sh, test_demo_i386.py. */
#include "demo.c"
