"""topicPrefixPerms and groupPrefixPerms (Rocketport's extension of plain_acl.yml, what Kafka's
PREFIXED bindings say): how a name, its prefixes and the default combine."""

from __future__ import annotations

import pytest
import yaml

from rocketport.core.auth.plain_acl import PUB, SUB, PlainAcl, group_resource, parse_acl
from rocketport.core.errors import ConfigError

FILE = """
accounts:
  - accessKey: app
    secretKey: app-secret
    defaultTopicPerm: SUB
    topicPerms: [orders.eu.vip=SUB]
    topicPrefixPerms: [orders.=PUB, orders.eu.=PUB|SUB, orders.us.=DENY]
    groupPrefixPerms: [billing-=SUB]
  - accessKey: boss
    secretKey: boss-secret
    admin: true
    defaultTopicPerm: PUB|SUB
    topicPrefixPerms: [secret.=DENY]
"""


def _account(key: str = "app"):
    return parse_acl(yaml.safe_load(FILE), "test").accounts[key]


def test_the_most_specific_entry_decides_and_a_matching_deny_refuses():
    app = _account()
    assert app.permits("orders.jp", PUB) and not app.permits("orders.jp", SUB)  # the prefix replaces the default
    assert app.permits("orders.eu.x", PUB) and app.permits("orders.eu.x", SUB)  # the longest prefix
    assert app.permits("orders.eu.vip", SUB) and not app.permits("orders.eu.vip", PUB)  # the name beats prefixes
    assert not app.permits("orders.us.x", SUB)  # DENY on a matching prefix
    assert app.permits("other", SUB) and not app.permits("other", PUB)  # the default
    assert app.permits(group_resource("billing-eu"), SUB)
    assert not app.permits(group_resource("orders.x"), SUB)  # a topic prefix says nothing about groups


def test_a_deny_prefix_binds_an_admin_and_beats_an_exact_allow(tmp_path):
    boss = _account("boss")  # as with topicPerms, an admin with prefix entries is checked against them
    assert not boss.permits("secret.plans", PUB) and boss.permits("public", PUB)
    path = tmp_path / "plain_acl.yml"
    path.write_text(FILE.replace("topicPerms: [orders.eu.vip=SUB]", "topicPerms: [orders.us.x=PUB]"))
    assert not PlainAcl(str(path)).account("app").permits("orders.us.x", PUB)  # Kafka: DENY wins


def test_a_bad_prefix_entry_is_a_config_error():
    with pytest.raises(ConfigError, match="topicPrefixPerms"):
        parse_acl({"accounts": [{"accessKey": "a", "secretKey": "secret", "topicPrefixPerms": ["=PUB"]}]}, "t")
