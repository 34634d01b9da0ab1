/* The one definition of the user-space memory hook (see emulate_user.h). */
#include "x86/emulate_user.h"

_Thread_local const struct gt_emu_memory* gt_emu_memory;
