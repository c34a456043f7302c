#!/usr/bin/env bash
# Run setpoint on a local 3-member etcd cluster with several API servers, all on loopback.
#
#   scripts/cluster.sh [-n SERVERS] [-d DIR] [-p API_PORT] [-e ETCD_PORT] [-t SECONDS] [-T]
#
#   -n SERVERS   API servers to start (default 2)
#   -d DIR       where data, logs and kubeconfigs live (default .setpoint-cluster)
#   -p API_PORT  port of the first API server, the others follow (default 6443; 0: any free)
#   -e ETCD_PORT client port of the first etcd member; member i listens for clients on
#                ETCD_PORT+2i and for peers on ETCD_PORT+2i+1 (default 2379; 0: any free).
#                A DIR that already holds a cluster keeps its ports (DIR/etcd/ports).
#   -t SECONDS   stop everything after SECONDS (default: run until Ctrl-C)
#   -T           etcd over TLS, as Kubernetes runs it: members serve clients and peers over
#                https and accept only certificates of their CA (--client-cert-auth,
#                --peer-client-cert-auth); the API servers connect with --etcd-cafile,
#                --etcd-certfile, --etcd-keyfile. The CA and certificates are made on first
#                start in DIR/etcd/pki (setpoint.pki). A DIR keeps the mode it was created
#                with (DIR/etcd/tls marks a TLS cluster; -T on a plain one is refused).
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
tls=""
while getopts "n:d:p:e:t:Th" opt; do
  case "$opt" in
    n) servers=$OPTARG ;;
    d) dir=$OPTARG ;;
    p) api_port=$OPTARG ;;
    e) etcd_port=$OPTARG ;;
    t) lifetime=$OPTARG ;;
    T) tls=1 ;;
    *) sed -n '2,24s/^# \{0,1\}//p' "$0"; exit 2 ;;
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

# wait_http URL WHAT [CAFILE [CERTFILE KEYFILE]]: wait until URL answers 200 with a body that
# is not "false" (over https: trusting CAFILE, presenting CERTFILE if given)
wait_http() {
  "$python" - "$1" "$2" "${3:-}" "${4:-}" "${5:-}" <<'EOF' || { echo "cluster.sh: $2 did not come up; see its log" >&2; exit 1; }
import ssl, sys, time, urllib.request
url, what, cafile, certfile, keyfile = sys.argv[1:6]
context = ssl.create_default_context(cafile=cafile) if cafile else None
if context is not None and certfile:
    context.load_cert_chain(certfile, keyfile)
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

# etcd_pki DIR: the etcd CA, the members' certificate (serverAuth for clients and peers,
# clientAuth for peers and etcd's own HTTP gateway; SANs 127.0.0.1 and localhost) and the API
# servers' client certificate, made once; keys 0600 in a 0700 directory
etcd_pki() {
  "$python" - "$1" <<'EOF'
import datetime as dt, sys
from pathlib import Path
from setpoint.pki import certs, files
pki = files.private_dir(Path(sys.argv[1]))
if not (pki / "apiserver-etcd-client.crt").exists():
    now = dt.datetime.now(dt.timezone.utc)
    ca = certs.new_ca("setpoint-etcd-ca", now=now)
    pairs = {"ca": ca,
             "member": certs.issue(ca, common_name="setpoint-etcd-member", now=now,
                                   usage=("server", "client"), hosts=("127.0.0.1", "localhost")),
             "apiserver-etcd-client": certs.issue(ca, common_name="setpoint-apiserver-etcd-client",
                                                  usage="client", now=now)}
    for name, pair in pairs.items():  # the client certificate last: it says "done"
        files.write_private(pki / f"{name}.key", pair.key_pem)
        files.write_private(pki / f"{name}.crt", pair.cert_pem)
EOF
}

# A cluster keeps the mode it was created with: its members remember their peers' URLs.
if [ -e "$dir/etcd/tls" ]; then
  [ -n "$tls" ] || echo "cluster.sh: $dir is a TLS cluster (created with -T); starting it with TLS"
  tls=1
elif [ -n "$tls" ] && [ -d "$dir/etcd/member0" ]; then
  echo "cluster.sh: $dir holds a cluster created without -T; use another -d DIR for TLS" >&2
  exit 2
fi
scheme=http
etcd_tls=()
serve_tls=()
client_auth=()
if [ -n "$tls" ]; then
  pki="$dir/etcd/pki"
  etcd_pki "$pki"
  touch "$dir/etcd/tls"
  scheme=https
  etcd_tls=(--client-cert-auth --trusted-ca-file "$pki/ca.crt"
            --cert-file "$pki/member.crt" --key-file "$pki/member.key"
            --peer-client-cert-auth --peer-trusted-ca-file "$pki/ca.crt"
            --peer-cert-file "$pki/member.crt" --peer-key-file "$pki/member.key")
  serve_tls=(--etcd-cafile "$pki/ca.crt" --etcd-certfile "$pki/apiserver-etcd-client.crt"
             --etcd-keyfile "$pki/apiserver-etcd-client.key")
  client_auth=("$pki/ca.crt" "$pki/apiserver-etcd-client.crt" "$pki/apiserver-etcd-client.key")
fi

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
  initial+="${initial:+,}member$i=$scheme://127.0.0.1:${ports[2 * i + 1]}"
  endpoints+="${endpoints:+,}$scheme://127.0.0.1:${ports[2 * i]}"
done

for ((i = 0; i < members; i++)); do
  client="$scheme://127.0.0.1:${ports[2 * i]}"
  peer="$scheme://127.0.0.1:${ports[2 * i + 1]}"
  "${detach[@]}" "$etcd" --name "member$i" --data-dir "$dir/etcd/member$i" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$initial" --initial-cluster-token setpoint-local \
    --initial-cluster-state new \
    --experimental-watch-progress-notify-interval 1s ${tls:+"${etcd_tls[@]}"} \
    --logger zap --log-level warn </dev/null >>"$dir/etcd/member$i.log" 2>&1 &
  etcd_pids+=($!)
done
for ((i = 0; i < members; i++)); do
  wait_http "$scheme://127.0.0.1:${ports[2 * i]}/health" "etcd member$i" ${tls:+"${client_auth[@]}"}
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
    ${tls:+"${serve_tls[@]}"} --port "$port" --data-dir "$data" --pki-dir "$dir/pki" \
    </dev/null >>"$data/serve.log" 2>&1 &
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

echo "etcd members (data and logs in $dir/etcd${tls:+; TLS with client certificates from $dir/etcd/pki}):"
for ((i = 0; i < members; i++)); do echo "  member$i  $scheme://127.0.0.1:${ports[2 * i]}"; done
echo "API servers:"
for ((i = 0; i < servers; i++)); do
  echo "  server$i  ${urls[i]}  kubeconfig $dir/server$i/kubeconfig  log $dir/server$i/serve.log"
done
echo "try: KUBECONFIG=$dir/server0/kubeconfig kubectl get namespaces"
if [ -n "$tls" ]; then
  echo "     etcdctl --endpoints $endpoints --cacert ${client_auth[0]} --cert ${client_auth[1]} --key ${client_auth[2]} endpoint status"
fi
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
