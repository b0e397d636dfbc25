#!/usr/bin/env bash
# The end-to-end test of deploy/kubernetes on a real two-node Kubernetes (cluster.sh): what a
# new user does, as the README says it, checked the way the user would read it.
#
#   bash deploy/kubernetes/e2e/e2e.sh [--binary PATH]     # as root; CI runs it (.ci/run)
#
# 1. Builds (or reuses, under $K8S_DIR, default /var/tmp/linerate-k8s) Kubernetes v1.34.4,
#    CoreDNS and the pause image, builds the project's image from the binary, and starts
#    node-a (zone-a) and node-b (zone-b) with the API server's PodTopologyLabelsAdmission gate
#    on (pods get their node's zone, as on 1.35+).
# 2. Deploys the mesh overlay exactly as the README says (namespace applied, key Secret, apply
#    -k) and waits the README's way (kubectl wait on the Jobs). Then checks: no warning from
#    apply; every Job completed with its first and only pod; `kubectl logs job/linerate-fleet`
#    names node-a and node-b; `kubectl logs job/linerate-mesh` names both ordered pairs and
#    zone-a and zone-b; the fleet and the mesh did not overlap (one waited for the other's
#    requester lock); each agent was ready within seconds of starting.
# 3. Restarts the API server with the gate off (1.33-1.34 defaults), removes everything the
#    README's way, frees the history volume as its administrator would, deploys again: the
#    same checks, but the zone is reported "unknown", never blank.
# 4. Runs another mesh the README's way (delete the Jobs, apply again): a new mesh is stored
#    beside the first in the kept history.
# 5. Applies the scheduled mesh (overlays/mesh-schedule, a CronJob with concurrencyPolicy
#    Forbid) and runs one now the README's way (kubectl create job --from=cronjob/...): it
#    completes on its first attempt, names both ordered pairs and stores a new mesh.
# 6. Switches to both networks the README's way (overlays/mesh-networks: a second DaemonSet of
#    agents on each node's own network): the Jobs complete on their first attempts, the mesh
#    names all four pairs (node-a/pod -> node-b/pod, ..., node-b/host -> node-a/host) and says
#    what the pod network costs against the host's on both node pairs.
# Then tears the cluster down and checks the host is as it was: no process, bridge, route,
# iptables rule or netns left, ip_forward restored.
#
# Where it cannot run (not root, no namespaces, a missing program) it says why and exits 1
# under CI=true, 77 otherwise. Prints the cluster's start-to-done time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
export K8S_DIR=${K8S_DIR:-/var/tmp/linerate-k8s}
K=$K8S_DIR
NS=linerate
t_start=$(date +%s)

say() { printf '[e2e %s] %s\n' "$(date +%T)" "$*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
cannot() { # why it cannot run here
  say "cannot run: $*"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
}

bin=target/release/linerate
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) bin=$2; shift 2 ;;
    *) fail "unknown argument $1 (use --binary PATH)" ;;
  esac
done

[ "$(id -u)" = 0 ] || cannot "needs root (containerd, bridges, iptables)"
ip netns add lre2e-probe 2>/dev/null && ip netns del lre2e-probe || cannot "cannot make network namespaces"
for c in go gcc podman etcd etcdctl containerd ctr runc iptables openssl; do
  command -v $c >/dev/null 2>&1 || cannot "$c is missing (apt-get install etcd-server etcd-client containerd runc containernetworking-plugins iptables podman gcc; Go 1.24+)"
done
[ -d /usr/lib/cni ] || cannot "/usr/lib/cni is missing (apt-get install containernetworking-plugins)"
[ -x "$bin" ] || fail "$bin is not an executable (cargo build --release)"
[ -e /sys/fs/cgroup/cpuset ] || [ -e /sys/fs/cgroup/cgroup.controllers ] || cannot "no cgroup hierarchy"

results=$(mktemp -d /var/tmp/linerate-e2e.XXXXXX)
say "results and logs: $results"


