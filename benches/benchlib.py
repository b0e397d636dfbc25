"""What the benchmarks share: peers given by path, the route the traffic takes (loopback, or
two network namespaces this run creates joined by a veth pair), the CPU placement every tool
gets alike, one bounded server+client run with both processes' CPU from wait4, the host
(CPU model, kernel, CPUs) and the machine's own limit beside the figures, and whether the
machine stayed quiet: one core's memcpy bandwidth measured before and after each line, which
must agree within QUIET (10 %) for the line to count as a headline figure.

Traffic goes to 127.0.0.1, or to an address inside the namespaces this run creates and
removes at exit; every run is bounded by its -t plus a timeout.
"""

import atexit
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Route:
    """Where the traffic goes. Loopback (127.0.0.1), or `netns`: two namespaces this run
    creates, joined by a veth pair with `mtu` (and, with `rate`, a tbf shaper of that rate
    on both ends), server in one and client in the other, removed at exit. Both ends still
    share one kernel and its CPUs, but every byte crosses a device with an MTU, GSO/GRO and
    a qdisc, as on a NIC, instead of loopback's 64 KiB frames."""

    def __init__(self, netns=False, mtu=1500, rate=None):
        self.netns = netns
        self.mtu = mtu
        self.rate = rate
        if not netns:
            self.addr = "127.0.0.1"
            self.server_wrap = []
            self.client_wrap = []
            self.name = "loopback"
            return
        if os.geteuid() != 0 or not shutil.which("ip"):
            sys.exit("--netns needs root and iproute2 (ip, tc): it creates two network namespaces")
        tag = f"lrb{os.getpid() % 100000}"
        self.a, self.b = tag + "a", tag + "b"
        va, vb = tag + "x", tag + "y"
        net = f"10.211.{1 + os.getpid() % 200}"
        atexit.register(self.close)
        for ns in (self.a, self.b):
            _ip("netns", "add", ns)
        _ip("link", "add", va, "type", "veth", "peer", "name", vb)
        for ns, dev, host in ((self.a, va, 1), (self.b, vb, 2)):
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{net}.{host}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "mtu", str(mtu), "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            if rate:
                # burst >= 128 KiB keeps tbf at its nominal rate (tests/netns.rs does the same).
                _run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                      rate, "burst", "256kb", "latency", "20ms"])
        self.addr = f"{net}.2"
        self.server_wrap = ["ip", "netns", "exec", self.b]
        self.client_wrap = ["ip", "netns", "exec", self.a]
        self.name = f"two namespaces over a veth pair, MTU {mtu}" + (f", tbf {rate}" if rate else "")

    def close(self):
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _run(argv):
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(argv)}: {out.stderr.strip()}")


def _ip(*args):
    _run(["ip", *args])


# How CPUs are placed, alike for every tool of a run:
#   system: nobody pins (linerate's loopback pairing is off: -A none);
#   pinned: every tool gets -A 0,1 (client on CPU 0, server on CPU 1; iperf3's meaning);
#   paired: linerate pairs each stream's ends on one CPU (its loopback default), iperf3 runs
#           unpinned -- NOT alike, kept to compare with figures published that way.
PLACEMENTS = ("system", "pinned", "defaults", "paired")

# Two memcpy figures further apart than this share say the machine was not quiet between them.
QUIET = 0.10

# The history linerate keeps its loopback placement calibration in during this run (`-A
# auto`, placement `defaults`): the bench's own, removed at exit, so a run never reads the
# user's and every run calibrates on the host it runs on.
BENCH_HOME = None

# The route and placement of this run (set by `configure`).
ROUTE = Route()
PLACEMENT = "system"


def add_route_args(ap):
    """The route and placement options every benchmark takes."""
    ap.add_argument("--netns", action="store_true",
                    help="run between two namespaces joined by a veth pair (needs root), not on loopback")
    ap.add_argument("--mtu", type=int, default=1500, help="with --netns: the veth MTU (1500, 9000)")
    ap.add_argument("--shape", metavar="RATE", help="with --netns: tbf-shape the veth to RATE, e.g. 10gbit")
    ap.add_argument("--placement", choices=PLACEMENTS, default="system",
                    help="CPU placement, alike for every tool: system (nobody pins), pinned (-A 0,1); "
                         "or each tool's own default: defaults (linerate -A auto, calibrated on this "
                         "host before the first line; iperf3 nobody pins); or paired (linerate -A "
                         "pair; not alike)")


