"""Kafka's ACL admin APIs (CreateAcls, DescribeAcls, DeleteAcls) with confluent-kafka's and
kafka-python's admin clients: they read and write plain_acl.yml, the file every protocol
checks, and what they write is enforced at once (Kafka and STOMP here) and kept on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType,
                                   ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

from rocketport.core.auth.plain_acl import PlainAcl
from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.protocols.stomp.stomp_support import connect as stomp_connect
from tests.support.live_broker import LiveBroker, start_live_broker

ACL = """\
accounts:
  - accessKey: ops
    secretKey: ops-secret
    admin: true
  - accessKey: app
    secretKey: app-secret
    defaultGroupPerm: SUB
"""


@pytest.fixture
def acl_broker(tmp_path) -> Iterator[tuple[LiveBroker, Path]]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=1 << 20,
        default_topic_queue_nums=1, listen_port=0, namesrv=ProtocolConfig(True, 0, "127.0.0.1"),
        kafka=ProtocolConfig(True, 0, "127.0.0.1"), amqp=ProtocolConfig(False, 0),
        stomp=ProtocolConfig(True, 0, "127.0.0.1"), acl_enable=True, plain_acl_file=str(acl),
        kafka_sasl_mechanisms="PLAIN")
    live = start_live_broker(config)
    try:
        for topic in ("t", "orders.eu", "ordersx"):
            live.run(lambda topic=topic: live.server.broker.create_topic(topic, read_queue_nums=1,
                                                                         write_queue_nums=1))
        yield live, acl
    finally:
        live.stop()


def _sasl(live: LiveBroker, user: str, password: str) -> dict:
    return {"bootstrap.servers": live.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}


def _produce_error(live: LiveBroker, topic: str = "t") -> int | None:
    """app's one message to ``topic``: None when delivered, else the error code."""
    outcome: list = []
    producer = Producer({**_sasl(live, "app", "app-secret"), "message.timeout.ms": 4000})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(8)
    [err] = outcome
    return None if err is None else err.code()


def _write_t(principal: str = "User:app", pattern=ResourcePatternType.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(ResourceType.TOPIC, "t", pattern, principal, host, AclOperation.WRITE, AclPermissionType.ALLOW)


def _described(admin: AdminClient, flt: AclBindingFilter) -> set[tuple]:
    return {(b.restype, b.name, b.principal, b.host, b.operation, b.permission_type)
            for b in admin.describe_acls(flt).result(10)}


ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


def test_confluent_admin_creates_describes_and_deletes_bindings_kept_in_the_acl_file(acl_broker):
    live, acl = acl_broker
    admin = AdminClient(_sasl(live, "ops", "ops-secret"))
    assert _produce_error(live) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for future in admin.create_acls([_write_t()]).values():
        assert future.result(10) is None
    assert _produce_error(live) is None  # enforced at once
    stomp, listener = stomp_connect(live, username="app", passcode="app-secret")
    stomp.send("/queue/t", b"over stomp", receipt="r")  # the same permission, another protocol
    listener.wait_receipt("r")
    assert not listener.errors

    assert _described(admin, ANY_FILTER) == {
        (ResourceType.BROKER, "kafka-cluster", "User:ops", "*", AclOperation.ALL, AclPermissionType.ALLOW),
        (ResourceType.GROUP, "*", "User:app", "*", AclOperation.READ, AclPermissionType.ALLOW),  # defaultGroupPerm
        (ResourceType.TOPIC, "t", "User:app", "*", AclOperation.WRITE, AclPermissionType.ALLOW)}
    app = next(a for a in yaml.safe_load(acl.read_text())["accounts"] if a["accessKey"] == "app")
    assert app["topicPerms"] == ["t=PUB"] and app["secretKey"] == "app-secret"
    assert PlainAcl(str(acl)).account("app").permits("t", 1 << 2)  # what a restart reads

    read_t = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:app", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)
    [future] = admin.create_acls([read_t]).values()
    future.result(10)
    assert "t=PUB|SUB" in acl.read_text()

    writes = AclBindingFilter(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:app", None,
                              AclOperation.WRITE, AclPermissionType.ANY)
    [future] = admin.delete_acls([writes]).values()
    assert [(b.name, b.operation) for b in future.result(10)] == [("t", AclOperation.WRITE)]
    assert "t=SUB" in acl.read_text()
    assert _produce_error(live) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    deny = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:app", "*",
                      AclOperation.ALL, AclPermissionType.DENY)
    [future] = admin.create_acls([deny]).values()
    future.result(10)
    assert "t=DENY" in acl.read_text()
    assert _described(admin, writes) == set()


