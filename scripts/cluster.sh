#!/usr/bin/env bash
# Run setpoint on a local 3-member etcd cluster with several API servers, all on loopback.
#
#   scripts/cluster.sh [-n SERVERS] [-d DIR] [-p API_PORT] [-e ETCD_PORT] [-t SECONDS]
#
#   -n SERVERS   API servers to start (default 2)
#   -d DIR       where data, logs and kubeconfigs live (default .setpoint-cluster)
#   -p API_PORT  port of the first API server, the others follow (default 6443; 0: any free)
#   -e ETCD_PORT client port of the first etcd member; member i listens for clients on
#                ETCD_PORT+2i and for peers on ETCD_PORT+2i+1 (default 2379; 0: any free).
#                A DIR that already holds a cluster keeps its ports (DIR/etcd/ports).
#   -t SECONDS   stop everything after SECONDS (default: run until Ctrl-C)
#
# Starts the etcd members (data in DIR/etcd/member<i>), waits until they are healthy, then
# the API servers (`setpoint serve --storage etcd`, data dir DIR/server<i>), waits until each
# is ready, and prints their URLs and kubeconfigs. Ctrl-C (or SIGTERM) stops the API servers
# first, gracefully, then the etcd members. Run again with the same DIR to continue on the
# same data. Environment: PYTHON (default .venv/bin/python), ETCD (default etcd on the PATH).
set -euo pipefail

servers=2
dir=.setpoint-cluster
api_port=6443
etcd_port=2379
lifetime=""
while getopts "n:d:p:e:t:h" opt; do
  case "$opt" in
    n) servers=$OPTARG ;;
    d) dir=$OPTARG ;;
    p) api_port=$OPTARG ;;
    e) etcd_port=$OPTARG ;;
    t) lifetime=$OPTARG ;;
    *) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 2 ;;
  esac
done
case "$servers" in ''|*[!0-9]*|0) echo "cluster.sh: -n needs a positive number" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
etcd=${ETCD:-$(command -v etcd || echo /usr/bin/etcd)}
[ -x "$python" ] || { echo "cluster.sh: no python at $python (make install, or set PYTHON)" >&2; exit 1; }
[ -x "$etcd" ] || { echo "cluster.sh: no etcd (apt-get install etcd-server, or set ETCD)" >&2; exit 1; }
mkdir -p "$dir/etcd"
dir=$(cd "$dir" && pwd)
members=3

# Children get their own session, so that Ctrl-C reaches only this script, which then stops
# them in order: API servers first (they release the controllers' Lease), etcd last.
detach=()
command -v setsid >/dev/null 2>&1 && detach=(setsid)
server_pids=()
etcd_pids=()

stop_all() {
  trap - INT TERM EXIT
  echo "stopping..."
  for pid in "${server_pids[@]}"; do [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${server_pids[@]}"; do [ -z "$pid" ] || wait "$pid" 2>/dev/null || true; done
  for pid in "${etcd_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${etcd_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -f "$dir/pids"
  echo "stopped"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# free_ports N: N free loopback TCP ports, one per line
free_ports() {
  "$python" - "$1" <<'EOF'
import socket, sys
sockets = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in sockets))
EOF
}

# wait_http URL WHAT PID: wait until URL answers 200 with a body that is not "false"
wait_http() {
  "$python" - "$1" "$2" "${3:-}" <<'EOF' || { echo "cluster.sh: $2 did not come up; see its log" >&2; exit 1; }
import ssl, sys, time, urllib.request
url, what, cafile = sys.argv[1], sys.argv[2], sys.argv[3]
context = ssl.create_default_context(cafile=cafile) if cafile else None
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=1, context=context) as reply:
            body = reply.read()
            if reply.status == 200 and b'"false"' not in body:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
sys.exit(1)
EOF
}

