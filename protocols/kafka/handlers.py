"""The Kafka request dispatcher: one table from API key to the handler of its family.

The handlers are split by request family as remoting's are: `cluster` (ApiVersions,
Metadata, FindCoordinator, ListOffsets), `groups` (classic membership and committed
offsets), `consumer_group_handlers` (KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe), `admin` (topics, configs, DeleteRecords), `transactions` (producer
ids and transactions), `produce` and `fetch`; what they share (the request context, permission checks) is
`requests`. Each turns a decoded request into a response dict for the codec, or None when
Kafka wants no response (Produce with acks=0). None touches a socket or raises for client
input: bad input is an error code in the response. This module only assembles them.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from rocketport.core.auth.plain_acl import PUB, SUB, Account
from rocketport.core.auth.scram import ScramCredentials
from rocketport.core.broker import Broker

from .acl_admin import AclAdminHandlers
from .admin import AdminHandlers
from .cluster import ClusterHandlers
from .consumer_group_handlers import ConsumerGroupHandlers
from .consumer_groups import ConsumerGroupCoordinator, ConsumerGroupSettings
from .coordinator import GroupCoordinator
from .describe_topics import DescribeTopicsHandlers
from .fetch import FetchHandler, PlainRecordEncoder
from .fetch_sessions import FetchSessionCache, SessionFetch
from .groups import GroupHandlers
from .produce import ProduceHandler
from .requests import BrokerNode, Handler, RequestContext, may_use_topic, partitions
from .sasl import SaslServer, parse_mechanisms
from .scram_admin import ScramAdminHandlers
from .schema import ApiKey
from .topic_ids import TopicIds
from .transactions import TransactionHandlers

log = logging.getLogger(__name__)

TXN_V2_PRODUCE: Final = 12  # the transaction protocol v2: Produce adds the partitions itself
PRODUCE_TOPIC_IDS: Final = 13  # Produce names topics by id (KIP-516)
FETCH_SESSIONS: Final = 7  # incremental fetch sessions (KIP-227) from Fetch v7
FETCH_TOPIC_IDS: Final = 13  # Fetch names topics by id from v13


class KafkaHandlers:
    """The Kafka front-end's request handling, shared by every connection."""

    def __init__(self, broker: Broker, advertised: tuple[str, int]) -> None:
        self.broker = broker
        self.node = BrokerNode(*advertised)
        config = broker.config
        self.coordinator = GroupCoordinator()
        self.topic_ids = TopicIds(broker)
        self.consumer_groups = ConsumerGroupCoordinator(
            self.coordinator, broker.topic_names, lambda topic: partitions(broker, topic),
            ConsumerGroupSettings(config.kafka_group_consumer_session_timeout_ms,
                                  config.kafka_group_consumer_heartbeat_interval_ms,
                                  tuple(a.strip() for a in config.kafka_group_consumer_assignors.split(",")
                                        if a.strip()),
                                  config.kafka_group_consumer_migration_policy))
        self.encoder = PlainRecordEncoder(config.kafka_tag_header)
        self.produce = ProduceHandler(broker, config.kafka_tag_header)
        self.fetch = FetchHandler(broker, self.encoder)
        self.fetch_sessions = FetchSessionCache(config.kafka_max_incremental_fetch_session_cache_slots)
        mechanisms = parse_mechanisms(config.kafka_sasl_mechanisms)
        self.sasl = SaslServer(broker.acl, mechanisms,
                               ScramCredentials(config.scram_credentials_path)
                               if any(m.startswith("SCRAM-") for m in mechanisms) else None) if mechanisms else None
        self.table: dict[int, Handler] = {ApiKey.PRODUCE: self._produce, ApiKey.FETCH: self._fetch}
        for family in (ClusterHandlers(broker, self.node, self.topic_ids),
                       GroupHandlers(broker, self.coordinator, self.consumer_groups),
                       ConsumerGroupHandlers(broker, self.consumer_groups, self.topic_ids),
                       DescribeTopicsHandlers(broker, self.node, self.topic_ids),
                       AdminHandlers(broker, self.encoder, self.topic_ids), TransactionHandlers(broker, self.coordinator, self.consumer_groups)):
            self.table.update(family.table)
        self.accounts_checked = config.acl_enable or bool(mechanisms)
        # KIP-554 on the SCRAM file (served with or without SASL: kafka-configs sets credentials first)
        self.table.update(ScramAdminHandlers(ScramCredentials(config.scram_credentials_path),
                                             self.accounts_checked).table)
        # KIP-140 on the plain ACL file every protocol checks
        self.table.update(AclAdminHandlers(lambda: broker.acl, self.accounts_checked).table)

    def certificate_account(self, name: str | None) -> Account | None:
        """The account a verified client certificate names (``name``: its subject's CN), when
        accounts are checked; a name the file lacks logs in as nobody (SASL may follow)."""
        if name is None or not self.accounts_checked:
            return None
        account = self.broker.acl.account(name)
        if account is None:
            log.info("Kafka: client certificate CN=%s names no account", name)
        return account

    def close(self) -> None:
        self.consumer_groups.close()
        self.coordinator.close()

    async def _produce(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any] | None:
        may_write = None if ctx.principal is None else (lambda topic: may_use_topic(ctx, topic, PUB))
        unknown: list[dict[str, Any]] = []
        if ctx.api_version >= PRODUCE_TOPIC_IDS:
            body, unknown = self.topic_ids.produce_by_name(body)
        response = await self.produce.handle(body, ctx.client_host, may_write,
                                             adds_partitions=ctx.api_version >= TXN_V2_PRODUCE)
        if body["acks"] == 0:
            return None
        return self.topic_ids.produce_by_id(response, unknown) if ctx.api_version >= PRODUCE_TOPIC_IDS else response

    async def _fetch(self, ctx: RequestContext, body: dict[str, Any]) -> dict[str, Any]:
        may_read = None if ctx.principal is None else (lambda topic: may_use_topic(ctx, topic, SUB))
        if ctx.api_version < FETCH_SESSIONS:
            return await self.fetch.handle(body, may_read, ctx.client_host)
        unknown: list[dict[str, Any]] = []
        if ctx.api_version >= FETCH_TOPIC_IDS:
            body, unknown = self.topic_ids.fetch_by_name(body)
        fetch = self.fetch_sessions.begin(body)
        if not isinstance(fetch, SessionFetch):  # an unknown session or a wrong epoch
            return {"throttle_time_ms": 0, "error_code": fetch, "session_id": 0, "responses": []}
        known = None if fetch.session is None else fetch.session.partitions
        response = self.fetch_sessions.finish(
            fetch, await self.fetch.handle(fetch.request, may_read, ctx.client_host, known))
        return self.topic_ids.fetch_by_id(response, unknown) if ctx.api_version >= FETCH_TOPIC_IDS else response
