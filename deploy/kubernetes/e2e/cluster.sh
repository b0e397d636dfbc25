#!/usr/bin/env bash
# A local multi-node Kubernetes (v1.34.4; v1.35.4 with K8S_MODULE=k8s-1.35) as host processes on one machine, without any image
# registry, for the end-to-end test of deploy/kubernetes (e2e.sh). What runs: etcd (Debian),
# kube-apiserver, kube-controller-manager, kube-scheduler, and per node a containerd (Debian)
# and a kubelet with bridge CNI, plus CoreDNS (kubernetes plugin only) as a host process. The
# Kubernetes binaries and CoreDNS are built here from the Go module proxy (k8s/, coredns/: a
# module of our own requiring k8s.io/kubernetes and its staging modules at the release; cold
# ~9 min on 2 cores, then cached under $K8S_DIR); the sandbox ("pause") image is our own
# static C program (pause/).
#
#   bash cluster.sh build                 # the binaries and the pause image (cached)
#   NODES=2 bash cluster.sh up            # node-a (zone-a, cni0 10.244.0.1/24), node-b
#                                         # (zone-b, cni1 10.244.1.1/24); images in $K8S_DIR/images
#   FEATURE_GATES=PodTopologyLabelsAdmission=true bash cluster.sh apiserver   # restart it so
#   bash cluster.sh down                  # stop what `up` started, remove what it made
#   bash cluster.sh clean                 # down, and forget etcd's data, the PV and the PKI
#   export KUBECONFIG=$K8S_DIR/run/pki/admin.kubeconfig PATH=$K8S_DIR/bin:$PATH
#
# Network safety: the service CIDR is blackholed (no kube-proxy runs); pods may only talk to
# the pod subnets (iptables FORWARD drops anything else, no masquerade); CoreDNS has no
# forward plugin; containerd has every image preloaded, its registry mirrors and HTTP(S) proxy
# point at 127.0.0.1:1, so a pull can never leave the machine. Everything listens on
# 127.0.0.1 or a pod bridge's own address. `down` restores ip_forward and removes every
# bridge, route, rule, cgroup and mount it made.
#
# Facts this script works around (each was hit on this machine kind: Debian 12, cgroup v1,
# root without CAP_SYS_RESOURCE):
# - runc cannot lower a sandbox's oom_score_adj: containerd's `restrict_oom_score_adj`.
# - the kubelet's config field is `podLogsDir` (a wrong name is ignored silently, and two
#   kubelets sharing /var/log/pods delete each other's logs as orphans).
# - a second kubelet's cgroupRoot must exist in every v1 hierarchy (cpuset needs cpus/mems).
# - the kubelet makes KUBE-FIREWALL and friends in iptables: `down` removes them.
# - cgroup v1 needs `failCgroupV1: false` (the default until 1.35).
set -euo pipefail

K=${K8S_DIR:-/var/tmp/linerate-k8s}
SRC=$(cd "$(dirname "$0")" && pwd)
# The Kubernetes release built: the module directory that requires it (k8s/: v1.34.4, the one
# CI runs; k8s-1.35/: v1.35.4). Give each its own K8S_DIR, as the binaries are cached there.
K8S_MODULE=${K8S_MODULE:-$SRC/k8s}
BIN=$K/bin
RUN=$K/run
PKI=$RUN/pki
PIDS=$RUN/pids
LOGS=$RUN/logs
NODES=${NODES:-1}
GW=10.244.0.1                    # node-a's bridge address: its node IP, apiserver advertise, DNS
PODS_ALL=10.244.0.0/16           # every node's pod subnet (node i: 10.244.i.0/24 on bridge cni<i>)
SVC_CIDR=10.96.0.0/16
TAG=linerate-k8s-e2e           # comment on every iptables rule we add
FEATURE_GATES=${FEATURE_GATES:-}
export PATH=$BIN:$PATH

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
t0=$(date +%s.%N)
elapsed() { echo "$(date +%s.%N) $t0" | awk '{printf "%.1f", $1-$2}'; }

start() { # name cmd... : start in background, record PID (unless it runs already)
  local name=$1; shift
  if [ -f "$PIDS/$name.pid" ] && kill -0 "$(cat "$PIDS/$name.pid")" 2>/dev/null; then
    log "$name runs already (pid $(cat "$PIDS/$name.pid"))"; return 0
  fi
  nohup "$@" >"$LOGS/$name.log" 2>&1 &
  echo $! >"$PIDS/$name.pid"
  log "started $name pid $!"
}

