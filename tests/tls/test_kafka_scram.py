"""Kafka SASL/SCRAM-SHA-256 and -512 beside PLAIN, over SASL_PLAINTEXT and SASL_SSL, with
confluent-kafka; credentials set by `rocketport admin updateScramCredential` (salted and
hashed: the file holds no password)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer

from rocketport.core.auth.scram import ScramCredentials, ScramError, ScramServer
from rocketport.core.config import FREE_PORT
from rocketport.protocols import tls
from tests.support.kafka import kafka_config
from tests.support.live_broker import LiveBroker, start_live_broker

ACL = """\
accounts:
  - accessKey: alice
    secretKey: plain-secret
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
PASSWORDS = {"SCRAM-SHA-256": "pw-256", "SCRAM-SHA-512": "pw-512"}


@pytest.fixture
def scram_broker(tmp_path, pki, monkeypatch) -> Iterator[tuple[LiveBroker, str]]:
    monkeypatch.setattr(tls, "HANDSHAKE_TIMEOUT_S", 2.0)
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    creds = str(tmp_path / "scram.json")
    for mechanism, password in PASSWORDS.items():
        proc = subprocess.run([sys.executable, "-m", "rocketport", "admin", "updateScramCredential", "-u", "alice",
                               "-m", mechanism, "-f", creds], env=dict(os.environ, ROCKETPORT_SCRAM_PASSWORD=password),
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    config = kafka_config(str(tmp_path / "store"), kafka_sasl_mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                          plain_acl_file=str(acl), kafka_scram_credential_file=creds,
                          tls_server_cert_path=pki.server_cert, tls_server_key_path=pki.server_key)
    config.kafka.tls_port = FREE_PORT
    live = start_live_broker(config, "uvloop")
    try:
        yield live, creds
    finally:
        live.stop()


def _produce(live: LiveBroker, ssl_ca: str | None, mechanism: str, password: str) -> tuple[int, list]:
    errors: list = []
    delivered: list = []
    port = live.endpoint("kafka (tls)")[1] if ssl_ca else live.port
    config = {"bootstrap.servers": f"127.0.0.1:{port}",
              "security.protocol": "SASL_SSL" if ssl_ca else "SASL_PLAINTEXT",
              "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password,
              "message.timeout.ms": 4000, "error_cb": errors.append}
    if ssl_ca:
        config["ssl.ca.location"] = ssl_ca
    producer = Producer(config)
    producer.produce("scram-topic", b"x", on_delivery=lambda err, msg: delivered.append(err))
    started = time.monotonic()
    producer.flush(8)
    assert time.monotonic() - started < 8  # no hang
    return sum(1 for e in delivered if e is None), errors


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("over", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_scram_right_and_wrong_password(scram_broker, pki, mechanism, over):
    live, _ = scram_broker
    ca = pki.ca if over == "SASL_SSL" else None
    ok, errors = _produce(live, ca, mechanism, PASSWORDS[mechanism])
    assert ok == 1, errors
    ok, errors = _produce(live, ca, mechanism, "wrong")
    assert ok == 0
    assert any(e.code() == KafkaError._AUTHENTICATION and "invalid credentials" in e.str() for e in errors), errors


def test_plain_still_works_beside_scram(scram_broker):
    live, _ = scram_broker
    assert _produce(live, None, "PLAIN", "plain-secret")[0] == 1


def test_the_credential_file_holds_no_password(scram_broker):
    _, creds = scram_broker
    text = open(creds).read()
    assert "pw-256" not in text and "pw-512" not in text
    entry = json.loads(text)["alice"]["SCRAM-SHA-512"]
    assert set(entry) == {"salt", "iterations", "storedKey", "serverKey"} and entry["iterations"] == 4096
    assert oct(os.stat(creds).st_mode & 0o777) == "0o600"


def test_malformed_and_replayed_messages_are_refused(tmp_path):
    creds = ScramCredentials(str(tmp_path / "c.json"))
    creds.set("bob", "SCRAM-SHA-256", "pw")
    for first in (b"", b"p=tls-unique,,n=bob,r=abc", b"n,,r=abc", b"\xff"):
        with pytest.raises(ScramError):
            ScramServer("SCRAM-SHA-256", creds).step(first)
    server = ScramServer("SCRAM-SHA-256", creds)
    server.step(b"n,,n=bob,r=abc")
    with pytest.raises(ScramError):
        server.step(b"c=biws,r=other,p=AAAA")
    with pytest.raises(ScramError):
        server.step(b"c=biws,r=other,p=AAAA")  # finished: no second try on one exchange


def test_admin_client_sets_describes_and_deletes_scram_credentials(scram_broker):
    """KIP-554 with confluent-kafka's AdminClient (SASL/PLAIN as the admin account)."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)
    live, creds = scram_broker
    admin = AdminClient({"bootstrap.servers": live.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "pw-256"})
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"new-512-password", b"salt-of-the-test")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(10)
    described = admin.describe_user_scram_credentials().result(10)  # every user: one future
    assert set(described) == {"alice"}
    infos = {(i.mechanism, i.iterations) for i in described["alice"].scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)}
    assert "new-512-password" not in open(creds).read()
    assert _produce(live, None, "SCRAM-SHA-512", "new-512-password")[0] == 1
    assert _produce(live, None, "SCRAM-SHA-512", "pw-512")[0] == 0  # the old one is gone
    deletion = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion]).values():
        future.result(10)
    assert _produce(live, None, "SCRAM-SHA-512", "new-512-password")[0] == 0
