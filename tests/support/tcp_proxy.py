"""A TCP proxy on a loopback port, run in its own thread, that a test can cut (every
connection closed, new ones refused) and restore: a network partition between one process
and a server, without touching either."""

from __future__ import annotations

import asyncio
import threading

from tests.support.remoting import free_port


class TcpProxy:
    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.restore()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _call(self, coro) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def restore(self) -> None:
        async def listen() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self._call(listen())

    def cut(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
                self._server = None
            for writer in list(self._writers):
                writer.transport.abort()
        self._call(close())

    def close(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.transport.abort()
                self._writers.discard(dst)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
