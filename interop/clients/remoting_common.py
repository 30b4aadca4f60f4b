"""What the RocketMQ (remoting) adapters share."""

from __future__ import annotations

# the compression scenario for remoting: the client's own body compression (zlib above its
# 4 KiB threshold), the only codec RocketMQ 4.x clients have
CODECS = ("zlib",)
