"""Proof that a master's process is gone, for an election before its lease runs out
(etcdElectOnMasterDeath; docs/operations.md has the safety argument).

A TCP connect to a port no socket listens on is refused by that host's kernel at once
(ECONNREFUSED). A process that lives keeps its listening sockets, even while it is frozen
(SIGSTOP, a VM pause: the kernel still completes the handshake into the accept queue),
and a host that is down or cut off does not answer at all (a timeout). So only "every
port the master listened on is refused" counts as proof; any connect that succeeds,
times out or fails otherwise is no proof, and the caller waits for the lease as before.
This module only probes: the election decides what to do with the answer.
"""

from __future__ import annotations

import asyncio
import errno
from enum import Enum

PROBE_TIMEOUT_S = 1.0


class Probe(Enum):
    REFUSED = "refused"  # nothing listens there
    OPEN = "open"  # something listens (maybe frozen)
    UNKNOWN = "unknown"  # timed out or failed otherwise: no proof either way


async def probe(address: str, timeout: float = PROBE_TIMEOUT_S) -> Probe:
    """Connect to ``address`` ("host:port") and close at once; what that says."""
    host, _, port = address.rpartition(":")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)), timeout)
    except ConnectionRefusedError:
        return Probe.REFUSED
    except OSError as exc:  # several addresses for one name raise a plain OSError
        return Probe.REFUSED if exc.errno == errno.ECONNREFUSED else Probe.UNKNOWN
    except (asyncio.TimeoutError, ValueError):
        return Probe.UNKNOWN
    writer.close()
    return Probe.OPEN


async def all_refused(addresses: list[str], timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True only when every one of ``addresses`` (at least one) was refused."""
    if not addresses:
        return False
    answers = await asyncio.gather(*(probe(a, timeout) for a in addresses))
    return all(a is Probe.REFUSED for a in answers)
