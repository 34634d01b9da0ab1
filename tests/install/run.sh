#!/bin/bash
# The install tests (scripts/test.sh step `install`): staging.sh (cmake --install + the installed
# server under gdb) and debs.sh (lintian, the .debs in a clean Debian 12 chroot, DKMS for the
# 6.1 and 6.12 headers, dpkg -r). Both run; the exit status is non-zero if either failed.
# Environment: BUILD_DIR (default ./build).
here=$(cd "$(dirname "$0")" && pwd)
rc=0
echo "=== tests/install/staging.sh"
"$here/staging.sh" || rc=1
echo
echo "=== tests/install/debs.sh"
"$here/debs.sh" || rc=1
exit $rc
