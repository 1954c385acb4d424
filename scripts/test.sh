#!/usr/bin/env bash
# Install the test dependencies and run every test (README's test command; .ci/run calls it).
# Browser tests drive Debian's chromium through Playwright; as root on Debian this script installs
# it with apt-get, elsewhere install the `chromium` package yourself.
set -uo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[test]' || exit 1
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || exit 1
  else
    echo "scripts/test.sh: the browser tests need Debian's chromium (apt-get install chromium)" >&2
  fi
fi
python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