wait_for() { # description timeout-seconds cmd...
  local what=$1 to=$2; shift 2
  local i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -le $((to * 2)) ] || { log "timeout: $what"; return 1; }
    sleep 0.5
  done
  log "$what after $(elapsed)s"
}

node_vars() { # node index -> per-node names
  local i=$1
  NB=cni$i; NGW=10.244.$i.1; NCIDR=10.244.$i.0/24; ND=$RUN/n$i
  NSOCK=$ND/containerd/containerd.sock
  if [ "$i" = 0 ]; then NNAME=node-a; NZONE=zone-a; NCGROOT=/; NHZ=10248
  else NNAME=node-b; NZONE=zone-b; NCGROOT=/node-b; NHZ=10258; fi
}

kubeconfig() { # name cert-basename
  cat >"$PKI/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    certificate-authority: $PKI/ca.crt
    server: https://127.0.0.1:6443
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
EOF
}

cert() { # basename subject [san]
  local b=$1 subj=$2 san=${3:-}
  openssl genrsa -out "$PKI/$b.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$b.key" -subj "$subj" -out "$PKI/$b.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi
  } >"$PKI/$b.ext"
  openssl x509 -req -in "$PKI/$b.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 30 -extfile "$PKI/$b.ext" -out "$PKI/$b.crt" 2>/dev/null
}

pki() {
  mkdir -p "$PKI"
  [ -f "$PKI/kubelet-node-b.kubeconfig" ] && return 0
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 30 \
    -subj "/CN=local-k8s-ca" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$GW,IP:10.96.0.1"
  cert admin "/O=system:masters/CN=kubernetes-admin"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  cert controller-manager "/CN=system:kube-controller-manager"
  cert scheduler "/CN=system:kube-scheduler"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  for n in node-a node-b; do
    cert kubelet-$n "/O=system:nodes/CN=system:node:$n"
    kubeconfig kubelet-$n kubelet-$n
  done
}

