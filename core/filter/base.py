"""The contract every subscription filter meets, and the error a bad filter raises.

Front-ends and the store only ever talk to `MessageFilter`; which grammar produced it is
the compiler's business. This module must never import a protocol or do I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar
from collections.abc import Callable, Mapping


class FilterError(ValueError):
    """An expression or expression type that cannot be compiled.

    `position` is the 0-based character index in the expression where the problem was
    found (0 for an unknown expression type), so a front-end can point at it.
    """

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(f"{reason} at position {position}")
        self.reason = reason
        self.position = position


class MessageFilter(ABC):
    """A compiled subscription: a cheap tagsCode prefilter plus the exact check."""

    __slots__ = ()

    expression_type: ClassVar[str]  # "TAG" or "SQL92", set by each kind
    expression: str

    @abstractmethod
    def match_tags_code(self, tags_code: int) -> bool:
        """Whether a ConsumeQueue entry with this tagsCode may match (no false negatives)."""

    @abstractmethod
    def match(self, tags: str | None, properties: Mapping[str, str]) -> bool:
        """Whether the message with these tags and properties matches exactly."""

    @property
    @abstractmethod
    def raw_matcher(self) -> Callable[[bytes], bool]:
        """`match` as a function of a record's encoded properties (name \\x01 value \\x02
        pairs; the tags are the TAGS property). The store's scan calls it for every
        candidate, so it finds only the properties it needs instead of decoding them all."""

    @property
    def prefilter_codes(self) -> frozenset[int] | None:
        """Hint for the store's scan loop: the exact set of (Java int) tagsCodes for which
        `match_tags_code` is True, or None when it is True for every code. Lets the store
        test a whole ConsumeQueue chunk with set look-ups instead of a call per entry."""
        return None

    @property
    def needs_exact_check(self) -> bool:
        """False when `match` is True for every message that passed the prefilter, so the
        store need not read the CommitLog to decide."""
        return True
