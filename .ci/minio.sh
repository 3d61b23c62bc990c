#!/usr/bin/env bash
# Installs the pinned MinIO server that the S3 tests run (storagetest.StartMinIO),
# unless $(go env GOBIN or GOPATH)/bin/minio already is that version.
# Prints the path of the binary. Idempotent; the first build takes minutes.
set -euo pipefail

module=github.com/minio/minio
# Keep in step with storagetest.MinIOVersion.
version=v0.0.0-20260212201848-7aac2a2c5b7c

bindir="$(go env GOBIN)"
if [ -z "$bindir" ]; then
  bindir="$(go env GOPATH | cut -d: -f1)/bin"
fi
bin="$bindir/minio"

installed() {
  [ -x "$bin" ] || return 1
  # `go version -m` prints the main module as: mod <path> <version> <sum>
  go version -m "$bin" 2>/dev/null | awk -v m="$module" -v v="$version" '
    $1 == "mod" && $2 == m && $3 == v { found = 1 } END { exit !found }'
}

if ! installed; then
  echo "minio: installing $module@$version into $bindir (takes a few minutes)" >&2
  go install "$module@$version"
  installed || { echo "minio: $bin is not $module@$version after go install" >&2; exit 1; }
fi
echo "$bin"
