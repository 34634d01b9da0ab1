# Shared by the install tests (source it after setting `repo`): the project version and the
# ok/fail reporting whose count decides the exit status.
version=$(sed -n 's/^project(gdbtrace VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }
