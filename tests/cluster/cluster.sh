#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for tests/it/cluster.rs: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler (tests/controlplane/build.sh + tests/cluster/build.sh), containerd + runc
# (Debian packages, installed when missing) and a kubelet, with a bridge CNI network and locally built images
# (tests/cluster/oci.py; no registry). Facts behind every flag: ../shared/notes/real-cluster.md.
#
#   cluster.sh up      cleans up what a crashed run left, starts the cluster, waits until Pods can be admitted,
#                      prints the admin kubeconfig path on stdout
#   cluster.sh down    stops everything and removes what it made (processes, containers, mounts, cgroups,
#                      network namespaces, veths, the bridge, the DNAT chain, the directory); safe to repeat
#
# One cluster per machine: the bridge, /kubepods and the node identity are global. Needs root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
DIR=${KRUNTIMES_CLUSTER_DIR:-/var/tmp/kruntimes-cluster}
BRIDGE=krc0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
APISERVER_PORT=6443
NODE=kruntimes-node
CHAIN=KRUNTIMES-SVC
KRUNTIMES_IMAGE=ghcr.io/kruntimes/kubectl-kruntimes:0.1.0
PAUSE_IMAGE=docker.io/kruntimes-test/pause:1
BUSYBOX_IMAGE=docker.io/kruntimes-test/busybox:1
RUNTIME_SERVER_IMAGE=docker.io/kruntimes-test/runtime-server:1
BASH_RUNTIME_IMAGE=docker.io/kruntimes-test/bash-runtime:1
ADMIN_TOKEN=kruntimes-cluster-admin

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: error: $*" >&2; exit 1; }

running() { # pid: alive and not a zombie (PID 1 of some machines reaps orphans only every few seconds)
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $state && $state != Z ]]
}

stop_pid() { # name, timeout seconds: SIGTERM, then SIGKILL
  local f="$DIR/run/$1.pid" pid i
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if running "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < $2 * 10; i++)); do running "$pid" || break; sleep 0.1; done
    running "$pid" && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

pids_matching() { # extended regexp: pids whose command line matches it (no procps on a minimal machine)
  local cmdline pid
  for cmdline in /proc/[0-9]*/cmdline; do
    pid=${cmdline#/proc/}
    pid=${pid%/cmdline}
    [[ $pid == "$$" ]] && continue
    { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -Eq "$1" && echo "$pid"
  done
  return 0
}

down() {
  local sock="$DIR/containerd/containerd.sock" pid cg m ns link
  stop_pid kubelet 10
  # Frozen Pods (a test's lost node) must thaw, or SIGKILL never lands.
  for f in /sys/fs/cgroup/freezer/kubepods/freezer.state /sys/fs/cgroup/freezer/kubepods/*/freezer.state \
    /sys/fs/cgroup/freezer/kubepods/*/*/freezer.state; do
    [[ -f $f ]] && echo THAWED >"$f" 2>/dev/null || true
  done
  # Containers: the shims started for this cluster's containerd, and every process in the kubelet's cgroups.
  if [[ -d $DIR ]]; then
    for pid in $(pids_matching "containerd-shim-runc-v2 .*-address $sock"); do kill -KILL "$pid" 2>/dev/null || true; done
  fi
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $cg ]] || continue
    find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  done
  stop_pid containerd 10
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $cg ]] || continue
    for ((i = 0; i < 50; i++)); do find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true; [[ -d $cg ]] || break; sleep 0.1; done
  done
  stop_pid kube-scheduler 10
  stop_pid kube-controller-manager 10
  stop_pid kube-apiserver 20 # before etcd: stopping both at once leaves the apiserver hanging
  stop_pid etcd 10
  # Daemons of a run whose pid files are gone: every one of them names the cluster directory.
  if [[ -d $DIR ]]; then
    for pid in $(pids_matching "^([^ ]*/)?(etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|containerd) .*$DIR/"); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  fi
  # Mounts under the cluster directory (emptyDirs, tokens, rootfs, shm), deepest first.
  if [[ -d $DIR ]]; then
    awk -v d="$DIR" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  fi
  rm -rf /run/containerd/runc/k8s.io
  for ns in /run/netns/cni-*; do
    [[ -e $ns ]] || continue
    umount "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    for link in $(ip -o link show master "$BRIDGE" | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip link del "$link" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
  fi
  for hook in PREROUTING OUTPUT; do
    while iptables -t nat -D "$hook" -j "$CHAIN" 2>/dev/null; do :; done
  done
  iptables -t nat -F "$CHAIN" 2>/dev/null || true
  iptables -t nat -X "$CHAIN" 2>/dev/null || true
  rm -rf "$DIR"
}

install_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v python3 >/dev/null || missing+=(python3) # writes the OCI archives
  command -v openssl >/dev/null || missing+=(openssl) # the cluster's certificates
  # The tests' Git server (testkit/src/git) is Git's own http-backend; the Go project's Bash
  # runtime server needs bash.
  [[ -x "$(git --exec-path 2>/dev/null)/git-http-backend" ]] || missing+=(git)
  command -v bash >/dev/null || missing+=(bash)
  # The Go project's Bash runtime image (tests/cluster/oci.py bash-runtime) carries a static bash.
  [[ -x /bin/bash-static ]] || missing+=(bash-static)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q </dev/null >&2 || die "apt-get update failed"
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null >&2 ||
    die "apt-get install of ${missing[*]} failed"
}

pki() {
  local p="$DIR/pki"
  mkdir -p "$p"
  cd "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=kruntimes-cluster-ca 2>/dev/null
  cert() { # name, subject, extensions
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 -extfile "$1.ext" 2>/dev/null
  }
  cert apiserver /CN=kube-apiserver "subjectAltName=IP:$NODE_IP,IP:127.0.0.1,IP:$SERVICE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth"
  cert kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  cert kubelet "/CN=$NODE" "subjectAltName=IP:$NODE_IP,DNS:$NODE
extendedKeyUsage=serverAuth"
  # The aggregation layer's front proxy: its own CA and the client certificate kube-apiserver
  # presents to aggregated API servers.
  openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 2 \
    -subj /CN=kruntimes-cluster-front-proxy-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr \
    -subj /CN=front-proxy-client 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >front-proxy-client.ext
  openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key \
    -CAcreateserial -out front-proxy-client.crt -days 2 -extfile front-proxy-client.ext 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  cat >tokens.csv <<EOF
$ADMIN_TOKEN,kruntimes-admin,admin,"system:masters"
kruntimes-cluster-node,system:node:$NODE,node,"system:nodes"
kruntimes-cluster-kcm,system:kube-controller-manager,kcm
kruntimes-cluster-scheduler,system:kube-scheduler,scheduler
EOF
  kubeconfig() { # file, token
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://$NODE_IP:$APISERVER_PORT", certificate-authority: "$p/ca.crt"}}]
users: [{name: user, user: {token: "$2"}}]
contexts: [{name: local, context: {cluster: local, user: user, namespace: default}}]
current-context: local
EOF
  }
  kubeconfig "$DIR/kubeconfig" "$ADMIN_TOKEN"
  kubeconfig "$p/node.kubeconfig" kruntimes-cluster-node
  kubeconfig "$p/kcm.kubeconfig" kruntimes-cluster-kcm
  kubeconfig "$p/scheduler.kubeconfig" kruntimes-cluster-scheduler
  cd - >/dev/null
}

start() { # name, command...: in the background, in its own session, output to logs/NAME.log
  local name=$1
  shift
  setsid "$@" </dev/null >"$DIR/logs/$name.log" 2>&1 &
  echo $! >"$DIR/run/$name.pid"
}

