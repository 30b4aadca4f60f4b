"""Kafka's ACL admin APIs (CreateAcls, DescribeAcls, DeleteAcls) on the plain ACL file.

kafka-acls and the admin clients manage the same accounts and permissions every protocol
checks (plainAclFile), as Kafka bindings: principal ``User:<accessKey>``, host ``*``, a
LITERAL resource (topicPerms, groupPerms) or a PREFIXED one (topicPrefixPerms,
groupPrefixPerms). A topic's PUB is WRITE, its SUB READ, DENY any operation denied; a group's
SUB is READ; a LITERAL ``*`` is the account's default permission; admin is ALL on the cluster.
DESCRIBE needs no binding (PUB or SUB allow it), so creating one changes nothing. What the
file cannot say is refused with INVALID_REQUEST: a host other than ``*``, other operations,
a principal with no account in the file, a PREFIXED cluster or ``*``. The file holds one
permission per resource and pattern, so a DENY replaces the allowances (as deny would win in
Kafka anyway).
Every call needs an authenticated admin account (SASL or a client certificate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rocketport.core.auth.plain_acl import (ADMIN, ALL_NAMES, DENY, GROUP, PUB, SUB, TOPIC, AclError,
                                            Grant, PlainAcl)
from rocketport.core.errors import ConfigError

from .errors import ErrorCode
from .requests import Handler, RequestContext
from .schema import ApiKey

# Kafka's enums (org.apache.kafka.common.resource / acl)
ANY: Final = 1
RES_TOPIC, RES_GROUP, RES_CLUSTER = 2, 3, 4
MATCH, LITERAL, PREFIXED = 2, 3, 4
OP_ALL, OP_READ, OP_WRITE, OP_DESCRIBE = 2, 3, 4, 8
PERM_DENY, PERM_ALLOW = 2, 3
CLUSTER_NAME: Final = "kafka-cluster"
PRINCIPAL_PREFIX: Final = "User:"
_KIND_OF = {RES_TOPIC: TOPIC, RES_GROUP: GROUP, RES_CLUSTER: ADMIN}
_TYPE_OF = {kind: code for code, kind in _KIND_OF.items()}


class BindingRefused(Exception):
    """A binding the plain ACL file cannot hold; the message says why."""


@dataclass(frozen=True, slots=True)
class Binding:
    resource_type: int
    resource_name: str
    principal: str
    operation: int
    permission_type: int
    host: str = "*"
    pattern_type: int = LITERAL

    def as_acl(self) -> dict[str, Any]:
        return {"principal": self.principal, "host": self.host, "operation": self.operation,
                "permission_type": self.permission_type}


def bindings_of(grant: Grant) -> list[Binding]:
    """A file grant as Kafka bindings (one per operation, so each can be deleted alone)."""
    principal = PRINCIPAL_PREFIX + grant.access_key
    if grant.kind == ADMIN:
        return [Binding(RES_CLUSTER, CLUSTER_NAME, principal, OP_ALL, PERM_ALLOW)]
    code, pattern = _TYPE_OF[grant.kind], PREFIXED if grant.prefixed else LITERAL
    if grant.perm & DENY:
        return [Binding(code, grant.name, principal, OP_ALL, PERM_DENY, pattern_type=pattern)]
    ops = [OP_READ] if grant.kind == GROUP else \
        [op for op, bit in ((OP_WRITE, PUB), (OP_READ, SUB)) if grant.perm & bit]
    return [Binding(code, grant.name, principal, op, PERM_ALLOW, pattern_type=pattern) for op in ops]


def _bits(kind: str, operation: int) -> int:
    if kind == GROUP:
        if operation in (OP_READ, OP_ALL):
            return SUB
    elif operation in (OP_READ, OP_WRITE, OP_ALL):
        return {OP_READ: SUB, OP_WRITE: PUB, OP_ALL: PUB | SUB}[operation]
    raise BindingRefused(f"operation {operation} on a {kind} has no plain ACL permission "
                         "(READ, WRITE or ALL on topics, READ or ALL on groups)")


Target = tuple[str, str, str, bool]  # accessKey, kind, name ("" for ADMIN), prefixed


def _target(creation: dict[str, Any], accounts: set[str]) -> Target:
    """What a creation is about; BindingRefused when the file cannot hold it."""
    kind = _KIND_OF.get(creation["resource_type"])
    if kind is None:
        raise BindingRefused(f"resource type {creation['resource_type']}: only topics, groups and the cluster")
    pattern, name = creation["resource_pattern_type"], creation["resource_name"]
    if pattern not in (LITERAL, PREFIXED):
        raise BindingRefused("only LITERAL and PREFIXED resource patterns")
    if pattern == PREFIXED and (kind == ADMIN or name in ("", ALL_NAMES)):
        raise BindingRefused("a PREFIXED pattern needs a topic or group name prefix (not '*')")
    if creation["host"] != "*":
        raise BindingRefused("host must be '*' (plain ACL keeps addresses in whiteRemoteAddress)")
    principal = creation["principal"]
    if not principal.startswith(PRINCIPAL_PREFIX):
        raise BindingRefused(f"principal {principal!r}: expected User:<accessKey>")
    key = principal[len(PRINCIPAL_PREFIX):]
    if key not in accounts:
        raise BindingRefused(f"no account {key!r} in the ACL file: add it there (accessKey, secretKey) first")
    if kind == ADMIN and name != CLUSTER_NAME:
        raise BindingRefused(f"the cluster resource is named {CLUSTER_NAME}")
    return key, kind, "" if kind == ADMIN else name, pattern == PREFIXED


def _name_matches(pattern: int, name: str | None, b: Binding) -> bool:
    """Kafka's pattern filter: ANY, LITERAL and PREFIXED match bindings of that pattern (ANY:
    every one) with that name; MATCH every binding that applies to the name: the name
    itself, the LITERAL ``*`` and each PREFIXED binding the name starts with."""
    if pattern == MATCH:
        return name is None or (b.resource_name in (name, ALL_NAMES) if b.pattern_type == LITERAL
                                else name.startswith(b.resource_name))
    if pattern not in (ANY, b.pattern_type):
        return False
    return name is None or b.resource_name == name


def _matches(flt: dict[str, Any]) -> Callable[[Binding], bool]:
    """A Kafka AclBindingFilter as a predicate (ANY and null match anything)."""
    def test(b: Binding) -> bool:
        if not _name_matches(flt["pattern_type_filter"], flt["resource_name_filter"], b):
            return False
        return (flt["resource_type_filter"] in (ANY, b.resource_type)
                and flt["principal_filter"] in (None, b.principal) and flt["host_filter"] in (None, b.host)
                and flt["operation"] in (ANY, b.operation) and flt["permission_type"] in (ANY, b.permission_type))
    return test


def _held(acl: PlainAcl) -> dict[Target, int]:
    """The file's permissions by target."""
    return {(g.access_key, g.kind, g.name, g.prefixed): g.perm for g in acl.grants()}


