#!/usr/bin/env bash
# Installs the nats-server binary the cluster tests run
# (eventlog/natstest.StartCluster), built from the module version go.mod
# embeds, unless $(go env GOBIN or GOPATH)/bin/nats-server already is that
# version. Prints the path of the binary. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

module=github.com/nats-io/nats-server/v2
version="$(go list -m -f '{{.Version}}' "$module")"

bindir="$(go env GOBIN)"
if [ -z "$bindir" ]; then
  bindir="$(go env GOPATH | cut -d: -f1)/bin"
fi
bin="$bindir/nats-server"

installed() {
  [ -x "$bin" ] || return 1
  go version -m "$bin" 2>/dev/null | awk -v m="$module" -v v="$version" '
    $1 == "mod" && $2 == m && $3 == v { found = 1 } END { exit !found }'
}

if ! installed; then
  echo "nats: installing $module@$version into $bindir" >&2
  go install "$module@$version"
  installed || { echo "nats: $bin is not $module@$version after go install" >&2; exit 1; }
fi
echo "$bin"
