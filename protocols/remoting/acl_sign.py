"""RocketMQ 4.x request signing (AclClientRPCHook), shared by the broker's check and our client.

The signed bytes are the values of a request's extFields sorted by key (Signature and
_UNIQUE_KEY_QUERY left out; AccessKey included) followed by the body; the signature is
base64 HMAC-SHA1 with the account's secret key.
"""

from __future__ import annotations

from functools import lru_cache

from rocketport.common.signature import sign

from .command import Body, RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


@lru_cache(maxsize=256)
def _signed_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    # a client sends the same fields in the same order on every request of a kind
    return tuple(sorted(k for k in keys if k not in (SIGNATURE, UNIQUE_MSG_QUERY_FLAG)))


def signed_content(ext: dict[str, str], body: Body) -> bytes:
    """What a request with these extFields and body is signed over."""
    text = "".join([ext[k] for k in _signed_keys(tuple(ext))])
    if isinstance(body, list):
        body = b"".join(bytes(part) for part in body)
    return text.encode("utf-8") + bytes(body)


def sign_request(request: RemotingCommand, access_key: str, secret_key: str) -> None:
    """Add AccessKey and Signature to ``request`` (after its other fields are final)."""
    request.ext_fields[ACCESS_KEY] = access_key
    request.ext_fields[SIGNATURE] = sign(signed_content(request.ext_fields, request.body), secret_key)
