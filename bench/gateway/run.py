"""Streamed chat completions through `groundstate gateway` versus straight to the upstream, at 1 and 100 concurrent
streams: added latency (a whole streamed answer, p50 and p99) and throughput.

    python bench/gateway/run.py            # 300 sequential streams, then 6 rounds of 100 concurrent
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).parents[1]))  # bench/processes.py, shared with bench/mcp
from processes import cpu_seconds

CHUNKS = [b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}]
                                  }).encode() + b"\n\n" for i in range(100)] + [b"data: [DONE]\n\n"]  # fmt: skip
REQUEST = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
ANSWER = b"".join(CHUNKS)
PACED_MS = 5.0  # the paced upstream's time between chunks: 200 tokens/s, faster than hosted models stream
PACE = {"seconds": 0.0}  # the upstream process's own pace (--pace-ms)


async def upstream(scope: Any, receive: Any, send: Any) -> None:
    """The answer, chunk by chunk."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for chunk in CHUNKS:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if PACE["seconds"]:
            await asyncio.sleep(PACE["seconds"])
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


class RawStream:
    """One kept-alive connection that asks for the streamed answer and reads it whole: the load generator for the
    crowded rounds. httpx's pool spent more CPU than both servers together and varied tenfold between identical
    rounds (0.27–2.4 s per 100 streams), so with it the rounds measured the client; this reads each answer with a
    few Python steps per chunk, checks it is the answer the upstream sends, and leaves the servers the bottleneck."""

    def __init__(self, host: str, port: int, path: str) -> None:
        self.address, self._reader, self._writer = (host, port), None, None
        body = json.dumps(REQUEST).encode()
        self.request = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip

    async def one(self) -> float:
        started = time.perf_counter()
        if self._reader is None:
            self._reader, self._writer = await asyncio.open_connection(*self.address)
        reader, writer = self._reader, self._writer
        assert writer is not None
        writer.write(self.request)
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"chunked" in head.lower(), head
        body = bytearray()
        while size := int((await reader.readuntil(b"\r\n"))[:-2], 16):
            body += (await reader.readexactly(size + 2))[:-2]
        await reader.readexactly(2)
        assert body == ANSWER, "a different answer came back"
        return (time.perf_counter() - started) * 1000

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


async def latency(urls: dict[str, str], sequential: int) -> dict[str, dict[str, float]]:
    """Each path's whole-answer time alone, p50 and p99, read with httpx as SDKs read streams; the paths alternate
    in blocks of 50 so that a slow moment of this shared machine falls on both."""
    alone: dict[str, list[float]] = {name: [] for name in urls}
    async with httpx.AsyncClient(timeout=60) as client:
        for url in urls.values():
            for _ in range(10):
                await one(client, url)
        for block in range(0, sequential, 50):
            for name, url in urls.items():
                alone[name] += [await one(client, url) for _ in range(min(50, sequential - block))]
    results = {}
    for name, times in alone.items():
        ordered = sorted(times)
        results[name] = {"p50": statistics.median(ordered), "p99": ordered[min(int(0.99 * len(ordered)),
                         len(ordered) - 1)]}  # fmt: skip
    return results


async def throughput(
    urls: dict[str, str], concurrent: int, rounds: int, servers: dict[str, int]
) -> dict[str, dict[str, float]]:
    """Each path's streams per second with ``concurrent`` at once (``RawStream``s), round by round alternating,
    with the CPU seconds each server process and this client spent per round."""
    crowded: dict[str, list[float]] = {name: [] for name in urls}
    elapsed = dict.fromkeys(urls, 0.0)
    spent = {name: dict.fromkeys([*servers, "client"], 0.0) for name in urls}
    streams = {name: [RawStream(*_host_port_path(url)) for _ in range(concurrent)] for name, url in urls.items()}
    try:
        for name in urls:  # the connections opened before anything is timed
            await asyncio.gather(*(stream.one() for stream in streams[name]))
        for _ in range(rounds):
            for name in urls:
                before = {**{s: cpu_seconds(pid) for s, pid in servers.items()}, "client": time.process_time()}
                started = time.perf_counter()
                crowded[name] += await asyncio.gather(*(stream.one() for stream in streams[name]))
                elapsed[name] += time.perf_counter() - started
                after = {**{s: cpu_seconds(pid) for s, pid in servers.items()}, "client": time.process_time()}
                for who in after:
                    spent[name][who] += (after[who] - before[who]) / (rounds * concurrent)
    finally:
        for stream in (stream for group in streams.values() for stream in group):
            stream.close()
    return {name: {"crowded_p50": statistics.median(crowded[name]), "streams_per_s": len(crowded[name]) / elapsed[name],
                   **{f"cpu_{who}": seconds for who, seconds in spent[name].items()}} for name in urls}  # fmt: skip