# The host as it was, to compare after.
host_state() {
  {
    echo "ip_forward $(sysctl -n net.ipv4.ip_forward)"
    ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort || true
    ip route show | sort || true
    iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9:]*\]//' | sort || true
    ip netns list | awk '{print $1}' | sort || true
  } 2>/dev/null
}
cluster() { bash "$here/cluster.sh" "$@"; }
down_done=""
teardown() {
  [ -n "$down_done" ] && return 0
  down_done=1
  LOGS_TO="$results/cluster-logs" cluster down >"$results/down.txt" 2>&1 || true
}
trap 'teardown' EXIT

say "build (cached under $K)"
t0=$(date +%s)
cluster build 2>&1 | tail -3
podman_() {
  podman --root "$K/podman/root" --runroot "$K/podman/run" --storage-driver vfs \
    --cgroup-manager cgroupfs --events-backend file "$@"
}
image=$(PODMAN="podman --root $K/podman/root --runroot $K/podman/run --storage-driver vfs" \
  bash packaging/build-image.sh --binary "$bin" | tail -1)
[ "$image" = "$("$bin" generate kubernetes | awk '/image:/ {print $2; exit}')" ] ||
  fail "the image built ($image) is not the one the manifests name"
mkdir -p "$K/images"
rm -f "$K/images/linerate.tar"
podman_ save -o "$K/images/linerate.tar" "$image" >/dev/null
say "built in $(( $(date +%s) - t0 )) s: $image"

export KUBECONFIG=$K/run/pki/admin.kubeconfig PATH=$K/bin:$PATH
t_cluster=$(date +%s)
say "cluster up: node-a (zone-a), node-b (zone-b), PodTopologyLabelsAdmission on"
# A fresh state: etcd's data, the PV's contents and the PKI of an earlier run are forgotten,
# and whatever an interrupted earlier run left is removed. Then the host as it is, to compare.
cluster clean >/dev/null 2>&1 || true
host_state >"$results/host-before.txt"
FEATURE_GATES=PodTopologyLabelsAdmission=true NODES=2 cluster up 2>"$results/up.txt" ||
  { tail -20 "$results/up.txt" >&2; fail "the cluster did not come up"; }
kubectl version 2>/dev/null | sed 's/^/  /' >&2

k() { kubectl -n "$NS" "$@"; }

# The README's deployment of the mesh overlay, word for word.
deploy_mesh() { # phase
  local out=$results/$1
  mkdir -p "$out"
  kubectl apply -f deploy/kubernetes/base/namespace.yaml >"$out/apply.txt" 2>&1
  head -c 32 /dev/urandom | base64 >"$out/psk"
  k create secret generic linerate-psk --from-file=psk="$out/psk" >>"$out/apply.txt" 2>&1
  kubectl apply -k deploy/kubernetes/overlays/mesh >>"$out/apply.txt" 2>&1
  if grep -i warning "$out/apply.txt"; then fail "$1: apply warned (above)"; fi
}

# The README's wait, then what a user reads; every check names what it saw.
wait_jobs() { # phase
  local out=$results/$1 t0
  t0=$(date +%s)
  if ! k wait --for=condition=complete --timeout=10m job/linerate-fleet job/linerate-mesh \
    >"$out/wait.txt" 2>&1; then
    k get pods -o wide >&2 || true
    for j in fleet mesh; do k logs "job/linerate-$j" --tail=30 >&2 || true; done
    fail "$1: the Jobs did not complete (kubectl wait: $(tail -1 "$out/wait.txt"))"
  fi
  say "$1: Jobs complete $(( $(date +%s) - t0 )) s after apply"
  for j in fleet mesh; do
    k logs "job/linerate-$j" >"$out/$j.log" 2>&1
    local failed pods
    failed=$(k get job "linerate-$j" -o jsonpath='{.status.failed}')
    pods=$(k get pods -l "job-name=linerate-$j" --no-headers | wc -l)
    [ -z "$failed" ] || [ "$failed" = 0 ] || fail "$1: job/linerate-$j had $failed failed attempt(s)"
    [ "$pods" = 1 ] || fail "$1: job/linerate-$j ran $pods pods, not one"
  done
  k get pods -o wide >"$out/pods.txt"
  k get pods -o json >"$out/pods.json"
}

