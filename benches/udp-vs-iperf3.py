#!/usr/bin/env python3
"""UDP side by side: linerate vs one or more iperf3 builds at -b 0, in one run, interleaved,
on loopback or (--netns) between two namespaces over a veth pair.

For each datagram size each repetition runs every peer once and linerate once, in turn
(server -1, client -u -b 0 -J), on 127.0.0.1 only, and reports per peer the median of:
  * datagrams per second that *arrived* (sent minus lost, over the test time), in thousands,
  * receiver Gbit/s,
  * loss as each tool reports it, %,
and the ratio linerate/peer of delivered datagrams per second. Medians and ratios are what
to quote: the machines are shared and noisy.

Usage: benches/udp-vs-iperf3.py [--reps N] [--time S] [--sizes 64,1472] [--linerate PATH]
                                [--iperf3 'PATH [client args]']... [--peer-linerate PATH]...
--iperf3 may be given several times, with client arguments after the path, e.g.
--iperf3 /opt/iperf3-3.21/bin/iperf3 --iperf3 '/opt/iperf3-3.21/bin/iperf3 --gsro';
without it, the iperf3 on the PATH.
Options --netns, --mtu, --shape and --placement as benches/vs-iperf3.py. Traffic goes to
127.0.0.1, or inside the namespaces the run creates and removes; every run is bounded by its
-t plus a timeout.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def run(peer, size, seconds):
    args = ["-u", "-b", "0", "-l", str(size)]
    out, err, _, _ = benchlib.run_peer(peer, args, seconds)
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        raise RuntimeError(f"{peer.label} printed no JSON at -l {size}: {err}")
    if peer.kind == "iperf3":
        s = doc.get("end", {}).get("sum")
        if s is None or "packets" not in s:
            raise RuntimeError(f"{peer.label} reported no UDP result at -l {size}: {doc.get('error')}")
        delivered = s["packets"] - s["lost_packets"]
        return delivered / s["seconds"], s["bits_per_second"] * (1 - s["lost_percent"] / 100), s["lost_percent"]
    if doc["record"]["outcome"]["status"] != "completed":
        raise RuntimeError(f"linerate run failed at -l {size}: {doc['record']['outcome']}")
    u = doc["summary"]["udp"][0]
    rcv = doc["summary"]["directions"][0]["receiver"]
    return u["received"] / rcv["seconds"], rcv["bits_per_second"], u["loss_percent"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=3)
    ap.add_argument("--sizes", default="64,1472")
    ap.add_argument("--linerate", default="target/release/linerate")
    ap.add_argument("--iperf3", action="append", metavar="'PATH [ARGS]'",
                    help="an iperf3 to compare against, with extra client arguments (repeatable)")
    ap.add_argument("--peer-linerate", action="append", metavar="PATH",
                    help="another linerate build to compare against (repeatable)")
    benchlib.add_route_args(ap)
    a = ap.parse_args()
    try:
        sizes = [int(s) for s in a.sizes.split(",") if s]
    except ValueError:
        sys.exit(f"--sizes takes datagram sizes in bytes, e.g. 64,1472 (got {a.sizes!r})")
    route = benchlib.configure(a)
    me = benchlib.under_test(a.linerate)
    peers = benchlib.peers_from(a.iperf3, a.peer_linerate)
    limit = benchlib.announce(peers, me)
    print(route)
    quiet = benchlib.Quiet(limit)
    print(f"UDP -b 0, {a.time} s per run, {a.reps} interleaved repetitions, medians")
    print(f"{'-l':>6} {'peer':16} {'peer kpps':>10} {'Gbit/s':>7} {'loss %':>7}   "
          f"{'linerate kpps':>13} {'Gbit/s':>7} {'loss %':>7}   {'pps ratio':>9}")
    for size in sizes:
        res = {p.label: [] for p in peers + [me]}
        for _ in range(a.reps):
            for p in peers + [me]:
                res[p.label].append(run(p, size, a.time))
        med = {t: [statistics.median(x[i] for x in r) for i in range(3)] for t, r in res.items()}
        l = med[me.label]
        for p in peers:
            i = med[p.label]
            ratio = f"{l[0] / i[0]:9.2f}" if i[0] > 0 else "      n/a"
            print(f"{size:6} {p.label:16} {i[0] / 1e3:10.0f} {i[1] / 1e9:7.2f} {i[2]:7.2f}   "
                  f"{l[0] / 1e3:13.0f} {l[1] / 1e9:7.2f} {l[2]:7.2f}   {ratio}", flush=True)
        busy = quiet.check(f"-l {size}")
        if busy:
            print(f"{'':6}{busy}", flush=True)
    print(quiet.verdict())


if __name__ == "__main__":
    main()
