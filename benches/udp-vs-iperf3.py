#!/usr/bin/env python3
"""UDP side by side on loopback: linerate vs iperf3 at -b 0, in one run, interleaved.

For each datagram size it alternates iperf3 and linerate runs (server -1, client -u -b 0 -J)
on 127.0.0.1 only and reports the median of:
  * datagrams per second that *arrived* (sent minus lost, over the test time), in thousands,
  * receiver Gbit/s,
  * loss as each tool reports it, %,
and the ratio linerate/iperf3 of delivered datagrams per second. The goal (issue 4) is a ratio
of at least 2 at equal or lower loss. Medians and ratios are what to quote: the machines are
shared and noisy.

Usage: benches/udp-vs-iperf3.py [--reps N] [--time S] [--sizes 64,1472] [--linerate PATH]
Traffic goes to 127.0.0.1 only; every run is bounded by its -t plus a timeout.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tool, size, seconds, binary):
    port = free_port()
    if tool == "iperf3":
        server = ["iperf3", "-s", "-1", "-p", str(port)]
        client = ["iperf3", "-c", "127.0.0.1", "-p", str(port)]
    else:
        server = [binary, "server", "-1", "-p", str(port), "-4"]
        client = [binary, "client", "127.0.0.1", "-p", str(port), "-i", "0"]
    client += ["-u", "-b", "0", "-l", str(size), "-t", str(seconds), "-J"]
    srv = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    try:
        out = subprocess.run(client, capture_output=True, timeout=seconds + 30).stdout
    finally:
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        raise RuntimeError(f"{tool} printed no JSON: {client}")
    if tool == "iperf3":
        s = doc["end"]["sum"]
        delivered = s["packets"] - s["lost_packets"]
        secs = s["seconds"]
        return delivered / secs, s["bits_per_second"] * (1 - s["lost_percent"] / 100), s["lost_percent"]
    if doc["record"]["outcome"]["status"] != "completed":
        raise RuntimeError(f"linerate run failed: {client}: {doc['record']['outcome']}")
    u = doc["summary"]["udp"][0]
    rcv = doc["summary"]["directions"][0]["receiver"]
    return u["received"] / rcv["seconds"], rcv["bits_per_second"], u["loss_percent"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=3)
    ap.add_argument("--sizes", default="64,1472")
    ap.add_argument("--linerate", default="target/release/linerate")
    a = ap.parse_args()
    if not shutil.which("iperf3"):
        sys.exit("iperf3 is not installed (apt-get install -y iperf3)")
    if not os.path.exists(a.linerate):
        sys.exit(f"{a.linerate} not found: run `cargo build --release` first")
    print(f"loopback UDP -b 0, {a.time} s per run, {a.reps} interleaved repetitions, medians")
    print(f"{'-l':>6} {'iperf3 kpps':>12} {'Gbit/s':>7} {'loss %':>7}   "
          f"{'linerate kpps':>13} {'Gbit/s':>7} {'loss %':>7}   {'pps ratio':>9}")
    for size in [int(s) for s in a.sizes.split(",")]:
        res = {"iperf3": [], "linerate": []}
        for _ in range(a.reps):
            for tool in ("iperf3", "linerate"):
                res[tool].append(run(tool, size, a.time, a.linerate))
        med = {t: [statistics.median(x[i] for x in r) for i in range(3)] for t, r in res.items()}
        i, l = med["iperf3"], med["linerate"]
        print(f"{size:6} {i[0] / 1e3:12.0f} {i[1] / 1e9:7.2f} {i[2]:7.2f}   "
              f"{l[0] / 1e3:13.0f} {l[1] / 1e9:7.2f} {l[2]:7.2f}   {l[0] / i[0]:9.2f}", flush=True)


if __name__ == "__main__":
    main()
