"""RocketMQ 4.x request signing (AclClientRPCHook), shared by the broker's check and our client.

The signed bytes are the values of a request's extFields sorted by key (Signature and
_UNIQUE_KEY_QUERY left out; AccessKey included) followed by the body; the signature is
base64 HMAC-SHA1 with the account's secret key.
"""

from __future__ import annotations

from rocketport.core.auth.plain_acl import sign

from .command import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def signed_content(request: RemotingCommand) -> bytes:
    ext = request.ext_fields
    text = "".join(ext[k] for k in sorted(ext) if k not in (SIGNATURE, UNIQUE_MSG_QUERY_FLAG))
    body = request.body
    if isinstance(body, list):
        body = b"".join(bytes(part) for part in body)
    return text.encode("utf-8") + bytes(body)


def sign_request(request: RemotingCommand, access_key: str, secret_key: str) -> None:
    """Add AccessKey and Signature to ``request`` (after its other fields are final)."""
    request.ext_fields[ACCESS_KEY] = access_key
    request.ext_fields[SIGNATURE] = sign(signed_content(request), secret_key)
