"""qualify's figures against llama-server's own, and qualify's footprint on the server.

Starts its own llama-server (SmolLM2-135M, the demo's flags, port 18501 by default), then runs
`--rounds` rounds at concurrency 1. Each round makes one request with a minimal client (a raw
socket that sends the request and reads until the server closes, nothing else) and one with
`qualify.httpclient.client.Client`, alternating which goes first (ABBA), all in this one process.
request has the same body (greedy, `cache_prompt: false`, `ignore_eos` unless `--allow-eos`), so
the server does the same work each time. It prints, as a table:

- the server's own `predicted_per_second` under each client, and their ratio (footprint);
- qualify's decode tok/s over the server's, and its TTFT minus the server's `prompt_ms`;
- the client's CPU per streamed token.

    .venv/bin/python bench/fidelity.py               # 10 rounds, as in docs/performance.md
    .venv/bin/python bench/fidelity.py --allow-eos \\
        --prompt "In one short sentence, what is a lighthouse?"
    .venv/bin/python bench/fidelity.py --rounds 0 --ladder 1 2 4 6 --parallel 6 --max-tokens 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from qualify.httpclient.chat import from_stream
from qualify.httpclient.client import Client
from qualify.httpclient.load import drive, figures, warm
from qualify.httpclient.timing import RequestTiming, fidelity, fidelity_reasons, median, timing
from qualify.serving.local import LocalPaths

PROMPT = (
    "Write a long story about a lighthouse keeper who finds a map in a bottle. Describe the "
    "island, the weather, the keeper's daily routine, and the journey the map leads to."
)


def body(args: argparse.Namespace) -> dict[str, Any]:
    b: dict[str, Any] = {
        "messages": [{"role": "user", "content": args.prompt}],
        "max_tokens": args.max_tokens,
        "temperature": 0,
        "seed": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": False,
    }
    if not args.allow_eos:
        b["ignore_eos"] = True
    return b


def start_server(port: int, parallel: int, log: Path) -> subprocess.Popen[bytes]:
    p = LocalPaths("cpu")
    cmd = [str(p.binary), "-m", str(p.model), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-c", str(4096 * parallel), "-np", str(parallel), "-t", "2", "--metrics"]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"llama-server did not become healthy; see {log}")


def minimal_request(port: int, payload: bytes) -> dict[str, Any]:
    """One streamed request over a raw socket; the server's `timings` parsed after it ended."""
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    parts = []
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(head + payload)
        while chunk := s.recv(65536):
            parts.append(chunk)
    for line in b"".join(parts).split(b"\n"):
        if line.startswith(b"data: ") and b'"timings"' in line:
            timings: dict[str, Any] = json.loads(line[6:])["timings"]
            return timings
    raise SystemExit("the minimal client saw no timings in the response")


async def qualify_request(client: Client, b: dict[str, Any]) -> tuple[RequestTiming, float]:
    c0 = time.process_time()
    ex = await client.stream("/v1/chat/completions", b)
    cpu = time.process_time() - c0
    if not ex.ok:
        raise SystemExit(f"qualify request failed: {ex.error or ex.status}")
    return timing(from_stream(ex)), cpu


async def rounds(args: argparse.Namespace, client: Client) -> dict[str, Any]:
    b = body(args)
    payload = json.dumps(b).encode()
    minimal: list[float] = []
    minimal_cpu: list[float] = []
    timed: list[RequestTiming] = []
    cpu: list[float] = []
    for i in range(args.rounds + 1):  # round 0 warms both paths and is not counted
        order = ("minimal", "qualify") if i % 2 else ("qualify", "minimal")
        for who in order:
            if who == "minimal":
                c0 = time.process_time()
                tm = minimal_request(args.port, payload)
                if i:
                    minimal.append(tm["predicted_per_second"])
                    minimal_cpu.append((time.process_time() - c0) / tm["predicted_n"])
            else:
                t, c = await qualify_request(client, b)
                if i:
                    timed.append(t)
                    cpu.append(c / (t.completion_tokens or 1))
    return {"minimal": minimal, "timed": timed, "cpu_per_token": cpu, "minimal_cpu": minimal_cpu}


