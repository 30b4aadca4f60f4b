"""Exchange types as routing rules: a binding becomes a predicate, a queue's bindings its
delivery group's Sources.

A publish stores one message in its exchange's topic with the routing key as TAGS; a
queue is a delivery group reading every topic it is bound to, each through one Source
whose filter is the union of the queue's bindings to that exchange: direct = tag equality
(the tag expression lets the ConsumeQueue's tags codes skip other keys before any message
is read), fanout = everything, topic = the ``*``/``#`` pattern over the routing key's
words, headers = ``x-match`` all/any over the message's properties. The same predicates
answer "does any queue get this publish" for mandatory publishes. No I/O, no state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from urllib.parse import unquote

from rocketport.common.field_table import with_header_texts
from rocketport.common.message import PROPERTY_TAGS, MessageExt
from rocketport.core.facade.types import AmqpBinding, AmqpExchange, AmqpExchangeBinding, Source

from .properties import DEFAULT_EXCHANGE_MARK as _MARK
from .properties import _text

Predicate = Callable[[str, Mapping[str, str]], bool]  # (routing key, properties) -> routed
_PLAIN = re.compile(r"[|a-zA-Z0-9_.-]+")
_PLAIN_CHAR = re.compile(r"[|a-zA-Z0-9_.-]")
_MAX_HOPS = 8  # exchange-to-exchange bindings followed from a queue


@lru_cache(maxsize=4096)
def topic_of(name: str) -> str:
    """The topic (and group) of an exchange or queue name: itself when it is a valid topic
    name, else with every other character percent-encoded (Celery's
    ``celery@host.celery.pidbox``: ``celery%40host.celery.pidbox``), '%' included, so the
    mapping is one to one. Every publish asks: names are remembered."""
    if _PLAIN.fullmatch(name):
        return name
    return "".join(c if _PLAIN_CHAR.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape"))
                   for c in name)


def name_of(topic: str) -> str:
    """The exchange or queue name of a topic (`topic_of` reversed)."""
    return unquote(topic, errors="surrogateescape") if "%" in topic else topic


@lru_cache(maxsize=65536)
def topic_matches(pattern: str, key: str) -> bool:
    """AMQP topic matching: words split on '.', '*' one word, '#' zero or more words."""
    return _match(tuple(pattern.split(".")), tuple(key.split(".")))  # "" is one empty word, as in RabbitMQ


def _match(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    # positions reachable in ``words`` after each pattern word (a small NFA, no recursion)
    reachable = {0}
    for token in pattern:
        if token == "#":
            start = min(reachable) if reachable else None
            reachable = set(range(start, len(words) + 1)) if start is not None else set()
        else:
            reachable = {i + 1 for i in reachable if i < len(words) and (token == "*" or words[i] == token)}
        if not reachable:
            return False
    return len(words) in reachable


def headers_match(arguments: Mapping[str, object], properties: Mapping[str, str]) -> bool:
    """RabbitMQ's headers exchange: ``x-match`` all (default) or any over the binding's
    other non-``x-`` arguments; a void argument matches the header's presence. A kept
    typed table's headers compare as their texts."""
    properties = with_header_texts(properties)
    mode = _text(arguments.get("x-match", "all"))
    wanted = [(k, v) for k, v in arguments.items() if not k.startswith("x-")]
    if mode == "any":
        return any(k in properties and (v is None or properties[k] == _text(v)) for k, v in wanted)
    return all(k in properties and (v is None or properties[k] == _text(v)) for k, v in wanted)


def binding_predicate(exchange_type: str, binding: AmqpBinding | AmqpExchangeBinding) -> Predicate:
    """A binding's test; a publish through the default exchange into a queue's topic that
    shares the exchange's name is never the exchange's (`DEFAULT_EXCHANGE_MARK`)."""
    key = binding.routing_key
    if exchange_type == "fanout":
        return lambda rk, props: _MARK not in props
    if exchange_type == "topic":
        return lambda rk, props: topic_matches(key, rk) and _MARK not in props
    if exchange_type == "headers":
        arguments = binding.argument_map
        return lambda rk, props: headers_match(arguments, props) and _MARK not in props
    return lambda rk, props: rk == key and _MARK not in props


def _tag_expression(exchange_type: str, bindings: list[AmqpBinding]) -> str:
    """The tag prefilter: the direct keys, when each is a plain tag; else all."""
    if exchange_type != "direct":
        return "*"
    keys = {b.routing_key for b in bindings}
    if any(not k or "||" in k or k != k.strip() or k == "*" for k in keys):
        return "*"
    return " || ".join(sorted(keys))