def test_refusals_in_kafka_terms(acl_broker):
    live, _ = acl_broker
    not_admin = AdminClient(_sasl(live, "app", "app-secret"))
    [future] = not_admin.create_acls([_write_t()]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert not_admin.describe_acls(ANY_FILTER).result(10) == []  # librdkafka drops DescribeAcls' error code

    admin = AdminClient(_sasl(live, "ops", "ops-secret"))
    prefixed_all = AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.PREFIXED, "User:app", "*",
                              AclOperation.WRITE, AclPermissionType.ALLOW)
    bad = [prefixed_all, _write_t(host="10.0.0.1"), _write_t("User:nobody"),
           AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:app", "*",
                      AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW)]
    for binding, future in admin.create_acls(bad).items():
        with pytest.raises(KafkaException) as refused:
            future.result(10)
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST, binding
    assert _produce_error(live) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _kafka_python_admin(live, user: str, password: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=live.bootstrap, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="PLAIN", sasl_plain_username=user, sasl_plain_password=password,
                            request_timeout_ms=10_000)


def test_kafka_python_admin_client(acl_broker):
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as PatternType
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError
    live, acl = acl_broker
    admin = _kafka_python_admin(live, "ops", "ops-secret")
    try:
        group_read = ACL("User:app", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                         ResourcePattern(KpResourceType.GROUP, "billing", PatternType.LITERAL))
        result = admin.create_acls([group_read])
        assert result["succeeded"] == [group_read] and not result["failed"]
        assert "billing=SUB" in acl.read_text()
        found, error = admin.describe_acls(ACLFilter(
            "User:app", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.GROUP, None, PatternType.ANY)))
        assert sorted((a.resource_pattern.resource_name, a.operation) for a in found) == [
            ("*", ACLOperation.READ), ("billing", ACLOperation.READ)]  # defaultGroupPerm, and the new one
        [(_, deleted, _)] = admin.delete_acls([ACLFilter(
            "User:app", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePatternFilter(KpResourceType.GROUP, "billing", PatternType.LITERAL))])
        assert len(deleted) == 1 and "billing" not in acl.read_text()
    finally:
        admin.close()
    not_admin = _kafka_python_admin(live, "app", "app-secret")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            not_admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                              ResourcePatternFilter(KpResourceType.ANY, None, PatternType.ANY)))
    finally:
        not_admin.close()


