#!/bin/sh
# help2man runs this instead of gdbtrace-server: the same --help and --version text, with the
# usage lines written the way help2man recognises alternatives ("Usage: A" / "  or: B") rather
# than gdbserver's tab-indented continuation lines. Usage: help2man-server.sh SERVER ARGS...
server=$1
shift
"$server" "$@" | sed 's/^Usage:\t/Usage: /; s/^\t\(gdbtrace-server \)/  or:  \1/'