def queue_sources(queue: str, bindings: Iterable[AmqpBinding], exchanges: Mapping[str, AmqpExchange],
                  exchange_bindings: Iterable[AmqpExchangeBinding] = ()) -> list[Source]:
    """The Sources of ``queue``'s delivery group: its own topic (the default exchange) and
    one per exchange it is bound to, directly or through exchange-to-exchange bindings
    (a path's predicates all hold: the source's binding, then the next exchange's ...)."""
    by_exchange: dict[str, list[AmqpBinding]] = {}
    for binding in bindings:
        if binding.exchange in exchanges:
            by_exchange.setdefault(binding.exchange, []).append(binding)
    paths: dict[str, list[Predicate]] = {
        name: [binding_predicate(exchanges[name].type, b) for b in group] for name, group in by_exchange.items()}
    upstream: dict[str, list[AmqpExchangeBinding]] = {}
    for e2e in exchange_bindings:
        if e2e.source in exchanges and e2e.destination in exchanges:
            upstream.setdefault(e2e.destination, []).append(e2e)
    frontier = dict(paths)
    for _ in range(_MAX_HOPS):  # a cycle of exchange bindings ends here
        reached: dict[str, list[Predicate]] = {}
        for destination, preds in frontier.items():
            for e2e in upstream.get(destination, ()):
                first = binding_predicate(exchanges[e2e.source].type, e2e)
                reached.setdefault(e2e.source, []).extend(_both(first, p) for p in preds)
        if not reached:
            break
        for name, preds in reached.items():
            paths.setdefault(name, []).extend(preds)
        frontier = reached
    # the queue's own topic: everything, unless an exchange shares its name (then only what
    # the default exchange put there)
    own = topic_of(queue)
    sources = [Source(own, match=_marked) if queue in exchanges else Source(own)]
    for name, predicates in sorted(paths.items()):
        direct = by_exchange.get(name, [])
        expression = _tag_expression(exchanges[name].type, direct) if len(direct) == len(predicates) else "*"
        sources.append(Source(topic_of(name), expression, match=_message_match(predicates)))
    return sources


def _both(first: Predicate, then: Predicate) -> Predicate:
    return lambda rk, props: first(rk, props) and then(rk, props)


def _marked(message: MessageExt) -> bool:
    return _MARK in message.properties


def _message_match(predicates: list[Predicate]) -> Callable[[MessageExt], bool]:
    if len(predicates) == 1:
        only = predicates[0]

        def match_one(message: MessageExt) -> bool:
            props = message.properties
            return only(props.get(PROPERTY_TAGS, ""), props)
        return match_one

    def match_any(message: MessageExt) -> bool:
        props = message.properties
        rk = props.get(PROPERTY_TAGS, "")
        return any(p(rk, props) for p in predicates)
    return match_any


class Router:
    """Whether a publish to an exchange reaches any queue (mandatory and basic.return), and
    which (queues with limits)."""

    def __init__(self) -> None:
        # per exchange: (destination exchange, None) or (None, queue), and the binding's test
        self._routes: dict[str, list[tuple[str | None, str | None, Predicate]]] = {}

    def rebuild(self, exchanges: Mapping[str, AmqpExchange], bindings: Iterable[AmqpBinding],
                exchange_bindings: Iterable[AmqpExchangeBinding] = ()) -> None:
        routes: dict[str, list[tuple[str | None, str | None, Predicate]]] = {}
        for binding in bindings:
            exchange = exchanges.get(binding.exchange)
            if exchange is not None:
                routes.setdefault(exchange.name, []).append(
                    (None, binding.queue, binding_predicate(exchange.type, binding)))
        for e2e in exchange_bindings:
            source = exchanges.get(e2e.source)
            if source is not None and e2e.destination in exchanges:
                routes.setdefault(source.name, []).append(
                    (e2e.destination, None, binding_predicate(source.type, e2e)))
        self._routes = routes

    def routed(self, exchange: str, routing_key: str, properties: Mapping[str, str], hops: int = 0) -> bool:
        for destination, _, pred in self._routes.get(exchange, ()):
            if pred(routing_key, properties) and (
                    destination is None
                    or (hops < _MAX_HOPS and self.routed(destination, routing_key, properties, hops + 1))):
                return True
        return False

    def queues(self, exchange: str, routing_key: str, properties: Mapping[str, str],
               hops: int = 0, found: set[str] | None = None) -> set[str]:
        """The queues a publish to ``exchange`` reaches."""
        found = set() if found is None else found
        for destination, queue, pred in self._routes.get(exchange, ()):
            if pred(routing_key, properties):
                if queue is not None:
                    found.add(queue)
                elif destination is not None and hops < _MAX_HOPS:
                    self.queues(destination, routing_key, properties, hops + 1, found)
        return found
