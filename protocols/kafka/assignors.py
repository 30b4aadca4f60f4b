"""KIP-848's server-side assignors: who in a consumer group reads which partition.

Kafka's ``group.consumer.assignors`` names them; this broker offers the same two:

- ``uniform`` (Kafka's default): every partition of the subscribed topics to one member,
  counts as even as the subscriptions allow, and sticky: a partition stays with its
  current owner unless balance needs it elsewhere, so a join or leave moves as few
  partitions as it can.
- ``range``: per topic, the partitions in contiguous ranges over the members subscribed to
  it in member order (by instance id, else member id), so the same partition numbers of
  equally partitioned topics go to the same member (co-partitioning, what joins need).
  It is not sticky, as Kafka's classic range assignor is not.

Pure functions over plain data, no I/O and no group state: the coordinator
(``consumer_groups.py``) calls them when the group epoch moves.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

Assignment = dict[str, set[int]]  # topic name -> partitions


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of one member."""

    member_id: str
    instance_id: str | None
    topics: frozenset[str]  # subscribed topics that exist
    current: Mapping[str, frozenset[int]]  # its previous target assignment


class Assignor(Protocol):
    name: str

    def assign(self, members: list[MemberSpec], partitions: Mapping[str, int]) -> dict[str, Assignment]:
        """member id -> assignment, for every member (empty when it gets nothing)."""
        ...


def _order_key(m: MemberSpec) -> tuple[str, str]:
    return (m.instance_id or m.member_id, m.member_id)


class UniformAssignor:
    name = "uniform"

    def assign(self, members: list[MemberSpec], partitions: Mapping[str, int]) -> dict[str, Assignment]:
        members = sorted(members, key=_order_key)
        eligible: dict[str, list[str]] = {t: [m.member_id for m in members if t in m.topics] for t in partitions}
        owned: dict[str, list[tuple[str, int]]] = {m.member_id: [] for m in members}
        owner: dict[tuple[str, int], str] = {}
        # 1. keep what each member had, where it still subscribes and the partition still exists
        for m in members:
            for topic, parts in sorted(m.current.items()):
                n = partitions.get(topic)
                if n is None or topic not in m.topics:
                    continue
                for p in sorted(parts):
                    if p < n and (topic, p) not in owner:
                        owner[topic, p] = m.member_id
                        owned[m.member_id].append((topic, p))
        total = sum(n for t, n in partitions.items() if eligible[t])
        if members and len({m.topics for m in members}) == 1:
            # every member reads the same topics (the usual group): each gets floor or ceil of
            # the share, the members already holding most keeping the ceil ones
            floor, extra = divmod(total, len(members))
            for m in sorted(members, key=lambda m: -len(owned[m.member_id])):
                mine = owned[m.member_id]
                allowed = floor + 1 if extra and len(mine) > floor else floor
                extra -= allowed - floor
                while len(mine) > allowed:
                    del owner[mine.pop()]
            loads = [(len(owned[m.member_id]), i, m.member_id) for i, m in enumerate(members)]
            heapq.heapify(loads)
            for topic in sorted(partitions):
                for p in range(partitions[topic] if eligible[topic] else 0):
                    if (topic, p) not in owner:
                        count, i, chosen = heapq.heappop(loads)
                        owner[topic, p] = chosen
                        owned[chosen].append((topic, p))
                        heapq.heappush(loads, (count + 1, i, chosen))
            return {mid: _as_assignment(tps) for mid, tps in owned.items()}
        # 2. cap members above their fair share: the total partitions they can read, shared out
        quota = -(-total // len(members)) if members else 0  # ceil
        for m in members:
            mine = owned[m.member_id]
            while len(mine) > quota:
                tp = mine.pop()
                del owner[tp]
        # 3. each unowned partition to the least loaded member that subscribes to its topic
        for topic in sorted(partitions):
            candidates = eligible[topic]
            if not candidates:
                continue
            for p in range(partitions[topic]):
                if (topic, p) in owner:
                    continue
                chosen = min(candidates, key=lambda mid: len(owned[mid]))
                owner[topic, p] = chosen
                owned[chosen].append((topic, p))
        # 4. heterogeneous subscriptions: move partitions from the most to the least loaded
        # eligible member while that evens things (O(partitions x members) a pass)
        moved = True
        while moved:
            moved = False
            for m in sorted(members, key=lambda m: -len(owned[m.member_id])):
                mine = owned[m.member_id]
                for tp in list(mine):
                    target = min(eligible[tp[0]], key=lambda mid: len(owned[mid]))
                    if len(owned[target]) + 1 < len(mine):
                        mine.remove(tp)
                        owned[target].append(tp)
                        owner[tp] = target
                        moved = True
        return {mid: _as_assignment(tps) for mid, tps in owned.items()}


class RangeAssignor:
    name = "range"

    def assign(self, members: list[MemberSpec], partitions: Mapping[str, int]) -> dict[str, Assignment]:
        members = sorted(members, key=_order_key)
        out: dict[str, Assignment] = {m.member_id: {} for m in members}
        for topic, n in sorted(partitions.items()):
            subscribers = [m.member_id for m in members if topic in m.topics]
            if not subscribers:
                continue
            per, extra = divmod(n, len(subscribers))
            start = 0
            for i, mid in enumerate(subscribers):
                count = per + (1 if i < extra else 0)
                if count:
                    out[mid][topic] = set(range(start, start + count))
                start += count
        return out


def _as_assignment(tps: list[tuple[str, int]]) -> Assignment:
    out: Assignment = {}
    for topic, p in tps:
        out.setdefault(topic, set()).add(p)
    return out


ASSIGNORS: Final[dict[str, Assignor]] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
