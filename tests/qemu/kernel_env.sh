# Sourced by build_debug_kernel.sh, build_noskip_kernel.sh and fetch_kernels.sh.
# build_kernel_and_env: builds the kernel tree SRC
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

# The cached build of a checking kernel in WORK, used as it is (fetch_kernels.sh with
# GT_CACHED_ONLY=1, as `run.sh all` asks): never compiles. Fails, saying why, when there is no
# complete build or its .config lacks a line of debug.config (a build of an older debug.config:
# content, not mtimes, which a fresh checkout resets).
cached_kernel_env() {
  local work=$1 here line
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  [ -f "$work/env" ] || { echo "no cached build in $work (run.sh $(basename "$work") builds it)" >&2; return 1; }
  # shellcheck disable=SC1091
  . "$work/env"
  [ -f "$VMLINUZ" ] && [ -f "$KDIR/Module.symvers" ] ||
    { echo "the cached build in $work is incomplete ($VMLINUZ, $KDIR/Module.symvers)" >&2; return 1; }
  while read -r line; do
    case $line in '' | '#'*) continue ;; esac
    grep -qxF "$line" "$KDIR/.config" ||
      { echo "the cached build in $work predates debug.config's $line (run.sh $(basename "$work") rebuilds it)" >&2; return 1; }
  done <"$here/debug.config"
}
