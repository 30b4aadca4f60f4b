"""The client's one exception type: every failure a caller sees is a `ClientError`.

A broker or name server refusal carries the response code and remark it sent; a
transport failure (connect, timeout, closed connection, undecodable frame) has
`code=None`. Nothing deeper (OSError, struct.error, a codec error) escapes the client.
"""

from __future__ import annotations


class ClientError(Exception):
    """A request failed; `code` is the peer's response code when it answered."""

    def __init__(self, remark: str, code: int | None = None) -> None:
        super().__init__(remark if code is None else f"{remark} (code {code})")
        self.code = code
        self.remark = remark
