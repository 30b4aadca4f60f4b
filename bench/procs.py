"""Process plumbing the benches share: free loopback ports, waiting for a broker process to
listen, and a process's (or process group's) CPU time, so broker cost is told from client
cost. Imported by the bench scripts run as ``python bench/<name>.py`` (bench/ is on sys.path)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Until ``proc`` accepts on 127.0.0.1:``port``; RuntimeError if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the broker exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the broker did not start")


def _proc_stats(entries: list[str]) -> Iterator[tuple[int, int, int, int]]:
    """(pid, parent pid, process group, user + system ticks) of each live process named in
    ``entries`` (Linux /proc; other entries and processes gone meanwhile are skipped)."""
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(entry), int(fields[1]), int(fields[2]), int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int, group: bool = False) -> float:
    """User + system CPU of process ``pid``, or (``group``) of every process in its process
    group (a peer started in its own session: RabbitMQ's launcher runs the Erlang VM as a
    child). Linux /proc; a process that is gone counts 0."""
    entries = os.listdir("/proc") if group else [str(pid)]
    total = sum(t for _, _, pgrp, t in _proc_stats(entries) if not group or pgrp == pid)
    return total / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int, exclude: int | None = None) -> float:
    """User + system CPU of process ``root`` and every live descendant of it, but process
    ``exclude`` and its own descendants: a SparkSession's JVM and its Python workers (the
    driver's children and theirs), the broker process beside them left out. Linux /proc."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for pid, parent, _, t in _proc_stats(os.listdir("/proc")):
        parents[pid], ticks[pid] = parent, t
    total = 0
    for pid, t in ticks.items():
        p = pid
        while p not in (root, exclude, 0, 1) and p in parents:
            p = parents[p]
        if p == root:
            total += t
    return total / os.sysconf("SC_CLK_TCK")


def remoting_broker_main(store_dir: str, port: int, ready, uvloop: bool = True) -> None:
    """A broker process's main (multiprocessing, spawn) for the benches that drive it
    through the native client: remoting on ``port`` (a real one: offset message ids embed
    it), the name server on a free port, every other front-end off. Sends the name server's
    address through the pipe end ``ready``, and stops when something arrives on it."""
    import asyncio

    from rocketport.core.config import BrokerConfig, ProtocolConfig
    from rocketport.server import BrokerServer

    async def serve() -> None:
        config = BrokerConfig(store_path_root_dir=store_dir, listen_port=port,
                              namesrv=ProtocolConfig(True, 0), kafka=ProtocolConfig(False, 0),
                              amqp=ProtocolConfig(False, 0), stomp=ProtocolConfig(False, 0))
        server = BrokerServer(config)
        await server.start()
        endpoints = {role: f"{host}:{p}" for fe in server.front_ends.values()
                     for role, host, p in fe.endpoints()}
        ready.send(endpoints["name server"])
        stop = asyncio.Event()
        asyncio.get_running_loop().add_reader(ready.fileno(), stop.set)
        await stop.wait()
        await server.stop()

    if uvloop:
        try:
            import uvloop as loop_module
        except ImportError:
            loop_module = None
        if loop_module is not None:
            loop_module.run(serve())
            return
    asyncio.run(serve())


def consumer_latencies(consumer, args: tuple, publish, timeout_s: float) -> list:
    """A latency case's consumer in a process of its own (spawn), so it shares no
    interpreter with the publisher: ``consumer(*args, pipe)`` sends "ready" once it
    consumes, then its list of latencies (a text instead is its error); ``publish()``
    runs here in between. Stamps must be time.perf_counter_ns (CLOCK_MONOTONIC: one
    clock for every process)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=consumer, args=(*args, there), daemon=True)
    proc.start()
    try:
        if not here.poll(60):
            raise RuntimeError("the latency consumer did not start")
        if (ready := here.recv()) != "ready":
            raise RuntimeError(ready)
        publish()
        if not here.poll(timeout_s):
            raise RuntimeError("the latency consumer did not answer")
        latencies = here.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    if isinstance(latencies, str):
        raise RuntimeError(latencies)
    return latencies
