"""Plain ACL: accounts with secret keys and per-topic / per-group permissions.

RocketMQ 4.x's model and file format (``plain_acl.yml``), so an existing file works as it
is: ``globalWhiteRemoteAddresses`` (clients from these addresses skip every check),
``accounts`` of accessKey, secretKey, whiteRemoteAddress (skips the signature and the
permission checks), admin, defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms
(``name=PUB|SUB``), and Rocketport's extension topicPrefixPerms and groupPrefixPerms
(``prefix=PERM``, what Kafka's PREFIXED bindings say; see `Account.permits`). Requests are signed with HMAC-SHA1 over content the protocol defines;
this module checks a signature, a login and the permissions a request needs, and never
sees a protocol. One instance per broker serves every protocol; the file is re-read when it
changes (checked at most once a second) and written, as permission rows (`Grant`), only by
`write_grants` (Kafka's ACL admin APIs).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import yaml

from rocketport.common.signature import sign

from ..errors import BrokerError, ConfigError

log = logging.getLogger(__name__)

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3
_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}
_PERM_NAMES = {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB", DENY: "DENY"}
TOPIC, GROUP, ADMIN = "topic", "group", "admin"  # what a Grant is about
ALL_NAMES = "*"  # a Grant on the account's default (defaultTopicPerm, defaultGroupPerm)
RETRY_PREFIX = "%RETRY%"
RELOAD_CHECK_S = 1.0
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


class AclError(BrokerError):
    """A request the ACL refuses; the message says why (never the secret)."""


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)



def group_resource(group: str) -> str:
    """Groups are checked under their retry topic's name, as in RocketMQ."""
    return group if group.startswith(RETRY_PREFIX) else RETRY_PREFIX + group


# -- remote address patterns ----------------------------------------------------------------
def address_matcher(pattern: str | None) -> Callable[[str], bool]:
    """RocketMQ's whiteRemoteAddress forms: blank (nothing), ``*`` (anything), one address,
    ``a,b,c``, ``192.168.1.{1,2,3}``, and ``*`` or ``1-200`` ranges per IPv4 part."""
    pattern = (pattern or "").strip()
    if not pattern:
        return lambda ip: False
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda ip: True
    if pattern.endswith("}"):
        head, _, choices = pattern.rpartition("{")
        options = {head + c.strip() for c in choices[:-1].split(",")}
        for option in options:
            _check_address(option, pattern)
        return options.__contains__
    if "," in pattern:
        options = {p.strip() for p in pattern.split(",")}
        for option in options:
            _check_address(option, pattern)
        return options.__contains__
    parts = pattern.split(".")
    if ("*" in pattern or "-" in pattern) and len(parts) == 4:
        ranges = [_part_range(p, pattern) for p in parts]

        def in_ranges(ip: str) -> bool:
            octets = ip.split(".")
            if len(octets) != 4 or not all(o.isdigit() for o in octets):
                return False
            return all(lo <= int(o) <= hi for o, (lo, hi) in zip(octets, ranges))
        return in_ranges
    _check_address(pattern, pattern)
    return lambda ip: ip == pattern


def _check_address(address: str, pattern: str) -> None:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise ConfigError(f"ACL: bad remote address pattern {pattern!r}") from None


def _part_range(part: str, pattern: str) -> tuple[int, int]:
    if part == "*":
        return 0, 255
    lo, sep, hi = part.partition("-")
    if lo.isdigit() and (not sep or hi.isdigit()):
        low, high = int(lo), int(hi) if sep else int(lo)
        if 0 <= low <= high <= 255:
            return low, high
    raise ConfigError(f"ACL: bad remote address pattern {pattern!r}")


