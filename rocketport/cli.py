"""The `rocketport` command: run the broker and inspect stores."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from rich.console import Console

from rocketport import log_format
from rocketport.core.errors import ConfigError

log = logging.getLogger("rocketport")


def _parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


async def _run_broker(config) -> None:
    from rocketport.server import BrokerServer

    server = BrokerServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        await server.stop()


def _cmd_broker(args: argparse.Namespace) -> int:
    from rocketport.config_file import load_config
    from rocketport.core.errors import StoreLocked

    overrides = _parse_overrides(args.set)
    if args.namesrv_addr is not None:  # mqbroker -n: the name servers to register with
        overrides.setdefault("namesrvAddr", args.namesrv_addr)
    config = load_config(args.config, overrides)
    if args.print_config:  # mqbroker -p: every setting, then exit
        for key, value in config.as_properties().items():
            print(f"{key}={value}")
        return 0
    for key, why in config.inert_keys.items():
        log.info("%s: %s", key, why)
    try:
        import uvloop
    except ImportError:
        run = asyncio.run
    else:
        run = uvloop.run
    try:
        run(_run_broker(config))
    except (StoreLocked, OSError) as exc:  # a taken port, a locked or unwritable store
        print(f"rocketport: {_one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        return f"cannot use {exc.filename}: {exc.strerror.lower()}"
    return str(exc)


def _cmd_store(args: argparse.Namespace) -> int:
    from rocketport import store_tools
    from rocketport.core.store.store_lock import holder_pid

    console = Console()
    holder = holder_pid(args.path)
    if holder is not None:
        console.print(f"note: a live broker (pid {holder}) holds this store; it is read as "
                      "it stands and may change while it is read")
    if args.store_cmd == "verify":
        report = store_tools.verify(args.path, console)
        store_tools.print_verify(report, console)
        return 1 if report.problems else 0
    store_tools.dump(args.path, console, topic=args.topic, queue=args.queue,
                     offset=args.offset, limit=args.limit)
    return 0


async def _run_namesrv(host: str, port: int, kv_config: str) -> None:
    from rocketport.protocols.remoting.kv_config import KVConfig, NamesrvSettings
    from rocketport.protocols.remoting.namesrv import NameServerHandlers, RouteRegistry
    from rocketport.protocols.remoting.session import RemotingListener

    kv = KVConfig(kv_config)
    kv.load()
    handlers = NameServerHandlers(RouteRegistry(), kv, NamesrvSettings(port, kv_config))
    listener = RemotingListener(handlers, host, port, role="name server")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await handlers.start()
    await listener.start()
    try:
        await stop.wait()
    finally:
        await listener.stop()
        await handlers.stop()


def _cmd_namesrv(args: argparse.Namespace) -> int:
    try:
        asyncio.run(_run_namesrv(args.host, args.port, os.path.expanduser(args.kv_config)))
    except OSError as exc:  # the port is taken
        print(f"rocketport: {_one_line(exc)}", file=sys.stderr)
        return 1
    return 0


def _cmd_admin(args: argparse.Namespace) -> int:
    from rocketport import admin

    return admin.run(args)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rocketport")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocketport", description="Rocketport message broker")
    parser.add_argument("--version", action="version", version=f"rocketport {_version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="json: one JSON object a line (time, level, logger, message), for log shippers")
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run the broker")
    broker.add_argument("-c", "--config", help="broker.yaml, or a RocketMQ broker.properties / broker.conf")
    broker.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", metavar="ADDRS",
                        help="name servers to register with, host:port;host:port (mqbroker's -n)")
    broker.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="print every setting and exit (mqbroker's -p)")
    broker.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a configuration key (RocketMQ name)")
    broker.set_defaults(func=_cmd_broker)

    store = sub.add_parser("store", help="inspect a store directory")
    store_sub = store.add_subparsers(dest="store_cmd", required=True)
    verify = store_sub.add_parser("verify", help="CRC-check records, check consume queues")
    verify.add_argument("path")
    dump = store_sub.add_parser("dump", help="print messages as a table")
    dump.add_argument("path")
    dump.add_argument("--topic")
    dump.add_argument("--queue", type=int)
    dump.add_argument("--offset", type=int, default=0, help="first queue offset (with --topic)")
    dump.add_argument("--limit", type=int, default=50)
    store.set_defaults(func=_cmd_store)

    namesrv = sub.add_parser("namesrv", help="run a standalone name server brokers register with")
    namesrv.add_argument("--host", default="0.0.0.0")
    namesrv.add_argument("-p", "--port", type=int, default=9876)
    namesrv.add_argument("--kv-config", default="~/rocketport/namesrv/kvConfig.json",
                         help="where the KV config (mqadmin updateKvConfig) is kept (RocketMQ's kvConfigPath)")
    namesrv.set_defaults(func=_cmd_namesrv)

    from rocketport import admin
    admin.add_parser(sub)
    sub.choices["admin"].set_defaults(func=_cmd_admin)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log_format.configure(logging.DEBUG if args.verbose else logging.INFO, args.log_format)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"rocketport: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
