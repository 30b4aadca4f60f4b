"""The interop matrix: off-the-shelf clients x scenarios x protocols against a fresh broker.

``python -m interop`` (fast subset) or ``python -m interop --full --json PATH``, from the
repository root. The runner (`runner.py`) starts brokers as subprocesses (`broker.py`), runs
each client's scenarios in a worker subprocess of its own (`worker.py`), so that a client
that crashes or hangs costs only its own cells, and writes docs/interop.md and the JSON
(`report.py`). A client is one adapter module in `clients/`; scenarios (`scenarios.py`) are
written once against the adapter interface (`base.py`).
"""
