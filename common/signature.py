"""The signature RocketMQ's ACL puts on a request: base64 HMAC-SHA1 over the signed bytes
with the account's secret key (AclSigner). The client signs with it, the broker checks."""

from __future__ import annotations

import base64
import hmac


def sign(content: bytes, secret_key: str) -> str:
    """Base64 HMAC-SHA1, as RocketMQ's AclSigner computes it."""
    return base64.b64encode(hmac.digest(secret_key.encode(), content, "sha1")).decode()
