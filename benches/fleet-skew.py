#!/usr/bin/env python3
"""How together a fleet starts: `linerate fleet` over N hosts, each a network namespace on one
Linux bridge with its own `linerate server`, the coordinator in its own namespace whose link
is shaped with tbf (the VMware paper's many-VMs-one-NIC design, the same as
crates/linerate/tests/fleet.rs). Runs the fleet --reps times and prints, per run and as the
median over runs:
  * start skew: the spread of the hosts' first data bytes on the coordinator's clock (what
    the fleet's JSON reports as summary.skew.start_seconds), and the stop skew;
  * the shared window against the test's length.
There is no peer to put side by side: N clients started by a shell have no common clock
for their first data bytes, and no tool the seeds used reports one.

Needs root and iproute2. Every namespace, link and server is this script's own and is removed
at exit; traffic stays inside those namespaces. Every run is bounded by -t plus a timeout.

Usage: benches/fleet-skew.py [--hosts 16] [--flows 5] [--time 1] [--reps 5] [--link 1gbit]
                             [--reverse] [--linerate PATH]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


class Namespaces:
    """hub (bridge), coordinator (index 0) and N hosts, each on a veth to the bridge."""

    def __init__(self, n, link):
        self.prefix = f"lk{os.getpid() % 10000}"
        self.net = f"10.205.{1 + os.getpid() % 200}"
        self.names = []
        self.servers = []
        hub = self.ns("hub")
        self.add(hub)
        sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", hub, "link", "set", "br0", "up")
        self.addrs = []
        for i in range(n + 1):
            ns = self.ns(i)
            self.add(ns)
            inside, port = f"{self.prefix}i{i}", f"{self.prefix}p{i}"
            sh("ip", "link", "add", inside, "type", "veth", "peer", "name", port)
            sh("ip", "link", "set", inside, "netns", ns)
            sh("ip", "link", "set", port, "netns", hub)
            sh("ip", "-n", hub, "link", "set", port, "master", "br0", "up")
            addr = f"{self.net}.{10 + i}"
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", inside)
            sh("ip", "-n", ns, "link", "set", inside, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            if i > 0:
                self.addrs.append(addr)
        for ns, dev in ((self.ns(0), f"{self.prefix}i0"), (hub, f"{self.prefix}p0")):
            sh("tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", link,
               "burst", "256kb", "latency", "20ms")

    def ns(self, i):
        return f"{self.prefix}{i}" if isinstance(i, int) else f"{self.prefix}{i}"

    def add(self, ns):
        sh("ip", "netns", "add", ns)
        self.names.append(ns)

    def start_servers(self, linerate):
        for i, addr in enumerate(self.addrs):
            p = subprocess.Popen(
                ["ip", "netns", "exec", self.ns(i + 1), linerate, "server", "-p", "5201",
                 "-B", addr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.servers.append(p)
        time.sleep(0.5)

    def close(self):
        for p in self.servers:
            p.kill()
            p.wait()
        for ns in self.names:
            sh("ip", "netns", "del", ns, check=False)


def fleet_run(nss, linerate, flows, secs, extra):
    cmd = ["ip", "netns", "exec", nss.ns(0), linerate, "fleet", *nss.addrs, "-P", str(flows),
           "-t", str(secs), "-J", "--no-store", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 60)
    if r.returncode != 0:
        raise SystemExit(f"fleet exited {r.returncode}: {r.stderr.strip()}")
    s = json.loads(r.stdout)["summary"]
    skew = s.get("skew") or {}
    window = s.get("window")
    return skew.get("start_seconds"), skew.get("stop_seconds"), window and window[1] - window[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--flows", type=int, default=5)
    ap.add_argument("--time", type=float, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--linerate", default="target/release/linerate")
    ap.add_argument("--reverse", action="store_true", help="-R: the hosts send")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    linerate = os.path.abspath(a.linerate)
    ver = sh(linerate, "--version").stdout.strip()
    nss = Namespaces(a.hosts, a.link)
    try:
        nss.start_servers(linerate)
        fleet = []
        print(f"{ver}: {a.hosts} hosts x {a.flows} flows{' -R' if a.reverse else ''}, "
              f"-t {a.time}, link {a.link}, "
              f"load {os.getloadavg()[0]:.1f}")
        for rep in range(a.reps):
            extra = ["-R"] if a.reverse else []
            start, stop, window = fleet_run(nss, linerate, a.flows, a.time, extra)
            fleet.append(start)
            line = (f"run {rep + 1}: fleet start skew {start * 1e3:.2f} ms, stop skew "
                    f"{stop * 1e3:.2f} ms, shared window {window:.3f} s")
            print(line, flush=True)
        med = statistics.median(fleet)
        print(f"median start skew over {a.reps} runs: fleet {med * 1e3:.2f} ms "
              f"(min {min(fleet) * 1e3:.2f}, max {max(fleet) * 1e3:.2f})")
    finally:
        nss.close()


if __name__ == "__main__":
    sys.exit(main())
