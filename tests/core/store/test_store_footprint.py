"""The disk a fresh store takes: a real broker process with the default segment sizes (a
1 GiB CommitLog segment, 6 MB ConsumeQueue files, ~420 MB index files) and three messages
sent takes tens of MiB of disk blocks, because files are made at their full size but backed
a window at a time (docs/store-format.md, "Disk blocks"). The sizes (what offsets and
mappings see) stay the configured ones."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from tests.support.processes import start_broker, stop, wait_ready
from tests.support.remoting import free_port


def disk_usage(root: Path) -> tuple[int, int]:
    """(bytes of disk blocks, apparent bytes) of every file under ``root``: what du counts."""
    blocks = apparent = 0
    for directory, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(directory, name))
            blocks += st.st_blocks * 512
            apparent += st.st_size
    return blocks, apparent


def _send(port: int, topic: str, bodies: list[bytes]) -> list[int]:
    async def main() -> list[int]:
        client = await RemotingClient.connect(f"127.0.0.1:{port}")
        try:
            codes = []
            for i, body in enumerate(bodies):
                props = f"UNIQ_KEY\x01{os.getpid():08X}{i:024X}\x02KEYS\x01key{i}\x02"  # as clients
                header = SendMessageRequestHeader("pg", topic, "TBW102", 8, i % 8, 0, 0, 0, props)
                response = await client.invoke(request(
                    RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body), 30)
                codes.append(response.code)
            return codes
        finally:
            await client.close()

    return asyncio.run(main())


def test_a_fresh_store_with_the_default_segment_sizes_takes_tens_of_mib(tmp_path):
    root = tmp_path / "store"
    port = free_port()
    proc = start_broker(root, f"listenPort={port}", "namesrv.port=0", "kafka.port=0")
    try:
        seen = wait_ready(proc)
        assert "CommitLog segments of 1 GiB" in seen, seen  # the default sizes
        assert _send(port, "Footprint", [b"one", b"two", b"three"]) == [ResponseCode.SUCCESS] * 3
        index_dir = root / "index"
        deadline = time.monotonic() + 30
        while not (index_dir.is_dir() and any(index_dir.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.1)  # the index builder makes its first file
        time.sleep(1.0)  # the flushes and the preparer's work are done too
        blocks, apparent = disk_usage(root)
        commit_log = root / "commitlog" / "00000000000000000000"
        assert commit_log.stat().st_size == 1 << 30  # offsets and the mapping are 1 GiB
        cq_files = list((root / "consumequeue" / "Footprint").glob("*/" + "0" * 20))
        index_files = list(index_dir.iterdir())
        assert len(cq_files) == 8 and all(f.stat().st_size == 6_000_000 for f in cq_files)
        assert index_files and all(f.stat().st_size > 400_000_000 for f in index_files)
        assert apparent > (1 << 30) + 8 * 6_000_000 + 400_000_000
        assert blocks < 128 << 20, f"{blocks / (1 << 20):.1f} MiB of disk for three messages"
        print(f"fresh store: {blocks / (1 << 20):.1f} MiB of disk blocks, "
              f"{apparent / (1 << 20):.1f} MiB apparent")
    finally:
        stop(proc)
    assert proc.returncode == 0
