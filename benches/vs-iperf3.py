#!/usr/bin/env python3
"""Side-by-side TCP benchmark: linerate vs one or more iperf3 builds, in one run,
interleaved, on loopback or (--netns) between two namespaces over a veth pair.

For every configuration each repetition runs every peer once and linerate once, in turn
(server with -1, client with -J), with the same CPU placement for every tool (--placement:
nobody pins, or all -A 0,1; or each tool's default, linerate's -A auto calibrated on this host
first), and reports per peer:
  * median receiver throughput (Gbit/s, both directions summed for --bidir), min-max, and
    the ratio linerate/peer;
  * CPU seconds per GB moved (client + server process user+system time, from wait4 rusage),
    and the ratio (below 1: linerate spends less);
  * each tool's median as a share of the machine's loopback ceiling (its cores copying
    memory and nothing else, every byte copied twice), measured at the start of the run.
Medians and ratios are what to quote: the machines are shared and noisy. The run names the
host (CPU model, kernel) and measures one core's memcpy again after every line: a line whose
memcpy moved more than 10 % says "machine busy", and the run's last line says whether any
figure of it may be a headline.

Usage: benches/vs-iperf3.py [--reps N] [--time S] [--only NAME,...] [--linerate PATH]
                            [--iperf3 'PATH [client args]']... [--peer-linerate PATH]...
                            [--netns [--mtu 1500|9000] [--shape RATE]]
                            [--placement system|pinned|defaults|paired]
--iperf3 may be given several times (e.g. Debian's 3.12 and a 3.21 built from its release
tag, docs/PERFORMANCE.md says how); without it, the iperf3 on the PATH. --peer-linerate
compares against another linerate build (e.g. the commit before a change), run with the
linerate arguments: a before/after benchmark in one run.
Traffic goes to 127.0.0.1, or inside the namespaces the run creates and removes; every run
is bounded by its -t plus a timeout.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

CONFIGS = {
    # name: (iperf3 client args, linerate client args)
    "P1": ([], []),
    "P1-R": (["-R"], ["-R"]),
    "P2": (["-P", "2"], ["-P", "2"]),
    "P2-R": (["-P", "2", "-R"], ["-P", "2", "-R"]),
    "P4": (["-P", "4"], ["-P", "4"]),
    "P8": (["-P", "8"], ["-P", "8"]),
    "P8-W800K": (["-P", "8", "-w", "800K"], ["-P", "8", "-w", "800K"]),
    "BIDIR": (["--bidir"], ["--bidir"]),
    "Z-P1": (["-Z"], ["-Z"]),
    "Z-P1-R": (["-Z", "-R"], ["-Z", "-R"]),
    # 1 MiB blocks: iperf3 -Z -l 1M is the best stock single-stream result on these machines.
    "L1M": (["-l", "1M"], ["-l", "1M"]),
    "Z-L1M": (["-Z", "-l", "1M"], ["-Z", "-l", "1M"]),
    # Fixed rates (per stream, in both tools): how close each tool's pacing comes to what was
    # asked; the line after the table gives the achieved share of the rate to 0.1 %.
    "B10G": (["-b", "10G"], ["-b", "10G"]),
    "P4-B10G": (["-P", "4", "-b", "10G"], ["-P", "4", "-b", "10G"]),
}


def asked_gbit(args):
    """The total rate a fixed-rate configuration asks for, Gbit/s (None: unpaced)."""
    if "-b" not in args:
        return None
    rate = args[args.index("-b") + 1]
    streams = int(args[args.index("-P") + 1]) if "-P" in args else 1
    return float(rate.rstrip("G")) * streams
DEFAULT = ["P1", "P1-R", "P2", "P4", "P8", "P8-W800K", "BIDIR"]


def received(kind, doc, cmd):
    """(receiver bit/s, bytes received) over every direction of one run's JSON."""
    if kind == "iperf3":
        end = doc.get("end", {})
        if "sum_received" not in end:
            raise RuntimeError(f"iperf3 reported no result: {cmd}: {doc.get('error')}")
        sums = [end["sum_received"]] + ([end["sum_received_bidir_reverse"]]
                                        if "sum_received_bidir_reverse" in end else [])
        return sum(s["bits_per_second"] for s in sums), sum(s["bytes"] for s in sums)
    if doc["record"]["outcome"]["status"] != "completed":
        raise RuntimeError(f"linerate run failed: {cmd}: {doc['record']['outcome']}")
    rcv = [d["receiver"] for d in doc["summary"]["directions"]]
    return sum(r["bits_per_second"] for r in rcv), sum(r["bytes"] for r in rcv)


