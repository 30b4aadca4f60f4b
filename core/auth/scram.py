"""SASL/SCRAM-SHA-256 and -512 (RFC 5802, RFC 7677): credentials and the server's exchange.

A credential is what the server keeps: salt, iterations, StoredKey and ServerKey; never the
password. `ScramCredentials` is the file of them (JSON, reloaded on change), written by
`rocketport admin updateScramCredential`. `ScramServer` is a sans-IO state machine: each
client message in, the server's message out, the account name once the proof checks. A
maintained library exists (scramp); the exchange is small enough that hashlib and hmac keep
it without a dependency.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass, field

from ..errors import BrokerError

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # RFC 7677's minimum; Kafka's default too
NONCE_BYTES = 24


class ScramError(BrokerError):
    """The exchange failed: a malformed message, an unknown user or a wrong proof."""


@dataclass(slots=True, frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """Salt and hash a password as RFC 5802 says (SaltedPassword, then the two keys)."""
    hash_name = MECHANISMS[mechanism]
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    return credential_from_salted(mechanism, salt, salted, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """The keys from a SaltedPassword (what AlterUserScramCredentials sends, never the password)."""
    hash_name = MECHANISMS[mechanism]
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(salt, iterations, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted, b"Server Key"))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class ScramCredentials:
    """The credential file: ``{user: {mechanism: {salt, iterations, storedKey, serverKey}}}``
    in base64; re-read when its modification time changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime: float | None = None
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def _load(self) -> None:
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            self._users, self._mtime = {}, None
            return
        if mtime == self._mtime:
            return
        with open(self.path, "rb") as f:
            raw = json.load(f)
        self._users = {user: {mech: ScramCredential(base64.b64decode(c["salt"]), int(c["iterations"]),
                                                    base64.b64decode(c["storedKey"]),
                                                    base64.b64decode(c["serverKey"]))
                              for mech, c in mechs.items()} for user, mechs in raw.items()}
        self._mtime = mtime

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        self._load()
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, list[tuple[str, int]]]:
        """Each user's mechanisms and iterations (DescribeUserScramCredentials' view)."""
        self._load()
        return {u: [(m, c.iterations) for m, c in mechs.items()] for u, mechs in self._users.items()}

    def set(self, user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS) -> None:
        """Store a user's credential (the file is replaced atomically, mode 0600)."""
        if mechanism not in MECHANISMS:
            raise ScramError(f"unknown mechanism {mechanism!r}: {', '.join(MECHANISMS)}")
        if iterations < MIN_ITERATIONS:
            raise ScramError(f"iterations must be at least {MIN_ITERATIONS}")
        self._load()
        self._users.setdefault(user, {})[mechanism] = make_credential(mechanism, password, iterations)
        self._save()

    def put(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Store a credential made elsewhere (AlterUserScramCredentials' salted password)."""
        self._load()
        self._users.setdefault(user, {})[mechanism] = credential
        self._save()

    def delete(self, user: str, mechanism: str) -> bool:
        self._load()
        gone = self._users.get(user, {}).pop(mechanism, None) is not None
        if user in self._users and not self._users[user]:
            del self._users[user]
        if gone:
            self._save()
        return gone

    def _save(self) -> None:
        data = {user: {mech: {"salt": _b64(c.salt), "iterations": c.iterations,
                              "storedKey": _b64(c.stored_key), "serverKey": _b64(c.server_key)}
                       for mech, c in mechs.items()} for user, mechs in self._users.items()}
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = f"{self.path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)
        self._mtime = None


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1:
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        out.setdefault(key, value)
    return out


def _username(raw: str) -> str:
    """saslname: '=2C' is ',' and '=3D' is '='; any other '=' is malformed."""
    if "=" in raw.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed SCRAM user name")
    return raw.replace("=2C", ",").replace("=3D", "=")


@dataclass(slots=True)
class ScramServer:
    """One exchange: `step` twice (client-first, client-final); `user` once it succeeded."""

    mechanism: str
    credentials: ScramCredentials
    user: str | None = None
    _state: int = 0  # 0: client-first next, 1: client-final next, 2: done
    _nonce: str = ""
    _first_bare: str = ""
    _server_first: str = ""
    _gs2: str = ""
    _claimed: str = ""
    _credential: ScramCredential | None = None
    _fake: bool = False
    _hash: str = field(default="")

    def __post_init__(self) -> None:
        self._hash = MECHANISMS[self.mechanism]

    def step(self, message: bytes) -> bytes:
        """The server's answer to the client's next message; ScramError when refused."""
        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._state == 0:
            return self._client_first(text)
        if self._state == 1:
            return self._client_final(text)
        raise ScramError("SCRAM exchange already finished")

    def _client_first(self, text: str) -> bytes:
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y"):
            raise ScramError("SCRAM channel binding is not supported" if flag.startswith("p=")
                             else "malformed SCRAM client-first message")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("malformed SCRAM client-first message")
        self._claimed = _username(attrs["n"])
        if authzid and _username(authzid.removeprefix("a=")) != self._claimed:
            raise ScramError("authorization id differs from the user name")
        self._gs2 = f"{flag},{authzid},"
        self._first_bare = bare
        credential = self.credentials.get(self._claimed, self.mechanism)
        if credential is None:  # answer as for a user: the failure comes with the proof
            self._fake = True
            credential = make_credential(self.mechanism, secrets.token_hex(16), MIN_ITERATIONS,
                                         hashlib.sha256(self._claimed.encode()).digest())
        self._credential = credential
        self._nonce = attrs["r"] + base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._state = 2
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("malformed SCRAM client-final message")
        attrs = _attributes(without_proof)
        if attrs.get("r") != self._nonce:
            raise ScramError("SCRAM nonce mismatch")
        if attrs.get("c") != _b64(self._gs2.encode()):
            raise ScramError("SCRAM channel binding mismatch")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("malformed SCRAM proof") from None
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Authentication failed: invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key) \
                or self._fake:
            raise ScramError(f"Authentication failed during authentication due to invalid credentials "
                             f"with SASL mechanism {self.mechanism}")
        self.user = self._claimed
        return f"v={_b64(_hmac(self._hash, credential.server_key, auth_message))}".encode()
