"""One client's scenarios (or cross-protocol pairs) in a process of its own.

    python -m interop.worker client NAME SCENARIO... --ep JSON [--acl-ep JSON] --run ID
    python -m interop.worker pairs PRODUCER:CONSUMER[:group]... --ep JSON --run ID

Prints one JSON line per result: first {"version": ...} (or {"missing": reason}, then
nothing), then {"cell": name, "result": "pass" | "fail: ..." | "n/a"} in the order asked.
The parent enforces each cell's timeout by killing this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from .base import Endpoints, Failed, Missing, NotApplicable
from .clients import load
from .probe import Probe
from .scenarios import BY_NAME, Ctx, cross, shared_group


_results = sys.stdout


def _emit(obj: dict) -> None:
    _results.write(json.dumps(obj) + "\n")
    _results.flush()


def reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, Failed):
        text = f"{type(exc).__name__}: {text}"
    return text[:300]


def _cell(name: str, fn) -> None:
    try:
        fn()
    except NotApplicable:
        _emit({"cell": name, "result": "n/a"})
    except Exception as exc:  # every failure is a cell, never the end of the run
        traceback.print_exc(file=sys.stderr)
        _emit({"cell": name, "result": f"fail: {reason(exc)}"})
    else:
        _emit({"cell": name, "result": "pass"})


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m interop.worker")
    parser.add_argument("mode", choices=("client", "pairs"))
    parser.add_argument("names", nargs="+")
    parser.add_argument("--ep", required=True)
    parser.add_argument("--acl-ep")
    parser.add_argument("--run", required=True)
    args = parser.parse_args()
    global _results
    # results go to the original stdout; whatever a client library prints goes to stderr
    _results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    ep = Endpoints(**json.loads(args.ep))
    acl_ep = Endpoints(**json.loads(args.acl_ep)) if args.acl_ep else None
    probe = Probe(ep.namesrv)
    if args.mode == "client":
        cls = load(args.names[0])
        try:
            cls(ep).check()
            _emit({"version": cls(ep).version()})
        except Exception as exc:
            _emit({"missing": reason(exc) if not isinstance(exc, Missing) else str(exc)})
            return 0
        for name in args.names[1:]:
            ctx = Ctx(cls, ep, acl_ep, args.run, name, probe)
            _cell(name, lambda: BY_NAME[name].fn(ctx))
    else:
        for pair in args.names:  # PRODUCER:CONSUMER, or FIRST:SECOND:group
            first, second, *kind = pair.split(":")

            def run_pair() -> None:
                p, c = load(first), load(second)
                p(ep).check()
                c(ep).check()
                (shared_group if kind else cross)(p, c, ep, probe, args.run)
            _cell(pair, run_pair)
    probe.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
