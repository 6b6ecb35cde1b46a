"""Connection churn: does the JobManager's RPC stay healthy as TaskManagers come and go?

In-process: one RpcService watching its connections (as the JobManager does) and N
peers, each connecting, answering an ask and vanishing while the service drops it
(the race that can block ZeroMQ's I/O thread forever if a socket monitor's reader is
closed before the monitor: rpc/service.py); then a new peer's round trip.

Real processes: a JobManager, then rounds of TaskManager processes that register and
leave (half SIGKILL, half SIGTERM). Registration latency (TaskManager "ready" line to
listed by the JobManager) of the first TaskManager, against one started after the rounds.

The in-process peers are CURVE-authenticated, as every JobManager's and TaskManager's
RPC is (a MiniCluster's own secret, or this user's on loopback), so each
cycle pays a CURVE handshake; --plain measures plain TCP for comparison. The processes
run without a configured secret: on loopback they share this user's.

    .venv/bin/python benchmarks/bench_rpc_churn.py [--cycles 2000] [--rounds 5] [--per-round 6] [--plain]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from flink_runtime.client.local_cluster import StandaloneCluster
from flink_runtime.rpc.messages import Heartbeat, HeartbeatResponse
from flink_runtime.rpc.service import AskTimeoutError, RpcService

TARGET_REGISTRATION = 5.0  # seconds; a JobManager whose ZeroMQ I/O thread is blocked never registers one


BENCH_SECRET = "bench-rpc-churn"


async def in_process(cycles: int, plain: bool = False) -> tuple[float, float]:
    """Cycles per second, and a new peer's round trip (s) after them.

    Raises AskTimeoutError naming the cycle when a peer stops answering (the I/O thread
    blocked in a monitor-event send)."""

    def answer(message, reply) -> None:
        if reply is not None:
            reply(HeartbeatResponse(task_manager_id="peer"))

    secret = "" if plain else BENCH_SECRET
    hub = RpcService(cluster_secret=secret)
    hub.on_disconnect = lambda address: None
    await hub.start(answer)
    try:
        began = time.monotonic()
        for cycle in range(cycles):
            peer = RpcService(cluster_secret=secret)
            await peer.start(answer)
            try:
                await hub.ask(peer.address, Heartbeat(jobmanager_id="hub"), TARGET_REGISTRATION)
            except AskTimeoutError as exc:
                raise AskTimeoutError(f"cycle {cycle}: {exc}") from None
            if cycle % 2:
                hub.disconnect(peer.address)
                await peer.close()
            else:
                await peer.close()
                hub.disconnect(peer.address)
        rate = cycles / (time.monotonic() - began)
        newcomer = RpcService(cluster_secret=secret)
        await newcomer.start(answer)
        began = time.monotonic()
        await hub.ask(newcomer.address, Heartbeat(jobmanager_id="hub"), TARGET_REGISTRATION)
        round_trip = time.monotonic() - began
        await newcomer.close()
        return rate, round_trip
    finally:
        await hub.close()


def registration_latency(cluster: StandaloneCluster, resource_id: str) -> float:
    cluster.start_taskmanager(resource_id, wait=False, **{"taskmanager.numberOfTaskSlots": 1})
    ready = time.monotonic()  # start_taskmanager returns once the process printed "ready"
    while time.monotonic() - ready < 30:
        ids = {tm["id"] for tm in httpx.get(f"{cluster.rest_url}/taskmanagers").json()["taskmanagers"]}
        if resource_id in ids:
            return time.monotonic() - ready
        time.sleep(0.005)
    return float("inf")


def processes(rounds: int, per_round: int) -> tuple[float, float, float]:
    """First registration (s), TaskManagers churned per second, registration after churn (s)."""
    properties = {"heartbeat.interval": "1 s", "heartbeat.timeout": "60 s"}
    with tempfile.TemporaryDirectory() as work_dir, StandaloneCluster(Path(work_dir), properties=properties) as cluster:
        cluster.start_jobmanager()
        first = registration_latency(cluster, "first")
        cluster.taskmanagers.pop().terminate()
        cluster.wait_for_taskmanagers(lambda ids: not ids, timeout=10)
        began = time.monotonic()
        for round_number in range(rounds):
            ids = [f"churn-{round_number}-{index}" for index in range(per_round)]
            with ThreadPoolExecutor(per_round) as pool:
                started = list(
                    pool.map(
                        lambda tm_id: cluster.start_taskmanager(
                            tm_id, wait=False, **{"taskmanager.numberOfTaskSlots": 1}
                        ),
                        ids,
                    )
                )
            try:
                cluster.wait_for_taskmanagers(lambda registered, ids=ids: set(ids) <= registered)
            except TimeoutError:
                raise TimeoutError(f"round {round_number}: TaskManagers not registered within 30 s") from None
            for index, process in enumerate(started):
                if index % 2:
                    process.process.terminate()
                else:
                    process.kill()
            for process in started:
                process.terminate()
            try:
                cluster.wait_for_taskmanagers(lambda registered, ids=ids: not set(ids) & registered, timeout=10)
            except TimeoutError:
                raise TimeoutError(f"round {round_number}: TaskManagers still listed 10 s after they left") from None
        churn_rate = rounds * per_round / (time.monotonic() - began)
        after = registration_latency(cluster, "after-churn")
    return first, churn_rate, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=2000, help="in-process connect/vanish cycles")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of TaskManager processes")
    parser.add_argument("--per-round", type=int, default=6, help="TaskManager processes per round")
    parser.add_argument("--plain", action="store_true", help="in-process peers over plain TCP instead of CURVE")
    args = parser.parse_args()

    try:
        rate, round_trip = asyncio.run(in_process(args.cycles, args.plain))
        print(
            f"in-process ({'plain' if args.plain else 'CURVE'}): {args.cycles} connect/ask/vanish cycles at "
            f"{rate:.0f} cycles/s; "
            f"a new peer's round trip after them {round_trip * 1e3:.1f} ms  PASS"
        )
    except AskTimeoutError as exc:
        print(f"in-process: a peer stopped answering: {exc}  FAIL")
    try:
        first, churn_rate, after = processes(args.rounds, args.per_round)
    except TimeoutError as exc:
        print(f"processes: {exc}  FAIL")
        return
    churned = args.rounds * args.per_round
    verdict = "PASS" if after <= TARGET_REGISTRATION else "FAIL"
    print(
        f"processes: {churned} TaskManagers registered and killed/stopped at {churn_rate:.2f}/s; "
        f"registration latency first {first * 1e3:.0f} ms, after the churn {after * 1e3:.0f} ms "
        f"(target <= {TARGET_REGISTRATION:g} s)  {verdict}"
    )


if __name__ == "__main__":
    main()
