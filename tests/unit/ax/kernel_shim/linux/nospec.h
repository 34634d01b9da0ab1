/* Stand-in for the kernel's <linux/nospec.h>: the same contract (INDEX if
 * below SIZE, else 0), without the speculation barrier, so the VM's
 * AX_INDEX_NOSPEC compiles here as it does in kmodule/. */
#ifndef AX_TEST_KERNEL_SHIM_NOSPEC_H
#define AX_TEST_KERNEL_SHIM_NOSPEC_H
#define array_index_nospec(index, size) ((index) < (size) ? (index) : 0)
#endif
