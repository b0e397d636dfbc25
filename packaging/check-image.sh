#!/usr/bin/env bash
# Builds the container image (packaging/build-image.sh) and checks it as an operator meets it:
# only the binary, its libraries, nsswitch.conf and host.conf in it (no shell: /bin/sh fails), a
# numeric non-root user (in the image's config and in the running process's /proc status),
# `--version` naming the binary's. Then it runs the image as the Kubernetes manifests do
# (`linerate generate kubernetes --psk-secret`): two agents with the DaemonSet's arguments, the
# key mounted as the Secret is, node and zone in the variables the downward API sets, a
# read-only root and every capability dropped, inside a network namespace this script
# creates. From a second namespace: a client without the key is refused; the host binary and
# the image (its history on a mounted volume) are served, JSON checked, the node and zone
# read back; and the fleet Job's own arguments, in the image, find both agents by one name
# and name their nodes, stored on the volume.
#
# Run as root (CI): `bash packaging/check-image.sh [--binary PATH]` (default: the release
# build). Installs podman and runc if missing. Podman runs with storage, runtime and ulimits
# of its own, under a temporary directory removed at exit (vfs storage, runc, cgroupfs, no
# default ulimits: what runs in a sandbox as well as on a host), so it touches no image or
# container of the machine's podman. The only network traffic is inside the two namespaces,
# which are removed at exit.
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
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
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
net=$((1 + $$ % 200))
server_ip="10.205.$net.2"
server_b_ip="10.205.$net.3"
client_ip="10.205.$net.1"
cleanup() {
  "${podman[@]}" rm -f -t 0 "${id}-server" "${id}-server-b" >/dev/null 2>&1 || true
  ip netns del "$ns_server" 2>/dev/null || true
  ip netns del "$ns_client" 2>/dev/null || true
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

# The containers' arguments as `linerate generate kubernetes --psk-secret` writes them: the
# agents and the Job below run them as the cluster would.
manifests=$("$bin" generate kubernetes --psk-secret linerate-psk)
args_of() {
  awk -v name="$1" '/^---$/ {found = 0} $0 == "  name: " name {found = 1}
    found && /^        args:$/ {args = 1; next}
    args && /^        - / {sub(/^        - /, ""); gsub(/"/, ""); print; next}
    {args = 0}' <<<"$manifests" | tr '\n' ' '
}
server_args=$(args_of linerate-server)
job_args=$(args_of linerate-fleet)
echo "DaemonSet: linerate $server_args"
echo "Job:       linerate $job_args"
[ "$server_args" = "server --max-memory 384M --psk-file=/etc/linerate/psk/psk " ] ||
  fail "the DaemonSet runs \"$server_args\""
[ "$job_args" = "fleet --each-address linerate -t 10 --psk-file=/etc/linerate/psk/psk " ] ||
  fail "the Job runs \"$job_args\""
# The key, mounted as the Secret is: read-only, readable by the pods' group only.
head -c 32 /dev/urandom | base64 >"$work/psk"
chgrp "${user#*:}" "$work/psk"
chmod 0440 "$work/psk"
key=(-v "$work/psk:/etc/linerate/psk/psk:ro")

step "the image as two agents in $ns_server: the DaemonSet's arguments, read-only root, no capabilities, no new privileges, node and zone as the DaemonSet passes them"
# shellcheck disable=SC2086
"${podman[@]}" run -d --name "${id}-server" --read-only --cap-drop=all \
  --security-opt no-new-privileges --network "ns:/run/netns/$ns_server" "${key[@]}" \
  -e LINERATE_NODE_NAME=node-a -e LINERATE_ZONE=zone-1 "$image" $server_args \
  --max-duration 10 -B "$server_ip" >/dev/null
# A second agent on the second address, in a zone without a name (the label's empty value):
# the fleet Job below finds both by one name.
# shellcheck disable=SC2086
"${podman[@]}" run -d --name "${id}-server-b" --read-only --cap-drop=all \
  --security-opt no-new-privileges --network "ns:/run/netns/$ns_server" "${key[@]}" \
  -e LINERATE_NODE_NAME=node-b -e LINERATE_ZONE= "$image" $server_args \
  --max-duration 10 -B "$server_b_ip" >/dev/null
for addr in "$server_ip" "$server_b_ip"; do
  for _ in $(seq 50); do
    ip netns exec "$ns_server" ss -Htln "src = $addr and sport = :5201" | grep -q . && break
    sleep 0.2
  done
  ip netns exec "$ns_server" ss -Htln "src = $addr and sport = :5201" | grep -q . ||
    fail "no server listened on $addr:5201: $("${podman[@]}" logs "${id}-server" "${id}-server-b" 2>&1 | tail -5)"
done
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
grep -q "^linerate/$server_b_ip (node node-b) " "$work/fleet.txt" ||
  fail "the fleet's table does not name node-b for $server_b_ip"
group=$(sed -n 's/^Stored as fleet f\([0-9]*\) .*/\1/p' "$work/fleet.txt")
[ -n "$group" ] || fail "the fleet did not say where it was stored"
stored=$("$bin" history --db "$db" --group "$group")
for addr in "$server_ip" "$server_b_ip"; do
  grep -q "$addr" <<<"$stored" || fail "the history on the volume holds no run of fleet f$group against $addr: $stored"
done
echo "fleet f$group stored on the volume: a run against each agent"

"${podman[@]}" rm -f -t 2 "${id}-server" "${id}-server-b" >/dev/null
echo "check-image: OK in $((SECONDS - start)) s"