def test_kafka_python_admin_client_with_a_prefixed_binding(acl_broker):
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as PatternType
    from kafka.admin import ResourceType as KpResourceType
    live, acl = acl_broker
    admin = _kafka_python_admin(live, "ops", "ops-secret")
    try:
        orders = ACL("User:app", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                     ResourcePattern(KpResourceType.TOPIC, "orders.", PatternType.PREFIXED))
        result = admin.create_acls([orders])
        assert result["succeeded"] == [orders] and not result["failed"]
        app = next(a for a in yaml.safe_load(acl.read_text())["accounts"] if a["accessKey"] == "app")
        assert app["topicPrefixPerms"] == ["orders.=PUB"]
        assert _produce_error(live, "orders.eu") is None
        assert _produce_error(live, "ordersx") == KafkaError.TOPIC_AUTHORIZATION_FAILED

        def described(name: str, pattern: PatternType) -> list[tuple]:
            found, error = admin.describe_acls(ACLFilter(
                None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                ResourcePatternFilter(KpResourceType.TOPIC, name, pattern)))
            assert error.errno == 0
            return sorted((a.principal, a.resource_pattern.resource_name, a.resource_pattern.pattern_type,
                           a.operation, a.permission_type) for a in found)

        binding = ("User:app", "orders.", PatternType.PREFIXED, ACLOperation.WRITE, ACLPermissionType.ALLOW)
        assert described("orders.", PatternType.PREFIXED) == [binding]
        assert described("orders.", PatternType.LITERAL) == []
        assert described("orders.eu", PatternType.MATCH) == [binding]  # what applies to the topic orders.eu
        [(_, deleted, _)] = admin.delete_acls([ACLFilter(
            "User:app", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
            ResourcePatternFilter(KpResourceType.TOPIC, "orders.", PatternType.PREFIXED))])
        assert [(a.resource_pattern.resource_name, a.resource_pattern.pattern_type) for a in deleted] == [
            ("orders.", PatternType.PREFIXED)]
    finally:
        admin.close()
    assert "orders." not in acl.read_text()
    assert _produce_error(live, "orders.eu") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_bindings_are_kept_as_prefix_permissions_and_enforced_by_every_protocol(acl_broker):
    live, acl = acl_broker
    admin = AdminClient(_sasl(live, "ops", "ops-secret"))
    orders = AclBinding(ResourceType.TOPIC, "orders.", ResourcePatternType.PREFIXED, "User:app", "*",
                        AclOperation.WRITE, AclPermissionType.ALLOW)
    assert _produce_error(live, "orders.eu") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [future] = admin.create_acls([orders]).values()
    assert future.result(10) is None
    assert _produce_error(live, "orders.eu") is None  # enforced at once
    assert _produce_error(live, "ordersx") == KafkaError.TOPIC_AUTHORIZATION_FAILED  # not the prefix
    stomp, listener = stomp_connect(live, username="app", passcode="app-secret")
    stomp.send("/queue/orders.eu", b"over stomp", receipt="r")
    listener.wait_receipt("r")
    assert not listener.errors
    app = next(a for a in yaml.safe_load(acl.read_text())["accounts"] if a["accessKey"] == "app")
    assert app["topicPrefixPerms"] == ["orders.=PUB"] and "topicPerms" not in app

    prefixed = AclBindingFilter(ResourceType.TOPIC, "orders.", ResourcePatternType.PREFIXED, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    expected = {(ResourceType.TOPIC, "orders.", "User:app", "*", AclOperation.WRITE, AclPermissionType.ALLOW)}
    assert _described(admin, prefixed) == expected
    [found] = admin.describe_acls(prefixed).result(10)
    assert found.resource_pattern_type == ResourcePatternType.PREFIXED
    literal = AclBindingFilter(ResourceType.TOPIC, "orders.", ResourcePatternType.LITERAL, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    assert _described(admin, literal) == set()
    applies = AclBindingFilter(ResourceType.TOPIC, "orders.eu", ResourcePatternType.MATCH, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    assert _described(admin, applies) == expected  # what applies to the topic orders.eu

    # a DENY on the exact topic wins over the prefix's ALLOW (as Kafka resolves them)
    deny = AclBinding(ResourceType.TOPIC, "orders.eu", ResourcePatternType.LITERAL, "User:app", "*",
                      AclOperation.ALL, AclPermissionType.DENY)
    [future] = admin.create_acls([deny]).values()
    future.result(10)
    assert _produce_error(live, "orders.eu") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [future] = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "orders.eu", ResourcePatternType.LITERAL,
                                                   None, None, AclOperation.ANY, AclPermissionType.ANY)]).values()
    future.result(10)
    assert _produce_error(live, "orders.eu") is None

    [future] = admin.delete_acls([prefixed]).values()
    assert [(b.name, b.resource_pattern_type) for b in future.result(10)] == [
        ("orders.", ResourcePatternType.PREFIXED)]
    assert "orders." not in acl.read_text()
    assert _produce_error(live, "orders.eu") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_without_sasl_the_acl_apis_refuse_the_unauthenticated_client(tmp_path):
    """aclEnable with no kafkaSaslMechanisms: a Kafka client is nobody, and must not rewrite the file."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    config = BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=1 << 20,
        listen_port=0, namesrv=ProtocolConfig(True, 0, "127.0.0.1"), kafka=ProtocolConfig(True, 0, "127.0.0.1"),
        amqp=ProtocolConfig(False, 0), stomp=ProtocolConfig(False, 0), acl_enable=True, plain_acl_file=str(acl))
    live = start_live_broker(config)
    try:
        anonymous = AdminClient({"bootstrap.servers": live.bootstrap})
        [future] = anonymous.create_acls([_write_t()]).values()
        with pytest.raises(KafkaException) as refused:
            future.result(10)
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        assert acl.read_text() == ACL
        # nor set a SCRAM credential that would log in once SASL is turned on
        upsert = UserScramCredentialUpsertion("mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                              b"password", b"salt-salt-salt")
        [future] = anonymous.alter_user_scram_credentials([upsert]).values()
        with pytest.raises(KafkaException) as refused:
            future.result(10)
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    finally:
        live.stop()
