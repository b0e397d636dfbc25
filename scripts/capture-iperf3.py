#!/usr/bin/env python3
"""Records the control-connection bytes of real iperf3 sessions, for golden-byte tests.

Runs `iperf3 -s` on one loopback port and a logging relay on another; `iperf3 -c` talks
through the relay. The first connection of each session is the control connection: its bytes
in both directions are written to crates/proto/testdata/iperf3-<version>/<name>.json as hex.
Data connections are relayed, not recorded. Loopback only; every run is bounded.

Usage: scripts/capture-iperf3.py   (needs iperf3 on PATH)
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

CASES = {
    "upload": ["-t", "1"],
    "reverse-p2": ["-t", "1", "-R", "-P", "2"],
    "bidir": ["-t", "1", "--bidir"],
    "bytes": ["-n", "10M"],
    "udp": ["-u", "-b", "10M", "-t", "1"],
    "udp-64bit": ["-u", "-b", "10M", "-t", "1", "--udp-counters-64bit", "-R"],
}


def free_port():
    """A port free for both TCP and UDP on 127.0.0.1."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue


def pump(src, dst, log):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            if log is not None:
                log.extend(b)
            dst.sendall(b)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(listen_port, target_port, record, stop):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listen_port))
    srv.listen(64)
    srv.settimeout(0.2)
    first = True
    while not stop.is_set():
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        u = socket.create_connection(("127.0.0.1", target_port))
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c2s, s2c = (record["c2s"], record["s2c"]) if first else (None, None)
        first = False
        threading.Thread(target=pump, args=(c, u, c2s), daemon=True).start()
        threading.Thread(target=pump, args=(u, c, s2c), daemon=True).start()
    srv.close()


def udp_relay(listen_port, target_port, stop):
    """Forwards UDP datagrams both ways (UDP tests open their streams on the same port)."""
    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", listen_port))
    front.settimeout(0.2)
    upstream = {}

    def back(up, client):
        up.settimeout(0.2)
        while not stop.is_set():
            try:
                front.sendto(up.recv(65536), client)
            except (socket.timeout, OSError):
                continue

    while not stop.is_set():
        try:
            data, client = front.recvfrom(65536)
        except socket.timeout:
            continue
        if client not in upstream:
            up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            up.connect(("127.0.0.1", target_port))
            upstream[client] = up
            threading.Thread(target=back, args=(up, client), daemon=True).start()
        try:
            upstream[client].send(data)
        except OSError:
            pass
    front.close()


def main():
    version = subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout
    version = version.split()[1]
    out_dir = os.path.join(os.path.dirname(__file__), "..", "crates", "proto", "testdata",
                           f"iperf3-{version}")
    os.makedirs(out_dir, exist_ok=True)
    for name, args in CASES.items():
        server_port, relay_port = free_port(), free_port()
        server = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(server_port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        record, stop = {"c2s": bytearray(), "s2c": bytearray()}, threading.Event()
        t = threading.Thread(target=relay, args=(relay_port, server_port, record, stop))
        t.start()
        u = threading.Thread(target=udp_relay, args=(relay_port, server_port, stop))
        u.start()
        cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(relay_port)] + args
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, timeout=30).returncode
        time.sleep(0.3)
        stop.set()
        t.join()
        u.join()
        server.wait(timeout=10)
        if rc != 0:
            sys.exit(f"{' '.join(cmd)} failed with {rc}")
        doc = {
            "captured_with": f"iperf3 {version} client and server (Debian), loopback relay",
            "client_args": args,
            "c2s_hex": record["c2s"].hex(),
            "s2c_hex": record["s2c"].hex(),
        }
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"{name}: {len(record['c2s'])} bytes client->server, "
              f"{len(record['s2c'])} bytes server->client")


if __name__ == "__main__":
    main()