# etcd members remember their peers' URLs in their data: a cluster that has data keeps the
# ports it was created with (DIR/etcd/ports), whatever -e says.
if [ -s "$dir/etcd/ports" ]; then
  mapfile -t ports <"$dir/etcd/ports"
elif [ "$etcd_port" = 0 ]; then
  mapfile -t ports < <(free_ports $((2 * members)))
else
  ports=()
  for ((i = 0; i < 2 * members; i++)); do ports+=($((etcd_port + i))); done
fi
printf '%s\n' "${ports[@]}" >"$dir/etcd/ports"
initial=""
endpoints=""
for ((i = 0; i < members; i++)); do
  initial+="${initial:+,}member$i=http://127.0.0.1:${ports[2 * i + 1]}"
  endpoints+="${endpoints:+,}http://127.0.0.1:${ports[2 * i]}"
done

for ((i = 0; i < members; i++)); do
  client="http://127.0.0.1:${ports[2 * i]}"
  peer="http://127.0.0.1:${ports[2 * i + 1]}"
  "${detach[@]}" "$etcd" --name "member$i" --data-dir "$dir/etcd/member$i" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$initial" --initial-cluster-token setpoint-local \
    --initial-cluster-state new \
    --experimental-watch-progress-notify-interval 1s \
    --logger zap --log-level warn </dev/null >>"$dir/etcd/member$i.log" 2>&1 &
  etcd_pids+=($!)
done
for ((i = 0; i < members; i++)); do
  wait_http "http://127.0.0.1:${ports[2 * i]}/health" "etcd member$i"
done

for ((i = 0; i < servers; i++)); do
  data="$dir/server$i"
  mkdir -p "$data"
  rm -f "$data/kubeconfig"
  port=0
  [ "$api_port" = 0 ] || port=$((api_port + i))
  # one PKI for every server: one CA for every kubeconfig, one key for ServiceAccount tokens,
  # one encryption key for Secrets (the servers share their data through etcd)
  "${detach[@]}" "$python" -m setpoint serve --storage etcd --etcd-endpoints "$endpoints" \
    --port "$port" --data-dir "$data" --pki-dir "$dir/pki" </dev/null >>"$data/serve.log" 2>&1 &
  server_pids+=($!)
done
urls=()
for ((i = 0; i < servers; i++)); do
  kubeconfig="$dir/server$i/kubeconfig"
  for _ in $(seq 300); do
    [ -s "$kubeconfig" ] && break
    kill -0 "${server_pids[i]}" 2>/dev/null || { echo "cluster.sh: server$i exited; see $dir/server$i/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  url=$(sed -n 's/^ *server: *//p' "$kubeconfig")
  [ -n "$url" ] || { echo "cluster.sh: server$i wrote no kubeconfig" >&2; exit 1; }
  wait_http "$url/readyz" "server$i" "$dir/pki/ca.crt"
  urls+=("$url")
done
printf '%s\n' "${etcd_pids[@]}" "${server_pids[@]}" >"$dir/pids"

echo "etcd members (data and logs in $dir/etcd):"
for ((i = 0; i < members; i++)); do echo "  member$i  http://127.0.0.1:${ports[2 * i]}"; done
echo "API servers:"
for ((i = 0; i < servers; i++)); do
  echo "  server$i  ${urls[i]}  kubeconfig $dir/server$i/kubeconfig  log $dir/server$i/serve.log"
done
echo "try: KUBECONFIG=$dir/server0/kubeconfig kubectl get namespaces"
echo "ready; Ctrl-C stops everything"

started=$SECONDS
while [ -z "$lifetime" ] || [ $((SECONDS - started)) -lt "$lifetime" ]; do
  sleep 1 &
  wait $! || true
  for ((i = 0; i < servers; i++)); do
    if [ -n "${server_pids[i]}" ] && ! kill -0 "${server_pids[i]}" 2>/dev/null; then
      echo "server$i exited; see $dir/server$i/serve.log" >&2
      server_pids[i]=""
    fi
  done
done