def _target_of(b: Binding) -> Target:
    kind = _KIND_OF[b.resource_type]
    return (b.principal[len(PRINCIPAL_PREFIX):], kind, "" if kind == ADMIN else b.resource_name,
            b.pattern_type == PREFIXED)


class AclAdminHandlers:
    def __init__(self, acl: Callable[[], PlainAcl], enabled: bool) -> None:
        self._acl = acl  # loaded on first use: a broker without ACL never reads the file
        self.enabled = enabled
        self.table: dict[int, Handler] = {ApiKey.DESCRIBE_ACLS: self._describe, ApiKey.CREATE_ACLS: self._create,
                                          ApiKey.DELETE_ACLS: self._delete}

    def _refusal(self, ctx: RequestContext) -> tuple[int, str] | None:
        if not self.enabled:
            return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured (aclEnable or kafkaSaslMechanisms)"
        if ctx.principal is None or not ctx.principal.admin:  # unauthenticated (aclEnable without SASL): no writer
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "the ACL admin APIs need an admin account"
        return None

    def _bindings(self) -> list[Binding]:
        return [b for grant in self._acl().grants() for b in bindings_of(grant)]

    async def _describe(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        refused = self._refusal(ctx)
        if refused:
            return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1], "resources": []}
        try:
            found = list(filter(_matches(body), self._bindings()))
        except ConfigError as exc:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
                    "error_message": str(exc), "resources": []}
        resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for b in found:
            resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b.as_acl())
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "resources": [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                              for (t, n, p), acls in resources.items()]}

    async def _create(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        creations = body["creations"]
        refused = self._refusal(ctx)
        if refused:
            return {"throttle_time_ms": 0, "results": [
                {"error_code": refused[0], "error_message": refused[1]} for _ in creations]}
        try:
            acl = self._acl()
            current = _held(acl)
            accounts = set(acl.table.accounts)
        except ConfigError as exc:
            return {"throttle_time_ms": 0, "results": [
                {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc)} for _ in creations]}
        results, changed = [], {}
        for creation in creations:
            try:
                target = _target(creation, accounts)
                kind = target[1]
                if creation["permission_type"] not in (PERM_DENY, PERM_ALLOW):
                    raise BindingRefused("permission type must be ALLOW or DENY")
                deny = creation["permission_type"] == PERM_DENY
                if kind == ADMIN:
                    if creation["operation"] != OP_ALL:
                        raise BindingRefused("on the cluster: ALL (admin) only")
                    changed[target] = 0 if deny else PUB | SUB
                elif creation["operation"] == OP_DESCRIBE and not deny:
                    pass  # implied by PUB or SUB
                else:
                    bits = DENY if deny else _bits(kind, creation["operation"])
                    held = changed.get(target, current.get(target, 0))
                    changed[target] = DENY if (deny or held & DENY) else held | bits
                results.append({"error_code": ErrorCode.NONE, "error_message": None})
            except BindingRefused as exc:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(exc)})
        if changed:
            error = self._write(acl, changed)
            if error is not None:
                results = [r if r["error_code"] else {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
                                                      "error_message": error} for r in results]
        return {"throttle_time_ms": 0, "results": results}

    async def _delete(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        filters = body["filters"]
        refused = self._refusal(ctx)
        if refused:
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": refused[0], "error_message": refused[1], "matching_acls": []} for _ in filters]}
        try:
            acl = self._acl()
            current = _held(acl)
            bindings = self._bindings()
        except ConfigError as exc:
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": str(exc), "matching_acls": []}
                for _ in filters]}
        changed: dict[Target, int] = {}
        out = []
        for flt in filters:
            matching = list(filter(_matches(flt), bindings))
            for b in matching:
                target = _target_of(b)
                kind = target[1]
                held = changed.get(target, current.get(target, 0))
                gone = PUB | SUB | DENY if (b.permission_type == PERM_DENY or b.operation == OP_ALL or kind == GROUP) \
                    else _bits(kind, b.operation)
                changed[target] = held & ~gone
            out.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": [
                {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": b.resource_type,
                 "resource_name": b.resource_name, "pattern_type": b.pattern_type, **b.as_acl()} for b in matching]})
        if changed:
            error = self._write(acl, changed)
            if error is not None:
                out = [{"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "error_message": error, "matching_acls": []}
                       for _ in filters]
        return {"throttle_time_ms": 0, "filter_results": out}

    @staticmethod
    def _write(acl: PlainAcl, changed: dict[Target, int]) -> str | None:
        """Write the changed grants; the reason when the file could not be written."""
        try:
            acl.write_grants([Grant(key, kind, name, perm, prefixed)
                              for (key, kind, name, prefixed), perm in changed.items()])
        except (AclError, ConfigError, OSError) as exc:
            return str(exc)
        return None
