"""The broker's typed configuration: one object, built once at start-up, passed down.

Keys use RocketMQ's names (``listenPort``, ``flushDiskType``, ``fileReservedTime`` ...) so a
RocketMQ operator recognises them; attributes are their snake_case spelling. Values are
validated here, so a bad file fails at start-up, never later, with every problem at once
(one line each, naming the key: a user fixes them all in one go).
This module reads no files: ``rocketport.config_file`` turns YAML or ``broker.properties``
into the mapping that :func:`BrokerConfig.from_mapping` checks.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import ConfigError
from .inert_keys import INERT_KEYS, REFUSED_VALUES

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


MAX_PORT = 65535
FREE_PORT = -1  # tlsPort / wssPort: a port the OS picks when binding (tests, brokers side by side)
RABBITMQ_MAX_MESSAGE_SIZE = 128 << 20  # RabbitMQ 3.x's default max_message_size
MAX_MESSAGE_SIZE = 512 << 20  # RabbitMQ's ceiling for max_message_size


def _key(key: str, *, choices: tuple[str, ...] = (), minimum: int | None = None,
         maximum: int | None = None) -> dict:
    """Field metadata: the RocketMQ key name and the value's constraints."""
    return {"key": key, "choices": choices, "minimum": minimum, "maximum": maximum}


class InvalidConfig(ConfigError):
    """Every problem of one configuration; the message is one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(slots=True)
class ProtocolConfig:
    """One wire front-end: whether it listens, and where."""

    enabled: bool
    port: int
    host: str = "127.0.0.1"
    # a second listener serving the same protocol over WebSocket (STOMP's wsPort); 0 = none.
    # Only sections listed in _WS_SECTIONS accept the key.
    ws_port: int = 0
    # http's metricsPerObject: per-topic and per-group series on /metrics (false leaves
    # only the broker's and each protocol's, for brokers with very many queues)
    metrics_per_object: bool = True
    # http's allowRemote: the console and /api/ answer clients off loopback without aclEnable
    # (with aclEnable they ask every client for an admin account's basic auth instead)
    allow_remote: bool = False
    # the largest message body the front-end takes (maxMessageSize in its section: RabbitMQ's
    # max_message_size for STOMP and AMQP); 0 = the broker's maxMessageSize. Only sections listed in
    # _SIZE_SECTIONS accept the key.
    max_message_size: int = 0
    # AMQP's logins without aclEnable, as RabbitMQ's default_user, default_pass and
    # loopback_users: the one account (defaultUser "" = any credentials log in) and the users
    # who may log in only from a loopback address. Only _LOGIN_SECTIONS accept the keys.
    default_user: str = ""
    default_pass: str = ""
    loopback_users: tuple[str, ...] = ()
    # the protocol's own TLS port (tlsPort: Kafka's SSL listener, amqps 5671, STOMP/TLS 61614,
    # HTTPS) and STOMP's WebSocket over TLS (wssPort); 0 = none, FREE_PORT (-1) = one the OS
    # picks (the listener's bound port says which). Only _TLS_SECTIONS take tlsPort
    tls_port: int = 0
    wss_port: int = 0


def bind_port(port: int) -> int:
    """The port a listener binds for a tlsPort / wssPort value: 0 (the OS picks) for FREE_PORT."""
    return 0 if port == FREE_PORT else port


@dataclass(slots=True, frozen=True)
class ConnectionLimits:
    """What every front-end's listener enforces (see the server* keys below)."""

    max_connections: int = 10_000
    idle_timeout: float = 600.0
    frame_timeout: float = 30.0


