#!/usr/bin/env python3
"""What a fleet's coordinator costs: `linerate fleet` over N loopback servers against the way
people do it today, N separate `linerate client` processes started at once, side by side.

For each N (default 16 and 64 hosts, 5 flows each) it runs, interleaved, --reps times:
  * `linerate fleet` over the N servers (-P 5 -t T -J), and
  * N `linerate client` processes started together (-P 5 -t T -J),
and reports per side, medians over the repetitions:
  * CPU seconds per GB moved on the client side (user+system time from wait4 rusage: the one
    coordinator process, or the sum over the N clients), and the ratio fleet/clients;
  * memory: the coordinator's peak RSS, or the sum of the N clients' peak RSS, and the ratio;
  * the start skew the fleet measured (the N clients have none to report: they are not
    started together by anything but the shell).
GB moved are the receivers' bytes each run reports. The servers are the same processes for
both sides. Traffic goes to 127.0.0.1 only; every run is bounded by its -t plus a timeout.

Usage: benches/fleet-overhead.py [--hosts 16,64] [--flows 5] [--time 3] [--reps 3]
                                 [--linerate PATH]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def received_bytes(summary):
    return sum(
        (d.get("receiver") or {}).get("bytes", 0) for d in summary.get("directions", [])
    )


def wait_all(procs, limit):
    """Waits for every child; returns (outputs, cpu seconds, summed peak RSS bytes)."""
    deadline = time.monotonic() + limit
    outs, cpu, rss = {}, 0.0, 0
    pending = {p.pid: p for p in procs}
    while pending:
        if time.monotonic() > deadline:
            for p in pending.values():
                p.kill()
            raise SystemExit(f"runs did not finish within {limit} s")
        pid, status, ru = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.01)
            continue
        if pid not in pending:
            continue
        p = pending.pop(pid)
        cpu += ru.ru_utime + ru.ru_stime
        rss += ru.ru_maxrss * 1024
        outs[pid] = (os.waitstatus_to_exitcode(status), p)
    return outs, cpu, rss


def run_fleet(binary, ports, flows, secs, env):
    targets = [f"127.0.0.1:{p}=h{i}" for i, p in enumerate(ports)]
    args = [binary, "fleet", *targets, "-P", str(flows), "-t", str(secs), "-J", "--no-store"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = p.stdout.read(), p.stderr.read()
    outs, cpu, rss = wait_all([p], secs + 60)
    code = outs[p.pid][0]
    if code != 0:
        raise SystemExit(f"fleet exit {code}: {err.decode(errors='replace')[-2000:]}")
    doc = json.loads(out)
    moved = sum(received_bytes(h["summary"]) for h in doc["hosts"])
    skew = (doc["summary"].get("skew") or {}).get("start_seconds")
    return cpu, rss, moved, skew


def run_clients(binary, ports, flows, secs, env):
    procs = []
    for p in ports:
        args = [binary, "client", f"127.0.0.1:{p}", "-P", str(flows), "-t", str(secs), "-J",
                "--no-store"]
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      env=env))
    # Read every stdout while they run (a full pipe would stall a client).
    outputs = {p.pid: b"" for p in procs}
    outs, cpu, rss = None, 0.0, 0
    reader_done = time.monotonic() + secs + 60
    for p in procs:
        outputs[p.pid] = p.stdout.read()
        if time.monotonic() > reader_done:
            break
    outs, cpu, rss = wait_all(procs, 60)
    moved = 0
    for pid, (code, _) in outs.items():
        if code != 0:
            raise SystemExit(f"a client exited {code}")
        moved += received_bytes(json.loads(outputs[pid])["summary"])
    return cpu, rss, moved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="16,64")
    ap.add_argument("--flows", type=int, default=5)
    ap.add_argument("--time", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--linerate", default="target/release/linerate")
    a = ap.parse_args()
    version = subprocess.run([a.linerate, "--version"], capture_output=True, text=True).stdout
    env = dict(os.environ, XDG_DATA_HOME="/tmp/linerate-bench-fleet")
    print(f"{version.strip()}; loopback, {a.flows} flows per host, {a.time} s per run, "
          f"{a.reps} interleaved repetitions, medians")
    print(f"{'hosts':>5} {'fleet CPU s/GB':>15} {'clients CPU s/GB':>17} {'ratio':>6} "
          f"{'fleet RSS MiB':>14} {'clients RSS MiB':>16} {'ratio':>6} {'start skew ms':>14}")
    for n in [int(x) for x in a.hosts.split(",")]:
        ports = free_ports(n)
        servers = [subprocess.Popen([a.linerate, "server", "-B", "127.0.0.1", "-p", str(p)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                   for p in ports]
        try:
            time.sleep(1.0)
            fleet, clients = [], []
            for _ in range(a.reps):
                cpu, rss, moved, skew = run_fleet(a.linerate, ports, a.flows, a.time, env)
                fleet.append((cpu / (moved / 1e9), rss, skew))
                cpu, rss, moved = run_clients(a.linerate, ports, a.flows, a.time, env)
                clients.append((cpu / (moved / 1e9), rss))
            med = lambda xs: statistics.median(xs)
            f_cpu, c_cpu = med([x[0] for x in fleet]), med([x[0] for x in clients])
            f_rss, c_rss = med([x[1] for x in fleet]), med([x[1] for x in clients])
            skews = [x[2] for x in fleet if x[2] is not None]
            skew = f"{med(skews) * 1e3:.1f}" if skews else "n/a"
            print(f"{n:>5} {f_cpu:>15.3f} {c_cpu:>17.3f} {f_cpu / c_cpu:>6.2f} "
                  f"{f_rss / 2**20:>14.1f} {c_rss / 2**20:>16.1f} {f_rss / c_rss:>6.2f} {skew:>14}")
            sys.stdout.flush()
        finally:
            for s in servers:
                s.kill()
            for s in servers:
                s.wait()


if __name__ == "__main__":
    main()
