#!/usr/bin/env bash
# Checks (and where it can, installs) the non-Go tools the tests use.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { echo "tools: node (20+) is needed: apt-get install nodejs"; exit 1; }
command -v chromium >/dev/null || { echo "tools: chromium is needed for the browser tests: apt-get install chromium"; exit 1; }