@dataclass(slots=True)
class BrokerConfig:
    # identity and network
    broker_cluster_name: str = field(default="DefaultCluster", metadata=_key("brokerClusterName"))
    broker_name: str = field(default="broker-a", metadata=_key("brokerName"))
    broker_id: int = field(default=0, metadata=_key("brokerId", minimum=0))
    broker_ip1: str = field(default="127.0.0.1", metadata=_key("brokerIP1"))
    listen_port: int = field(default=10911, metadata=_key("listenPort", minimum=0, maximum=MAX_PORT))
    bind_address: str = field(default="127.0.0.1", metadata=_key("bindAddress"))
    namesrv_addr: str = field(default="", metadata=_key("namesrvAddr"))
    broker_role: str = field(default="ASYNC_MASTER", metadata=_key(
        "brokerRole", choices=("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")))
    # replication (RocketMQ 4.x HA, core/ha/): a slave streams its master's CommitLog
    # haListenPort 0: listenPort + 1 (ephemeral when listenPort is 0); a master listens for
    # slaves when it is SYNC_MASTER, registers with name servers, or names the port
    ha_listen_port: int = field(default=0, metadata=_key("haListenPort", minimum=0, maximum=MAX_PORT))
    broker_ip2: str = field(default="", metadata=_key("brokerIP2"))  # the HA address ("": brokerIP1)
    ha_master_address: str = field(default="", metadata=_key("haMasterAddress"))  # "": from the name server
    ha_send_heartbeat_interval: int = field(default=5000, metadata=_key("haSendHeartbeatInterval", minimum=10))
    ha_housekeeping_interval: int = field(default=20_000, metadata=_key("haHousekeepingInterval", minimum=10))
    ha_slave_fallbehind_max: int = field(default=256 << 20, metadata=_key("haSlaveFallbehindMax", minimum=0))
    # the largest frame the master sends (RocketMQ's 32 KiB: larger frames catch a slave
    # up at loopback speed with fewer Python calls)
    ha_transfer_batch_size: int = field(default=1 << 20, metadata=_key(
        "haTransferBatchSize", minimum=4096, maximum=64 << 20))
    # a slave whose log holds bytes its master never had: false refuses (and logs) every
    # reconnection until an operator decides; true cuts its log back to the master's end
    ha_slave_truncate_divergent: bool = field(default=False, metadata=_key("haSlaveTruncateDivergent"))
    sync_flush_timeout: int = field(default=5000, metadata=_key("syncFlushTimeout", minimum=1))
    # failover (core/ha/election.py): controllerMode "etcd" hands the choice of master to an
    # election on etcd (every node of a group configured alike, brokerRole the durability a
    # master keeps); "" keeps the configured roles. etcdLeaseTtl (s) bounds how long a dead
    # master holds the group; etcdCheckInterval (ms) how often a node looks at the keys
    controller_mode: str = field(default="", metadata=_key("controllerMode", choices=("", "etcd")))
    etcd_endpoints: str = field(default="", metadata=_key("etcdEndpoints"))  # host:port,...
    etcd_key_prefix: str = field(default="/rocketport", metadata=_key("etcdKeyPrefix"))
    etcd_lease_ttl: int = field(default=10, metadata=_key("etcdLeaseTtl", minimum=2, maximum=3600))
    etcd_check_interval: int = field(default=500, metadata=_key("etcdCheckInterval", minimum=50))
    # a slave whose HA link to the master ended probes the master's ports; all refused (the
    # process is gone) ends the dead master's lease at once instead of waiting out its TTL
    etcd_elect_on_master_death: bool = field(default=True, metadata=_key("etcdElectOnMasterDeath"))
    ha_max_time_slave_not_catchup: int = field(default=15_000, metadata=_key(
        "haMaxTimeSlaveNotCatchup", minimum=100))
    enable_elect_unclean_master: bool = field(default=False, metadata=_key("enableElectUncleanMaster"))
    slave_read_enable: bool = field(default=False, metadata=_key("slaveReadEnable"))
    which_broker_when_consume_slowly: int = field(default=1, metadata=_key("whichBrokerWhenConsumeSlowly", minimum=0))
    access_message_in_memory_max_ratio: int = field(default=40, metadata=_key(
        "accessMessageInMemoryMaxRatio", minimum=0, maximum=100))
    # store
    # RocketMQ keeps its store under the user's home (~/store); Rocketport's is its own
    # folder there, never the directory the broker happened to be started from
    store_path_root_dir: str = field(default="~/rocketport/store", metadata=_key("storePathRootDir"))
    store_path_commit_log: str = field(default="", metadata=_key("storePathCommitLog"))
    store_path_consume_queue: str = field(default="", metadata=_key("storePathConsumerQueue"))
    store_path_index: str = field(default="", metadata=_key("storePathIndex"))
    mapped_file_size_commit_log: int = field(default=1 << 30, metadata=_key(
        "mappedFileSizeCommitLog", minimum=64 * 1024))
    mapped_file_size_consume_queue: int = field(default=300_000 * 20, metadata=_key(
        "mappedFileSizeConsumeQueue", minimum=20 * 16))
    flush_disk_type: str = field(default="ASYNC_FLUSH", metadata=_key(
        "flushDiskType", choices=("ASYNC_FLUSH", "SYNC_FLUSH")))
    flush_interval_commit_log: int = field(default=500, metadata=_key("flushIntervalCommitLog", minimum=1))
    # SYNC_FLUSH only: hold a record from consumers until the fsync that acknowledges it
    # (false: visible once written, as RocketMQ's reput does; see docs/store-format.md)
    dispatch_after_flush: bool = field(default=False, metadata=_key("dispatchAfterFlush"))
    flush_interval_consume_queue: int = field(default=1000, metadata=_key("flushIntervalConsumeQueue", minimum=1))
    # pages ahead of the CommitLog's write position are faulted in by a worker thread
    warm_maped_file_enable: bool = field(default=True, metadata=_key("warmMapedFileEnable"))
    check_crc_on_recover: bool = field(default=True, metadata=_key("checkCRCOnRecover"))
    recover_check_window: int = field(default=64 << 20, metadata=_key("recoverCheckWindow", minimum=0))
    max_message_size: int = field(default=4 << 20, metadata=_key("maxMessageSize", minimum=1024))
    message_index_enable: bool = field(default=True, metadata=_key("messageIndexEnable"))
    max_hash_slot_num: int = field(default=5_000_000, metadata=_key("maxHashSlotNum", minimum=16))
    max_index_num: int = field(default=20_000_000, metadata=_key("maxIndexNum", minimum=16))
    # retention
    file_reserved_time: int = field(default=72, metadata=_key("fileReservedTime", minimum=0))
    delete_when: str = field(default="04", metadata=_key("deleteWhen"))
    disk_max_used_space_ratio: int = field(default=75, metadata=_key("diskMaxUsedSpaceRatio", minimum=1))
    clean_resource_interval: int = field(default=10_000, metadata=_key("cleanResourceInterval", minimum=10))
    # log compaction (core/compaction): RocketMQ 5's keys. enableCompaction switches the
    # compactor; compactionScheduleInternal (sic, RocketMQ's spelling) is the pause between
    # passes, in ms (15 s, Kafka's log.cleaner.backoff.ms; RocketMQ's default is 15 min);
    # maxOffsetMapSize bounds the cleaner's key map, in bytes (a compaction covers as many
    # dirty records as their distinct keys fit in it)
    enable_compaction: bool = field(default=True, metadata=_key("enableCompaction"))
    compaction_schedule_internal: int = field(default=15_000, metadata=_key("compactionScheduleInternal", minimum=10))
    max_offset_map_size: int = field(default=100 << 20, metadata=_key("maxOffsetMapSize", minimum=1024))
    # topics, groups, offsets
    auto_create_topic_enable: bool = field(default=True, metadata=_key("autoCreateTopicEnable"))
    default_topic_queue_nums: int = field(default=8, metadata=_key("defaultTopicQueueNums", minimum=1))
    auto_create_subscription_group: bool = field(default=True, metadata=_key("autoCreateSubscriptionGroup"))
    flush_consumer_offset_interval: int = field(default=5000, metadata=_key("flushConsumerOffsetInterval", minimum=10))
    message_delay_level: str = field(default=DEFAULT_DELAY_LEVELS, metadata=_key("messageDelayLevel"))
    flush_delay_offset_interval: int = field(default=10_000, metadata=_key("flushDelayOffsetInterval", minimum=10))
    # transactions (RocketMQ's BrokerConfig names and defaults)
    transaction_time_out: int = field(default=6_000, metadata=_key("transactionTimeOut", minimum=1))
    transaction_check_max: int = field(default=15, metadata=_key("transactionCheckMax", minimum=1))
    transaction_check_interval: int = field(default=60_000, metadata=_key("transactionCheckInterval", minimum=10))
    # in-place (Kafka) transactions: Kafka's transaction.max.timeout.ms
    transaction_max_timeout_ms: int = field(default=900_000, metadata=_key("transactionMaxTimeoutMs", minimum=1))
    # Kafka's producer.id.expiration.ms: an idempotent producer silent this long is forgotten
    producer_id_expiration_ms: int = field(default=86_400_000,
                                           metadata=_key("producerIdExpirationMs", minimum=1))
    # clients, locks
    rebalance_lock_max_live_time: int = field(default=60_000, metadata=_key("rebalanceLockMaxLiveTime", minimum=1))
    channel_expired_timeout: int = field(default=120_000, metadata=_key("channelExpiredTimeout", minimum=1))
    client_scan_interval: int = field(default=10_000, metadata=_key("clientScanInterval", minimum=10))
    # access control (remoting): RocketMQ's switch; the file is what RocketMQ reads from
    # -Drocketmq.acl.plain.file
    acl_enable: bool = field(default=False, metadata=_key("aclEnable"))
    plain_acl_file: str = field(default="conf/plain_acl.yml", metadata=_key("plainAclFile"))
    # connections, for every front-end: an idle connection (no input, no request in flight)
    # is closed after serverChannelMaxIdleTimeSeconds (RocketMQ's key; 600 s, Kafka's
    # connections.max.idle.ms, since Kafka clients go 5 minutes between metadata refreshes),
    # a frame still incomplete after serverFrameTimeoutSeconds (a slowloris) is dropped, and
    # a listener holds at most serverMaxConnections
    server_channel_max_idle_time_seconds: int = field(default=600, metadata=_key(
        "serverChannelMaxIdleTimeSeconds", minimum=1))
    server_frame_timeout_seconds: int = field(default=30, metadata=_key("serverFrameTimeoutSeconds", minimum=1))
    server_max_connections: int = field(default=10_000, metadata=_key("serverMaxConnections", minimum=1))
    # front-ends
    namesrv: ProtocolConfig = field(default_factory=lambda: ProtocolConfig(True, 9876))
    kafka: ProtocolConfig = field(default_factory=lambda: ProtocolConfig(True, 9092))
    stomp: ProtocolConfig = field(default_factory=lambda: ProtocolConfig(
        True, 61613, ws_port=15674, max_message_size=RABBITMQ_MAX_MESSAGE_SIZE))
    amqp: ProtocolConfig = field(default_factory=lambda: ProtocolConfig(
        True, 5672, max_message_size=RABBITMQ_MAX_MESSAGE_SIZE, default_user="guest", default_pass="guest",
        loopback_users=("guest",)))
    # /metrics and the JSON API (docs/observability.md); 5557 is RocketMQ 5's Prometheus
    # exporter port. Off in a config built in code (tests, embedding); conf/broker.yaml and
    # the shell's no-file default turn it on
    http: ProtocolConfig = field(default_factory=lambda: ProtocolConfig(False, 5557))
    # TLS, with RocketMQ's keys (protocols/tls.py): remoting and the name server follow the
    # mode on their own port (permissive: TLS and plaintext told apart by the first byte);
    # the other protocols serve TLS on their section's tlsPort with the same certificate
    tls_server_mode: str = field(default="disabled", metadata=_key(
        "tls.server.mode", choices=("disabled", "permissive", "enforcing")))
    tls_server_cert_path: str = field(default="", metadata=_key("tls.server.certPath"))
    tls_server_key_path: str = field(default="", metadata=_key("tls.server.keyPath"))
    # the CA that signs client certificates (mutual TLS)
    tls_server_trust_cert_path: str = field(default="", metadata=_key("tls.server.trustCertPath"))
    tls_server_need_client_auth: str = field(default="none", metadata=_key(
        "tls.server.need.client.auth", choices=("none", "optional", "require")))
    # SASL on the Kafka port ("PLAIN", or "" for none); accounts come from plainAclFile
    # (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, separated by commas). SCRAM's salted credentials
    # live in kafkaScramCredentialFile ("": <storePathRootDir>/config/scram_credentials.json),
    # set with `rocketport admin updateScramCredential`
    kafka_sasl_mechanisms: str = field(default="", metadata=_key(
        "kafkaSaslMechanisms", choices=("", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "SCRAM-SHA-256,SCRAM-SHA-512",
                                        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "PLAIN,SCRAM-SHA-256", "PLAIN,SCRAM-SHA-512")))
    kafka_scram_credential_file: str = field(default="", metadata=_key("kafkaScramCredentialFile"))
    # the Kafka record header whose value becomes a message's TAGS
    kafka_tag_header: str = field(default="tag", metadata=_key("kafkaTagHeader"))
    # KIP-848 consumer groups (group.protocol=consumer): Kafka's group.consumer.session.timeout.ms,
    # group.consumer.heartbeat.interval.ms and group.consumer.assignors (the first is the default)
    kafka_group_consumer_session_timeout_ms: int = field(default=45_000, metadata=_key(
        "kafkaGroupConsumerSessionTimeoutMs", minimum=1000))
    kafka_group_consumer_heartbeat_interval_ms: int = field(default=5_000, metadata=_key(
        "kafkaGroupConsumerHeartbeatIntervalMs", minimum=100))
    kafka_group_consumer_assignors: str = field(default="uniform,range", metadata=_key(
        "kafkaGroupConsumerAssignors", choices=("uniform,range", "range,uniform", "uniform", "range")))
    # KIP-848 online migration (Kafka's group.consumer.migration.policy): whether a running classic
    # group moves to the consumer protocol when a consumer-protocol member joins (upgrade), and
    # back when the last one leaves (downgrade)
    kafka_group_consumer_migration_policy: str = field(default="bidirectional", metadata=_key(
        "kafkaGroupConsumerMigrationPolicy", choices=("bidirectional", "upgrade", "downgrade", "disabled")))
    # incremental fetch sessions (KIP-227): Kafka's max.incremental.fetch.session.cache.slots (0: none)
    kafka_max_incremental_fetch_session_cache_slots: int = field(default=1000, metadata=_key(
        "kafkaMaxIncrementalFetchSessionCacheSlots", minimum=0, maximum=1_000_000))
    # RocketMQ keys the file named that have no effect here, with why (core/inert_keys.py):
    # not a key itself; the broker names each at start-up
    inert_keys: dict[str, str] = field(default_factory=dict, metadata={"internal": True})

    def __post_init__(self) -> None:
        self.store_path_root_dir = os.path.expanduser(self.store_path_root_dir)
        self.store_path_commit_log = os.path.expanduser(self.store_path_commit_log)
        self.store_path_consume_queue = os.path.expanduser(self.store_path_consume_queue)
        self.store_path_index = os.path.expanduser(self.store_path_index)

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return self.store_path_consume_queue or os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return self.store_path_index or os.path.join(self.store_path_root_dir, "index")

    @property
    def scram_credentials_path(self) -> str:
        return self.kafka_scram_credential_file or os.path.join(self.store_path_root_dir, "config",
                                                                 "scram_credentials.json")

    @property
    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(self.server_max_connections,
                                float(self.server_channel_max_idle_time_seconds),
                                float(self.server_frame_timeout_seconds))

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    @property
    def sync_master(self) -> bool:
        return self.broker_role == "SYNC_MASTER"

    @property
    def ha_port(self) -> int:
        """The port a master listens on for its slaves (haListenPort, else listenPort + 1)."""
        if self.ha_listen_port:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def ha_listens(self) -> bool:
        """Whether this master opens its HA port: SYNC_MASTER needs slaves; a master in a
        cluster (namesrvAddr) or naming the port offers it; the single-process default
        opens no port it was not asked for."""
        return not self.is_slave and bool(self.sync_master or self.namesrv_addr or self.ha_listen_port
                                          or self.controller_mode)

    def message_size_of(self, section: ProtocolConfig) -> int:
        """The largest body a front-end takes: its section's maxMessageSize, else the broker's."""
        return section.max_message_size or self.max_message_size

    @property
    def largest_message_size(self) -> int:
        """The largest body any enabled front-end takes: the store's limit for one message
        (each front-end refuses more than its own limit first)."""
        sections = (self.stomp, self.amqp)
        return max([self.max_message_size] + [self.message_size_of(s) for s in sections if s.enabled])

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *,
                     sources: Mapping[str, str] | None = None) -> "BrokerConfig":
        """Build from RocketMQ-named keys. A front-end's section is a nested mapping
        (``kafka: {port: 9092}``) or dotted keys (``kafka.port``, as broker.properties and
        --set spell it; later keys win). Every unknown key, nested ones included, and every
        bad value is reported in one InvalidConfig. ``sources`` says where keys came from
        (a file, "--set"), by full dotted key or by section: each problem's line starts with
        it, and lines are ordered by source."""
        by_key = {key_of(f): f for f in _settable_fields()}
        kwargs: dict[str, Any] = {}
        inert: dict[str, str] = {}
        problems: list[tuple[str, str]] = []  # (dotted key, line)
        for key, raw in _sections(values).items():
            f = by_key.get(key)
            if f is None and key in INERT_KEYS:
                refused = REFUSED_VALUES.get((key, _text(raw).strip().lower()))
                if refused:
                    problems.append((key, refused))
                inert[key] = INERT_KEYS[key]
            elif f is None:
                problems.append((key, _unknown(key, _ALL_KEYS)))
            elif f.name in _PROTOCOL_FIELDS:
                section = _protocol_section(key, f, raw, problems)
                if section is not None:
                    kwargs[f.name] = section
            else:
                try:
                    kwargs[f.name] = _coerce(f, raw)
                except (TypeError, ValueError) as exc:
                    problems.append((key, f"{key}: {exc}"))
        role, broker_id = kwargs.get("broker_role", "ASYNC_MASTER"), kwargs.get("broker_id", 0)
        if kwargs.get("controller_mode") == "etcd":  # the election decides the role
            problems.extend(_election_problems(kwargs))
        elif role == "SLAVE" and broker_id == 0:
            problems.append(("brokerId", "brokerId=0 names the master: a SLAVE needs brokerId > 0"))
        elif role != "SLAVE" and broker_id != 0:
            problems.append(("brokerId", f"brokerId={broker_id} names a slave: a master "
                                         f"({role}) needs brokerId=0"))
        if problems:
            raise InvalidConfig(_locate(problems, sources or {}))
        return cls(**kwargs, inert_keys=inert)

    def update_live(self, changes: Mapping[str, Any]) -> dict[str, str]:
        """Apply RocketMQ-named ``changes`` to this running config (UPDATE_BROKER_CONFIG):
        only keys in LIVE_KEYS, which the broker reads where it uses them; every value is
        checked as a file's would be. All or nothing: an InvalidConfig names each problem.
        Returns the changes as applied, by key, as text."""
        problems = [f"{key}: needs a restart (it is read when the broker starts)" if key in _ALL_KEYS
                    else _unknown(key, _ALL_KEYS) for key in changes if key not in LIVE_KEYS]
        if problems:
            raise InvalidConfig(problems)
        checked = BrokerConfig.from_mapping({**self.as_properties(), **changes})
        by_key = {key_of(f): f for f in _settable_fields()}
        for key in changes:
            setattr(self, by_key[key].name, getattr(checked, by_key[key].name))
        return {key: self.as_properties()[key] for key in changes}

    def with_overrides(self, **changes: Any) -> "BrokerConfig":
        return dataclasses.replace(self, **changes)

    def shown_properties(self) -> dict[str, str]:
        """`as_properties` for a remote reader (GET_BROKER_CONFIG): secrets masked."""
        return {k: ("******" if k in SECRET_KEYS and v else v) for k, v in self.as_properties().items()}

    def as_properties(self) -> dict[str, str]:
        """Every setting by its RocketMQ name, as broker.properties would spell it
        (front-ends as ``kafka.port`` ...); what GET_BROKER_CONFIG reports."""
        out: dict[str, str] = {}
        for f in _settable_fields():
            value = getattr(self, f.name)
            if f.name in _PROTOCOL_FIELDS:
                for sub in _section_keys(f.name):
                    out[f"{key_of(f)}.{sub}"] = _text(getattr(value, _SECTION_ATTRIBUTES.get(sub, sub)))
            else:
                out[key_of(f)] = _text(value)
        return out


