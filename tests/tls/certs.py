"""A throwaway CA, a server certificate for 127.0.0.1/localhost and client certificates,
made with `cryptography` into a directory (PEM files the broker and the clients read)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(slots=True, frozen=True)
class Pki:
    """Paths of the PEM files one test needs."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    stranger_cert: str  # a client certificate signed by another CA
    stranger_key: str


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path: str, key: ec.EllipticCurvePrivateKey) -> None:
    with open(path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))


def _write_cert(path: str, cert: x509.Certificate) -> None:
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _leaf(cn: str, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, server: bool
          ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                     else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def renew_server_certificate(pki: Pki) -> int:
    """A new server certificate and key from the same CA in the same files; its serial."""
    with open(pki.ca, "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(os.path.join(os.path.dirname(pki.ca), "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), None)
    cert, key = _leaf("localhost", ca, ca_key, True)  # type: ignore[arg-type]
    _write_key(pki.server_key + ".new", key)
    _write_cert(pki.server_cert + ".new", cert)
    os.replace(pki.server_key + ".new", pki.server_key)
    os.replace(pki.server_cert + ".new", pki.server_cert)
    return cert.serial_number


def make_pki(directory: str) -> Pki:
    os.makedirs(directory, exist_ok=True)
    p = lambda name: os.path.join(directory, name)  # noqa: E731
    ca, ca_key = _ca("rocketport test CA")
    _write_cert(p("ca.pem"), ca)
    _write_key(p("ca.key"), ca_key)
    for name, server, (issuer, issuer_key) in (("server", True, (ca, ca_key)), ("client", False, (ca, ca_key)),
                                               ("stranger", False, _ca("another CA"))):
        cert, key = _leaf(name if not server else "localhost", issuer, issuer_key, server)
        _write_cert(p(f"{name}.pem"), cert)
        _write_key(p(f"{name}.key"), key)
    return Pki(p("ca.pem"), p("server.pem"), p("server.key"), p("client.pem"), p("client.key"),
               p("stranger.pem"), p("stranger.key"))


def make_client_certificate(pki: Pki, cn: str) -> tuple[str, str]:
    """(cert, key) paths of another client certificate of the test CA, its subject CN ``cn``."""
    directory = os.path.dirname(pki.ca)
    with open(pki.ca, "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(os.path.join(directory, "ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), None)
    cert, key = _leaf(cn, ca, ca_key, False)  # type: ignore[arg-type]
    paths = os.path.join(directory, f"{cn}.pem"), os.path.join(directory, f"{cn}.key")
    _write_cert(paths[0], cert)
    _write_key(paths[1], key)
    return paths