def configure(a):
    """Sets the route and placement from the parsed options; returns a line naming them."""
    global ROUTE, PLACEMENT
    if not a.netns and (a.mtu != 1500 or a.shape):
        sys.exit("--mtu and --shape need --netns (loopback has no MTU to set)")
    ROUTE = Route(a.netns, a.mtu, a.shape)
    PLACEMENT = a.placement
    return f"route: {ROUTE.name}; CPU placement: {PLACEMENT}"


def placement_args(kind):
    """The client arguments that give tool `kind` this run's placement."""
    if PLACEMENT == "pinned":
        return ["-A", "0,1"]
    if PLACEMENT == "system" and kind == "linerate":
        return ["-A", "none"]
    if PLACEMENT == "paired" and kind == "linerate":
        return ["-A", "pair"]
    return []


def history_args():
    """Where a linerate client keeps its runs: nowhere, or with placement `defaults` the
    bench's own history (created on first use, removed at exit), where `-A auto` keeps the
    calibration it needs."""
    global BENCH_HOME
    if PLACEMENT != "defaults":
        return ["--no-store"]
    if BENCH_HOME is None:
        import tempfile
        BENCH_HOME = tempfile.mkdtemp(prefix="linerate-bench-")
        atexit.register(shutil.rmtree, BENCH_HOME, True)
    return ["--db", os.path.join(BENCH_HOME, "history.sqlite")]


