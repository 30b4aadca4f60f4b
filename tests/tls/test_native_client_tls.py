"""The native client and `rocketport admin` over TLS: a permissive broker and name server,
a private CA, and mutual TLS where the broker requires a client certificate."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys

import pytest

from rocketport.client import ClientError, Message, Producer, PullConsumer
from tests.tls.certs import Pki


def _context(pki: Pki, cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki.ca)
    if cert:
        context.load_cert_chain(pki.client_cert, pki.client_key)
    return context


async def _round_trip(namesrv: str, tls: ssl.SSLContext | bool) -> list[bytes]:
    async with Producer(namesrv, "tls-producer", tls=tls) as producer:
        for i in range(3):
            await producer.send(Message("TlsTopic", b"n%d" % i))
    async with PullConsumer("tls-group", namesrv, consume_from="first", tls=tls) as consumer:
        consumer.assign(await consumer.queues("TlsTopic"))
        got: list[bytes] = []
        for _ in range(20):
            got += [m.body for m in await consumer.poll(0.5)]
            if len(got) >= 3:
                break
        return sorted(got)


def test_producer_and_pull_consumer_over_tls(tls_broker, pki):
    assert asyncio.run(_round_trip(tls_broker.namesrv, _context(pki))) == [b"n0", b"n1", b"n2"]


def test_the_system_cas_do_not_trust_a_private_ca(tls_broker):
    with pytest.raises(ClientError):
        asyncio.run(_round_trip(tls_broker.namesrv, True))


def test_mutual_tls_client(mtls_broker, pki):
    assert asyncio.run(_round_trip(mtls_broker.namesrv, _context(pki, cert=True))) == [b"n0", b"n1", b"n2"]
    with pytest.raises(ClientError):
        asyncio.run(_round_trip(mtls_broker.namesrv, _context(pki)))


def _admin(namesrv: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocketport", "admin", "topicList", "-n", namesrv, *args],
                          env=dict(os.environ, TERM="dumb"), capture_output=True, text=True, timeout=60)


def test_admin_tls(mtls_broker, pki):
    asyncio.run(_round_trip(mtls_broker.namesrv, _context(pki, cert=True)))
    proc = _admin(mtls_broker.namesrv, "--tls-ca", pki.ca, "--tls-cert", pki.client_cert, "--tls-key", pki.client_key)
    assert proc.returncode == 0 and "TlsTopic" in proc.stdout, proc.stderr
    refused = _admin(mtls_broker.namesrv, "--tls-ca", pki.ca)  # no client certificate
    assert refused.returncode != 0 and "TlsTopic" not in refused.stdout
    plain = _admin(mtls_broker.namesrv)  # plaintext to an enforcing name server
    assert plain.returncode != 0