check_logs() { # phase, zone words expected in the mesh's log (zone-a zone-b | unknown)
  local out=$results/$1
  shift
  for n in node-a node-b; do
    grep -q "node $n" "$out/fleet.log" || { cat "$out/fleet.log" >&2; fail "fleet log does not name $n"; }
  done
  grep -q "2 hosts" "$out/fleet.log" || { cat "$out/fleet.log" >&2; fail "the fleet did not test 2 hosts"; }
  for p in "node-a -> node-b" "node-b -> node-a"; do
    grep -q -- "$p" "$out/mesh.log" || { cat "$out/mesh.log" >&2; fail "mesh log does not name $p"; }
  done
  for z in "$@"; do
    grep -qw -- "$z" "$out/mesh.log" || { cat "$out/mesh.log" >&2; fail "mesh log does not name zone $z"; }
    grep -qw -- "zone $z" "$out/fleet.log" || { cat "$out/fleet.log" >&2; fail "fleet log does not say zone $z"; }
  done
  # One of them waited for the other: the requester lock on the shared history.
  cat "$out/fleet.log" "$out/mesh.log" | grep -q "requester lock" ||
    fail "neither Job waited for the other (no 'requester lock' line): they may have overlapped"
}

# The fleet and the mesh did not overlap: one Job's pod ended before the other's first run
# started (pods' own times, runs' start times from the history on the volume).
check_no_overlap() { # phase, apply time (unix s)
  local db=$K/run/pv/history/linerate/history.sqlite
  [ -f "$db" ] || fail "$1: no history on the volume ($db)"
  "$bin" history --db "$db" -J --limit 1000 >"$results/$1/history.json"
  python3 - "$results/$1/history.json" "$results/$1/pods.json" "$2" <<'EOF' ||
import json, sys, datetime
runs = json.load(open(sys.argv[1]))
pods = json.load(open(sys.argv[2]))["items"]
since_ms = int(sys.argv[3]) * 1000
first = {}
for r in runs:
    kind = "mesh" if "mesh" in r["kind"] else "fleet" if "fleet" in r["kind"] else None
    if kind and r["started_unix_ms"] >= since_ms:
        first[kind] = min(first.get(kind, r["started_unix_ms"]), r["started_unix_ms"])
ended = {}
for p in pods:
    job = p["metadata"]["labels"].get("job-name", "")
    if job.startswith("linerate-"):
        at = p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        t = datetime.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
        ended[job[len("linerate-"):]] = int(t * 1000)
print(f"  first runs (unix ms): {first}; pods ended: {ended}", file=sys.stderr)
if set(first) != {"fleet", "mesh"} or set(ended) != {"fleet", "mesh"}:
    sys.exit(1)
# finishedAt has whole seconds: a pod that ended within the second of the other's first run
# counts as before it.
ok = ended["fleet"] <= first["mesh"] + 999 or ended["mesh"] <= first["fleet"] + 999
sys.exit(0 if ok else 1)
EOF
    fail "$1: the fleet and the mesh overlapped (figures above)"
}