wait_for() { # what, timeout seconds, command...
  local what=$1 timeout=$2 i
  shift 2
  for ((i = 0; i < timeout * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "timed out after ${timeout}s waiting for $what; logs in $DIR/logs"
}

alive() { running "$(cat "$DIR/run/$1.pid")" || die "$1 exited; its log: $(tail -20 "$DIR/logs/$1.log")"; }

start_kubelet() { # bin dir
  start kubelet "$1/kubelet" --config="$DIR/kubelet/config.yaml" --kubeconfig="$DIR/pki/node.kubeconfig" \
    --root-dir="$DIR/kubelet" --cert-dir="$DIR/kubelet/pki" --hostname-override="$NODE" --node-ip="$NODE_IP" --v=1
}

pod_freezer() { # pod uid: its freezer cgroup (cgroup v1)
  local d
  for d in /sys/fs/cgroup/freezer/kubepods/pod"$1" /sys/fs/cgroup/freezer/kubepods/*/pod"$1"; do
    [[ -d $d ]] && { echo "$d"; return 0; }
  done
  die "no freezer cgroup for Pod UID $1"
}

up() {
  [[ $(id -u) -eq 0 ]] || die "the single-node cluster needs root (kubelet, containerd, network)"
  down
  install_packages
  local bin
  bin=$(bash "$here/build.sh") || die "building the Kubernetes binaries failed"
  mkdir -p "$DIR"/{run,logs,images,cni,cni-ipam,etcd,kubelet,pod-logs,containerd}

  log "building the static kubectl-kruntimes"
  local static
  static=$(bash "$here/static.sh") || die "the static build of kubectl-kruntimes failed"
  python3 "$here/oci.py" pause "$DIR/images/pause.tar" "$PAUSE_IMAGE" /bin/busybox
  python3 "$here/oci.py" busybox "$DIR/images/busybox.tar" "$BUSYBOX_IMAGE" /bin/busybox
  python3 "$here/oci.py" kruntimes "$DIR/images/kruntimes.tar" "$KRUNTIMES_IMAGE" "$static"
  log "building the static test runtime server"
  static=$(bash "$here/static.sh" kruntimes-test-runtime-server) || die "the static build of the test runtime server failed"
  python3 "$here/oci.py" runtime-server "$DIR/images/runtime-server.tar" "$RUNTIME_SERVER_IMAGE" "$static"
  python3 "$here/oci.py" bash-runtime "$DIR/images/bash-runtime.tar" "$BASH_RUNTIME_IMAGE" \
    "$(cd "$here/../.." && pwd)/../shared/runtimes/kruntimes-bash-runtime"

  log "network: bridge $BRIDGE $NODE_IP, DNAT $SERVICE_IP:443 -> $NODE_IP:$APISERVER_PORT"
  ip link add "$BRIDGE" type bridge
  ip addr add "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  iptables -t nat -N "$CHAIN"
  iptables -t nat -A "$CHAIN" -d "$SERVICE_IP/32" -p tcp --dport 443 -j DNAT --to-destination "$NODE_IP:$APISERVER_PORT"
  iptables -t nat -I PREROUTING -j "$CHAIN"
  iptables -t nat -I OUTPUT -j "$CHAIN"
  cat >"$DIR/cni/10-kruntimes.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "kruntimes", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$DIR/cni-ipam", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF

  pki

  log "etcd, kube-apiserver"
  start etcd "$bin/etcd" --data-dir="$DIR/etcd" --listen-client-urls="http://$NODE_IP:12379" \
    --advertise-client-urls="http://$NODE_IP:12379" --listen-peer-urls="http://$NODE_IP:12380" \
    --initial-advertise-peer-urls="http://$NODE_IP:12380" --initial-cluster="default=http://$NODE_IP:12380" \
    --unsafe-no-fsync=true --log-level=warn
  local p="$DIR/pki"
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers="http://$NODE_IP:12379" \
    --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port="$APISERVER_PORT" \
    --cert-dir="$DIR/apiserver-certs" --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
    --client-ca-file="$p/ca.crt" --token-auth-file="$p/tokens.csv" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$p/sa.pub" \
    --service-account-signing-key-file="$p/sa.key" \
    --kubelet-client-certificate="$p/kubelet-client.crt" --kubelet-client-key="$p/kubelet-client.key" \
    --kubelet-certificate-authority="$p/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --requestheader-client-ca-file="$p/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$p/front-proxy-client.crt" --proxy-client-key-file="$p/front-proxy-client.key" \
    --enable-aggregator-routing=true --v=0

  log "containerd"
  cat >"$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt"]
[grpc]
  address = "$DIR/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$(stat -fc %T "$DIR" | grep -q overlay && echo native || echo overlayfs)"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni"
EOF
  start containerd containerd --config "$DIR/containerd/config.toml"
  wait_for "containerd" 30 ctr --address "$DIR/containerd/containerd.sock" version
  for image in pause busybox kruntimes runtime-server bash-runtime; do
    ctr --address "$DIR/containerd/containerd.sock" -n k8s.io images import "$DIR/images/$image.tar" >&2
  done

  wait_for "kube-apiserver /readyz" 60 "$bin/kubectl" --kubeconfig "$DIR/kubeconfig" get --raw /readyz
  alive etcd

  log "kube-controller-manager, kube-scheduler, kubelet"
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$p/kcm.kubeconfig" \
    --authentication-kubeconfig="$p/kcm.kubeconfig" --authorization-kubeconfig="$p/kcm.kubeconfig" \
    --bind-address="$NODE_IP" --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" --v=0
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$p/scheduler.kubeconfig" \
    --authentication-kubeconfig="$p/scheduler.kubeconfig" --authorization-kubeconfig="$p/scheduler.kubeconfig" \
    --bind-address="$NODE_IP" --leader-elect=false --v=0
  cat >"$DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$p/ca.crt"}
authorization: {mode: Webhook}
readOnlyPort: 0
address: "$NODE_IP"
healthzBindAddress: "$NODE_IP"
tlsCertFile: "$p/kubelet.crt"
tlsPrivateKeyFile: "$p/kubelet.key"
podLogsDir: "$DIR/pod-logs"
containerRuntimeEndpoint: "unix://$DIR/containerd/containerd.sock"
resolvConf: /etc/resolv.conf
EOF
  start_kubelet "$bin"

  local k=("$bin/kubectl" --kubeconfig "$DIR/kubeconfig")
  wait_for "Node $NODE Ready" 90 "${k[@]}" wait --for=condition=Ready "node/$NODE" --timeout=1s
  wait_for "ServiceAccount default/default" 60 "${k[@]}" get serviceaccount default -n default
  wait_for "ConfigMap default/kube-root-ca.crt" 60 "${k[@]}" get configmap kube-root-ca.crt -n default
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet; do alive "$name"; done
  echo "$DIR/kubeconfig"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  # What a fresh machine lacks for the cluster (Debian packages), installed up front by .ci/run.
  packages) install_packages ;;
  # Faults for tests: a lost node is a kubelet that is gone and processes that no longer run.
  kill-kubelet) kill -KILL "$(cat "$DIR/run/kubelet.pid")"; while running "$(cat "$DIR/run/kubelet.pid")"; do sleep 0.1; done ;;
  start-kubelet) start_kubelet "$(bash "$here/build.sh")" ;;
  freeze-pod) echo FROZEN >"$(pod_freezer "$2")/freezer.state" ;;
  thaw-pod) echo THAWED >"$(pod_freezer "$2")/freezer.state" ;;
  # A second name for an imported image (a "new release" of the same binary, for upgrades).
  tag-image) ctr --address "$DIR/containerd/containerd.sock" -n k8s.io images tag --force "$2" "$3" >&2 ;;
  *) die "usage: $0 up|down|packages|kill-kubelet|start-kubelet|freeze-pod UID|thaw-pod UID|tag-image SOURCE TARGET" ;;
esac
