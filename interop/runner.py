"""Run the matrix: brokers up, one worker process per client, cells collected, reports out.

A worker prints one result line per cell; each cell has its own deadline here. A worker
that passes a deadline is killed (that cell: "fail: timeout ...") and a new worker picks up
the cells after it; a worker that dies fails its current cell the same way. A client that
cannot be installed fails its cells with the reason. A broker that died is replaced by a
fresh one before the next client, and the cells that saw it die say so.
"""

from __future__ import annotations

import datetime
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .broker import ACL_DENIED_TOPIC, ACL_GROUP, ACL_TOPIC, REPO, Broker
from .probe import Probe
from .clients import CLIENTS, FAST
from .scenarios import BY_NAME, SCENARIOS, SHARED_GROUPS

PAIR_TIMEOUT = 90.0


@dataclass(slots=True)
class ClientRow:
    name: str
    protocol: str
    version: str = ""
    cells: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Results:
    broker: dict
    clients: list[ClientRow]
    cross_protocol: dict[str, str]

    def to_json(self) -> dict:
        return {"broker": self.broker,
                "clients": [{"name": r.name, "version": r.version, "protocol": r.protocol,
                             "cells": r.cells} for r in self.clients],
                "cross_protocol": self.cross_protocol}


def _progress(text: str) -> None:
    print(f"[interop] {text}", file=sys.stderr, flush=True)


class _Worker:
    """A worker process and a thread turning its stdout into a queue of parsed lines."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.lines: queue.Queue[dict | None] = queue.Queue()
        self.log = log.open("a")
        self.proc = subprocess.Popen([sys.executable, "-m", "interop.worker", *args], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     start_new_session=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                continue
        self.lines.put(None)

    def next(self, timeout: float) -> dict | None:
        """The next result line; None when the worker ended or the deadline passed."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)  # the worker and the drivers it started
            except ProcessLookupError:
                pass
        self.proc.wait(30)
        self.log.close()


class Runner:
    def __init__(self, *, clients: list[str], scenarios: list[str], pairs: list[tuple[str, str]],
                 workdir: Path) -> None:
        self.clients = clients
        self.scenarios = scenarios
        self.pairs = pairs
        self.workdir = workdir
        self.run_id = datetime.datetime.now(datetime.UTC).strftime("%H%M%S")
        self.broker = Broker(workdir / "broker")
        self.acl_broker = Broker(workdir / "broker-acl", acl=True) if "acl" in scenarios else None
        self.restarts = 0

    def _ep_args(self) -> list[str]:
        if not self.broker.alive():
            if self.broker.proc is not None:
                self.restarts += 1
                _progress(f"broker died ({self.broker.tail(3)}); starting a fresh one")
                self.broker = Broker(self.workdir / f"broker-{self.restarts}")
            self.broker.start()
        args = ["--ep", json.dumps(asdict(self.broker.ep)), "--run", self.run_id]
        if self.acl_broker is not None:
            if not self.acl_broker.alive():
                _start_acl_broker(self.acl_broker)
            args += ["--acl-ep", json.dumps(asdict(self.acl_broker.ep))]
        return args

    def _cells(self, mode: str, first: list[str], names: list[str],
               timeout: dict[str, float], log: Path) -> tuple[dict[str, str], str]:
        """Run `names` through workers; returns their results and the worker's version line."""
        results: dict[str, str] = {}
        version = ""
        todo = list(names)
        while todo:
            worker = _Worker([mode, *first, *todo, *self._ep_args()], log)
            try:
                if mode == "client":
                    head = worker.next(180)  # check(): may install (npm) or compile (javac)
                    if head is None or "missing" in head:
                        why = (head or {}).get("missing") or "the worker did not start (see its log)"
                        return {name: f"fail: client not available: {why}" for name in todo}, ""
                    version = head["version"]
                while todo:
                    name = todo[0]
                    line = worker.next(timeout[name])
                    if line is None:
                        dead = worker.proc.poll() is not None
                        results[name] = ("fail: the client's process died" if dead else
                                         f"fail: timeout after {timeout[name]:.0f} s")
                        if not self.broker.alive():
                            results[name] += f" (the broker died: {self.broker.tail(2)})"
                        todo.pop(0)
                        break
                    if line.get("cell") == name:
                        results[name] = line["result"]
                        todo.pop(0)
            finally:
                worker.kill()
        return results, version

    def run(self) -> Results:
        try:
            return self._run()
        finally:  # also on Ctrl-C / SIGTERM: no broker is left behind
            for b in (self.broker, self.acl_broker):
                if b is not None:
                    b.stop()
                    shutil.rmtree(b.root / "store", ignore_errors=True)  # the logs stay

    def _run(self) -> Results:
        started = time.monotonic()
        self._ep_args()
        rows = []
        for name in self.clients:
            t0 = time.monotonic()
            row = ClientRow(name, CLIENTS[name][1])
            row.cells, row.version = self._cells(
                "client", [name], self.scenarios, {s: BY_NAME[s].timeout for s in self.scenarios},
                self.workdir / f"worker-{CLIENTS[name][0]}.log")
            rows.append(row)
            counts = {k: sum(1 for v in row.cells.values() if v.startswith(k)) for k in ("pass", "fail", "n/a")}
            _progress(f"{name} {row.version or '?'} ({row.protocol}): {counts['pass']} pass, "
                      f"{counts['fail']} fail, {counts['n/a']} n/a in {time.monotonic() - t0:.0f} s")
            for scenario, cell in row.cells.items():
                if cell.startswith("fail"):
                    _progress(f"  {scenario}: {cell}")
        cross: dict[str, str] = {}
        if self.pairs:
            names = [":".join(pair) for pair in self.pairs]
            t0 = time.monotonic()
            results, _ = self._cells("pairs", [], names, {n: PAIR_TIMEOUT for n in names},
                                     self.workdir / "worker-pairs.log")
            for (p, c, *kind), key in zip(self.pairs, names):
                label = f"{CLIENTS[p][1]}->{CLIENTS[c][1]}" + (" (shared group)" if kind else "")
                cross[label] = results[key]
            passed = sum(1 for v in cross.values() if v == "pass")
            _progress(f"cross-protocol: {passed} of {len(cross)} pairs pass in {time.monotonic() - t0:.0f} s")
            for pair, cell in cross.items():
                if cell != "pass":
                    _progress(f"  {pair}: {cell}")
        broker = {"name": "rocketport", "version": _version(),
                  "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                  "duration_s": round(time.monotonic() - started),
                  "broker_restarts": self.restarts}
        return Results(broker, rows, cross)


