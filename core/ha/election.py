"""Who is a broker group's master, decided on etcd (controllerMode: etcd), as Patroni decides
a PostgreSQL primary, with RocketMQ 5's controller rules for who may be elected.

Keys under ``<etcdKeyPrefix>/<brokerClusterName>/<brokerName>/`` (docs/operations.md has
the diagram):
- ``leader``: the master's `Leader` record, put under its lease by a transaction that
  requires the key to be absent and the history unchanged; gone when the lease expires.
- ``epochs``: the group's elections, one (epoch, start offset, brokerId) each, appended in
  that same transaction: the epoch is the election's number, the start offset where the
  new master's own writes begin. A node coming back cuts its log there (epoch_file.py).
- ``syncStateSet``: the members in sync (RocketMQ 5's SyncStateSet), written by the
  master under a compare on its lease: a slave joins once it has acknowledged what the
  master held at the previous look, and leaves after haMaxTimeSlaveNotCatchup without
  catching up. Only a member may take ``leader`` (unless enableElectUncleanMaster), and
  among the members alive the one whose log goes furthest (ties: the lower brokerId).
- ``members/<brokerId>``: each node's own record under its own lease: its log's end and
  the local address of its HA connection (how the master tells its slaves apart).

Every node keeps one lease alive, renewing every TTL/3. The master fences itself: the
store refuses puts past the last renewal's send time + TTL - margin (`store.write_deadline`,
checked on every put, so a master resumed from SIGSTOP refuses its first write), which is
before etcd can expire the lease and let another node in; then it steps down, revokes
its lease and follows whoever is elected, cutting what it wrote past that master's start.
A master that dies does not wait out its lease (etcdElectOnMasterDeath): a slave whose HA
link to it ended probes every port it published in ``leader``; when every connect is refused
(no process listens there: liveness.py) the slave revokes exactly that lease, and the
election proceeds under the same rules. A frozen or cut-off master is never taken for dead.
The election never touches the log itself: `promote` and `demote` (the broker) do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

import orjson

from ..config import BrokerConfig
from ..store.message_store import MessageStore
from .epoch_file import EpochEntry, EpochFile, truncate_point
from .etcd_client import Compare, EtcdClient, EtcdError, KeyValue, put_op
from .liveness import PROBE_TIMEOUT_S, all_refused
from .master import SlaveState
from .service import HAService

log = logging.getLogger(__name__)

# Right after the master goes or changes, the nodes look every REGROUP_TICK_S (or their
# etcdCheckInterval if shorter) for REGROUP_S: a candidate takes the key as soon as its wait
# is over, the others see the new master at once, and a slave's record (the HA connection's
# address the master knows it by) and the master's in-sync set follow within a few looks,
# not one etcdCheckInterval each (SYNC_MASTER's first acknowledgement waits on that).
REGROUP_TICK_S = 0.1
REGROUP_S = 3.0


@dataclass(slots=True, frozen=True)
class Leader:
    """The ``leader`` key's value."""

    broker_id: int
    epoch: int
    start_offset: int
    addr: str  # remoting host:port
    ha_addr: str  # where slaves replicate from
    listeners: tuple[str, ...] = ()  # every other client port (Kafka, AMQP, ...): probed too

    def encode(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def decode(cls, data: bytes) -> "Leader":
        fields = orjson.loads(data)
        fields["listeners"] = tuple(fields.get("listeners", ()))
        return cls(**fields)

    @property
    def ports(self) -> list[str]:
        """Every address the master listens on: all refused proves its process gone."""
        return list(dict.fromkeys([self.addr, self.ha_addr, *self.listeners]))


class Election:
    def __init__(self, config: BrokerConfig, store: MessageStore, ha: HAService, epoch_file: EpochFile, *,
                 promote: Callable[[], Awaitable[None]], demote: Callable[[], Awaitable[None]],
                 followed: Callable[[], None] = lambda: None, client: EtcdClient | None = None) -> None:
        """``followed``: told when this node starts following another master (routes and the
        group's peers are learnt again)."""
        self.config = config
        self.store = store
        self.ha = ha
        self.epoch_file = epoch_file
        self._promote, self._demote, self._followed = promote, demote, followed
        self.ttl = config.etcd_lease_ttl
        self.margin = max(0.5, self.ttl / 5)  # fence this long before the lease can expire
        self.tick = config.etcd_check_interval / 1000
        self.client = client or EtcdClient(config.etcd_endpoints.split(","), timeout=min(2.0, self.ttl / 4))
        prefix = f"{config.etcd_key_prefix.rstrip('/')}/{config.broker_cluster_name}/{config.broker_name}/"
        self.key_leader = (prefix + "leader").encode()
        self.key_epochs = (prefix + "epochs").encode()
        self.key_sync = (prefix + "syncStateSet").encode()
        self.key_members = (prefix + "members/").encode()
        self.me = config.broker_id
        self.lease = 0
        self.renewed_at = 0.0  # monotonic send time of the last successful grant or renewal
        self.is_master = False
        self.leader: Leader | None = None  # the master this node follows or is
        self.sync_state_set: set[int] = set()
        self._caught_up_at: dict[int, float] = {}
        self._confirm = 0  # the master's log end at the previous look: a slave there is in sync
        self._absent_since: float | None = None
        self._published: bytes = b""
        self._logged: str = ""
        self._member_of: dict[str, int] = {}  # HA connection's slave address -> brokerId
        self._regroup_until = 0.0  # monotonic: look every REGROUP_TICK_S until then
        self.listeners: tuple[str, ...] = ()  # this node's other client ports (the server sets them)
        self._closed = False
        self._wake = asyncio.Event()  # the loop looks again now (a dead master's lease ended)
        self._proving: asyncio.Task[None] | None = None
        ha.counts = self._counts
        if config.etcd_elect_on_master_death:
            ha.on_master_link_lost = self._master_link_lost

    # -- the loop ---------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self.epoch_file.load()
        while not stop.is_set() and not self._closed:
            try:
                await self._step()
            except EtcdError as exc:
                self._log_once(f"etcd: {exc}")
            except Exception:  # a role change that failed half-way: not a master then
                log.exception("election: a step failed")
                if self.is_master:
                    await self._step_down("a step of the election failed")
            if self._closed:
                break
            if self.is_master and time.monotonic() > self.store.write_deadline:
                await self._step_down("its lease could not be renewed in time: fenced")
            tick = self.tick if time.monotonic() >= self._regroup_until else min(self.tick, REGROUP_TICK_S)
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(waits, timeout=tick, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            self._wake.clear()
        if self._proving is not None:
            self._proving.cancel()

    async def close(self) -> None:
        """A clean stop: refuse writes, then hand the group over at once (revoke the lease).
        Called before any port closes (so no port is closed while this node may write: the
        proof of death counts on that) and again when the broker stops."""
        self._closed = True
        self.store.write_deadline = 0.0
        self._wake.set()  # the loop ends after its current step
        lease, self.lease = self.lease, 0
        if lease:
            try:
                await self.client.revoke(lease)
            except EtcdError:
                pass

    def _writes_until(self, deadline: float) -> None:
        """The store accepts puts until ``deadline`` (monotonic), unless this node is closing."""
        self.store.write_deadline = 0.0 if self._closed else deadline

    async def _step(self) -> None:
        await self._keep_lease()
        if not self.lease:  # lost just now: the next step asks for a new one
            return
        kv = await self.client.get(self.key_leader)
        leader = Leader.decode(kv.value) if kv is not None else None
        if self.is_master:
            if kv is None or kv.lease != self.lease:
                await self._step_down("the leader key is no longer this node's")
                return
            await self._publish()
            await self._update_sync_state_set()
        elif kv is not None and leader is not None:
            self._absent_since = None
            if leader.broker_id == self.me and kv.lease != self.lease:
                # this node's key from before a restart (the store lock says that process is
                # gone): end it now rather than wait for its TTL
                await self.client.revoke(kv.lease)
                return
            await self._follow(leader)
            await self._publish()
        else:
            await self._candidate()

    # -- the lease --------------------------------------------------------------------------
    async def _keep_lease(self) -> None:
        now = time.monotonic()
        if not self.lease:
            self.lease = await self.client.grant(self.ttl)
            self.renewed_at = now
            self._published = b""
            return
        if now - self.renewed_at < self.ttl / 3:
            return
        left = await self.client.keepalive(self.lease)
        if left <= 0:
            self.lease = 0
            if self.is_master:
                await self._step_down("its lease expired")
            return
        self.renewed_at = now
        if self.is_master:
            self._writes_until(now + left - self.margin)

    # -- following --------------------------------------------------------------------------
    async def _follow(self, leader: Leader) -> None:
        if self.leader == leader:
            return
        history, _ = await self._history()
        cut = truncate_point(self.epoch_file.last_epoch, history, self.store.commitlog.max_offset)
        if cut is not None:
            log.warning("election: this log goes past %d, where epoch %d's master began: cutting "
                        "%d bytes no later master had before following broker %d", cut,
                        leader.epoch, self.store.commitlog.max_offset - cut, leader.broker_id)
            await self.ha.set_role("SLAVE", truncate_to=cut)
        for entry in history:
            if entry.epoch > self.epoch_file.last_epoch:
                self.epoch_file.append(entry)
        self.leader = leader
        self._regroup_until = time.monotonic() + REGROUP_S  # the HA link's address published soon
        log.info("election: following broker %d (epoch %d) at %s", leader.broker_id, leader.epoch,
                 leader.ha_addr)
        if self.ha.slave is not None:
            self.ha.slave.follow(leader.ha_addr)
        self._followed()

    async def _publish(self, force: bool = False) -> None:
        """This node's members/<id> record (under its lease), when it changed."""
        slave = self.ha.slave
        record = {"brokerId": self.me, "offset": self.store.commitlog.max_offset,
                  "haLocal": slave.local_address if slave is not None else "",
                  "epoch": self.epoch_file.last_epoch}
        if not force:  # the offset alone changes too often to write each time
            record_key = orjson.dumps({**record, "offset": 0})
            if record_key == self._published:
                return
            self._published = record_key
        await self.client.put(self.key_members + str(self.me).encode(), orjson.dumps(record), self.lease)

    async def _history(self) -> tuple[list[EpochEntry], KeyValue | None]:
        kv = await self.client.get(self.key_epochs)
        entries = [EpochEntry(*e) for e in orjson.loads(kv.value)] if kv is not None else []
        return entries, kv

    # -- taking the key ---------------------------------------------------------------------
    async def _candidate(self) -> None:
        now = time.monotonic()
        if self._absent_since is None:
            self._absent_since = now
            self._regroup_until = now + REGROUP_S  # no master: the key is taken, and seen, sooner
            self.leader = None
            await self._publish(force=True)  # the log's end every rival compares with
            return
        sync_kv = await self.client.get(self.key_sync)
        members = set(orjson.loads(sync_kv.value)["members"]) if sync_kv is not None else None
        eligible = members is None or self.me in members or self.config.enable_elect_unclean_master
        if not eligible:
            self._log_once(f"election: no master, and broker {self.me} is not in the in-sync set "
                           f"{sorted(members or ())}: waiting for a member (enableElectUncleanMaster=false)")
            return
        if now - self._absent_since < 2 * self.tick:  # the rivals publish their ends meanwhile
            return
        mine = (self.store.commitlog.max_offset, -self.me)
        for kv in await self.client.get_prefix(self.key_members):
            rival = orjson.loads(kv.value)
            rid = rival["brokerId"]
            if rid == self.me or (members is not None and rid not in members
                                  and not self.config.enable_elect_unclean_master):
                continue
            if (rival["offset"], -rid) > mine:
                return  # a member further ahead is alive: it takes the key
        await self._take(sync_kv)

    async def _take(self, sync_kv: KeyValue | None) -> None:
        history, epochs_kv = await self._history()
        epoch = (history[-1].epoch if history else 0) + 1
        start = self.store.commitlog.max_offset
        c = self.config
        leader = Leader(self.me, epoch, start, f"{c.broker_ip1}:{c.listen_port}",
                        f"{c.broker_ip2 or c.broker_ip1}:{c.ha_port}", self.listeners)
        entry = EpochEntry(epoch, start, self.me)
        compare = [Compare(self.key_leader, "CREATE", "EQUAL", 0),
                   Compare(self.key_epochs, "MOD", "EQUAL", epochs_kv.mod_revision if epochs_kv else 0),
                   Compare(self.key_sync, "MOD", "EQUAL", sync_kv.mod_revision if sync_kv else 0)]
        ops = [put_op(self.key_leader, leader.encode(), self.lease),
               put_op(self.key_epochs, orjson.dumps([[e.epoch, e.start_offset, e.broker_id]
                                                     for e in [*history, entry]])),
               put_op(self.key_sync, orjson.dumps({"epoch": epoch, "members": [self.me]}))]
        sent = time.monotonic()
        result = await self.client.txn(compare, ops)
        if not result.succeeded:
            return
        if self._closed:  # stopping meanwhile: hand the key back at once (close() revoked the
            if self.lease:  # lease it found; this one was granted after)
                await self.client.revoke(self.lease)
            return
        # the lease was renewed at renewed_at at the latest: writes stop before it can expire
        self._writes_until(self.renewed_at + self.ttl - self.margin)
        if time.monotonic() > self.store.write_deadline:  # the take itself took too long
            log.warning("election: took the leader key too late to use it (%.1f s)", time.monotonic() - sent)
            return
        self.epoch_file.append(entry)
        self.store.leader_epoch = epoch  # on the Kafka batches it stores from now on (KIP-101)
        self.is_master = True
        self.leader = leader
        self.sync_state_set = {self.me}
        self._caught_up_at.clear()
        self._confirm = start
        self._absent_since = None
        self._regroup_until = time.monotonic() + REGROUP_S  # the slaves rejoin the in-sync set sooner
        log.warning("election: broker %d is master of %s, epoch %d, its writes start at offset %d",
                    self.me, c.broker_name, epoch, start)
        await self._promote()

    # -- a master that died ----------------------------------------------------------------
    def _master_link_lost(self) -> None:
        """The HA link to the master ended: look for proof that its process is gone (one
        look at a time; the slave's reconnects, every second, bring the next)."""
        if self.is_master or self._closed or (self._proving is not None and not self._proving.done()):
            return
        self._proving = asyncio.get_running_loop().create_task(self._end_dead_masters_lease(),
                                                               name="election-master-death")

    async def _end_dead_masters_lease(self) -> None:
        """Revoke the lease that holds ``leader`` now, if nothing listens at any port that
        leader published. Revoking by the lease id read with the key touches that holder's
        keys only: a newer master's key is under its own lease (it could be taken only once
        this one was gone), so whatever happened in between, no live master is unseated."""
        try:
            kv = await self.client.get(self.key_leader)
            if kv is None or not kv.lease or self._closed:
                return
            leader = Leader.decode(kv.value)
            if leader.broker_id == self.me:
                return
            if not await all_refused(leader.ports, min(PROBE_TIMEOUT_S, self.ttl / 4)):
                self._log_once(f"election: lost the HA link to broker {leader.broker_id}, but not every "
                               f"one of its ports refuses connects: no proof it died, its lease decides")
                return
            log.warning("election: broker %d (epoch %d) is gone: every connect to %s was refused; "
                        "ending its lease now instead of in up to %d s", leader.broker_id, leader.epoch,
                        ", ".join(leader.ports), self.ttl)
            await self.client.revoke(kv.lease)
        except EtcdError as exc:
            self._log_once(f"etcd: {exc}")
            return
        self._regroup_until = time.monotonic() + REGROUP_S
        self._wake.set()

    # -- the master's duties ----------------------------------------------------------------
    async def _update_sync_state_set(self) -> None:
        master = self.ha.master
        now = time.monotonic()
        if master is not None:
            by_local = {}
            for kv in await self.client.get_prefix(self.key_members):
                record = orjson.loads(kv.value)
                if record.get("haLocal"):
                    by_local[record["haLocal"]] = record["brokerId"]
            self._member_of = by_local
            for state in master.slaves.values():
                member = by_local.get(state.address)
                if member is not None and state.acked >= self._confirm:
                    self._caught_up_at[member] = now
        self._confirm = self.store.commitlog.max_offset
        limit = self.config.ha_max_time_slave_not_catchup / 1000
        wanted = {self.me} | {m for m, t in self._caught_up_at.items() if now - t <= limit}
        if wanted == self.sync_state_set:
            return
        assert self.leader is not None
        result = await self.client.txn(
            [Compare(self.key_leader, "LEASE", "EQUAL", self.lease)],
            [put_op(self.key_sync, orjson.dumps({"epoch": self.leader.epoch, "members": sorted(wanted)}))])
        if result.succeeded:
            log.info("election: in-sync set %s -> %s", sorted(self.sync_state_set), sorted(wanted))
            self.sync_state_set = wanted

    def _counts(self, state: SlaveState) -> bool:
        """A slave's acknowledgement counts for SYNC_MASTER once it is in the in-sync set."""
        return self._member_of.get(state.address, -1) in self.sync_state_set

    async def _step_down(self, why: str) -> None:
        self.store.write_deadline = 0.0
        if not self.is_master:
            return
        log.warning("election: broker %d steps down as master: %s", self.me, why)
        self.is_master = False
        self.leader = None
        lease, self.lease = self.lease, 0
        if lease:
            try:
                await self.client.revoke(lease)
            except EtcdError:
                pass  # it expires by itself; this node no longer writes either way
        await self._demote()

    def _log_once(self, line: str) -> None:
        if line != self._logged:
            log.warning("%s", line)
            self._logged = line
