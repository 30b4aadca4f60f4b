"""What a route answers: status, content type and body, and the error answers every route
shares (plain text, one line saying why), so a client always gets a status it can act on."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

TEXT = "text/plain; charset=utf-8"
JSON = "application/json"


@dataclass(slots=True, frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = field(default=())


class ApiError(Exception):
    """A JSON API request refused: its status and why (answered as ``{"error": why}``)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


def text(status: int, message: str) -> Response:
    return Response(status, TEXT, (message + "\n").encode())


def json(data: object, status: int = 200) -> Response:
    return Response(status, JSON, orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS))


def not_found(path: str) -> Response:
    return text(404, f"no such resource: {path}")


def method_not_allowed(allowed: str) -> Response:
    return Response(405, TEXT, b"method not allowed\n", (("allow", allowed),))