# Each agent's start -> Ready, from the pods' own status.
readiness() { # phase, the most seconds allowed (empty: print only)
  python3 - "$results/$1/pods.json" "${2:-}" <<'EOF'
import json, sys, datetime
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
pods = json.load(open(sys.argv[1]))["items"]
worst = 0
for p in pods:
    if p["metadata"]["labels"].get("app.kubernetes.io/component") != "server":
        continue
    started = t(p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    ready = [c for c in p["status"]["conditions"] if c["type"] == "Ready"][0]
    d = (t(ready["lastTransitionTime"]) - started).total_seconds()
    worst = max(worst, d)
    print(f"  {p['spec']['nodeName']}: ready {d:.0f} s after its server started", file=sys.stderr)
if sys.argv[2] and worst > float(sys.argv[2]):
    print(f"an agent took {worst:.0f} s to be ready (at most {sys.argv[2]})", file=sys.stderr)
    sys.exit(1)
EOF
}

say "phase 1: the mesh overlay, zones on the pods"
t_apply=$(date +%s)
deploy_mesh gate-on
wait_jobs gate-on
check_logs gate-on zone-a zone-b
check_no_overlap gate-on "$t_apply"
# A kubelet younger than a probe's period delays its first probe at random (up to 30 s): the
# cluster's kubelets are seconds old here, so this phase's figures are printed only.
readiness gate-on
say "phase 1 passed in $(( $(date +%s) - t_apply )) s"

say "phase 2: the gate off (Kubernetes 1.33-1.34 defaults), removed and deployed again"
t_apply=$(date +%s)
kubectl delete -k deploy/kubernetes/overlays/mesh --wait=true >"$results/delete.txt" 2>&1
# The README's note: a Retain volume is Released when its claim goes; its administrator frees it.
pv=$(kubectl get pv -o jsonpath='{.items[0].metadata.name}')
[ "$(kubectl get pv "$pv" -o jsonpath='{.status.phase}')" = Released ] ||
  fail "the history volume is not Released after the namespace went"
kubectl patch pv "$pv" --type json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null
# Off by name: 1.35 turns it on by default.
FEATURE_GATES=PodTopologyLabelsAdmission=false cluster apiserver 2>>"$results/up.txt"
deploy_mesh gate-off
wait_jobs gate-off
check_logs gate-off unknown
check_no_overlap gate-off "$t_apply"
if grep -Eq 'zone-[ab]' "$results/gate-off/mesh.log"; then fail "gate off, yet a zone was named"; fi
readiness gate-off 5 || fail "agents were slow to be ready (startup probe)"
say "phase 2 passed in $(( $(date +%s) - t_apply )) s"

say "phase 3: another run, the README's way (delete the Jobs, apply again), history kept"
t_apply=$(date +%s)
k delete job --all --wait=true >/dev/null
kubectl apply -k deploy/kubernetes/overlays/mesh >"$results/rerun-apply.txt" 2>&1
for j in fleet mesh; do
  grep -q "job.batch/linerate-$j created" "$results/rerun-apply.txt" ||
    { cat "$results/rerun-apply.txt" >&2; fail "apply did not create a new $j Job"; }
done
# The first of the two to take the requester lock ends and is stored beside the earlier ones
# in the kept history; the other has begun by then (it is not waited for: phases 1 and 2 did).
mkdir -p "$results/rerun"
stored() { { grep -ho 'Stored as \(fleet f\|mesh n\)[0-9]*' "$@" 2>/dev/null || true; } | grep -o '[0-9]*$' | sort -n | tail -1 || true; }
before=$(stored "$results"/gate-off/*.log)
ok=""
for _ in $(seq 1 240); do
  k logs job/linerate-fleet >"$results/rerun/fleet.log" 2>/dev/null || true
  k logs job/linerate-mesh >"$results/rerun/mesh.log" 2>/dev/null || true
  now=$(stored "$results"/rerun/*.log)
  if [ -n "$now" ] && [ "$now" -gt "$before" ] && grep -q "requester lock" "$results"/rerun/*.log; then
    ok=1; break
  fi
  sleep 1
done
[ -n "$ok" ] || { cat "$results"/rerun/*.log >&2; fail "the rerun stored nothing new after group $before"; }
say "phase 3 passed in $(( $(date +%s) - t_apply )) s: stored as group $now (the last before: $before)"

say "phase 4: the scheduled mesh (overlays/mesh-schedule: a CronJob), one run now"
t_apply=$(date +%s)
k delete job --all --wait=true >/dev/null
kubectl apply -k deploy/kubernetes/overlays/mesh-schedule >"$results/schedule-apply.txt" 2>&1 ||
  { cat "$results/schedule-apply.txt" >&2; fail "apply -k overlays/mesh-schedule failed"; }
grep -q "cronjob.batch/linerate-mesh created" "$results/schedule-apply.txt" ||
  { cat "$results/schedule-apply.txt" >&2; fail "apply did not create the CronJob"; }
if grep -qi warning "$results/schedule-apply.txt"; then
  cat "$results/schedule-apply.txt" >&2; fail "apply of the scheduled mesh warned"
fi
[ "$(k get cronjob linerate-mesh -o jsonpath='{.spec.concurrencyPolicy}')" = Forbid ] ||
  fail "the CronJob may run two meshes at once"
# The README's way to run one now, from the CronJob's own template.
k create job --from=cronjob/linerate-mesh linerate-mesh-now >/dev/null
if ! k wait --for=condition=complete --timeout=6m job/linerate-mesh-now >/dev/null 2>&1; then
  k logs job/linerate-mesh-now --tail=40 >&2 || true
  fail "the CronJob's mesh did not complete"
fi
mkdir -p "$results/schedule"
k logs job/linerate-mesh-now >"$results/schedule/mesh.log"
for p in "node-a -> node-b" "node-b -> node-a"; do
  grep -q -- "$p" "$results/schedule/mesh.log" ||
    { cat "$results/schedule/mesh.log" >&2; fail "the scheduled mesh's log does not name $p"; }
done
[ "$(k get job linerate-mesh-now -o jsonpath='{.status.failed}')" = "" ] ||
  fail "the scheduled mesh's Job had a failed attempt"
scheduled=$(stored "$results"/schedule/*.log)
[ -n "$scheduled" ] && [ "$scheduled" -gt "$now" ] ||
  { cat "$results/schedule/mesh.log" >&2; fail "the scheduled mesh stored nothing new after group $now"; }
say "phase 4 passed in $(( $(date +%s) - t_apply )) s: stored as group $scheduled"

say "phase 5: both networks (overlays/mesh-networks), pod-to-pod against host-to-host"
t_apply=$(date +%s)
k delete job,cronjob --all --wait=true >/dev/null
mkdir -p "$results/networks"
kubectl apply -k deploy/kubernetes/overlays/mesh-networks >"$results/networks/apply.txt" 2>&1 ||
  { cat "$results/networks/apply.txt" >&2; fail "apply -k overlays/mesh-networks failed"; }
if grep -qi warning "$results/networks/apply.txt"; then
  cat "$results/networks/apply.txt" >&2; fail "apply of the both-networks overlay warned"
fi
wait_jobs networks
for p in "node-a/pod -> node-b/pod" "node-b/pod -> node-a/pod" \
  "node-a/host -> node-b/host" "node-b/host -> node-a/host"; do
  grep -q -- "$p" "$results/networks/mesh.log" ||
    { cat "$results/networks/mesh.log" >&2; fail "the both-networks mesh does not name $p"; }
done
cost=$(grep -o 'pod-to-pod is .* against host-to-host on the same node pairs' "$results/networks/mesh.log" || true)
[ -n "$cost" ] || { cat "$results/networks/mesh.log" >&2; fail "the mesh does not say what the pod network costs"; }
for n in "node-a -> node-b" "node-b -> node-a"; do
  grep -q -- "on $n" <<<"$cost" || fail "the pod network's cost does not name $n: $cost"
done
say "phase 5 passed in $(( $(date +%s) - t_apply )) s: $cost"

t_done=$(date +%s)
teardown
sleep 1
host_state >"$results/host-after.txt"
if ! diff -u "$results/host-before.txt" "$results/host-after.txt" >"$results/host-diff.txt"; then
  cat "$results/host-diff.txt" >&2
  fail "the host is not as it was (above)"
fi
leftover=$(pgrep -af "$K/bin/|containerd --config $K|etcd --name default --data-dir $K" || true)
[ -z "$leftover" ] || fail "processes left: $leftover"
say "passed: cluster start to done $(( t_done - t_cluster )) s; whole script $(( $(date +%s) - t_start )) s"
