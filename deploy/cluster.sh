#!/usr/bin/env bash
# A local test bed of mf at scale (`go tool task cluster`): three clustered
# nats-server processes with JetStream, MinIO over four drives (erasure
# coded), and mf ingest, two mf process and mf api on top, all on
# loopback. It prints how to reach them and runs until Ctrl-C, which stops
# everything. Its files are under $MF_CLUSTER_DIR (default ./mf-cluster).
#
#   deploy/cluster.sh           run until Ctrl-C
#   deploy/cluster.sh --check   start, send one batch, wait until the
#                               reporting API counts it, stop; exit 0 if so
#
# Ports: NATS 4222-4224 (routes 6222-6224), MinIO 9000, ingest 8080,
# reporting API 8081, admin APIs 8082 (ingest), 8083 and 8084 (processors),
# 8085 (api). Override the first ports with MF_CLUSTER_PORT_BASE=N (NATS
# N..N+2, routes N+10.., MinIO N+20, mf N+30..).
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
[ "${1:-}" = "--check" ] && check=1

dir="${MF_CLUSTER_DIR:-./mf-cluster}"
base="${MF_CLUSTER_PORT_BASE:-}"
if [ -n "$base" ]; then
  nats_port=$base; route_port=$((base + 10)); minio_port=$((base + 20)); mf_port=$((base + 30))
else
  nats_port=4222; route_port=6222; minio_port=9000; mf_port=8080
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

nats_bin="$(bash .ci/nats.sh)"
minio_bin="$(bash .ci/minio.sh)"
go build -trimpath -o "$dir/mf" ./cmd/mf

pids=()
stop_all() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# Three NATS nodes, one cluster.
routes=""
for i in 0 1 2; do routes+="nats-route://127.0.0.1:$((route_port + i)),"; done
routes="${routes%,}"
urls=""
for i in 0 1 2; do
  n=$((i + 1))
  mkdir -p "$dir/nats$n"
  cat > "$dir/nats$n/server.conf" <<EOF
server_name: n$n
listen: 127.0.0.1:$((nats_port + i))
max_payload: 8MB
jetstream { store_dir: "$dir/nats$n/js" }
cluster {
  name: mf-local
  listen: 127.0.0.1:$((route_port + i))
  routes: [$routes]
}
EOF
  "$nats_bin" -c "$dir/nats$n/server.conf" > "$dir/nats$n/server.log" 2>&1 &
  pids+=($!)
  urls+="nats://127.0.0.1:$((nats_port + i)),"
done
log="${urls%,}"

# MinIO, erasure coded over four drives (directories of one disk here, so
# MINIO_CI_CD lets it use drives on the root disk).
secret_file="$dir/minio-secret"
[ -f "$secret_file" ] || head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$secret_file"
secret="$(cat "$secret_file")"
mkdir -p "$dir"/minio/d{1,2,3,4}
MINIO_CI_CD=1 MINIO_ROOT_USER=mfcluster MINIO_ROOT_PASSWORD="$secret" MINIO_BROWSER=off MINIO_UPDATE=off \
  "$minio_bin" server --quiet --address "127.0.0.1:$minio_port" "$dir/minio/d{1...4}" > "$dir/minio.log" 2>&1 &
pids+=($!)
store="s3://mfcluster:$secret@127.0.0.1:$minio_port/mf-data?secure=false"

wait_healthy() { # url, what
  for _ in $(seq 1 600); do
    curl -fsS "$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "cluster: $2 did not become healthy; see $dir/*.log" >&2
  exit 1
}
wait_minio() {
  for _ in $(seq 1 600); do
    curl -fsS "http://127.0.0.1:$minio_port/minio/health/cluster" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "cluster: MinIO did not start; see $dir/minio.log" >&2
  exit 1
}
wait_minio

shared=(--log "$log" --store "$store")
provisioned=0
for _ in $(seq 1 50); do # the cluster elects its JetStream leader first
  if "$dir/mf" provision "${shared[@]}" docs/demo-provision.json > "$dir/provision.log" 2>&1; then
    provisioned=1
    break
  fi
  sleep 1
done
if [ "$provisioned" = 0 ]; then
  echo "cluster: cannot provision the demo project:" >&2
  cat "$dir/provision.log" >&2
  exit 1
fi

start_role() { # name role admin-port [flags...]
  local name=$1 role=$2 admin=$3; shift 3
  "$dir/mf" "$role" "${shared[@]}" --admin-addr "127.0.0.1:$admin" "$@" > "$dir/$name.log" 2>&1 &
  pids+=($!)
  wait_healthy "http://127.0.0.1:$admin" "mf $name"
}
start_role ingest ingest $((mf_port + 2)) --ingest-addr "127.0.0.1:$mf_port"
start_role process-1 process $((mf_port + 3))
start_role process-2 process $((mf_port + 4))
start_role api api $((mf_port + 5)) --api-addr "127.0.0.1:$((mf_port + 1))"

cat <<EOF
mf cluster is up (files and logs in $dir):
  log        $log (3 replicas)
  store      MinIO at http://127.0.0.1:$minio_port, 4 drives, user mfcluster, password in $secret_file
  ingest     http://127.0.0.1:$mf_port/v1   (demo website key mf_demoweb1_Website-Key_1)
  reporting  http://127.0.0.1:$((mf_port + 1))/api/v1 and the dashboard at http://127.0.0.1:$((mf_port + 1))/
  admin      ingest :$((mf_port + 2)), processors :$((mf_port + 3)) :$((mf_port + 4)), api :$((mf_port + 5)) (/metrics, /admin/v1)
EOF

if [ "$check" = 1 ]; then
  now=$(($(date +%s) * 1000 - 60000))
  curl -fsS -X POST "http://127.0.0.1:$mf_port/v1/batch/mf_demoweb1_Website-Key_1" \
    -H 'Content-Type: application/json' -H 'Origin: https://shop.example' \
    -A 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36' \
    -d "{\"v\":1,\"batch\":\"0c0c0c0c-0000-4000-8000-000000000001\",\"mode\":\"full\",\"events\":[{\"name\":\"\$pageview\",\"time\":$now,\"anonymousId\":\"cluster-check\",\"page\":{\"url\":\"https://shop.example/\"}}]}" >/dev/null
  for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$((mf_port + 1))/api/v1/projects/9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03/events?period=1h" \
      -H 'Authorization: Bearer mf_pat_demo0001_DemoDemoDemoDemoDemoDemoDemoDemoDemoDemo' | grep -q '"type":"events"'; then
      echo "cluster: a batch sent to ingest is counted by the reporting API"
      exit 0
    fi
    sleep 1
  done
  echo "cluster: the batch was not counted within 2 minutes; see $dir/*.log" >&2
  exit 1
fi
wait
