#!/bin/sh
# Makes gdb load the gdbtrace plugin at start-up.
#
#   gdb-plugin/install.sh            append `source <repo>/gdb-plugin/gdbtrace.py` to ~/.gdbinit
#   gdb-plugin/install.sh --system   copy the plugin into gdb's data directory
#                                    (<data-directory>/python/gdb/command/, auto-loaded by every gdb)
#   gdb-plugin/install.sh --uninstall [--system]
#
# Without installing: `source gdb-plugin/gdbtrace.py` in gdb, or `gdb -x gdb-plugin/gdbtrace.py`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
mode=user
action=install
for arg in "$@"; do
  case "$arg" in
    --system) mode=system ;;
    --uninstall) action=uninstall ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done

if [ "$mode" = user ]; then
  init=${GDBINIT:-$HOME/.gdbinit}
  line="source $here/gdbtrace.py"
  if [ "$action" = uninstall ]; then
    if [ -f "$init" ]; then
      { grep -vxF "$line" "$init" || true; } >"$init.tmp"
      mv "$init.tmp" "$init"
    fi
    echo "removed the gdbtrace plugin from $init"
  elif [ -f "$init" ] && grep -qxF "$line" "$init"; then
    echo "$init already sources the gdbtrace plugin"
  else
    echo "$line" >>"$init"
    echo "added to $init: $line"
  fi
  exit 0
fi

# gdb imports every module in <data-directory>/python/gdb/command/ at start-up.
datadir=${GDB_DATA_DIRECTORY:-}
[ -n "$datadir" ] || datadir=$(gdb -nx -batch -ex 'show data-directory' 2>/dev/null | sed -n 's/^GDB.s data directory is "\(.*\)"\.$/\1/p')
[ -n "$datadir" ] || { echo "cannot ask gdb for its data-directory" >&2; exit 1; }
dest=$datadir/python/gdb/command
if [ "$action" = uninstall ]; then
  rm -rf "$dest/gdbtrace_plugin" "$dest/gdbtrace_autoload.py"
  echo "removed the gdbtrace plugin from $dest"
  exit 0
fi
mkdir -p "$dest"
rm -rf "$dest/gdbtrace_plugin"
cp -r "$here/gdbtrace_plugin" "$dest/gdbtrace_plugin"
find "$dest/gdbtrace_plugin" -name __pycache__ -prune -exec rm -rf {} +
cp "$here/gdbtrace_autoload.py" "$dest/gdbtrace_autoload.py"
echo "installed into $dest (every gdb now has \`help gdbtrace\`)"
