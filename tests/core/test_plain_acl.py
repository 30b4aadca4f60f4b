"""Plain ACL (RocketMQ 4.x plain_acl.yml): addresses, permissions, signatures, reloads."""

from __future__ import annotations

import base64
import os
import time

import pytest

from rocketport.core.auth import plain_acl
from rocketport.core.auth.plain_acl import (
    PUB,
    SUB,
    AccessRequest,
    AclError,
    PlainAcl,
    address_matcher,
    check_permission,
    sign,
)
from rocketport.core.errors import ConfigError

ROCKETMQ_EXAMPLE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


@pytest.fixture
def acl(tmp_path) -> PlainAcl:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ROCKETMQ_EXAMPLE)
    return PlainAcl(str(path))


def signed(key: str, secret: str, content: bytes, resources: dict[str, int], ip: str = "127.0.0.1",
           admin: bool = False) -> AccessRequest:
    return AccessRequest(ip, key, sign(content, secret), content, resources, admin)


def refused(acl: PlainAcl, req: AccessRequest) -> str:
    with pytest.raises(AclError) as info:
        acl.validate(req)
    return str(info.value)


def test_signature_is_base64_hmac_sha1():
    # RFC 2202 test case 2 for HMAC-SHA1: effcdf6ae5eb2fa2d27416d5f184df9c259a7c79
    expected = base64.b64encode(bytes.fromhex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")).decode()
    assert sign(b"what do ya want for nothing?", "Jefe") == expected


@pytest.mark.parametrize("pattern,hits,misses", [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["127.0.0.1"]),
    ("192.168.1.*", ["192.168.1.7"], ["192.168.2.7", "::1"]),
    ("192.168.1-10.*", ["192.168.5.200"], ["192.168.11.1"]),
    ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4"]),
    ("10.0.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
])
def test_remote_address_patterns(pattern, hits, misses):
    match = address_matcher(pattern)
    assert all(match(ip) for ip in hits) and not any(match(ip) for ip in misses)


@pytest.mark.parametrize("pattern", ["192.168.1.300-400", "not-an-ip", "1.2.3.{a,b}"])
def test_bad_address_patterns_are_config_errors(pattern):
    with pytest.raises(ConfigError):
        address_matcher(pattern)


def test_permission_rules():
    assert check_permission(PUB, PUB | SUB) and check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB) and not check_permission(SUB, plain_acl.DENY | SUB)
    assert check_permission(plain_acl.ANY, SUB) and not check_permission(plain_acl.ANY, plain_acl.DENY)


def test_validate_follows_the_accounts(acl):
    body = b"content"
    acl.validate(signed("RocketMQ", "12345678", body, {"topicB": PUB, "%RETRY%groupB": SUB}))
    acl.validate(signed("RocketMQ", "12345678", body, {"topicC": SUB, "%RETRY%anyGroup": SUB}))
    assert "topic topicA" in refused(acl, signed("RocketMQ", "12345678", body, {"topicA": SUB}))
    assert "topic topicC" in refused(acl, signed("RocketMQ", "12345678", body, {"topicC": PUB}))
    assert "topic other" in refused(acl, signed("RocketMQ", "12345678", body, {"other": PUB}))
    assert "group groupA" in refused(acl, signed("RocketMQ", "12345678", body, {"%RETRY%groupA": SUB}))
    assert "Check signature failed" in refused(acl, signed("RocketMQ", "87654321", body, {}))
    tampered = signed("RocketMQ", "12345678", body, {})
    tampered.content = b"contenT"
    assert "Check signature failed" in refused(acl, tampered)
    garbled = signed("RocketMQ", "12345678", body, {})
    garbled.signature = "ünïcode"
    assert "Check signature failed" in refused(acl, garbled)
    assert "No acl config for nobody" in refused(acl, signed("nobody", "12345678", body, {}))
    assert "No accessKey" in refused(acl, AccessRequest("127.0.0.1", None, None, body))
    assert "Need admin" in refused(acl, signed("RocketMQ", "12345678", body, {}, admin=True))
    # traces may always be published
    acl.validate(signed("RocketMQ", "12345678", body, {"RMQ_SYS_TRACE_TOPIC": PUB}))


def test_admins_and_white_addresses_skip_checks(acl):
    # rocketmq2 is an admin with no resource list: anything, once signed
    acl.validate(signed("rocketmq2", "12345678", b"x", {"topicA": PUB}, admin=True))
    assert "Check signature" in refused(acl, signed("rocketmq2", "wrong-secret", b"x", {}))
    # ... and from its white address, not even a signature
    acl.validate(AccessRequest("192.168.1.9", "rocketmq2", "garbage", b"x", {"topicA": PUB}))
    # a global white address needs no account at all
    acl.validate(AccessRequest("10.10.103.4", None, None, b"x", {"topicA": PUB}, True))


def test_file_errors_are_named(tmp_path):
    path = tmp_path / "acl.yml"
    for text, expected in [
        ("accounts:\n  - accessKey: a\n    secretKey: short\n", "secretKey of 6+"),
        ("accounts:\n  - accessKey: a\n    secretKey: 12345678\n    topicPerms: [t=ALL]\n", "PUB, SUB"),
        ("accounts:\n  - accessKey: a\n    secretKey: 12345678\n    groupPerms: [nogroup]\n", "name=PERM"),
        ("accounts: [\n", "not valid YAML"),
        ("- just a list\n", "expected a mapping"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=expected.replace("|", r"\|").replace("+", r"\+")):
            PlainAcl(str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        PlainAcl(str(tmp_path / "missing.yml"))


def test_changed_file_is_reloaded_and_a_broken_one_keeps_the_old_accounts(acl, monkeypatch):
    monkeypatch.setattr(plain_acl, "RELOAD_CHECK_S", 0.0)
    req = signed("fresh", "abcdefgh", b"x", {"t": PUB})
    assert "No acl config" in refused(acl, req)

    def rewrite(text: str) -> None:
        with open(acl.path, "w") as f:
            f.write(text)
        stamp = time.time() + 5  # a different mtime even on coarse-grained file systems
        os.utime(acl.path, (stamp, stamp))

    rewrite("accounts:\n  - accessKey: fresh\n    secretKey: abcdefgh\n    defaultTopicPerm: PUB\n")
    acl.validate(req)
    rewrite("accounts: [\n")
    acl.validate(req)  # the broken file is logged and ignored


def test_shipped_file_parses_and_grants_nothing():
    shipped = PlainAcl(os.path.join(os.path.dirname(__file__), "..", "..", "conf", "plain_acl.yml"))
    assert "No acl config" in refused(shipped, signed("my-app", "change-me-please", b"x", {}))
