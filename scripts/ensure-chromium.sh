#!/usr/bin/env bash
# Make sure headless Chromium and its WebDriver are on the PATH (the dashboard's browser
# tests in tests/browser/ drive them with selenium); install Debian's packages if absent.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi

echo "chromium or chromedriver not found; installing Debian's chromium and chromium-driver..." >&2
# shellcheck source=scripts/as-root.sh
. "$(dirname "$0")/as-root.sh"
if command -v apt-get >/dev/null 2>&1; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
else
  echo "error: no apt-get found; install Chromium and a matching chromedriver and retry." >&2
  exit 1
fi
chromium --version
chromedriver --version