@contextmanager
def servers(pace_ms: float) -> Iterator[tuple[dict[str, str], dict[str, int]]]:
    """An upstream (in a process of its own, as upstreams are) and a gateway in front of it: the two paths' URLs and
    the two processes' ids."""
    up, gw = free_port(), free_port()
    server = subprocess.Popen([sys.executable, __file__, "--upstream-on", str(up), "--pace-ms", str(pace_ms)])
    gateway = subprocess.Popen([sys.executable, "-m", "groundstate", "gateway", "--upstream",
                                f"http://127.0.0.1:{up}", "--listen", f"127.0.0.1:{gw}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(up)
        wait_for(gw)
        yield ({"direct": f"http://127.0.0.1:{up}/v1/chat/completions",
                "through the gateway": f"http://127.0.0.1:{gw}/v1/chat/completions"},
               {"upstream": server.pid, "gateway": gateway.pid})  # fmt: skip
    finally:
        gateway.terminate()
        server.terminate()


def _host_port_path(url: str) -> tuple[str, int, str]:
    parsed = httpx.URL(url)
    return parsed.host, int(parsed.port or 80), parsed.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--upstream-on", type=int, help=argparse.SUPPRESS)  # internal: be the upstream on this port
    parser.add_argument("--pace-ms", type=float, default=0.0, help=argparse.SUPPRESS)  # internal: the upstream's
    options = parser.parse_args()
    if options.upstream_on:
        PACE["seconds"] = options.pace_ms / 1000
        uvicorn.run(upstream, host="127.0.0.1", port=options.upstream_on, log_level="warning")
        return
    sequential, rounds = (50, 2) if options.quick else (300, 6)
    print(f"# {platform.python_version()}, {os.cpu_count()} cores; {sequential} streams alone, {rounds} x 100 "
          "concurrent; 100 chunks each; the two paths alternating", flush=True)  # fmt: skip
    with servers(0.0) as (urls, pids):
        results = asyncio.run(latency(urls, sequential))
        for name, row in asyncio.run(throughput(urls, 100, rounds, pids)).items():
            results[name].update(row)
    with servers(PACED_MS) as (urls, pids):
        paced = asyncio.run(throughput(urls, 100, max(2, rounds // 2), pids))
    print("\nAn upstream that answers at once (the gateway's own cost, the machine saturated):\n")
    print("| path | p50 ms (1 stream) | p99 ms (1 stream) | p50 ms (100 at once) | streams/s (100 at once) "
          "| CPU ms per stream: upstream / gateway / client |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, row in results.items():
        cells = f"{row['p50']:.2f} | {row['p99']:.2f} | {row['crowded_p50']:.1f} | {row['streams_per_s']:.0f}"
        print(f"| {name} | {cells} | {_cpu(row)} |")
    print(f"\nAn upstream that streams a chunk every {PACED_MS:g} ms (200 tokens/s per stream):\n")
    print("| path | p50 ms (100 at once) | streams/s (100 at once) "
          "| CPU ms per stream: upstream / gateway / client |")  # fmt: skip
    print("|---|---|---|---|")
    for name, row in paced.items():
        print(f"| {name} | {row['crowded_p50']:.1f} | {row['streams_per_s']:.0f} | {_cpu(row)} |")
    direct, through = results["direct"], results["through the gateway"]
    ratio = 100 * through["streams_per_s"] / direct["streams_per_s"]
    paced_ratio = 100 * paced["through the gateway"]["streams_per_s"] / paced["direct"]["streams_per_s"]
    print(f"\nadded p50 (1 stream): {through['p50'] - direct['p50']:.2f} ms; throughput at 100 streams: {ratio:.0f}% "
          f"of direct (an upstream at once), {paced_ratio:.0f}% (paced); the gateway's CPU per stream: "
          f"{1000 * through['cpu_gateway']:.3f} ms (at once), "
          f"{1000 * paced['through the gateway']['cpu_gateway']:.3f} ms (paced)")  # fmt: skip


def _cpu(row: dict[str, float]) -> str:
    """CPU milliseconds per stream (the client's ``process_time``, the servers' ``cpu_seconds``)."""
    return " / ".join(f"{1000 * row[f'cpu_{who}']:.3f}" for who in ("upstream", "gateway", "client"))


if __name__ == "__main__":
    main()
