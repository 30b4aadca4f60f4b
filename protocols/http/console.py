"""The web console's files (console/: HTML, CSS and ES modules, no build step), read once
from the package and served as they are. The page reads the JSON API (/api/); a strict
Content-Security-Policy lets it run only its own scripts, so even a mistake in rendering
broker data (topic names, keys, bodies) could not run a script from that data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from .responses import Response

DIRECTORY: Final = Path(__file__).with_name("console")
PREFIX: Final = "/console/"
_TYPES: Final = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
HEADERS: Final = (
    ("content-security-policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-cache"),
)


class Console:
    """The files by URL path: / is index.html, the rest under /console/."""

    def __init__(self, directory: Path = DIRECTORY) -> None:
        self.files: dict[str, Response] = {}
        for path in sorted(directory.iterdir()):
            content_type = _TYPES.get(path.suffix)
            if content_type is not None and path.is_file():
                self.files[PREFIX + path.name] = Response(200, content_type, path.read_bytes(), HEADERS)
        self.files["/"] = self.files[PREFIX + "index.html"]

    def get(self, path: str) -> Response | None:
        return self.files.get(path)
