"""The etcd v3 client (core/ha/etcd_client.py) against a real etcd 3.4 over its JSON gateway."""

from __future__ import annotations

import asyncio

import pytest

from rocketport.core.ha.etcd_client import (
    Compare,
    EtcdClient,
    EtcdUnavailable,
    put_op,
    range_op,
)
from tests.support.aio import run
from tests.support.remoting import free_port


def test_keys_put_get_prefix_and_delete(etcd):
    async def main():
        client = EtcdClient(etcd.endpoints.split(","))
        try:
            rev = await client.put(b"/g/a", b"\x00binary\xff")
            kv = await client.get(b"/g/a")
            assert kv is not None and kv.value == b"\x00binary\xff"
            assert kv.create_revision == kv.mod_revision == rev
            await client.put(b"/g/b", b"2")
            await client.put(b"/h", b"3")
            assert [k.key for k in await client.get_prefix(b"/g/")] == [b"/g/a", b"/g/b"]
            assert await client.delete(b"/g/a") == 1
            assert await client.get(b"/g/a") is None
        finally:
            await client.close()
    run(main())


def test_create_if_absent_transaction_lets_one_of_two_win(etcd):
    async def take(client, who):
        return await client.txn([Compare(b"/leader", "CREATE", "EQUAL", 0)],
                                [put_op(b"/leader", who)], [range_op(b"/leader")])

    async def main():
        a, b = EtcdClient([etcd.endpoints]), EtcdClient([etcd.endpoints])
        try:
            first, second = await take(a, b"a"), await take(b, b"b")
            assert first.succeeded and not second.succeeded
            holder = second.ranges[0][0]
            assert holder.value == b"a" and holder.create_revision == first.revision
            # compare-and-swap on the revision the winner saw
            swap = await a.txn([Compare(b"/leader", "MOD", "EQUAL", holder.mod_revision)],
                               [put_op(b"/leader", b"a2")])
            stale = await b.txn([Compare(b"/leader", "MOD", "EQUAL", holder.mod_revision)],
                                [put_op(b"/leader", b"b2")])
            assert swap.succeeded and not stale.succeeded
            assert (await a.get(b"/leader")).value == b"a2"
        finally:
            await a.close()
            await b.close()
    run(main())


def test_a_key_under_a_lease_goes_with_the_lease(etcd):
    async def main():
        client = EtcdClient([etcd.endpoints])
        try:
            lease = await client.grant(2)
            await client.put(b"/owned", b"x", lease=lease)
            assert (await client.get(b"/owned")).lease == lease
            assert await client.keepalive(lease) == 2
            await client.revoke(lease)
            assert await client.get(b"/owned") is None
            assert await client.keepalive(lease) == 0  # gone: renewing says so
            short = await client.grant(1)
            await client.put(b"/short", b"y", lease=short)
            for _ in range(100):  # etcd expires it after its TTL (checked twice a second)
                if await client.get(b"/short") is None:
                    break
                await asyncio.sleep(0.1)
            assert await client.get(b"/short") is None
        finally:
            await client.close()
    run(main())


def test_a_dead_endpoint_is_skipped_and_none_alive_is_unavailable(etcd):
    async def main():
        dead = f"127.0.0.1:{free_port()}"
        client = EtcdClient([dead, etcd.endpoints], timeout=1.0)
        try:
            await client.put(b"/k", b"v")
            assert (await client.get(b"/k")).value == b"v"
        finally:
            await client.close()
        nobody = EtcdClient([dead], timeout=0.5)
        with pytest.raises(EtcdUnavailable):
            await nobody.get(b"/k")
        await nobody.close()
    run(main())
