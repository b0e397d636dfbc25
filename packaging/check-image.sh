#!/usr/bin/env bash
# Builds the container image (packaging/build-image.sh) and checks it as an operator meets it:
# only the binary, its libraries, nsswitch.conf and host.conf in it (no shell: /bin/sh fails), a
# numeric non-root user (in the image's config and in the running process's /proc status),
# `--version` naming the binary's. Then it runs the image as the Kubernetes manifests do
# (`linerate generate kubernetes --psk-secret --mesh`, whose arguments it checks): agents with
# the DaemonSet's arguments, the key mounted as the Secret is, node and zone in the variables
# the downward API sets, a read-only root and every capability dropped, in network namespaces
# this script creates.
#
# Two agents in one namespace, from a second: a client without the key is refused; the host
# binary and the image (its history on a mounted volume) are served, JSON checked, the node
# and zone read back; and the fleet Job's own arguments, in the image, find both agents by one
# name and name their nodes, stored on the volume.
#
# Then a mesh: six agents, each in a namespace of its own, in two zones (a bridge each in a hub
# namespace, the bridges joined by a veth pair shaped with `tbf` to 400 Mbit/s both ways, as
# tests/mesh.rs builds it). The mesh Job's own arguments, in the image (2 runs of 1 s per pair
# instead of 10 s), find the six by one name, report all 30 ordered pairs with a 95 % interval
# each and every agent's node and zone, and name both cross-zone directions slow (and no
# same-zone one); the mesh is stored on the volume and reads back as a report. Refused, each
# checked: an agent without the key (it does not start); a mesh without the key (a usage error
# before anything is sent) and with the wrong key (the agents refuse it); a server in the
# image without `--agent` as a mesh member (the requester and the agent asked to test it both
# say it is not an agent).
#
# Run as root (CI): `bash packaging/check-image.sh [--binary PATH]` (default: the release
# build). Installs podman and runc if missing. Podman runs with storage, runtime and ulimits
# of its own, under a temporary directory removed at exit (vfs storage, runc, cgroupfs, no
# default ulimits: what runs in a sandbox as well as on a host), so it touches no image or
# container of the machine's podman. The only network traffic is inside the namespaces this
# script creates, which are removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

# shellcheck source=packaging/lib.sh
source packaging/lib.sh

bin=target/release/linerate
[ "${1:-}" = --binary ] && bin=$2
[ "$(id -u)" -eq 0 ] || fail "run as root: this creates network namespaces and runs rootful podman"

missing=""
command -v podman >/dev/null 2>&1 || missing="$missing podman"
command -v runc >/dev/null 2>&1 || missing="$missing runc"
{ command -v ip && command -v tc; } >/dev/null 2>&1 || missing="$missing iproute2"
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
podman --version

if [ "$bin" = target/release/linerate ]; then
  cargo build --release --locked -p linerate
fi
[ -x "$bin" ] || fail "$bin is not an executable"

work=$(mktemp -d /var/tmp/linerate-image.XXXXXX)
cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$work/containers.conf"
PODMAN="podman --root $work/storage --runroot $work/run --storage-driver vfs"
read -r -a podman <<<"$PODMAN"

