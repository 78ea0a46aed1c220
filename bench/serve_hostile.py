"""`/health` latency of `patarm serve` under hostile clients, beside the same probes on a quiet server.

    flock /tmp/patarm-cpu.lock python bench/serve_hostile.py [--model DIR] [--probes 50] [--sockets 200]
        [--header-mb 64] [--response-chars 3500000] [--max-connections 1024]

Starts the real CLI (`python -m patarm serve`) on a built random judge (bench/serve.py's) and probes it with
`--probes` GET /health, each on a fresh raw loopback connection (connect included; a raw socket, so the
figure is the server's, not an HTTP library's), `--interval-ms` apart, first on a quiet server, then under
each attack. Each attack runs in its own process (the prober keeps its own GIL) and keeps going until the
probes are done:

- `slowloris`: `--sockets` connections each send half a request head and then nothing; every half second
  the ones the server closed (at its 10 s head deadline) are reopened. Below `--max-connections` (the
  server's default, 1024) all are held; with fewer, each new connection evicts the one idle longest, and a
  reopening burst larger than the cap can evict a probe too (a connection cap's nature; the eviction path is
  tested in tests/serve/test_hostile_clients.py);
- `big_header`: connections, one after another, each streaming a header of up to `--header-mb` MB until the
  server refuses it (431 at its 64 KB head limit) and closes;
- `prepare`: back-to-back `/v1/judge` requests of one maximal item (a response of `--response-chars`
  characters, inside the 4 MB body limit), so the server is always preparing one (rendering, tokenising,
  fitting it to the prompt budget) or judging it.

Prints, per case, `<case>_health_p50_ms=`, `<case>_health_max_ms=` and (attacks) `<case>_p50_vs_quiet=`,
then `attack_health_p50_ms=` and `attack_health_max_ms=`, the worst over the attacks (target: < 100 ms).
On a shared machine the max is the figure most hit by other tenants: run it alone.
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ATTACKS = ("slowloris", "big_header", "prepare")
HALF_HEAD = b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"  # never finished


def health_ms(port: int) -> float:
    """One GET /health on a fresh connection, until the server has answered and closed: milliseconds."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    elapsed = 1000 * (time.perf_counter() - start)
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"/health answered {answer[:200]!r}")
    return elapsed


# ---------------------------------------------------------------- attackers (each in its own process)

def slowloris(port: int, sockets: int, stop: multiprocessing.synchronize.Event) -> None:
    open_ = []
    while not stop.is_set():
        alive = []
        for s in open_:  # closed by the server (408 or evicted): reopen
            try:
                s.setblocking(False)
                gone = s.recv(4096, socket.MSG_PEEK) is not None
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            (s.close() if gone else alive.append(s))
        while len(alive) < sockets and not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(HALF_HEAD)
                alive.append(s)
            except OSError:
                break
        open_ = alive
        stop.wait(0.5)
    for s in open_:
        s.close()


def big_header(port: int, megabytes: int, stop: multiprocessing.synchronize.Event) -> None:
    chunk = b"a" * (1 << 20)
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
                for _ in range(megabytes):
                    s.sendall(chunk)
                s.sendall(b"\r\n\r\n")
                s.recv(4096)
        except OSError:  # refused and closed by the server: the point
            pass


def prepare(port: int, chars: int, stop: multiprocessing.synchronize.Event) -> None:
    import json

    body = json.dumps({"items": [{"prompt": "Rate this answer.", "response": ("word " * chars)[:chars]}]}).encode()
    head = (b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body))
    while not stop.is_set():
        with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
            s.sendall(head + body)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        if not answer.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"the maximal request was answered {answer[:300]!r}")


# ---------------------------------------------------------------- server and measurement

