# Sourced by build_debug_kernel.sh and build_noskip_kernel.sh: builds the kernel tree SRC
# (bzImage, and `modules`, which with none =m writes Module.symvers for the module's external
# build) and writes WORK/env for run.sh. The paths in env are resolved, so they name the cache
# itself, not the checkout (or worktree) whose tests/qemu/work link led there.
build_kernel_and_env() {
  local src work krel
  src=$(readlink -f "$1")
  work=$(readlink -f "$2")
  make -s -C "$src" -j"${JOBS:-2}" bzImage modules >&2
  krel=$(make -s -C "$src" kernelrelease)
  mkdir -p "$work/modules"
  cat >"$work/env" <<EOT
KREL=$krel
KDIR=$src
VMLINUZ=$src/arch/x86/boot/bzImage
MODDIR=$work/modules
CHROOT=
EOT
}
