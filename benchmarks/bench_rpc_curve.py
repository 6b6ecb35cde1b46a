"""What CURVE (security.cluster.secret) costs the RPC: asks and tells per second, plain
against CURVE-authenticated and encrypted, between two in-process RpcServices on
loopback. Also the one-off cost of deriving the keys (scrypt).

    .venv/bin/python benchmarks/bench_rpc_curve.py [--asks 5000] [--tells 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from flink_runtime.rpc.messages import Heartbeat, HeartbeatResponse
from flink_runtime.rpc.service import RpcService
from flink_runtime.security.rpc_keys import curve_keys


async def measure(secret: str, asks: int, tells: int) -> tuple[float, float]:
    received = 0
    all_told = asyncio.Event()

    def handle(message, reply) -> None:
        nonlocal received
        if reply is not None:
            reply(HeartbeatResponse(task_manager_id="peer"))
            return
        received += 1
        if received == tells:
            all_told.set()

    server, client = RpcService(cluster_secret=secret), RpcService(cluster_secret=secret)
    await server.start(handle)
    await client.start(lambda message, reply: None)
    try:
        await client.ask(server.address, Heartbeat(jobmanager_id="warm-up"), timeout=10)
        began = time.perf_counter()
        for _ in range(asks):
            await client.ask(server.address, Heartbeat(jobmanager_id="jm"), timeout=10)
        ask_rate = asks / (time.perf_counter() - began)
        began = time.perf_counter()
        for _ in range(tells):
            client.tell(server.address, Heartbeat(jobmanager_id="jm"))
        await asyncio.wait_for(all_told.wait(), timeout=120)
        tell_rate = tells / (time.perf_counter() - began)
    finally:
        await client.close()
        await server.close()
    return ask_rate, tell_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--asks", type=int, default=5000)
    parser.add_argument("--tells", type=int, default=100_000)
    args = parser.parse_args()
    began = time.perf_counter()
    curve_keys("benchmark secret")
    print(f"key derivation (scrypt n=2^14): {(time.perf_counter() - began) * 1e3:.0f} ms, once per process")
    for label, secret in (("plain", ""), ("CURVE", "benchmark secret")):
        ask_rate, tell_rate = asyncio.run(measure(secret, args.asks, args.tells))
        print(f"{label:>5}: {ask_rate:8,.0f} asks/s (round trips)   {tell_rate:9,.0f} tells/s")


if __name__ == "__main__":
    main()