def calibrate(linerate_paths, streams):
    """With placement `defaults` on loopback: lets each linerate build calibrate its `-A
    auto` placement for `streams` (a list of stream counts) before the first measured run, so
    that no measured run's CPU time holds a calibration. Prints what each chose."""
    if PLACEMENT != "defaults" or ROUTE.netns:
        return
    for path in linerate_paths:
        for n in sorted(set(1 if s <= 1 else 2 for s in streams)):
            port = free_port()
            srv = subprocess.Popen([path, "server", "-1", "-4", "-p", str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(0.4)
                out = subprocess.run([path, "client", "127.0.0.1", "-p", str(port), "-t", "1",
                                      "-P", str(n)] + history_args(),
                                     capture_output=True, text=True, timeout=120)
            finally:
                srv.kill()
                srv.wait()
            chosen = [line for line in out.stdout.splitlines()
                      if line.startswith("Loopback placement on this host:")]
            print(f"{os.path.basename(path)} -P {n}: "
                  + (chosen[0] if chosen else f"no calibration shown (exit {out.returncode}: "
                     f"an older build, or one was kept) {out.stderr.strip()[:200]}"))


class Peer:
    """A tool to compare against: an iperf3 binary given by path (with extra client
    arguments, e.g. `--gsro`), or another linerate build."""

    def __init__(self, spec, kind="iperf3"):
        words = shlex.split(spec)
        if not words:
            sys.exit("an empty --iperf3 value: give a path, e.g. --iperf3 /usr/bin/iperf3")
        self.kind = kind
        self.path = shutil.which(words[0]) or words[0]
        self.extra = words[1:]
        if not os.path.exists(self.path):
            hint = ("apt-get install -y iperf3, or build one (docs/PERFORMANCE.md)"
                    if kind == "iperf3" else "cargo build --release")
            sys.exit(f"{words[0]} not found: {hint}")
        out = subprocess.run([self.path, "--version"], capture_output=True, text=True, timeout=10)
        first = (out.stdout or out.stderr).splitlines()[:1]
        self.version = first[0].strip() if first else "version unknown"
        if kind == "iperf3":
            words = self.version.split()
            short = words[1] if len(words) > 1 else kind
        else:
            # Another linerate build: named by its file, so it never shares the label (and
            # the result slot) of the linerate under test.
            short = "lr:" + os.path.basename(self.path)
        self.label = short + ("" if not self.extra else " " + " ".join(self.extra))

    def commands(self, port, client_args, seconds):
        """(server, client) argv for one run of this peer, on this run's route, with this
        run's CPU placement."""
        r = ROUTE
        bind = ["-B", r.addr] if r.netns else []
        if self.kind == "iperf3":
            server = [self.path, "-s", "-1", "-p", str(port)] + bind
            client = [self.path, "-c", r.addr, "-p", str(port), "-t", str(seconds), "-J"]
        else:
            server = [self.path, "server", "-1", "-p", str(port), "-4"] + bind
            client = [self.path, "client", r.addr, "-p", str(port), "-t", str(seconds),
                      "-i", "0", "-J"] + history_args()
        client += placement_args(self.kind)
        return r.server_wrap + server, r.client_wrap + client + client_args + self.extra


def peers_from(args_iperf3, args_peer_linerate):
    """The peers the command line names; iperf3 from the PATH when none is."""
    peers = [Peer(p, "linerate") for p in args_peer_linerate or []]
    peers += [Peer(p) for p in args_iperf3 or []]
    if not peers:
        if not shutil.which("iperf3"):
            sys.exit("iperf3 is not installed (apt-get install -y iperf3), or give --iperf3 PATH")
        peers = [Peer("iperf3")]
    return peers


def under_test(path):
    """The linerate build being measured, labelled `linerate`."""
    me = Peer(path, "linerate")
    me.label = "linerate"
    return me


def host_line():
    """The host the run measures: CPU model, kernel, CPUs."""
    model = "CPU model n/a"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"host: {model}, kernel {os.uname().release}, {os.cpu_count()} CPUs"


def announce(peers, me):
    """Names the host, every tool of the run and its version, then the machine's limit;
    returns it."""
    print(host_line())
    for p in peers:
        print(f"peer {p.label}: {p.path} ({p.version})")
    print(f"linerate: {me.path} ({me.version})")
    limit = machine_limit()
    print_machine(limit)
    return limit


class Quiet:
    """Whether the machine stayed quiet: one core's memcpy bandwidth after each line against
    the figure before it (the previous line's, or the start's)."""

    def __init__(self, limit):
        self.last = limit["memcpy_gbit_per_core"]
        self.busy = []

    def check(self, name):
        """Measures memcpy now; returns '' when it agrees with the last figure within QUIET,
        else a note naming both, and remembers `name` as a busy line."""
        now = memcpy_bytes_per_second() * 8 / 1e9
        before, self.last = self.last, now
        apart = abs(now - before) / max(now, before)
        if apart <= QUIET:
            return ""
        self.busy.append(name)
        return f"  machine busy: memcpy {before:.0f} -> {now:.0f} Gbit/s ({100 * apart:.0f} % apart)"

    def verdict(self):
        """The closing line: whether this run's figures may be quoted as headlines."""
        if not self.busy:
            return (f"quiet machine: memcpy agreed within {100 * QUIET:.0f} % before and after "
                    f"every line")
        return (f"machine busy during {', '.join(self.busy)}: memcpy moved more than "
                f"{100 * QUIET:.0f} %; no headline from this run")


def collect_client(cli, seconds):
    """Reads a running client's stdout until it exits (reaped with wait4, for its CPU), or
    kills it `seconds + 30` s after its start. Returns (stdout, wait status, rusage, hung)."""
    deadline = time.time() + seconds + 30
    chunks = []
    os.set_blocking(cli.stdout.fileno(), False)
    hung = False
    while True:
        piece = cli.stdout.read()
        if piece:
            chunks.append(piece)
        pid, status, ru = os.wait4(cli.pid, os.WNOHANG)
        if pid:
            break
        if time.time() > deadline:
            hung = True
            cli.kill()
            _, status, ru = os.wait4(cli.pid, 0)
            break
        time.sleep(0.02)
    os.set_blocking(cli.stdout.fileno(), True)
    chunks.append(cli.stdout.read())
    return b"".join(chunks), status, ru, hung


def run_pair(server, client, seconds, retries=3):
    """Runs `server`, then `client` against it; returns (client stdout, client CPU s,
    server CPU s). Both processes are bounded: killed seconds + 30 s after the start."""
    srv = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)  # let the server listen; no probe connection (iperf3 -1 would count it)
    if srv.poll() is not None:
        # The free port was taken in between (other programs bind ephemeral ports too):
        # the caller retries on a new one, a bounded number of times.
        if retries == 0:
            raise RuntimeError(f"server exited at once: {server}")
        return None
    cli = subprocess.Popen(client, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, _, ru, hung = collect_client(cli, seconds)
    if hung:
        srv.kill()
        os.wait4(srv.pid, 0)
        raise RuntimeError(f"client hung: {client}")
    err = cli.stderr.read().decode(errors="replace")
    _, sru, _ = reap_server(srv)
    cpu = lambda r: r.ru_utime + r.ru_stime  # noqa: E731
    return out, err, cpu(ru), cpu(sru)


def reap_server(srv, limit=10.0):
    """Waits up to `limit` s for the server to exit after its client, killing it then;
    returns (wait status, rusage, killed)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        pid, status, ru = os.wait4(srv.pid, os.WNOHANG)
        if pid:
            return status, ru, False
        time.sleep(0.02)
    srv.kill()
    _, status, ru = os.wait4(srv.pid, 0)
    return status, ru, True


def run_peer(peer, client_args, seconds):
    """One run of `peer` on a fresh port: (client stdout, stderr, client CPU s, server CPU s)."""
    for attempt in range(4):
        server, client = peer.commands(free_port(), client_args, seconds)
        got = run_pair(server, client, seconds, retries=3 - attempt)
        if got is not None:
            return got
    raise RuntimeError(f"{peer.label}: no server could listen")


def memcpy_bytes_per_second(size=64 << 20, seconds=0.5):
    """One core's memory copy bandwidth, bytes/s: the median of repeated copies of a
    `size`-byte buffer (larger than any cache here), for about `seconds`."""
    src = bytearray(os.urandom(1 << 20)) * (size >> 20)
    dst = bytearray(size)
    rates = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(rates) < 5:
        t0 = time.perf_counter()
        dst[:] = src
        rates.append(size / (time.perf_counter() - t0))
    rates.sort()
    return rates[len(rates) // 2]


def machine_limit():
    """The machine's own figures to read the results against: its cores, one core's memcpy
    bandwidth, and what loopback TCP could move if both cores did nothing but copy (every
    byte is copied twice: into the sender's socket, out to the receiver)."""
    cores = os.cpu_count() or 1
    copy = memcpy_bytes_per_second()
    return {
        "cores": cores,
        "memcpy_gbit_per_core": copy * 8 / 1e9,
        "loopback_ceiling_gbit": cores * copy * 8 / 1e9 / 2,
    }


def print_machine(limit):
    print(f"machine: {limit['cores']} cores, memcpy {limit['memcpy_gbit_per_core']:.0f} Gbit/s "
          f"per core; loopback ceiling (every core copying, two copies per byte) "
          f"{limit['loopback_ceiling_gbit']:.0f} Gbit/s")


def run_pair_status(server, client, seconds, settle=0.4):
    """Like run_pair, with everything needed to tell a failed tool from a result: runs
    `server`, waits `settle` s, runs `client` against it, and returns a dict with
    client_out (bytes), client_err, client_status, client_cpu (user+system s, wait4),
    server_err, server_status, server_cpu; statuses as os.waitstatus_to_exitcode gives them
    (negative: killed by that signal). When the server exited before the client started
    (most often: its port was taken in between) the dict has server_gone True and only the
    server's stderr and status. Both processes are bounded: the client is killed seconds +
    30 s after its start, the server 10 s after the client ends. stderr goes to temporary
    files, so a chatty tool cannot block on a full pipe."""
    import tempfile

    srv_err = tempfile.TemporaryFile()
    srv = subprocess.Popen(server, stdout=subprocess.DEVNULL, stderr=srv_err)
    time.sleep(settle)
    if srv.poll() is not None:
        srv_err.seek(0)
        return {"server_gone": True, "server_err": srv_err.read().decode(errors="replace"),
                "server_status": srv.returncode}
    cli_err = tempfile.TemporaryFile()
    cli = subprocess.Popen(client, stdout=subprocess.PIPE, stderr=cli_err)
    out, status, ru, hung = collect_client(cli, seconds)
    cli.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    cli.stdout.close()
    sstatus, sru, srv_killed = reap_server(srv)
    srv.returncode = os.waitstatus_to_exitcode(sstatus)
    cli_err.seek(0)
    srv_err.seek(0)
    cpu = lambda r: r.ru_utime + r.ru_stime  # noqa: E731
    err = cli_err.read().decode(errors="replace")
    if hung:
        err += f"\n(killed: still running {seconds + 30} s after its start)"
    return {
        "server_gone": False,
        "client_out": out,
        "client_err": err,
        "client_status": cli.returncode,
        "client_cpu": cpu(ru),
        "server_err": srv_err.read().decode(errors="replace")
        + ("\n(killed: still running 10 s after the client ended)" if srv_killed else ""),
        "server_status": srv.returncode,
        "server_cpu": cpu(sru),
    }


def run_on_free_port(commands, seconds, tries=4):
    """run_pair_status on a fresh port, `tries` times at most while the server exits at
    once (another program took the port in between). `commands(port)` gives the (server,
    client) argv. Raises RuntimeError with the server's stderr when no try got going."""
    for _ in range(tries):
        server, client = commands(free_port())
        got = run_pair_status(server, client, seconds)
        if not got["server_gone"]:
            return got
    raise RuntimeError(f"the server exited at once {tries} times (status {got['server_status']}): "
                       f"{shlex.join(server)}\n{got['server_err'].strip()}")
