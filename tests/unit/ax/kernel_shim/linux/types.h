/* Stand-in for the kernel's <linux/types.h>, just enough to compile the VM
 * the way kmodule/ does (-D__KERNEL__ -nostdinc): proves the sources need no
 * libc header and that the kernel build has no large stack frames. */
#ifndef AX_TEST_KERNEL_SHIM_TYPES_H
#define AX_TEST_KERNEL_SHIM_TYPES_H
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
typedef unsigned long size_t;
#endif
