#!/usr/bin/env python3
"""Side-by-side loopback benchmark: linerate vs iperf3, in one run, interleaved.

For every configuration it alternates iperf3 and linerate runs (server with -1, client
with -J), on 127.0.0.1 only, and reports:
  * median receiver throughput (Gbit/s) of each tool, min-max, and the ratio linerate/iperf3;
  * CPU seconds per GB moved (client + server process user+system time, from wait4 rusage),
    and the ratio.
Medians and ratios are what to quote: the machines are shared and noisy.

Usage: benches/vs-iperf3.py [--reps N] [--time S] [--only NAME,...] [--linerate PATH]
                            [--peer-linerate PATH]
With --peer-linerate the peer is another linerate build (e.g. the commit before a change)
instead of iperf3, run with the linerate arguments: a before/after benchmark in one run.
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

CONFIGS = {
    # name: (iperf3 client args, linerate client args)
    "P1": ([], []),
    "P1-R": (["-R"], ["-R"]),
    "P2": (["-P", "2"], ["-P", "2"]),
    "P2-R": (["-P", "2", "-R"], ["-P", "2", "-R"]),
    "Z-P1": (["-Z"], ["-Z"]),
    "Z-P1-R": (["-Z", "-R"], ["-Z", "-R"]),
    # 1 MiB blocks: iperf3 -Z -l 1M is the best stock single-stream result on these machines.
    "L1M": (["-l", "1M"], ["-l", "1M"]),
    "Z-L1M": (["-Z", "-l", "1M"], ["-Z", "-l", "1M"]),
}
DEFAULT = ["P1", "P1-R", "P2", "P2-R", "Z-P1", "Z-P1-R"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(rusage):
    return rusage.ru_utime + rusage.ru_stime


def measure(tool, args, seconds, binary, retries=3):
    port = free_port()
    if tool == "iperf3":
        server = ["iperf3", "-s", "-1", "-p", str(port)]
        client = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"] + args
    else:
        server = [binary, "server", "-1", "-p", str(port), "-4"]
        client = [binary, "client", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"] + args
    srv = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)  # let the server listen; no probe connection (iperf3 -1 would count it)
    if srv.poll() is not None:
        # The free port was taken in between (other programs bind ephemeral ports too): retry
        # on a new one, a bounded number of times.
        if retries == 0:
            raise RuntimeError(f"{tool} server exited at once: {server}")
        return measure(tool, args, seconds, binary, retries - 1)
    cli = subprocess.Popen(client, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = b""
    deadline = time.time() + seconds + 30
    while True:
        pid, status, ru = os.wait4(cli.pid, os.WNOHANG)
        if pid:
            break
        if time.time() > deadline:
            cli.kill()
            srv.kill()
            raise RuntimeError(f"{tool} client hung: {client}")
        time.sleep(0.05)
    out = cli.stdout.read()
    cli_cpu = cpu_seconds(ru)
    for _ in range(200):
        pid, status, sru = os.wait4(srv.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.05)
    else:
        srv.kill()
        _, _, sru = os.wait4(srv.pid, 0)
    srv_cpu = cpu_seconds(sru)
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        raise RuntimeError(f"{tool} printed no JSON: {client}\n{cli.stderr.read().decode()}")
    if tool != "iperf3" and doc["record"]["outcome"]["status"] != "completed":
        raise RuntimeError(f"linerate run failed: {client}: {doc['record']['outcome']}")
    if tool == "iperf3":
        bps = doc["end"]["sum_received"]["bits_per_second"]
        nbytes = doc["end"]["sum_received"]["bytes"]
    else:
        rcv = doc["summary"]["directions"][0]["receiver"]
        bps, nbytes = rcv["bits_per_second"], rcv["bytes"]
    return bps / 1e9, (cli_cpu + srv_cpu) / (nbytes / 1e9)


def fmt_range(xs):
    return f"{statistics.median(xs):6.1f} ({min(xs):.1f}-{max(xs):.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--only", default=",".join(DEFAULT), help=f"any of {','.join(CONFIGS)}")
    ap.add_argument("--linerate", default="target/release/linerate")
    ap.add_argument("--peer-linerate", default=None, help="compare against this linerate build instead of iperf3")
    a = ap.parse_args()
    peer = a.peer_linerate
    if peer is None and not shutil.which("iperf3"):
        sys.exit("iperf3 is not installed (apt-get install -y iperf3)")
    for path in [a.linerate] + ([peer] if peer else []):
        if not os.path.exists(path):
            sys.exit(f"{path} not found: run `cargo build --release` first")
    names = [n for n in a.only.split(",") if n]
    version_cmd = [peer, "--version"] if peer else ["iperf3", "--version"]
    version = subprocess.run(version_cmd, capture_output=True, text=True).stdout.splitlines()[:1]
    label = "peer" if peer else "iperf3"
    print(f"peer: {peer or 'iperf3'} ({version[0] if version else 'version unknown'})")
    print(f"loopback, {a.time} s per run, {a.reps} interleaved repetitions, median (min-max)")
    print(f"{'config':8} {label + ' Gbit/s':>20} {'linerate Gbit/s':>20} {'ratio':>6}   "
          f"{label + ' CPU s/GB':>15} {'linerate CPU s/GB':>17} {'ratio':>6}")
    worst = None
    for name in names:
        i_args, l_args = CONFIGS[name]
        res = {"peer": ([], []), "linerate": ([], [])}
        for _ in range(a.reps):
            runs = (("peer", "iperf3" if peer is None else "linerate", i_args if peer is None else l_args, peer),
                    ("linerate", "linerate", l_args, a.linerate))
            for key, tool, args, binary in runs:
                g, c = measure(tool, args, a.time, binary)
                res[key][0].append(g)
                res[key][1].append(c)
        ig, ic = res["peer"]
        lg, lc = res["linerate"]
        ratio = statistics.median(lg) / statistics.median(ig)
        cratio = statistics.median(lc) / statistics.median(ic)
        worst = ratio if worst is None else min(worst, ratio)
        print(f"{name:8} {fmt_range(ig):>20} {fmt_range(lg):>20} {ratio:6.2f}   "
              f"{statistics.median(ic):15.3f} {statistics.median(lc):17.3f} {cratio:6.2f}", flush=True)
    print(f"lowest throughput ratio: {worst:.2f}")


if __name__ == "__main__":
    main()