def _start_acl_broker(broker: Broker) -> None:
    """The ACL broker, its topics made first with ACL off (clients such as ali-ons need a
    topic's route before they send, and the runner's own client does not sign requests)."""
    broker.acl = False
    ep = broker.start()
    probe = Probe(ep.namesrv)
    try:
        for topic in (ACL_TOPIC, ACL_DENIED_TOPIC, ACL_GROUP):
            probe.create_topic(topic)
    finally:
        probe.close()
        broker.stop()
    broker.acl = True
    broker.start()


def _version() -> str:
    from rocketport import __version__
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except OSError:
        commit = ""
    return f"{__version__}+g{commit}" if commit else __version__


def plan(full: bool, clients: list[str] | None = None,
         scenarios: list[str] | None = None) -> tuple[list[str], list[str], list[tuple[str, ...]]]:
    """Clients, scenarios and cross-protocol pairs of a run: the fast subset is one client per
    protocol (`clients.FAST`) and the fast scenarios; the pairs are always every protocol's
    fast client to every other's, field by field, and with --full also a group shared by two
    protocols (`scenarios.SHARED_GROUPS`)."""
    chosen = clients or (list(CLIENTS) if full else list(FAST.values()))
    steps = scenarios or [s.name for s in SCENARIOS if full or s.fast]
    pairs: list[tuple[str, ...]] = [(FAST[a], FAST[b]) for a in FAST for b in FAST if a != b]
    if full:
        pairs += [(FAST[a], FAST[b], "group") for a in SHARED_GROUPS for b in SHARED_GROUPS if a != b]
    return chosen, steps, pairs


def run(full: bool, *, clients: list[str] | None = None, scenarios: list[str] | None = None,
        workdir: Path | None = None, pairs: bool = True) -> Results:
    chosen, steps, pair_list = plan(full, clients, scenarios)
    work = workdir or Path(tempfile.mkdtemp(prefix="interop-"))
    _progress(f"{len(chosen)} clients x {len(steps)} scenarios, {len(pair_list) if pairs else 0} "
              f"cross-protocol pairs; logs in {work}")
    return Runner(clients=chosen, scenarios=steps, pairs=pair_list if pairs else [], workdir=work).run()