def _text(value: Any) -> str:
    if isinstance(value, tuple):  # a list of names (loopbackUsers)
        return ",".join(value)
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


_PROTOCOL_FIELDS = {"namesrv", "kafka", "stomp", "amqp", "http"}
SECRET_KEYS = frozenset({"amqp.defaultPass"})  # never sent over the wire
_PROTOCOL_KEYS = ("enabled", "port", "host")
_WS_SECTIONS = {"stomp"}  # sections with a WebSocket listener: they also take wsPort
_METRICS_SECTIONS = {"http"}  # the section serving /metrics: it also takes metricsPerObject
_SIZE_SECTIONS = {"stomp", "amqp"}  # sections with a message size limit of their own: maxMessageSize
_TLS_SECTIONS = {"kafka", "amqp", "stomp", "http"}  # sections with a TLS port of their own: tlsPort
_LOGIN_SECTIONS = {"amqp"}  # sections with RabbitMQ's default account: defaultUser, defaultPass, loopbackUsers
_SECTION_ATTRIBUTES = {"wsPort": "ws_port", "metricsPerObject": "metrics_per_object", "allowRemote": "allow_remote",
                       "maxMessageSize": "max_message_size", "defaultUser": "default_user",
                       "defaultPass": "default_pass", "loopbackUsers": "loopback_users",
                       "tlsPort": "tls_port", "wssPort": "wss_port"}