# -- the file -------------------------------------------------------------------------------
@dataclass(slots=True)
class Account:
    access_key: str
    secret_key: str
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    perms: dict[str, int] = field(default_factory=dict)  # topics, and groups as %RETRY%name
    white_address: Callable[[str], bool] = lambda ip: False
    prefix_perms: dict[str, int] = field(default_factory=dict)  # topic prefixes, %RETRY%group prefixes

    def permits(self, resource: str, needed: int) -> bool:
        """Whether this account may use a topic (or ``%RETRY%group``) as ``needed`` says.

        A DENY on the name or on any matching prefix refuses (Kafka: a matching DENY binding
        wins over every ALLOW); otherwise the most specific entry decides: the exact name,
        else the longest matching prefix, else the default (RocketMQ: a named resource
        replaces the default, it does not add to it)."""
        if self.admin and not self.perms and not self.prefix_perms:
            return True  # RocketMQ: an admin with no resource list may do anything
        owned = self.perms.get(resource)
        if self.prefix_perms:
            is_group, longest, best = resource.startswith(RETRY_PREFIX), -1, DENY
            for prefix, perm in self.prefix_perms.items():
                if resource.startswith(prefix) and prefix.startswith(RETRY_PREFIX) == is_group:
                    if perm & DENY:
                        return False
                    if len(prefix) > longest:
                        longest, best = len(prefix), perm
            if owned is None and longest >= 0:
                owned = best
        if owned is None:
            owned = self.default_group_perm if resource.startswith(RETRY_PREFIX) else self.default_topic_perm
        return check_permission(needed, owned)


@dataclass(slots=True)
class AclTable:
    accounts: dict[str, Account]
    global_white: list[Callable[[str], bool]]


def _perm(value: Any, where: str) -> int:
    text = str(value).strip() if value is not None else ""
    if text not in _PERMS:
        raise ConfigError(f"ACL: {where}: expected PUB, SUB, PUB|SUB or DENY, got {value!r}")
    return _PERMS[text]


def _resource_perms(items: Any, where: str, as_group: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or []:
        name, sep, perm = str(item).partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"ACL: {where}: expected 'name=PERM', got {item!r}")
        name = name.strip()
        out[group_resource(name) if as_group else name] = _perm(perm, f"{where} {name}")
    return out


def parse_acl(data: Any, source: str) -> AclTable:
    """An AclTable from a loaded plain_acl.yml; every problem raises ConfigError."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"ACL: {source}: expected a mapping")
    accounts: dict[str, Account] = {}
    for i, raw in enumerate(data.get("accounts") or []):
        where = f"{source}: accounts[{i}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"ACL: {where}: expected a mapping")
        ak, sk = raw.get("accessKey"), raw.get("secretKey")
        if not ak or sk is None or len(str(sk)) < 6:
            raise ConfigError(f"ACL: {where}: accessKey and a secretKey of 6+ characters are required")
        ak = str(ak)
        if ak in accounts:
            raise ConfigError(f"ACL: {where}: accessKey {ak!r} appears twice")
        admin = raw.get("admin", False)
        accounts[ak] = Account(
            ak, str(sk), admin is True or str(admin).lower() == "true",
            _perm(raw.get("defaultTopicPerm", "DENY"), f"{where} defaultTopicPerm"),
            _perm(raw.get("defaultGroupPerm", "DENY"), f"{where} defaultGroupPerm"),
            {**_resource_perms(raw.get("topicPerms"), f"{where} topicPerms", False),
             **_resource_perms(raw.get("groupPerms"), f"{where} groupPerms", True)},
            address_matcher(raw.get("whiteRemoteAddress")),
            {**_resource_perms(raw.get("topicPrefixPerms"), f"{where} topicPrefixPerms", False),
             **_resource_perms(raw.get("groupPrefixPerms"), f"{where} groupPrefixPerms", True)})
    white = [address_matcher(str(p)) for p in data.get("globalWhiteRemoteAddresses") or []]
    return AclTable(accounts, white)


def load_acl_file(path: str) -> AclTable:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"ACL: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"ACL: {path}: not valid YAML: {exc}") from None
    return parse_acl(data, path)


@dataclass(frozen=True, slots=True)
class Grant:
    """One permission of one account: on a topic or group (``*``: its default), on every
    topic or group whose name starts with ``name`` (``prefixed``), or admin."""

    access_key: str
    kind: str  # TOPIC, GROUP or ADMIN
    name: str  # the topic or group (a group without %RETRY%); "" for ADMIN
    perm: int  # PUB, SUB, PUB|SUB or DENY; 0 when written: remove it
    prefixed: bool = False


def _write_grant(raw: dict[str, Any], grant: Grant) -> None:
    """Set one grant in an account's entry of the loaded YAML."""
    if grant.kind == ADMIN:
        raw["admin"] = bool(grant.perm)
        return
    if grant.name == ALL_NAMES and not grant.prefixed:
        key = "defaultTopicPerm" if grant.kind == TOPIC else "defaultGroupPerm"
        raw[key] = _PERM_NAMES[grant.perm or DENY]
        return
    key = ("topic" if grant.kind == TOPIC else "group") + ("PrefixPerms" if grant.prefixed else "Perms")
    items = [item for item in raw.get(key) or [] if str(item).partition("=")[0].strip() != grant.name]
    if grant.perm:
        items.append(f"{grant.name}={_PERM_NAMES[grant.perm]}")
    raw[key] = items