configs() {
  mkdir -p "$RUN/etc" "$RUN/pv/history"
  local i
  for i in $(seq 0 $((NODES - 1))); do
    node_vars "$i"
    mkdir -p "$ND/cni/net.d" "$ND/etc"
    cat >"$ND/cni/net.d/10-bridge.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "pods", "plugins": [
  {"type": "bridge", "bridge": "$NB", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$ND/cni/ipam",
            "ranges": [[{"subnet": "$NCIDR", "gateway": "$NGW"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOF
    cat >"$ND/etc/containerd.toml" <<EOF
version = 2
root = "$ND/containerd/root"
state = "$ND/containerd/state"
[grpc]
  address = "$NSOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:local"
  enable_selinux = false
  # This machine's root lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj (the
  # sandbox's -998) and fails "can't get final child's PID from pipe: EOF" without this.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ND/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."*"]
    endpoint = ["http://127.0.0.1:1"]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["http://127.0.0.1:1"]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."localhost"]
    endpoint = ["http://127.0.0.1:1"]
EOF
    cat >"$ND/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NGW
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $NHZ
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: $NCGROOT
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$NSOCK
clusterDNS: [$GW]
clusterDomain: cluster.local
resolvConf: $RUN/etc/host-resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
podLogsDir: $ND/pod-logs
EOF
  done
  # Pods get no search domains or nameservers from the host's resolv.conf.
  printf 'nameserver 127.0.0.1\n' >"$RUN/etc/host-resolv.conf"
  cat >"$RUN/etc/Corefile" <<EOF
.:53 {
    bind $GW
    errors
    log
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $PKI/admin.kubeconfig local
        pods insecure
        ttl 5
    }
    cache 5
}
EOF
}

network_up() {
  # Nothing addressed to a ClusterIP may leave by the default route (no kube-proxy here).
  ip route replace blackhole $SVC_CIDR
  [ -f "$RUN/ip_forward.orig" ] || sysctl -n net.ipv4.ip_forward >"$RUN/ip_forward.orig"
  # The bridges, made before anything binds to their address (the bridge plugin reuses them).
  local i
  for i in $(seq 0 $((NODES - 1))); do
    node_vars "$i"
    ip link show "$NB" >/dev/null 2>&1 || ip link add "$NB" type bridge
    ip addr replace "$NGW/24" dev "$NB"
    ip link set "$NB" up
  done
  # Pods talk to the pod subnets (and the host's bridge addresses) only: never routed elsewhere.
  iptables -C FORWARD -s $PODS_ALL ! -d $PODS_ALL -m comment --comment $TAG -j DROP 2>/dev/null ||
    iptables -I FORWARD 1 -s $PODS_ALL ! -d $PODS_ALL -m comment --comment $TAG -j DROP
  iptables -C FORWARD -d $PODS_ALL ! -s $PODS_ALL -m comment --comment $TAG -j DROP 2>/dev/null ||
    iptables -I FORWARD 1 -d $PODS_ALL ! -s $PODS_ALL -m comment --comment $TAG -j DROP
}

import_images() { # containerd socket
  local t
  for t in "$K"/images/*.tar; do
    [ -f "$t" ] && ctr -a "$1" -n k8s.io images import "$t" >/dev/null
  done
  ctr -a "$1" -n k8s.io images ls -q | grep -v sha256 >&2
}

cgroup_root() { # a second kubelet's cgroupRoot must exist in every (v1) hierarchy
  local h
  for h in /sys/fs/cgroup/*/; do
    mkdir -p "$h$1"
    if [ -f "${h}cpuset.cpus" ]; then
      cat "${h}cpuset.cpus" >"$h$1/cpuset.cpus"; cat "${h}cpuset.mems" >"$h$1/cpuset.mems"
    fi
  done
}

base() { # etcd and the containerds, images preloaded
  mkdir -p "$PIDS" "$LOGS" "$RUN/etcd"
  # The kubelet always makes /var/log/containers (its symlinks); note whether it was there.
  [ -e /var/log/containers ] || [ -e "$RUN/varlog.created" ] || touch "$RUN/varlog.created"
  pki; configs; network_up
  log "pki+configs+network $(elapsed)s"
  start etcd etcd --name default --data-dir "$RUN/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster default=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
  local i
  for i in $(seq 0 $((NODES - 1))); do
    node_vars "$i"
    # A pull, should one ever be tried, goes to a closed local port.
    HTTP_PROXY=http://127.0.0.1:1 HTTPS_PROXY=http://127.0.0.1:1 NO_PROXY= \
      start "containerd$i" containerd --config "$ND/etc/containerd.toml"
  done
  wait_for etcd 30 etcdctl --endpoints http://127.0.0.1:2379 endpoint health
  for i in $(seq 0 $((NODES - 1))); do
    node_vars "$i"
    wait_for "containerd$i" 60 ctr -a "$NSOCK" version
    import_images "$NSOCK"
  done
  log "images imported $(elapsed)s"
}

up() {
  base
  start_apiserver
  export KUBECONFIG=$PKI/admin.kubeconfig
  wait_for "apiserver ready" 120 kubectl get --raw /readyz
  start kube-controller-manager kube-controller-manager --kubeconfig="$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$PKI/controller-manager.kubeconfig" --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range=$SVC_CIDR ${FEATURE_GATES:+--feature-gates=$FEATURE_GATES}
  start kube-scheduler kube-scheduler --kubeconfig="$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig="$PKI/scheduler.kubeconfig" --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false ${FEATURE_GATES:+--feature-gates=$FEATURE_GATES}
  local i
  for i in $(seq 0 $((NODES - 1))); do
    node_vars "$i"
    [ "$NCGROOT" = / ] || cgroup_root "$NCGROOT"
    start "kubelet$i" kubelet --config="$ND/etc/kubelet.yaml" --kubeconfig="$PKI/kubelet-$NNAME.kubeconfig" \
      --hostname-override=$NNAME --node-ip=$NGW --root-dir="$ND/kubelet" --cert-dir="$ND/kubelet/pki" \
      --node-labels=topology.kubernetes.io/zone=$NZONE ${FEATURE_GATES:+--feature-gates=$FEATURE_GATES}
  done
  start coredns coredns -conf "$RUN/etc/Corefile"
  for i in $(seq 0 $((NODES - 1))); do
    node_vars "$i"
    wait_for "$NNAME Ready" 180 sh -c "kubectl get node $NNAME -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  done
  # A default StorageClass and one `local` PV on node-a (fsGroup applies to `local`; a
  # `hostPath` PV would stay root-owned and the Jobs, user 65532, could not write to it).
  kubectl apply -f - >&2 <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: history-node-a}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local
  local: {path: $RUN/pv/history}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-a]}]
