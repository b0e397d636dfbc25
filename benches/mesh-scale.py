#!/usr/bin/env python3
"""A mesh at fabric scale on one machine: N agents (default 100), each in a network namespace
of its own on one bridge, every node's link shaped with tbf both ways (so the machine's CPUs
are not what a pair measures), and `linerate mesh -t 1 --repeat 1` over all N(N-1) ordered
pairs from a requester namespace on the bridge. Prints the wall time beside the plan's
estimate and the serial estimate (one pair at a time, what k8s-netperf does), the requester's
peak RSS and threads, and the agents' largest peak RSS and threads, with the host it ran on.

    sudo python3 benches/mesh-scale.py [--agents 100] [--rate 200mbit] [--time 1]

Needs root and iproute2. Traffic stays inside the namespaces this run creates (10.235.x.0/24)
and removes at exit; the mesh is bounded by --limit seconds.
"""

import argparse
import atexit
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


def tc(*args):
    subprocess.run(["tc", *args], check=True, capture_output=True)


def status(pid):
    """VmHWM (peak RSS, bytes) and Threads of a live process, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        hwm = int(fields["VmHWM"].split()[0]) * 1024
        return hwm, int(fields["Threads"])
    except (OSError, KeyError, ValueError):
        return None


def set_backlog(value):
    with open("/proc/sys/net/core/netdev_max_backlog", "w") as f:
        f.write(value)


def softnet_drops():
    """Packets the kernel dropped because a CPU's backlog queue was full, all CPUs."""
    with open("/proc/net/softnet_stat") as f:
        return sum(int(line.split()[1], 16) for line in f if line.strip())


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=100)
    p.add_argument("--rate", default="200mbit", help="each node's link, both ways (tbf)")
    p.add_argument("--time", default="1", help="each pair test's -t")
    p.add_argument("--binary", default="target/release/linerate")
    p.add_argument("--limit", type=float, default=1800, help="the mesh's time limit, seconds")
    p.add_argument("--backlog", type=int, default=10000,
                   help="net.core.netdev_max_backlog during the run (restored after; 0 leaves "
                        "it): every packet between namespaces waits in this per-CPU queue, and "
                        "at the default 1000 a 100-agent mesh dropped ARP and SYNs there")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: it creates network namespaces")
    if not 4 <= a.agents <= 250:
        sys.exit("--agents: 4 to 250 (one /24)")
    binary = os.path.abspath(a.binary)
    tag = f"lms{os.getpid() % 10000}"
    net = f"10.235.{1 + os.getpid() % 200}"
    hub = tag + "h"
    names = [f"{tag}a{i}" for i in range(1, a.agents + 1)]
    procs = []

    def close():
        for pr in procs:
            pr.kill()
        for pr in procs:
            pr.wait()
        for ns in [hub, *names]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    atexit.register(close)
    backlog_was = open("/proc/sys/net/core/netdev_max_backlog").read().strip()
    if a.backlog:
        set_backlog(str(a.backlog))
        atexit.register(set_backlog, backlog_was)
    # A SIGTERM still removes the namespaces and stops the agents (atexit runs on exit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ip("netns", "add", hub)
    ip("-n", hub, "link", "set", "lo", "up")
    ip("-n", hub, "link", "add", "mbr", "type", "bridge")
    ip("-n", hub, "link", "set", "mbr", "up")
    ip("-n", hub, "addr", "add", f"{net}.254/24", "dev", "mbr")
    key = f"/tmp/{tag}.psk"
    with open(key, "wb") as f:
        f.write(os.urandom(32))
    atexit.register(lambda: os.path.exists(key) and os.remove(key))
    targets = []
    t0 = time.time()
    for i, ns in enumerate(names, 1):
        inner, outer = f"{tag}i{i}", f"{tag}o{i}"
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", inner, "type", "veth", "peer", "name", outer)
        ip("link", "set", inner, "netns", ns)
        ip("link", "set", outer, "netns", hub)
        ip("-n", hub, "link", "set", outer, "master", "mbr")
        ip("-n", hub, "link", "set", outer, "up")
        addr = f"{net}.{i}"
        ip("-n", ns, "addr", "add", f"{addr}/24", "dev", inner)
        ip("-n", ns, "link", "set", inner, "up")
        for n, dev in ((ns, inner), (hub, outer)):
            tc("-n", n, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", a.rate,
               "burst", "128kb", "latency", "50ms")
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, binary, "server", "-B", addr, "--agent", "--psk-file",
             key, "--node-name", f"node{i:03d}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        targets.append(addr)
    print(f"{a.agents} agents in namespaces, links {a.rate} each way: set up in "
          f"{time.time() - t0:.1f} s", file=sys.stderr)
    time.sleep(1.0)
    agents = [pr.pid for pr in procs]
    base = ["ip", "netns", "exec", hub, binary, "mesh", "--psk-file", key, "-t", a.time,
            "--repeat", "1", "--no-store"]
    plan = subprocess.run(base + ["--dry-run"] + targets, capture_output=True, text=True,
                          check=True).stdout.strip()
    print(plan, file=sys.stderr)
    peaks = {"requester": (0, 0), "agents": (0, 0)}
    done = threading.Event()

    def watch(pid):
        while not done.is_set():
            s = status(pid)
            if s:
                rss, thr = peaks["requester"]
                peaks["requester"] = (max(rss, s[0]), max(thr, s[1]))
            for ap in agents:
                s = status(ap)
                if s:
                    rss, thr = peaks["agents"]
                    peaks["agents"] = (max(rss, s[0]), max(thr, s[1]))
            time.sleep(0.5)

    drops_before = softnet_drops()
    start = time.time()
    req = subprocess.Popen(base + ["-J"] + targets, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    w = threading.Thread(target=watch, args=(req.pid,), daemon=True)
    w.start()
    try:
        out, err = req.communicate(timeout=a.limit)
    except subprocess.TimeoutExpired:
        req.kill()
        sys.exit(f"the mesh did not finish within {a.limit} s")
    wall = time.time() - start
    done.set()
    w.join()
    backlog_drops = softnet_drops() - drops_before
    doc = json.loads(out)
    runs = doc["runs"]
    completed = sum(1 for r in runs if r["record"]["outcome"]["status"] == "completed")
    why = {}
    for r in runs:
        o = r["record"]["outcome"]
        if o["status"] != "completed":
            key = str(o.get("error", o["status"]))[:60]
            why[key] = why.get(key, 0) + 1
    pairs = a.agents * (a.agents - 1)
    # The serial estimate: every pair one at a time, each as long as this run's pair tests
    # took on average inside their rounds (rounds ran their pairs at once).
    rounds = int(plan.split(" in ")[1].split(" rounds")[0]) if " rounds" in plan else None
    per_round = wall / rounds if rounds else None
    result = {
        "bench": "mesh-scale",
        "host": {"cpu": cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release()},
        "linerate": subprocess.run([binary, "--version"], capture_output=True,
                                   text=True).stdout.strip(),
        "agents": a.agents,
        "link": a.rate,
        "time": a.time,
        "pairs": pairs,
        "completed": completed,
        "rounds": rounds,
        "wall_seconds": round(wall, 1),
        "seconds_per_round": round(per_round, 2) if per_round else None,
        "serial_estimate_seconds": round(per_round * pairs, 0) if per_round else None,
        "requester_peak_rss_mib": round(peaks["requester"][0] / 2**20, 1),
        "requester_peak_threads": peaks["requester"][1],
        "agent_peak_rss_mib": round(peaks["agents"][0] / 2**20, 1),
        "agent_peak_threads": peaks["agents"][1],
        "backlog": a.backlog or int(backlog_was),
        "backlog_drops": backlog_drops,
        "failed_by_reason": why,
        "exit_status": req.returncode,
    }
    print(json.dumps(result))
    print(f"{a.agents} agents, {pairs} ordered pairs at -t {a.time}: {completed} completed in "
          f"{wall:.0f} s ({rounds} rounds, {per_round:.2f} s a round); one pair at a time: "
          f"about {per_round * pairs / 60:.0f} min at the same {per_round:.2f} s a pair. "
          f"Requester peak {result['requester_peak_rss_mib']} MiB, "
          f"{result['requester_peak_threads']} threads; agents peak "
          f"{result['agent_peak_rss_mib']} MiB, {result['agent_peak_threads']} threads. "
          f"Host: {result['host']['cpu']}, {result['host']['cpus']} CPUs, kernel "
          f"{result['host']['kernel']}. Backlog {result['backlog']}: {backlog_drops} packets "
          f"dropped there during the mesh", file=sys.stderr)
    if err.strip():
        print(err.strip().splitlines()[-1], file=sys.stderr)
    return 0 if completed == pairs else 1


if __name__ == "__main__":
    sys.exit(main())
