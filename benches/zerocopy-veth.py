#!/usr/bin/env python3
"""Does MSG_ZEROCOPY pay for a TCP bulk sender between two namespaces over a veth pair?

Builds benches/zerocopy-probe.c (cc -O2) and runs its sender in one namespace and its
receiver in the other, copying and MSG_ZEROCOPY interleaved, each run SECONDS long, and
prints per mode the medians of: Gbit/s received, the sender's and the receiver's CPU seconds
per GB, and the share of completions in which the kernel reports it copied after all
(SO_EE_CODE_ZEROCOPY_COPIED). Both modes write 1 MiB a call under a 128 KiB unsent limit,
as linerate's unpaced senders do. Each run is one receiver and one sender started by
benchlib.run_on_free_port, which bounds both and reaps them with wait4 for their CPU time.

Usage: benches/zerocopy-veth.py [--reps N] [--time S] [--mtu 1500] [--write BYTES]
Needs root, iproute2 and a C compiler; traffic stays inside the namespaces it creates.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def build():
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zerocopy-probe.c")
    exe = os.path.join(tempfile.mkdtemp(prefix="zc-probe-"), "zerocopy-probe")
    out = subprocess.run(["cc", "-O2", "-Wall", "-o", exe, src], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"cc {src}: {out.stderr.strip()}")
    return exe


def one(exe, route, mode, seconds, write):
    def commands(port):
        return (route.server_wrap + [exe, "recv", str(port), str(seconds)],
                route.client_wrap + [exe, "send", route.addr, str(port), str(seconds), mode,
                                     str(write)])

    got = benchlib.run_on_free_port(commands, seconds)
    if got["client_status"] != 0 or got["server_status"] != 0:
        sys.exit(f"{mode}: sender {got['client_status']} {got['client_err'].strip()}; "
                 f"receiver {got['server_status']} {got['server_err'].strip()}")
    s = json.loads(got["client_out"])
    gb = s["bytes"] / 1e9
    return {
        "gbps": s["bytes"] * 8 / s["seconds"] / 1e9,
        "tx_cpu": got["client_cpu"] / gb,
        "rx_cpu": got["server_cpu"] / gb,
        "copied": s["copied"] / s["completions"] if s["completions"] else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=float, default=3)
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--write", type=int, default=1 << 20)
    a = ap.parse_args()
    exe = build()
    route = benchlib.Route(netns=True, mtu=a.mtu)
    runs = {"copy": [], "zerocopy": []}
    for _ in range(a.reps):
        for mode in runs:
            runs[mode].append(one(exe, route, mode, a.time, a.write))
    print(f"route: {route.name}; {a.write} B writes, {a.time:g} s per run, "
          f"{a.reps} interleaved repetitions, medians (min-max)")
    print(f"{'mode':10} {'Gbit/s':>20} {'sender CPU s/GB':>16} {'receiver CPU s/GB':>18} "
          f"{'copied by kernel':>17}")
    for mode, rs in runs.items():
        g = [r["gbps"] for r in rs]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        copied = [r["copied"] for r in rs if r["copied"] is not None]
        share = f"{statistics.median(copied) * 100:.0f} %" if copied else "n/a (no completions)"
        print(f"{mode:10} {statistics.median(g):7.1f} ({min(g):.1f}-{max(g):.1f})"
              f" {med('tx_cpu'):16.3f} {med('rx_cpu'):18.3f} {share:>17}")
    print(f"zerocopy / copy: {statistics.median(r['gbps'] for r in runs['zerocopy']) / statistics.median(r['gbps'] for r in runs['copy']):.2f} in Gbit/s")


if __name__ == "__main__":
    main()
