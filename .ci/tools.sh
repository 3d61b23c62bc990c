#!/usr/bin/env bash
# Makes sure the non-Go tools the tests use are here: Node.js 20+ and
# Chromium (from Debian's packages, installed when running as root).
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
command -v node >/dev/null || need_apt+=(nodejs npm)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v tmux >/dev/null || need_apt+=(tmux)                     # terminal output tests (mf replay)
command -v systemd-analyze >/dev/null || need_apt+=(systemd)      # deploy/*.service checks
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "tools: installing ${need_apt[*]} from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "tools: the tests need ${need_apt[*]}: apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
fi
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "tools: Node.js 20 or newer is needed, found $(node --version)" >&2; exit 1; }
# The official MCP TypeScript client for the agent-facing server's tests
# (cmd/mf/mcp_e2e_test.go), pinned in its package-lock.json.
(cd cmd/mf/testdata/mcp && npm ci --no-audit --no-fund --loglevel=error)

# The dashboard's browser tests drive Chromium with playwright-core, pinned
# in its own package-lock.json (no browser download: /usr/bin/chromium).
if [ ! -d api/dashboard/e2e/node_modules/playwright-core ] || [ api/dashboard/e2e/package-lock.json -nt api/dashboard/e2e/node_modules/.package-lock.json ]; then
  (cd api/dashboard/e2e && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi

# npm packages of the browser client's tests (pinned in its package-lock.json):
# terser (the served, minified build), typescript (tsc --noEmit) and the
# OpenFeature web SDK (the web provider).
for dir in ingest/client/browser ingest/client/openfeature-web; do
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done
