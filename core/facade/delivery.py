"""Delivery: the calls of front-ends whose broker pushes messages to subscribers.

`delivery_group` gives the one `core.delivery.DeliveryGroup` of a group name (made on first
use, shared by every connection and protocol), `drop_delivery_group` ends one. The groups'
offsets are ordinary consumer offsets, so `rocketport admin` and Kafka's OffsetFetch show
them. These calls never read the store themselves: the groups read through the consume role.
"""

from __future__ import annotations

from ..delivery import DeliveryGroup, Source
from ..delivery.group import Start
from ..errors import GroupNotFound


class DeliveryRole:
    """The delivery calls of `core.broker.Broker`; state set up in its constructor."""

    _delivery_groups: dict[str, DeliveryGroup]

    def delivery_group(self, name: str, sources: list[Source], *,
                       start: Start = "first") -> DeliveryGroup:
        """The group ``name``, made with ``sources`` if it is not open yet (an open one
        keeps its sources: change them with `DeliveryGroup.set_sources`). ``start`` is
        where it begins on queues it has no offset for. GroupNotFound when the group does
        not exist and autoCreateSubscriptionGroup is off."""
        group = self._delivery_groups.get(name)
        if group is None:
            if self.get_group(name) is None:  # type: ignore[attr-defined]
                raise GroupNotFound(name)
            group = self._delivery_groups[name] = DeliveryGroup(self, name, sources, start=start)  # type: ignore[arg-type]
        return group

    def open_delivery_group(self, name: str) -> DeliveryGroup | None:
        """The group ``name`` if it is open (has been used since the broker started)."""
        return self._delivery_groups.get(name)

    def open_delivery_groups(self) -> list[DeliveryGroup]:
        """Every open group (for /metrics: their ready and unacknowledged counts)."""
        return list(self._delivery_groups.values())

    async def drop_delivery_group(self, name: str, *, forget_offsets: bool = True) -> None:
        """Close the group; with ``forget_offsets`` its offsets and subscription group go
        too (an auto-delete queue, a non-durable subscription)."""
        group = self._delivery_groups.pop(name, None)
        if group is not None:
            await group.close()
        if forget_offsets:
            self.delete_group(name)  # type: ignore[attr-defined]

    async def _close_delivery_groups(self) -> None:
        groups, self._delivery_groups = list(self._delivery_groups.values()), {}
        for group in groups:
            await group.close()