id="lri$(($$ % 100000))"
ns_server="${id}s"
ns_client="${id}c"
# The mesh's: a hub (the zones' bridges, the requester) and one namespace per agent.
ns_hub="${id}h"
ns_agents=("${id}1" "${id}2" "${id}3" "${id}4" "${id}5" "${id}6")
net=$((1 + $$ % 200))
server_ip="10.205.$net.2"
server_b_ip="10.205.$net.3"
client_ip="10.205.$net.1"
# --ignore: one container already gone must not keep the others running (and their mounts
# under $work busy).
cleanup() {
  "${podman[@]}" rm -f --ignore -t 0 "${id}-server" "${id}-server-b" "${id}-plain" \
    "${id}-agent-1" "${id}-agent-2" "${id}-agent-3" "${id}-agent-4" "${id}-agent-5" \
    "${id}-agent-6" >/dev/null 2>&1 || true
  for ns in "$ns_server" "$ns_client" "$ns_hub" "${ns_agents[@]}"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

step "build the image"
image=$(PODMAN="$PODMAN" bash packaging/build-image.sh --binary "$bin" --tag "localhost/linerate:check-$id" | tail -1)
size=$("${podman[@]}" image inspect "$image" --format '{{.Size}}')
echo "$image: $size bytes"
[ "$size" -lt 20000000 ] || fail "the image is $size bytes, not under 20 MB"

step "its files: the binary, the libraries ldd names, nsswitch.conf, host.conf; nothing else"
mnt=$("${podman[@]}" image mount "$image")
found=$(cd "$mnt" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort)
"${podman[@]}" image unmount "$image" >/dev/null
staged=$(cd packaging/generated/image/rootfs && find . \( -type f -o -type l \) | sed 's|^\.||' | sort)
printf '%s\n' "$found"
[ "$found" = "$staged" ] || fail "the image holds other files than staged: $(diff <(echo "$staged") <(echo "$found") | tr '\n' ' ')"
for shell in /bin/sh /bin/bash /bin/busybox /usr/bin/sh; do
  if "${podman[@]}" run --rm --read-only --entrypoint "$shell" "$image" -c true >/dev/null 2>&1; then
    fail "$shell runs in the image"
  fi
done

step "a numeric user that is not root"
user=$("${podman[@]}" image inspect "$image" --format '{{.Config.User}}')
[[ "$user" =~ ^[0-9]+:[0-9]+$ ]] || fail "the image's user is \"$user\", not numeric uid:gid"
[ "${user%%:*}" -ne 0 ] || fail "the image runs as root ($user)"
echo "image user: $user"

step "--version in the image, read-only root: the binary's own"
want=$("$bin" --version)
got=$("${podman[@]}" run --rm --read-only "$image" --version)
echo "$got"
[ "$got" = "$want" ] || fail "--version in the image says \"$got\", the binary \"$want\""

step "network namespaces $ns_client ($client_ip) and $ns_server ($server_ip)"
ip netns add "$ns_server"
ip netns add "$ns_client"
ip link add "${id}x" type veth peer name "${id}y"
ip link set "${id}x" netns "$ns_client"
ip link set "${id}y" netns "$ns_server"
for spec in "$ns_client ${id}x $client_ip" "$ns_server ${id}y $server_ip" "$ns_server ${id}y $server_b_ip"; do
  read -r ns dev addr <<<"$spec"
  ip -n "$ns" addr add "$addr/24" dev "$dev"
  ip -n "$ns" link set "$dev" up
  ip -n "$ns" link set lo up
done

# The containers' arguments as `linerate generate kubernetes --psk-secret --mesh` writes them:
# the agents and the Jobs below run them as the cluster would.
manifests=$("$bin" generate kubernetes --psk-secret linerate-psk --mesh)
args_of() {
  awk -v name="$1" '/^---$/ {found = 0} $0 == "  name: " name {found = 1}
    found && /^        args:$/ {args = 1; next}
    args && /^        - / {sub(/^        - /, ""); gsub(/"/, ""); print; next}
    {args = 0}' <<<"$manifests" | tr '\n' ' '
}
server_args=$(args_of linerate-server)
job_args=$(args_of linerate-fleet)
mesh_args=$(args_of linerate-mesh)
echo "DaemonSet: linerate $server_args"
echo "Job:       linerate $job_args"
echo "Mesh Job:  linerate $mesh_args"
[ "$server_args" = "server --max-memory 384M --psk-file=/etc/linerate/psk/psk --agent " ] ||
  fail "the DaemonSet runs \"$server_args\""
[ "$job_args" = "fleet --each-address linerate --wait-agents 5m -t 10 --psk-file=/etc/linerate/psk/psk " ] ||
  fail "the Job runs \"$job_args\""
[ "$mesh_args" = "mesh --each-address linerate --wait-agents 5m -t 10 --psk-file=/etc/linerate/psk/psk " ] ||
  fail "the mesh Job runs \"$mesh_args\""
# The key, mounted as the Secret is: read-only, readable by the pods' group only.
head -c 32 /dev/urandom | base64 >"$work/psk"
chgrp "${user#*:}" "$work/psk"
chmod 0440 "$work/psk"
key=(-v "$work/psk:/etc/linerate/psk/psk:ro")

# Starts the image as container $1 in namespace $2 as the DaemonSet runs it (read-only root, no
# capabilities, no new privileges, the key mounted as the Secret is), node $3 and zone $4 in
# the variables the downward API sets, arguments $6...; waits until it listens on port 5201
# (of address $5, when not empty: two servers share a namespace below).
start_agent() {
  local name=$1 ns=$2 node=$3 zone=$4 addr=$5 filter="sport = :5201"
  shift 5
  [ -z "$addr" ] || filter="src = $addr and $filter"
  "${podman[@]}" run -d --name "$name" --read-only --cap-drop=all \
    --security-opt no-new-privileges --network "ns:/run/netns/$ns" "${key[@]}" \
    -e LINERATE_NODE_NAME="$node" -e LINERATE_ZONE="$zone" "$image" "$@" >/dev/null
  for _ in $(seq 50); do
    ip netns exec "$ns" ss -Htln "$filter" | grep -q . && return
    sleep 0.2
  done
  fail "$name did not listen on ${addr:-any address}:5201 in $ns: $("${podman[@]}" logs "$name" 2>&1 | tail -5)"
}

step "the image as two agents in $ns_server: the DaemonSet's arguments, read-only root, no capabilities, no new privileges, node and zone as the DaemonSet passes them"
# shellcheck disable=SC2086
start_agent "${id}-server" "$ns_server" node-a zone-1 "$server_ip" $server_args \
  --max-duration 10 -B "$server_ip"
# A second agent on the second address, in a zone without a name (the label's empty value):
# the fleet Job below finds both by one name.
# shellcheck disable=SC2086
start_agent "${id}-server-b" "$ns_server" node-b "" "$server_b_ip" $server_args \
  --max-duration 10 -B "$server_b_ip"
pid=$("${podman[@]}" inspect "${id}-server" --format '{{.State.Pid}}')
uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$pid/status")
caps=$(awk '/^CapEff:/ {print $2}' "/proc/$pid/status")
echo "server process $pid: uids $uids, effective capabilities $caps"
for uid in $uids; do [ "$uid" -ne 0 ] || fail "the server runs with uid 0 ($uids)"; done
[ "$((16#$caps))" -eq 0 ] || fail "the server holds capabilities ($caps)"

# Checks a client's -J document: completed, bytes in the server's report, the server's node
# and zone as its environment variables named them.
check_json() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d["record"]
assert r["outcome"]["status"] == "completed", r["outcome"]
assert r["server"].startswith(sys.argv[1]), r["server"]
streams = r["server_results"]["streams"]
got = sum(s["bytes"] for s in streams)
assert got > 0, "the server reported no bytes"
env = r["server_results"]["environment"]
assert (env.get("node"), env.get("zone")) == ("node-a", "zone-1"), (env.get("node"), env.get("zone"))
print("completed:", r["server_software"], "on node", env["node"], "zone", env["zone"],
      "server reported", got, "bytes,",
      round(d["summary"]["directions"][0]["receiver"]["bits_per_second"] / 1e6), "Mbit/s")
' "$1"
}

step "a client (the host binary) from $ns_client: refused without the key, JSON checked with it"
if ip netns exec "$ns_client" "$bin" client "$server_ip" -t 1 -J --no-store >"$work/no-key.json"; then
  fail "a client without the key was served"
fi
grep -q '"kind": *"refused"' "$work/no-key.json" || fail "a client without the key: $(head -c 600 "$work/no-key.json")"
ip netns exec "$ns_client" "$bin" client "$server_ip" -t 1 -J --no-store --psk-file "$work/psk" \
  >"$work/host-client.json" || fail "the client failed: $(head -c 600 "$work/host-client.json")"
check_json "$server_ip" <"$work/host-client.json"

step "a client (the image, read-only root) from $ns_client, its history on a volume"
mkdir -p "$work/history"
chown "$user" "$work/history"
"${podman[@]}" run --rm --read-only --cap-drop=all --network "ns:/run/netns/$ns_client" "${key[@]}" \
  -v "$work/history:/var/lib/linerate" "$image" client "$server_ip" -t 1 -J \
  --psk-file /etc/linerate/psk/psk >"$work/image-client.json" ||
  fail "the client in the image failed: $(head -c 600 "$work/image-client.json")"
check_json "$server_ip" <"$work/image-client.json"
db="$work/history/linerate/history.sqlite"
[ -s "$db" ] || fail "the client in the image stored no history in the volume ($db)"
"$bin" history --db "$db" | grep -q "$server_ip" || fail "the stored history does not name $server_ip"
echo "history on the volume: $(stat -c %s "$db") bytes, the run listed"

step "the fleet Job's command in the image (1 s long): both agents found by one name (/etc/hosts, as DNS would)"
# shellcheck disable=SC2086
"${podman[@]}" run --rm --read-only --cap-drop=all --network "ns:/run/netns/$ns_client" "${key[@]}" \
  --add-host "linerate:$server_ip" --add-host "linerate:$server_b_ip" \
  -v "$work/history:/var/lib/linerate" "$image" ${job_args/-t 10/-t 1} >"$work/fleet.txt" ||
  fail "the fleet in the image failed: $(cat "$work/fleet.txt")"
cat "$work/fleet.txt"
grep -q "^linerate/$server_ip (node node-a, zone zone-1) " "$work/fleet.txt" ||
  fail "the fleet's table does not name node-a and zone-1 for $server_ip"
grep -q "^linerate/$server_b_ip (node node-b, zone unknown) " "$work/fleet.txt" ||
  fail "the fleet's table does not name node-b (zone unknown) for $server_b_ip"
group=$(sed -n 's/^Stored as fleet f\([0-9]*\) .*/\1/p' "$work/fleet.txt")
[ -n "$group" ] || fail "the fleet did not say where it was stored"
stored=$("$bin" history --db "$db" --group "$group")
for addr in "$server_ip" "$server_b_ip"; do
  grep -q "$addr" <<<"$stored" || fail "the history on the volume holds no run of fleet f$group against $addr: $stored"
done
echo "fleet f$group stored on the volume: a run against each agent"

"${podman[@]}" rm -f -t 2 "${id}-server" "${id}-server-b" >/dev/null

step "a mesh's network: hub $ns_hub with a bridge per zone, joined by a link shaped to 400 Mbit/s both ways; agents ${ns_agents[*]}"
ip netns add "$ns_hub"
for br in bra brb; do
  ip -n "$ns_hub" link add "$br" type bridge
  ip -n "$ns_hub" link set "$br" up
done
ip -n "$ns_hub" link add xa type veth peer name xb
for spec in "xa bra" "xb brb"; do
  read -r dev br <<<"$spec"
  ip -n "$ns_hub" link set "$dev" master "$br"
  ip -n "$ns_hub" link set "$dev" up
  tc -n "$ns_hub" qdisc replace dev "$dev" root tbf rate 400mbit burst 256kb latency 20ms
done
# The requester (the mesh Job) on zone a's bridge.
mesh_net="10.206.$net"
ip -n "$ns_hub" addr add "$mesh_net.100/24" dev bra
# Agents 1-3 in zone a, 4-6 in zone b: their zone as the node's topology label would name it.
zone_of() { if [ "$1" -le 3 ]; then echo eu-west-1a; else echo eu-west-1b; fi; }
hosts=()
for i in 1 2 3 4 5 6; do
  ns=${ns_agents[$((i - 1))]}
  br=bra
  [ "$i" -le 3 ] || br=brb
  ip netns add "$ns"
  ip link add "${ns}i" netns "$ns" type veth peer name "${ns}o" netns "$ns_hub"
  ip -n "$ns_hub" link set "${ns}o" master "$br"
  ip -n "$ns_hub" link set "${ns}o" up
  ip -n "$ns" addr add "$mesh_net.$i/24" dev "${ns}i"
  ip -n "$ns" link set "${ns}i" up
  ip -n "$ns" link set lo up
  hosts+=(--add-host "linerate:$mesh_net.$i")
done

# Starts container $1 as mesh agent $2 (node-$2, in its zone, in its own namespace) with
# arguments $3...
start_mesh_agent() {
  local name=$1 i=$2
  shift 2
  start_agent "$name" "${ns_agents[$((i - 1))]}" "node-$i" "$(zone_of "$i")" "" "$@"
}
# Runs the image in the hub (the requester's place), the agents found by the name `linerate`
# as the headless Service's DNS name finds them, the key file $1 mounted as the Secret is and
# the history volume mounted; stdout to $work/mesh.out, stderr to $work/mesh.err. Returns the
# exit code.
run_requester() {
  local keyfile=$1
  shift
  "${podman[@]}" run --rm --read-only --cap-drop=all --network "ns:/run/netns/$ns_hub" \
    -v "$keyfile:/etc/linerate/psk/psk:ro" "${hosts[@]}" -v "$work/history:/var/lib/linerate" \
    "$image" "$@" >"$work/mesh.out" 2>"$work/mesh.err"
}

psk_arg="--psk-file=/etc/linerate/psk/psk"
step "refused: an agent without the key does not start (the DaemonSet's arguments without $psk_arg)"
# shellcheck disable=SC2086
if "${podman[@]}" run --rm --read-only --cap-drop=all --network none "${key[@]}" "$image" \
  ${server_args/"$psk_arg "/} >"$work/no-key-agent.out" 2>&1; then
  fail "an agent without a key started: $(cat "$work/no-key-agent.out")"
fi
cat "$work/no-key-agent.out"
grep -q -- "--psk-file" "$work/no-key-agent.out" || fail "an agent without a key was refused without naming --psk-file"

step "six agents in the image, one per namespace: the DaemonSet's arguments, nodes node-1..node-6, zones eu-west-1a (1-3) and eu-west-1b (4-6)"
for i in 1 2 3 4 5 6; do
  # shellcheck disable=SC2086
  start_mesh_agent "${id}-agent-$i" "$i" $server_args
done

step "the mesh Job's command in the image (2 runs of 1 s per pair, one pair at a time: the zones share one shaped link): the six agents by one name, all 30 ordered pairs"
mesh_start=$SECONDS
# shellcheck disable=SC2086
run_requester "$work/psk" ${mesh_args/-t 10/-t 1 --repeat 2 --serial} -J ||
  fail "the mesh in the image failed: $(tail -5 "$work/mesh.err")"
echo "60 pair tests in $((SECONDS - mesh_start)) s"
python3 -c '
import itertools, json, sys
net, zone_a, zone_b = sys.argv[1:]
d = json.load(sys.stdin)
assert d["kind"] == "linerate.mesh", d["kind"]
s = d["summary"]
# Every agent found by its address and named by the node its container was given (the mesh
# names agents given without labels by the nodes they report), with its zone.
agents = {a["label"]: a for a in s["agents"]}
want = {f"node-{i}": (f"node-{i}", zone_a if i <= 3 else zone_b) for i in range(1, 7)}
got = {label: (a.get("node"), a.get("zone")) for label, a in agents.items()}
assert got == want, got
zone = {label: z for label, (_, z) in want.items()}
cells = {c["label"]: c for c in s["cells"]}
pairs = {f"{a} -> {b}" for a, b in itertools.permutations(want, 2)}
assert len(s["cells"]) == 30 and set(cells) == pairs, sorted(cells)
for c in s["cells"]:
    ci = c["bits_per_second"]["ci95"]
    assert c["runs"] == 2 and len(ci) == 2 and ci[0] <= c["bits_per_second"]["mean"] <= ci[1], c
def means(cross):
    return [c["bits_per_second"]["mean"] for l, c in cells.items()
            if (zone[l.split(" -> ")[0]] != zone[l.split(" -> ")[1]]) == cross]
cross, same = means(True), means(False)
print(f"cross-zone pairs ({len(cross)}): {min(cross) / 1e6:.0f}..{max(cross) / 1e6:.0f} Mbit/s, "
      f"same-zone pairs ({len(same)}): {min(same) / 1e6:.0f}..{max(same) / 1e6:.0f} Mbit/s")
# The link between the zones is shaped to 400 Mbit/s; a pair inside a zone is not.
assert 200e6 < min(cross) and max(cross) < 440e6, f"cross-zone pairs not at the 400 Mbit/s link: {cross}"
assert min(same) > 2 * max(cross), f"a same-zone pair ran at most twice a cross-zone one: {min(same)}"
findings = s["findings"]
for f in findings:
    print("finding:", f)
text = "\n".join(findings)
for a, b in [(zone_a, zone_b), (zone_b, zone_a)]:
    assert f"zone {a} -> zone {b} is " in text and "% slower than" in text, f"{a} -> {b} is not named slow"
for z in [zone_a, zone_b]:
    assert f"zone {z} -> zone {z} is " not in text, f"a same-zone direction named slow: {z}"
' "$mesh_net" "$(zone_of 1)" "$(zone_of 4)" <"$work/mesh.out" ||
  fail "the mesh's document: $(head -c 600 "$work/mesh.out")"
group=$("$bin" history --db "$db" -J --limit 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["group"])')
"$bin" report "n$group" --db "$db" >"$work/mesh-report.txt" ||
  fail "the stored mesh n$group does not read back: $(cat "$work/mesh-report.txt")"
rows=$(grep -c '^node-[1-6] -> node-[1-6] ' "$work/mesh-report.txt" || true)
[ "$rows" -eq 30 ] || fail "the stored mesh n$group reads back with $rows pairs, not 30: $(cat "$work/mesh-report.txt")"
echo "mesh n$group stored on the volume: its report lists the 30 pairs"

step "refused: the mesh Job without the key (a usage error), and with another key (the agents refuse it)"
refusal_args=${mesh_args/-t 10/-t 0.3 --repeat 1 --no-store}
# shellcheck disable=SC2086
if run_requester "$work/psk" ${refusal_args/"$psk_arg "/}; then code=0; else code=$?; fi
[ "$code" -eq 2 ] || fail "a mesh without the key exited $code, not 2: $(cat "$work/mesh.err")"
grep -q -- "--psk-file" "$work/mesh.err" || fail "a mesh without the key was refused without naming --psk-file: $(cat "$work/mesh.err")"
echo "without the key: exit $code, $(grep -m1 -- --psk-file "$work/mesh.err")"
head -c 32 /dev/urandom | base64 >"$work/other-psk"
chgrp "${user#*:}" "$work/other-psk"
chmod 0440 "$work/other-psk"
# shellcheck disable=SC2086
if run_requester "$work/other-psk" $refusal_args; then
  fail "a mesh with another key was served: $(cat "$work/mesh.out")"
fi
grep -q "authentication failed" "$work/mesh.err" ||
  fail "a mesh with another key failed without \"authentication failed\": $(tail -5 "$work/mesh.err")"
echo "with another key: $(grep -m1 "authentication failed" "$work/mesh.err")"

step "refused: a server in the image without --agent (the DaemonSet's arguments without it) as a mesh member"
"${podman[@]}" rm -f -t 2 "${id}-agent-6" >/dev/null
# shellcheck disable=SC2086
start_mesh_agent "${id}-plain" 6 ${server_args/--agent /}
# shellcheck disable=SC2086
if run_requester "$work/psk" mesh -t 0.3 --repeat 1 --no-store "$psk_arg" \
  "$mesh_net.1=agent" "$mesh_net.6=plain"; then
  fail "a mesh with a server that is not an agent succeeded: $(cat "$work/mesh.out")"
fi
grep -q "not a linerate agent" "$work/mesh.err" ||
  fail "a mesh with a server that is not an agent did not say so: $(tail -5 "$work/mesh.err")"
echo "requester: $(grep -m1 "not a linerate agent" "$work/mesh.err")"
# Agent 1, asked to test the plain server, refuses to as well.
"${podman[@]}" logs "${id}-agent-1" >"$work/agent-1.log" 2>&1
grep -q "not a linerate agent with a key" "$work/agent-1.log" ||
  fail "agent 1 did not refuse to test the server without --agent: $(tail -5 "$work/agent-1.log")"
echo "agent 1: $(grep -m1 "not a linerate agent with a key" "$work/agent-1.log")"
"${podman[@]}" rm -f -t 2 "${id}-agent-1" "${id}-agent-2" "${id}-agent-3" "${id}-agent-4" \
  "${id}-agent-5" "${id}-plain" >/dev/null

echo "check-image: OK in $((SECONDS - start)) s"
