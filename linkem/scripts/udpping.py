#!/usr/bin/env python3
"""Tiny UDP RTT prober for the linkem testbed (ping prints only 0.1 ms
resolution at 10-100 ms RTTs).

  udpping.py server PORT [SECONDS]        echo server (exits after SECONDS)
  udpping.py client HOST PORT COUNT INTERVAL_S [pipe]  -> one JSON line

Default (sequential): one probe in flight, next probe INTERVAL_S after the
previous one was sent *or* answered. `pipe`: probes are sent every INTERVAL_S
regardless of replies (endpoints never idle longer than INTERVAL_S, which
removes the VM's wake-from-long-idle latency from the measurement).
"""
import json, socket, statistics, sys, time


def server(port, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.5)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, addr = s.recvfrom(2048)
        except socket.timeout:
            continue
        s.sendto(data, addr)


def client_pipe(host, port, count, interval):
    import select
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    sent = {}
    rtts = []
    nxt = time.monotonic()
    i = 0
    deadline = None
    while True:
        now = time.monotonic()
        if i < count and now >= nxt:
            sent[i] = time.monotonic_ns()
            s.sendto(i.to_bytes(4, "big") + b"x" * 60, (host, port))
            i += 1
            nxt += interval
            if i == count:
                deadline = time.monotonic() + 2.5
            continue
        if deadline is not None and (now >= deadline or not sent):
            break
        wait = (nxt - now) if i < count else (deadline - now)
        r, _, _ = select.select([s], [], [], max(0.0, wait))
        while r:
            try:
                data, _ = s.recvfrom(2048)
            except BlockingIOError:
                break
            t = time.monotonic_ns()
            k = int.from_bytes(data[:4], "big")
            if k in sent:
                rtts.append((t - sent.pop(k)) / 1e6)
    report(rtts, len(sent))


def report(rtts, lost):
    rtts.sort()
    q = lambda p: rtts[min(len(rtts) - 1, int(p * len(rtts)))] if rtts else None
    print(json.dumps({"n": len(rtts), "lost": lost, "min_ms": rtts[0] if rtts else None,
                      "p50_ms": statistics.median(rtts) if rtts else None, "p90_ms": q(0.9),
                      "p99_ms": q(0.99), "mean_ms": statistics.fmean(rtts) if rtts else None}))


def client(host, port, count, interval):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2.0)
    rtts = []
    lost = 0
    for i in range(count):
        t0 = time.monotonic_ns()
        s.sendto(i.to_bytes(4, "big") + b"x" * 60, (host, port))
        try:
            while True:
                data, _ = s.recvfrom(2048)
                if int.from_bytes(data[:4], "big") == i:
                    break
            rtts.append((time.monotonic_ns() - t0) / 1e6)
        except socket.timeout:
            lost += 1
        nxt = t0 / 1e9 + interval
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
    report(rtts, lost)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 600)
    elif len(sys.argv) > 6 and sys.argv[6] == "pipe":
        client_pipe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
