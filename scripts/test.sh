#!/usr/bin/env bash
# Install the test dependencies and run every test (README's test command; .ci/run calls it).
# Browser tests drive Debian's chromium through Playwright; the generated C code is built with the
# host gcc and the cross toolchains and run under qemu and valgrind.  As root on Debian this script
# installs the missing ones with apt-get; elsewhere install the packages listed below yourself.
set -uo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[test]' || exit 1
# Debian package -> a command it provides
PACKAGES="chromium:chromium valgrind:valgrind qemu-user:qemu-aarch64 qemu-system-arm:qemu-system-arm
gcc-aarch64-linux-gnu:aarch64-linux-gnu-gcc gcc-riscv64-linux-gnu:riscv64-linux-gnu-gcc
libc6-dev-riscv64-cross:/usr/riscv64-linux-gnu/lib/libc.a gcc-arm-none-eabi:arm-none-eabi-gcc
libnewlib-arm-none-eabi:/usr/lib/arm-none-eabi/newlib/libc.a"
missing=""
for pc in $PACKAGES; do
  pkg=${pc%%:*}; cmd=${pc#*:}
  if [ "${cmd#/}" != "$cmd" ]; then [ -e "$cmd" ] || missing="$missing $pkg"
  else command -v "$cmd" >/dev/null 2>&1 || missing="$missing $pkg"; fi
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: installing$missing" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || exit 1
  else
    echo "scripts/test.sh: missing Debian packages:$missing (tests that need them skip, or fail in CI)" >&2
  fi
fi
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
