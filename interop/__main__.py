"""python -m interop [--full] [--json PATH] [--md PATH] [--clients A,B] [--scenarios X,Y]"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from . import report, runner
from .broker import REPO
from .clients import CLIENTS
from .scenarios import BY_NAME


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m interop", description=__doc__)
    parser.add_argument("--full", action="store_true", help="every client and scenario")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument("--md", type=Path, default=REPO / "docs" / "interop.md",
                        help="the Markdown table to rewrite (default docs/interop.md)")
    parser.add_argument("--clients", help=f"comma-separated subset of: {', '.join(CLIENTS)}")
    parser.add_argument("--scenarios", help=f"comma-separated subset of: {', '.join(BY_NAME)}")
    parser.add_argument("--no-pairs", action="store_true", help="skip the cross-protocol pairs")
    parser.add_argument("--workdir", type=Path, help="stores and logs (default: a new temp dir)")
    args = parser.parse_args()
    clients = args.clients.split(",") if args.clients else None
    scenarios = args.scenarios.split(",") if args.scenarios else None
    for name in clients or []:
        if name not in CLIENTS:
            parser.error(f"unknown client {name!r}")
    for name in scenarios or []:
        if name not in BY_NAME:
            parser.error(f"unknown scenario {name!r}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop cleanly, as on Ctrl-C
    results = runner.run(args.full, clients=clients, scenarios=scenarios, workdir=args.workdir,
                         pairs=not args.no_pairs)
    if args.json:
        args.json.write_text(json.dumps(results.to_json(), indent=2) + "\n")
    report.write(results, args.md)
    print(f"[interop] wrote {args.md}" + (f" and {args.json}" if args.json else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
