"""Streamed chat completions through `groundstate gateway` versus straight to the upstream, at 1 and 100 concurrent
streams: added latency (a whole streamed answer, p50 and p99) and throughput.

    python bench/gateway/run.py            # 300 sequential streams, then 3 rounds of 100 concurrent
    python bench/gateway/run.py --quick

The upstream is a loopback server (uvicorn, in a process of its own) streaming the same OpenAI chat-completion
answer, 100 chunks, each its own write; the client reads it with httpx as SDKs do. Through the gateway each answer
is also parsed into events for the metrics (SIGIL frames are encoded only with --publish, which this leaves off).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx
import uvicorn

CHUNKS = [b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}]
                                  }).encode() + b"\n\n" for i in range(100)] + [b"data: [DONE]\n\n"]  # fmt: skip
REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def upstream(scope: Any, receive: Any, send: Any) -> None:
    """The answer, chunk by chunk."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for chunk in CHUNKS:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(port: int) -> None:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


async def one(client: httpx.AsyncClient, url: str) -> float:
    started = time.perf_counter()
    async with client.stream("POST", url, json=REQUEST) as response:
        async for _ in response.aiter_raw():
            pass
    return (time.perf_counter() - started) * 1000


async def measure(url: str, sequential: int, concurrent: int, rounds: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=concurrent)) as client:
        for _ in range(10):
            await one(client, url)
        alone = [await one(client, url) for _ in range(sequential)]
        started, crowded = time.perf_counter(), []
        for _ in range(rounds):
            crowded += await asyncio.gather(*(one(client, url) for _ in range(concurrent)))
        elapsed = time.perf_counter() - started
    ordered = sorted(alone)
    return {"p50": statistics.median(alone), "p99": ordered[min(int(0.99 * len(ordered)), len(ordered) - 1)],
            "crowded_p50": statistics.median(crowded), "streams_per_s": len(crowded) / elapsed}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--upstream-on", type=int, help=argparse.SUPPRESS)  # internal: be the upstream on this port
    options = parser.parse_args()
    if options.upstream_on:
        uvicorn.run(upstream, host="127.0.0.1", port=options.upstream_on, log_level="warning")
        return
    sequential, rounds = (50, 1) if options.quick else (300, 3)
    up, gw = free_port(), free_port()
    server = subprocess.Popen([sys.executable, __file__, "--upstream-on", str(up)])  # its own process, as upstreams are
    wait_for(up)
    gateway = subprocess.Popen([sys.executable, "-m", "groundstate", "gateway", "--upstream",
                                f"http://127.0.0.1:{up}", "--listen", f"127.0.0.1:{gw}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(gw)
        print(f"# {platform.python_version()}, {os.cpu_count()} cores; {sequential} streams alone, {rounds} x 100 "
              "concurrent; 100 chunks each", flush=True)  # fmt: skip
        direct = asyncio.run(measure(f"http://127.0.0.1:{up}/v1/chat/completions", sequential, 100, rounds))
        through = asyncio.run(measure(f"http://127.0.0.1:{gw}/v1/chat/completions", sequential, 100, rounds))
    finally:
        gateway.terminate()
        server.terminate()
    print("| path | p50 ms (1 stream) | p99 ms (1 stream) | p50 ms (100 at once) | streams/s (100 at once) |")
    print("|---|---|---|---|---|")
    for name, row in (("direct", direct), ("through the gateway", through)):
        cells = f"{row['p50']:.2f} | {row['p99']:.2f} | {row['crowded_p50']:.1f} | {row['streams_per_s']:.0f}"
        print(f"| {name} | {cells} |")
    print(
        f"\nadded p50 (1 stream): {through['p50'] - direct['p50']:.2f} ms; throughput at 100 streams: "
        f"{100 * through['streams_per_s'] / direct['streams_per_s']:.0f}% of direct"
    )


if __name__ == "__main__":
    main()
