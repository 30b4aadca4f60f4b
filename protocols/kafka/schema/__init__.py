"""The Kafka APIs this broker serves, as data: one module per API, collected in ``APIS``.

Facts (field names, types, versions, nullability, tags, defaults) are transcribed from
Kafka 3.9's message specs, and from 4.0's for the transaction protocol v2 (KIP-890 part 2:
Produce v12, EndTxn v5, TxnOffsetCommit v5) and KIP-848's consumer group APIs (ConsumerGroupHeartbeat v0-1,
ConsumerGroupDescribe v0, DescribeTopicPartitions v0). Nothing here reads or writes bytes; ``codec.py`` does.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from ._dsl import Api, Field
from .acls import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from .add_offsets_to_txn import ADD_OFFSETS_TO_TXN
from .add_partitions_to_txn import ADD_PARTITIONS_TO_TXN
from .alter_configs import ALTER_CONFIGS
from .api_versions import API_VERSIONS
from .consumer_group_describe import CONSUMER_GROUP_DESCRIBE
from .consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from .create_partitions import CREATE_PARTITIONS
from .create_topics import CREATE_TOPICS
from .delete_records import DELETE_RECORDS
from .user_scram_credentials import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from .delete_topics import DELETE_TOPICS
from .describe_configs import DESCRIBE_CONFIGS
from .describe_groups import DESCRIBE_GROUPS
from .describe_topic_partitions import DESCRIBE_TOPIC_PARTITIONS
from .describe_transactions import DESCRIBE_TRANSACTIONS
from .end_txn import END_TXN
from .fetch import FETCH
from .find_coordinator import FIND_COORDINATOR
from .heartbeat import HEARTBEAT
from .incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from .init_producer_id import INIT_PRODUCER_ID
from .join_group import JOIN_GROUP
from .leave_group import LEAVE_GROUP
from .list_groups import LIST_GROUPS
from .list_offsets import LIST_OFFSETS
from .list_transactions import LIST_TRANSACTIONS
from .metadata import METADATA
from .offset_commit import OFFSET_COMMIT
from .offset_fetch import OFFSET_FETCH
from .offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH
from .produce import PRODUCE
from .sasl_authenticate import SASL_AUTHENTICATE
from .sasl_handshake import SASL_HANDSHAKE
from .sync_group import SYNC_GROUP
from .txn_offset_commit import TXN_OFFSET_COMMIT

__all__ = ["APIS", "Api", "ApiKey", "Field"]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75


APIS: Final[dict[int, Api]] = {
    api.key: api
    for api in (
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        METADATA,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        FIND_COORDINATOR,
        JOIN_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        SYNC_GROUP,
        DESCRIBE_GROUPS,
        LIST_GROUPS,
        SASL_HANDSHAKE,
        API_VERSIONS,
        CREATE_TOPICS,
        DELETE_TOPICS,
        DELETE_RECORDS,
        DESCRIBE_USER_SCRAM_CREDENTIALS,
        ALTER_USER_SCRAM_CREDENTIALS,
        INIT_PRODUCER_ID,
        OFFSET_FOR_LEADER_EPOCH,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        TXN_OFFSET_COMMIT,
        DESCRIBE_ACLS,
        CREATE_ACLS,
        DELETE_ACLS,
        DESCRIBE_CONFIGS,
        ALTER_CONFIGS,
        SASL_AUTHENTICATE,
        CREATE_PARTITIONS,
        INCREMENTAL_ALTER_CONFIGS,
        DESCRIBE_TRANSACTIONS,
        LIST_TRANSACTIONS,
        CONSUMER_GROUP_HEARTBEAT,
        CONSUMER_GROUP_DESCRIBE,
        DESCRIBE_TOPIC_PARTITIONS,
    )
}