def table(res: dict[str, Any]) -> None:
    timed: list[RequestTiming] = res["timed"]
    srv_q = median([t.server_decode_tok_s for t in timed if t.server_decode_tok_s])
    srv_m = median(res["minimal"])
    fid = fidelity(timed)
    rows = [
        ("server predicted_per_second, minimal client", srv_m, "tok/s"),
        ("server predicted_per_second, qualify client", srv_q, "tok/s"),
        ("server rate, qualify over minimal", (srv_q / srv_m) if srv_q and srv_m else None, ""),
        ("qualify decode tok/s", median([t.decode_tok_s for t in timed if t.decode_tok_s]), ""),
        ("qualify decode / server's", fid["decode_ratio_median"], ""),
        ("qualify TTFT", 1000 * (median([t.ttfo_s for t in timed if t.ttfo_s]) or 0), "ms"),
        (
            "server prompt_ms",
            median([t.server_prompt_ms for t in timed if t.server_prompt_ms]),
            "ms",
        ),
        ("TTFT minus server prompt_ms (median)", fid["ttft_minus_server_prompt_ms_median"], "ms"),
        ("TTFT minus server prompt_ms (min)", fid["ttft_minus_server_prompt_ms_min"], "ms"),
        ("TTFT minus server prompt_ms (p95)", fid["ttft_minus_server_prompt_ms_p95"], "ms"),
        ("qualify client CPU per token", 1e6 * (median(res["cpu_per_token"]) or 0), "us"),
        ("minimal client CPU per token", 1e6 * (median(res["minimal_cpu"]) or 0), "us"),
    ]
    print(f"{'figure (median of ' + str(len(timed)) + ' requests each)':<48} {'value':>12}")
    for name, value, unit in rows:
        print(f"{name:<48} {'-' if value is None else f'{value:12.4f}'} {unit}")
    tokens = sorted({t.completion_tokens for t in timed})
    print(f"completion tokens per request: {tokens}")
    print("per request (server_minimal, server_qualify, ratio, ttft_gap_ms):")
    for m, t in zip(res["minimal"], timed, strict=True):
        print(
            f"  {m:8.2f} {t.server_decode_tok_s:8.2f} {t.decode_ratio_client_over_server:.4f}"
            f" {t.ttft_minus_server_prompt_ms:6.2f}"
        )
    print("fidelity:", json.dumps(fid))
    print("disagreements:", fidelity_reasons(fid) or "none")


async def ladder(args: argparse.Namespace, client: Client) -> None:
    for c in args.ladder:
        await warm(client, c)
        exchanges = await drive(client, [body(args)] * (c * 2), c)
        f = figures(exchanges, c)
        print(
            f"c={c}: per-stream decode median {f.decode_tok_s_median:.1f} tok/s, aggregate "
            f"{f.aggregate_output_tok_s:.1f} tok/s over {f.window_s:.2f} s, failed {f.failed}"
        )


async def main(args: argparse.Namespace) -> None:
    log = Path(args.log)
    proc = start_server(args.port, args.parallel, log)
    try:
        print("load before:", Path("/proc/loadavg").read_text().strip())
        async with Client(f"http://127.0.0.1:{args.port}") as client:
            await warm(client, 1)
            if args.rounds:
                table(await rounds(args, client))
            if args.ladder:
                await ladder(args, client)
        print("load after:", Path("/proc/loadavg").read_text().strip())
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=18501)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--allow-eos", action="store_true", help="let generation stop at EOS")
    ap.add_argument("--prompt", default=PROMPT, help="the user message")
    ap.add_argument("--parallel", type=int, default=1, help="llama-server -np")
    ap.add_argument("--ladder", type=int, nargs="*", default=[], help="concurrencies to drive")
    ap.add_argument("--log", default="/tmp/qualify-bench-llama-server.log")
    asyncio.run(main(ap.parse_args()))