# -- checking -------------------------------------------------------------------------------
@dataclass(slots=True)
class AccessRequest:
    """What one request asks for, as its protocol reads it."""

    remote_ip: str
    access_key: str | None
    signature: str | None
    content: bytes  # the signed bytes
    resources: dict[str, int] = field(default_factory=dict)  # topic or %RETRY%group -> perm
    needs_admin: bool = False
    # a verified client certificate's CN (mutual TLS): an unsigned request is that account's
    certificate_name: str | None = None


class PlainAcl:
    """Validates requests against the table loaded from ``path`` (reloaded on change)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.table = load_acl_file(path)
        self._mtime = self._stat()
        self._checked = time.monotonic()

    def _stat(self) -> tuple[int, int, int] | None:
        """What tells a rewritten file (an editor's rename, an in-place write of the same size)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked < RELOAD_CHECK_S:
            return
        self._checked = now
        mtime = self._stat()
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            self._install(load_acl_file(self.path))
            log.info("ACL: reloaded %s", self.path)
        except ConfigError as exc:
            log.error("%s; keeping the previous accounts", exc)

    def _install(self, table: AclTable) -> None:
        """Take ``table``, updating the Account objects sessions hold in place, so a change
        reaches connections logged in before it; a removed account's sessions lose every right."""
        old = self.table.accounts
        for key, account in table.accounts.items():
            held = old.get(key)
            if held is not None:
                for f in fields(Account):
                    setattr(held, f.name, getattr(account, f.name))
                table.accounts[key] = held
        for key in old.keys() - table.accounts.keys():
            gone = old[key]
            gone.admin, gone.perms, gone.prefix_perms = False, {}, {}
            gone.default_topic_perm = gone.default_group_perm = DENY
        self.table = table

    # -- grants: the file as (account, kind, name, perm) rows, read and written ------------------
    def grants(self) -> list[Grant]:
        """Every permission the file gives: topicPerms and groupPerms, their prefixed forms,
        defaults other than DENY (name ``*``), and admin (kind ``admin``)."""
        self._maybe_reload()
        out: list[Grant] = []
        for key, account in self.table.accounts.items():
            if account.admin:
                out.append(Grant(key, ADMIN, "", PUB | SUB))
            for kind, perm in ((TOPIC, account.default_topic_perm), (GROUP, account.default_group_perm)):
                if perm != DENY:
                    out.append(Grant(key, kind, ALL_NAMES, perm))
            for prefixed, perms in ((False, account.perms), (True, account.prefix_perms)):
                for resource, perm in perms.items():
                    if resource.startswith(RETRY_PREFIX):
                        out.append(Grant(key, GROUP, resource[len(RETRY_PREFIX):], perm, prefixed))
                    else:
                        out.append(Grant(key, TOPIC, resource, perm, prefixed))
        return out

    def write_grants(self, changes: list[Grant]) -> None:
        """Set each grant's permission (perm 0: remove it; ``*``: the account's default) in the
        file, written whole (comments are not kept, as RocketMQ's updateAclConfig) and
        atomically, and take it at once. AclError for an account the file does not have."""
        self._maybe_reload()
        try:
            with open(self.path, encoding="utf-8") as f:
                data = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise AclError(f"cannot read {self.path}: {exc}") from None
        accounts = {str(a.get("accessKey")): a for a in data.get("accounts") or [] if isinstance(a, dict)}
        for grant in changes:
            raw = accounts.get(grant.access_key)
            if raw is None:
                raise AclError(f"no account {grant.access_key!r} in {self.path}: add it there first")
            _write_grant(raw, grant)
        table = parse_acl(data, self.path)
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".plain_acl.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                yaml.safe_dump(data, f, sort_keys=False, default_flow_style=False)
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(OSError):  # keep the file's mode (mkstemp makes 0600)
                os.chmod(tmp, os.stat(self.path).st_mode & 0o777)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._mtime = self._stat()
        self._install(table)

    def validate(self, req: AccessRequest) -> None:
        """Return if allowed, else raise AclError naming the reason."""
        self._maybe_reload()
        table = self.table
        if any(match(req.remote_ip) for match in table.global_white):
            return
        if not req.access_key and req.certificate_name is not None:  # the TLS handshake proved who
            key = req.certificate_name
            account = table.accounts.get(key)
            if account is None:
                raise AclError(f"No acl config for the client certificate's CN={key}")
        else:
            if not req.access_key:  # the C++ client sends an empty one without credentials
                raise AclError("No accessKey is configured")
            key = req.access_key
            account = table.accounts.get(key)
            if account is None:
                raise AclError(f"No acl config for {key}")
            if account.white_address(req.remote_ip):
                return
            expected = sign(req.content, account.secret_key)
            if req.signature is None or not hmac.compare_digest(
                    expected.encode(), req.signature.encode("utf-8", "surrogateescape")):
                raise AclError(f"Check signature failed for accessKey={key}")
        if req.needs_admin and not account.admin:
            raise AclError(f"Need admin permission, but accessKey={key} is not")
        if req.resources.get(TRACE_TOPIC) == PUB:
            return  # message traces may always be published, as in RocketMQ
        for resource, needed in req.resources.items():
            if not account.permits(resource, needed):
                raise _no_permission(resource, key)

    def account(self, access_key: str) -> Account | None:
        """An account by name, its permissions for a user authenticated elsewhere (SCRAM)."""
        self._maybe_reload()
        return self.table.accounts.get(access_key)

    def authenticate(self, access_key: str, secret_key: str) -> Account:
        """The account for a user name and password sent in clear (SASL/PLAIN), else AclError."""
        self._maybe_reload()
        account = self.table.accounts.get(access_key)
        # compare even for an unknown name, so timing does not tell names apart
        expected = account.secret_key if account is not None else "\0" * len(secret_key)
        if not hmac.compare_digest(expected.encode(), secret_key.encode()) or account is None:
            raise AclError("Authentication failed: invalid username or password")
        return account


def check_login(acl: PlainAcl, user: str, password: str, *, admin: bool = False,
                topic: str | None = None, group: str | None = None, needed: int = SUB) -> Account:
    """The account a user name and password log in as (HTTP basic auth, any login sent in
    clear), checked for what the caller is about to do: ``admin``, and/or ``needed`` (PUB,
    SUB or ANY) on ``topic`` and on ``group``. Raises AclError with the reason (for the log;
    tell the client only that it was refused)."""
    account = acl.authenticate(user, password)
    if admin and not account.admin:
        raise AclError(f"Need admin permission, but accessKey={user} is not")
    for resource in ([topic] if topic is not None else []) + ([group_resource(group)] if group is not None else []):
        if not account.permits(resource, needed):
            raise _no_permission(resource, user)
    return account


def _no_permission(resource: str, access_key: str) -> AclError:
    kind, name = (("group", resource[len(RETRY_PREFIX):]) if resource.startswith(RETRY_PREFIX)
                  else ("topic", resource))
    return AclError(f"No permission for {kind} {name} (accessKey={access_key})")