def measure(peer, args, seconds):
    out, err, cli_cpu, srv_cpu = benchlib.run_peer(peer, args, seconds)
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        raise RuntimeError(f"{peer.label} printed no JSON for {args}: {err}")
    bps, nbytes = received(peer.kind, doc, args)
    return bps / 1e9, (cli_cpu + srv_cpu) / (nbytes / 1e9)


def fmt_range(xs):
    return f"{statistics.median(xs):6.1f} ({min(xs):.1f}-{max(xs):.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time", type=int, default=5)
    ap.add_argument("--only", default=",".join(DEFAULT), help=f"any of {','.join(CONFIGS)}")
    ap.add_argument("--linerate", default="target/release/linerate")
    ap.add_argument("--iperf3", action="append", metavar="'PATH [ARGS]'",
                    help="an iperf3 to compare against, with extra client arguments (repeatable)")
    ap.add_argument("--peer-linerate", action="append", metavar="PATH",
                    help="compare against this linerate build (repeatable)")
    benchlib.add_route_args(ap)
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        sys.exit(f"unknown configuration {', '.join(unknown)}: use any of {','.join(CONFIGS)}")
    if a.reps < 1 or a.time < 1:
        sys.exit("--reps and --time must be at least 1")
    route = benchlib.configure(a)
    me = benchlib.under_test(a.linerate)
    peers = benchlib.peers_from(a.iperf3, a.peer_linerate)
    limit = benchlib.announce(peers, me)
    ceiling = limit["loopback_ceiling_gbit"]
    print(route)
    streams = [int(CONFIGS[n][1][CONFIGS[n][1].index("-P") + 1]) if "-P" in CONFIGS[n][1] else 1
               for n in names]
    benchlib.calibrate([me.path] + [p.path for p in peers if p.kind == "linerate"], streams)
    quiet = benchlib.Quiet(limit)
    print(f"{a.time} s per run, {a.reps} interleaved repetitions, median (min-max); "
          f"'%ceil' is the median's share of the loopback ceiling")
    print(f"{'config':9} {'peer':14} {'peer Gbit/s':>20} {'%ceil':>5} {'linerate Gbit/s':>20} "
          f"{'%ceil':>5} {'ratio':>6}   {'peer CPU s/GB':>13} {'linerate':>9} {'ratio':>6}")
    worst = None
    for name in names:
        i_args, l_args = CONFIGS[name]
        res = {p.label: ([], []) for p in peers + [me]}
        for _ in range(a.reps):
            for p in peers + [me]:
                g, c = measure(p, i_args if p.kind == "iperf3" else l_args, a.time)
                res[p.label][0].append(g)
                res[p.label][1].append(c)
        lg, lc = res[me.label]
        for p in peers:
            pg, pc = res[p.label]
            ratio = statistics.median(lg) / statistics.median(pg)
            cratio = statistics.median(lc) / statistics.median(pc)
            worst = ratio if worst is None else min(worst, ratio)
            share = lambda xs: 100 * statistics.median(xs) / ceiling  # noqa: E731
            print(f"{name:9} {p.label:14} {fmt_range(pg):>20} {share(pg):5.0f} {fmt_range(lg):>20} "
                  f"{share(lg):5.0f} {ratio:6.2f}   {statistics.median(pc):13.3f} "
                  f"{statistics.median(lc):9.3f} {cratio:6.2f}", flush=True)
        busy = quiet.check(name)
        if busy:
            print(f"{'':9}{busy}", flush=True)
        asked = asked_gbit(l_args)
        if asked:
            shares = ", ".join(f"{label} {100 * statistics.median(g) / asked:.1f} %"
                               for label, (g, _) in res.items())
            print(f"{'':9} pacing: median received / asked {asked:g} Gbit/s: {shares}", flush=True)
    print(f"lowest throughput ratio: {worst:.2f}")
    print(quiet.verdict())


if __name__ == "__main__":
    main()