EOF
  log "cluster up in $(elapsed)s"
  kubectl get nodes -L topology.kubernetes.io/zone -o wide >&2
}

down() {
  local saved=${LOGS_TO:-$K/logs/$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$saved"
  cp -a "$LOGS/." "$saved/" 2>/dev/null || true
  log "logs saved in $saved"
  local c i p
  for c in coredns kubelet0 kubelet1 kube-scheduler kube-controller-manager kube-apiserver; do
    [ -f "$PIDS/$c.pid" ] && kill "$(cat "$PIDS/$c.pid")" 2>/dev/null && log "stopped $c"
  done
  sleep 2
  # Containers: kill each task a containerd of ours runs, then containerd, then its shims.
  for i in 0 1; do
    node_vars "$i"
    [ -f "$PIDS/containerd$i.pid" ] || continue
    local a="ctr -a $NSOCK -n k8s.io"
    for t in $($a tasks ls -q 2>/dev/null); do $a tasks kill -s SIGKILL "$t" 2>/dev/null || true; done
    sleep 2
    for t in $($a tasks ls -q 2>/dev/null); do $a tasks delete -f "$t" 2>/dev/null || true; done
    for c in $($a containers ls -q 2>/dev/null); do $a containers delete "$c" 2>/dev/null || true; done
    kill "$(cat "$PIDS/containerd$i.pid")" 2>/dev/null && log "stopped containerd$i"
    sleep 1
    # shims of our containerd (their -address names our socket), each by its PID
    for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $NSOCK" || true); do kill "$p" 2>/dev/null || true; done
  done
  [ -f "$PIDS/etcd.pid" ] && kill "$(cat "$PIDS/etcd.pid")" 2>/dev/null && log "stopped etcd"
  sleep 1
  # Network namespaces CNI made (cni-*), the bridges, our rules and the blackhole route.
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do ip netns delete "$ns" || true; done
  for b in cni0 cni1; do ip link show $b >/dev/null 2>&1 && ip link delete $b; done
  while iptables -D FORWARD -s $PODS_ALL ! -d $PODS_ALL -m comment --comment $TAG -j DROP 2>/dev/null; do :; done
  while iptables -D FORWARD -d $PODS_ALL ! -s $PODS_ALL -m comment --comment $TAG -j DROP 2>/dev/null; do :; done
  # Chains the kubelet makes (KUBE-FIREWALL: its localhost-martian drop, jumped to from INPUT
  # and OUTPUT; the others are hints for kube-proxy).
  for ch in INPUT OUTPUT; do
    while iptables -D $ch -j KUBE-FIREWALL 2>/dev/null; do :; done
    while ip6tables -D $ch -j KUBE-FIREWALL 2>/dev/null; do :; done
  done
  for t in mangle nat filter; do
    for c in KUBE-IPTABLES-HINT KUBE-KUBELET-CANARY KUBE-FIREWALL; do
      iptables -t $t -F $c 2>/dev/null && iptables -t $t -X $c 2>/dev/null || true
      ip6tables -t $t -F $c 2>/dev/null && ip6tables -t $t -X $c 2>/dev/null || true
    done
  done
  # The kubelets' cgroups (node-a's /kubepods, node-b's /node-b), empty once the pods are
  # gone, deepest first (rmdir fails on a cgroup that still has tasks).
  for h in /sys/fs/cgroup/*/; do
    for g in kubepods node-b; do
      [ -d "$h$g" ] && find "$h$g" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
  done
  # The bridge plugin turned forwarding on; restore what it was.
  if [ -f "$RUN/ip_forward.orig" ]; then
    sysctl -qw net.ipv4.ip_forward="$(cat "$RUN/ip_forward.orig")"
    rm -f "$RUN/ip_forward.orig" # restored once: a later `down` must not undo someone else's change
  fi
  ip route del blackhole $SVC_CIDR 2>/dev/null || true
  # Mounts under our state dirs (kubelet volumes, containerd rootfs/shm/sandboxes).
  for m in $(awk -v r="$RUN" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null || true; done
  if [ -f "$RUN/varlog.created" ]; then rm -rf /var/log/containers /var/log/pods; rm -f "$RUN/varlog.created"; fi
  rm -f "$PIDS"/*.pid
  log "down"
}

build() { # the Kubernetes binaries, CoreDNS and the pause image, each rebuilt only when its
  # sources changed (a stamp of their hashes beside the output)
  local s=$(date +%s)
  mkdir -p "$BIN" "$K/images" "$K/src"
  export GOTOOLCHAIN=local GOMAXPROCS=2 GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
  local v minor stamp
  v=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$K8S_MODULE/go.mod")
  [ -n "$v" ] || { log "$K8S_MODULE/go.mod requires no k8s.io/kubernetes"; return 1; }
  minor=$(echo "$v" | cut -d. -f2)
  stamp=$(cat "$K8S_MODULE/go.mod" "$K8S_MODULE/go.sum" | sha256sum | cut -c1-16)-$(go version | awk '{print $3}')
  if [ "$(cat "$BIN/.k8s-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$K/src/k8s" && cp -r "$K8S_MODULE" "$K/src/k8s"
    local ld="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1"
    ld="$ld -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
    ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$v"
    (cd "$K/src/k8s" && nice -n 19 go build -p 2 -trimpath -ldflags "$ld" -o "$BIN/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl)
    echo "$stamp" >"$BIN/.k8s-stamp"
  fi
  stamp=$(cat "$SRC/coredns/go.mod" "$SRC/coredns/go.sum" "$SRC/coredns/main.go" | sha256sum | cut -c1-16)-$(go version | awk '{print $3}')
  if [ "$(cat "$BIN/.coredns-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$K/src/coredns" && cp -r "$SRC/coredns" "$K/src/coredns"
    (cd "$K/src/coredns" && nice -n 19 go build -p 2 -trimpath -ldflags "-s -w" -o "$BIN/coredns" .)
    echo "$stamp" >"$BIN/.coredns-stamp"
  fi
  stamp=$(cat "$SRC/pause/pause.c" "$SRC/pause/Containerfile" | sha256sum | cut -c1-16)
  if [ "$(cat "$K/images/.pause-stamp" 2>/dev/null)" != "$stamp" ]; then
    local ctx=$K/src/pause
    rm -rf "$ctx" && mkdir -p "$ctx" && cp "$SRC/pause/Containerfile" "$ctx/"
    gcc -O2 -static -o "$ctx/pause" "$SRC/pause/pause.c"
    podman_ build -q -t localhost/pause:local "$ctx" >/dev/null
    rm -f "$K/images/pause.tar"
    podman_ save -o "$K/images/pause.tar" localhost/pause:local >/dev/null
    echo "$stamp" >"$K/images/.pause-stamp"
  fi
  log "build $(( $(date +%s) - s ))s"
}

podman_() { # podman with its storage under $K (nothing in the host's own image store)
  podman --root "$K/podman/root" --runroot "$K/podman/run" --storage-driver vfs \
    --cgroup-manager cgroupfs --events-backend file "$@"
}

apiserver() { # (re)start the API server alone, with $FEATURE_GATES
  export KUBECONFIG=$PKI/admin.kubeconfig
  if [ -f "$PIDS/kube-apiserver.pid" ]; then
    local p; p=$(cat "$PIDS/kube-apiserver.pid")
    kill "$p" 2>/dev/null || true
    local i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    rm -f "$PIDS/kube-apiserver.pid"
  fi
  start_apiserver
  wait_for "apiserver ready" 120 kubectl get --raw /readyz
}

start_apiserver() {
  start kube-apiserver kube-apiserver --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=127.0.0.1 --secure-port=6443 --advertise-address=$GW \
    --service-cluster-ip-range=$SVC_CIDR \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    ${FEATURE_GATES:+--feature-gates=$FEATURE_GATES}
}

need() { # the host programs that base and up call (Debian: etcd-server etcd-client containerd
  # runc containernetworking-plugins iptables iproute2 openssl)
  local m="" c
  for c in etcd etcdctl containerd ctr runc openssl iptables ip podman; do command -v $c >/dev/null || m="$m $c"; done
  [ -d /usr/lib/cni ] || m="$m /usr/lib/cni"
  [ -z "$m" ] || { echo "missing:$m (apt-get install etcd-server etcd-client containerd runc containernetworking-plugins iptables iproute2 openssl podman)" >&2; exit 1; }
}

case "${1:-}" in
  build) build ;;
  apiserver) apiserver ;;
  base) need; base ;;
  up) need; up ;;
  down) down ;;
  clean) down; rm -rf "$RUN" ;;   # also forget etcd's data, the PV's contents and the PKI
  *) echo "usage: $0 build|up|apiserver|down|clean" >&2; exit 2 ;;
esac