def start_server(model: str, args: argparse.Namespace) -> tuple[subprocess.Popen, int, deque]:
    """The CLI on a free port; its stderr is drained on a thread (the last lines kept for errors)."""
    cmd = [sys.executable, "-m", "patarm", "serve", "--model", model, "--port", "0", "--max_new_tokens",
           str(args.max_new_tokens), "--max_connections", str(args.max_connections), "--log_level", "warning"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines: deque = deque(maxlen=40)
    found = threading.Event()

    def drain() -> None:
        for line in proc.stderr:
            lines.append(line)
            if re.search(r"listening on http://\S+:\d+", line):
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    while not found.wait(0.2):
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}:\n{''.join(lines)}")
    port = int(re.search(r"listening on http://\S+:(\d+)", "".join(lines)).group(1))
    deadline = time.monotonic() + 120
    while True:
        try:
            health_ms(port)
            return proc, port, lines
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def probe(port: int, count: int, interval_s: float) -> list[float]:
    times = []
    for _ in range(count):
        times.append(health_ms(port))
        time.sleep(interval_s)
    return times


def under_attack(kind: str, port: int, args: argparse.Namespace) -> list[float]:
    """Probe while `kind` runs in its own process (started, given `--warmup-s` to get going, then stopped)."""
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    size = {"slowloris": args.sockets, "big_header": args.header_mb, "prepare": args.response_chars}[kind]
    attacker = ctx.Process(target=globals()[kind], args=(port, size, stop), daemon=True)
    attacker.start()
    try:
        time.sleep(args.warmup_s)
        if not attacker.is_alive():
            raise RuntimeError(f"the {kind} attacker stopped early (exit code {attacker.exitcode})")
        times = probe(port, args.probes, args.interval_ms / 1000)
        if not attacker.is_alive():
            raise RuntimeError(f"the {kind} attacker failed during the probes (exit code {attacker.exitcode})")
    finally:
        stop.set()
        attacker.join(10)  # a request in flight is abandoned (the server cancels its queued work)
        if attacker.is_alive():
            attacker.kill()
            attacker.join()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="A judge folder (default: build bench/serve.py's random judge).")
    p.add_argument("--probes", type=int, default=50)
    p.add_argument("--interval-ms", type=float, default=20.0)
    p.add_argument("--warmup-s", type=float, default=1.0, help="attack time before the first probe")
    p.add_argument("--sockets", type=int, default=200)
    p.add_argument("--header-mb", type=int, default=64)
    p.add_argument("--response-chars", type=int, default=3_500_000)
    p.add_argument("--max-connections", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--attacks", nargs="+", choices=ATTACKS, default=list(ATTACKS))
    args = p.parse_args()

    sys.path.insert(0, str(ROOT))
    from bench.serve import build_judge

    model = args.model or build_judge(Path(tempfile.mkdtemp(prefix="bench-serve-hostile-")), args.max_new_tokens)
    proc, port, log = start_server(model, args)
    try:
        probe(port, 5, 0)  # warm-up
        cases = {"quiet": probe(port, args.probes, args.interval_ms / 1000)}
        for kind in args.attacks:
            cases[kind] = under_attack(kind, port, args)
            probe(port, 3, 0.2)  # the server is quiet again before the next attack
    except Exception:
        print("".join(log), file=sys.stderr)
        raise
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    print(f"probes={args.probes} interval_ms={args.interval_ms:g} sockets={args.sockets} header_mb={args.header_mb} "
          f"response_chars={args.response_chars} max_connections={args.max_connections}")
    quiet = statistics.median(cases["quiet"])
    for case, times in cases.items():
        print(f"{case}_health_p50_ms={statistics.median(times):.1f}")
        print(f"{case}_health_max_ms={max(times):.1f}")
        if case != "quiet":
            print(f"{case}_p50_vs_quiet={statistics.median(times) / quiet:.2f}")
    attacked = [cases[k] for k in args.attacks]
    print(f"attack_health_p50_ms={max(statistics.median(t) for t in attacked):.1f}")
    print(f"attack_health_max_ms={max(max(t) for t in attacked):.1f}")


if __name__ == "__main__":
    main()