def _section_keys(section: str) -> tuple[str, ...]:
    return _PROTOCOL_KEYS + (("wsPort", "wssPort") if section in _WS_SECTIONS else ()) \
        + (("tlsPort",) if section in _TLS_SECTIONS else ()) \
        + (("metricsPerObject", "allowRemote") if section in _METRICS_SECTIONS else ()) \
        + (("maxMessageSize",) if section in _SIZE_SECTIONS else ()) \
        + (("defaultUser", "defaultPass", "loopbackUsers") if section in _LOGIN_SECTIONS else ())


def _sections(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with dotted section keys (``kafka.port``) folded into their section; a
    dotted key overrides a section that is not a mapping (a file's ``kafka: 9092`` under
    ``--set kafka.port=...``), and None (``kafka:`` with nothing under it) is an empty section."""
    out: dict[str, Any] = {}
    for key, raw in values.items():
        key = str(key)
        section, dot, sub = key.partition(".")
        if dot and section in _PROTOCOL_FIELDS:
            current = out.get(section)
            if not isinstance(current, Mapping):
                current = out[section] = {}
            elif not isinstance(current, dict):
                current = out[section] = dict(current)
            current[sub] = raw
        elif key in _PROTOCOL_FIELDS and isinstance(raw, Mapping):
            current = out.get(key)
            out[key] = {**current, **raw} if isinstance(current, Mapping) else dict(raw)
        else:
            out[key] = {} if key in _PROTOCOL_FIELDS and raw is None else raw
    return out


def _normal(key: str) -> str:
    return re.sub(r"[^0-9a-z]", "", key.lower())


def _suggest(key: str, candidates: tuple[str, ...]) -> str | None:
    """The key meant: the same up to case and separators (listen_port), else the closest."""
    for candidate in candidates:
        if _normal(candidate) == _normal(key):
            return candidate
    close = difflib.get_close_matches(key, candidates, n=1)
    return close[0] if close else None


def _unknown(key: str, candidates: tuple[str, ...]) -> str:
    hint = _suggest(key, candidates)
    return f"unknown key {key!r}" + (f" (did you mean {hint!r}?)" if hint else "")


def _locate(problems: list[tuple[str, str]], sources: Mapping[str, str]) -> list[str]:
    """Each problem's line behind where its key came from, the lines grouped by source in
    the order sources are listed (a file's before --set's), each group as found."""
    order = {label: rank for rank, label in enumerate(dict.fromkeys(sources.values()))}
    located = []
    for key, line in problems:
        label = sources.get(key) or sources.get(key.partition(".")[0])
        located.append((order.get(label, -1) if label else -1, f"{label}: {line}" if label else line))
    return [line for _, line in sorted(located, key=lambda item: item[0])]


def key_of(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or f.name


def _settable_fields() -> tuple[dataclasses.Field, ...]:
    """The fields a file sets (not the config's own record of inert keys)."""
    return tuple(f for f in dataclasses.fields(BrokerConfig) if not f.metadata.get("internal"))


_DEFAULTS = BrokerConfig()  # every section's defaults, for keys a file leaves out

# every key a file may name, sections' keys dotted: what a misspelt key is compared with
_ALL_KEYS = tuple(key_of(f) for f in _settable_fields() if f.name not in _PROTOCOL_FIELDS) \
    + tuple(f"{section}.{sub}" for section in sorted(_PROTOCOL_FIELDS) for sub in _section_keys(section)) \
    + tuple(sorted(_PROTOCOL_FIELDS)) + tuple(INERT_KEYS)


# keys UPDATE_BROKER_CONFIG may change while the broker runs: each is read where it is used
LIVE_KEYS = frozenset({"autoCreateTopicEnable", "autoCreateSubscriptionGroup", "defaultTopicQueueNums",
                       "fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio"})

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _integer(raw: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"expected an integer, got {raw!r}")
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"must be <= {maximum}, got {value}")
    return value


def _coerce(f: dataclasses.Field, raw: Any) -> Any:
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    if kind == "bool":
        return _boolean(raw)
    if kind == "int":
        return _integer(raw, f.metadata.get("minimum"), f.metadata.get("maximum"))
    value = "" if raw is None else str(raw).strip()
    choices = f.metadata.get("choices")
    if choices and value not in choices:
        raise ValueError(f"must be one of {', '.join(c or repr(c) for c in choices)}, got {value!r}")
    if f.name == "message_delay_level":
        from .consumer.delay_levels import DelayLevelError, parse_delay_levels
        try:
            parse_delay_levels(value)
        except DelayLevelError as exc:
            raise ValueError(str(exc)) from None
    if f.name == "delete_when" and not re.fullmatch(r"\d{1,2}(;\d{1,2})*", value):
        raise ValueError(f"expected hours like '04' or '04;16', got {value!r}")
    return value


def _names(value: Any) -> tuple[str, ...]:
    """A list of names: a YAML list, or one string of names separated by commas (a
    broker.properties value); empty or none: no names."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"expected a list of names, got {value!r}")
    return tuple(str(item).strip() for item in items if str(item).strip())


def _protocol_section(key: str, f: dataclasses.Field, raw: Any,
                      problems: list[tuple[str, str]]) -> ProtocolConfig | None:
    """A front-end's section with its defaults for keys not given; each unknown key or bad
    value goes to ``problems`` by its dotted name (``kafka.port``), None if there was one."""
    default: ProtocolConfig = getattr(_DEFAULTS, f.name)
    if not isinstance(raw, Mapping):
        problems.append((key, f"{key}: expected a section with {', '.join(_section_keys(key))}, got {raw!r}"))
        return None
    values: dict[str, Any] = {}
    found = len(problems)
    for sub, value in raw.items():
        full = f"{key}.{sub}"
        try:
            if sub == "enabled":
                values[sub] = _boolean(value)
            elif sub == "port":
                values[sub] = _integer(value, 0, MAX_PORT)
            elif sub == "host":
                values[sub] = "" if value is None else str(value).strip()
            elif sub == "maxMessageSize" and key in _SIZE_SECTIONS:
                values["max_message_size"] = _integer(value, 1024, MAX_MESSAGE_SIZE)
            elif sub in ("defaultUser", "defaultPass") and key in _LOGIN_SECTIONS:
                values[_SECTION_ATTRIBUTES[sub]] = "" if value is None else str(value)
            elif sub == "loopbackUsers" and key in _LOGIN_SECTIONS:
                values["loopback_users"] = _names(value)
            elif sub == "wsPort" and key in _WS_SECTIONS:
                values["ws_port"] = _integer(value, 0, MAX_PORT)
            elif sub == "wssPort" and key in _WS_SECTIONS:
                values["wss_port"] = _integer(value, FREE_PORT, MAX_PORT)
            elif sub == "tlsPort" and key in _TLS_SECTIONS:
                values["tls_port"] = _integer(value, FREE_PORT, MAX_PORT)
            elif sub == "metricsPerObject" and key in _METRICS_SECTIONS:
                values["metrics_per_object"] = _boolean(value)
            elif sub == "allowRemote" and key in _METRICS_SECTIONS:
                values["allow_remote"] = _boolean(value)
            else:
                problems.append((full, _unknown(full, _ALL_KEYS)))
        except ValueError as exc:
            problems.append((full, f"{full}: {exc}"))
    return None if len(problems) > found else dataclasses.replace(default, **values)


def _election_problems(kwargs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """controllerMode etcd: every node names the etcd endpoints, the master role it would
    take, and its own brokerId (1 and up: 0 is the id the elected master registers under)."""
    problems = []
    if not kwargs.get("etcd_endpoints", "").strip():
        problems.append(("etcdEndpoints", "controllerMode=etcd needs etcdEndpoints (host:port,...)"))
    if kwargs.get("broker_role", "ASYNC_MASTER") == "SLAVE":
        problems.append(("brokerRole", "controllerMode=etcd: brokerRole is the role a node takes "
                                       "when elected, SYNC_MASTER or ASYNC_MASTER, not SLAVE"))
    if kwargs.get("broker_id", 0) < 1:
        problems.append(("brokerId", "controllerMode=etcd: each node of the group needs its own "
                                     "brokerId >= 1 (the elected master registers as 0)"))
    return problems
