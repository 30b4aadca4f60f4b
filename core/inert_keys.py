"""RocketMQ 4.9 configuration keys that Rocketport accepts without acting on them, and why.

A RocketMQ operator's broker.properties (the stock ``conf/broker.conf``, the ``2m-2s-*``
layouts, a tuned production file) names keys of RocketMQ's ``BrokerConfig``,
``MessageStoreConfig``, ``NettyServerConfig`` and ``NettyClientConfig``. Refusing them as
unknown would make every such file fail; accepting them silently would let an operator
believe a knob works. So each key RocketMQ defines is either a field of
``core.config.BrokerConfig`` (honoured) or listed here with the reason it has no effect;
the broker names every listed key it was given in one start-up line. A key no RocketMQ
version knows is still an error. This module holds data only: it never reads files.
"""

from __future__ import annotations

from typing import Final

_ONE_LOOP = "no effect: requests are served on one event loop by one writer, not queued to thread pools"
_ASYNCIO = "no effect: asyncio transports size their own socket buffers; backpressure is per connection"
_STORE = "no effect: the store flushes, commits and maps its files its own way (docs/store-format.md)"
_NO_POOL = "no effect: the CommitLog is written through its memory map; there is no transient store pool"
_REPLICATION = "no effect: Rocketport's replication does not use this setting (docs/operations.md)"
_DLEDGER = "no effect: DLedger is not built; failover is to be elected through etcd, not Raft"
_ALWAYS = "no effect: Rocketport always does this"
_NOT_BUILT = "no effect: this RocketMQ feature is not built in Rocketport"
_NAMESRV = "no effect: the broker registers with its name servers on its own schedule"
_STATS = "no effect: statistics are kept by the broker's own counters"

_GROUPS: Final[dict[str, tuple[str, ...]]] = {
    _ONE_LOOP: (
        "sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums", "pullMessageThreadPoolNums",
        "processReplyMessageThreadPoolNums", "queryMessageThreadPoolNums", "adminBrokerThreadPoolNums",
        "clientManageThreadPoolNums", "consumerManageThreadPoolNums", "heartbeatThreadPoolNums",
        "endTransactionThreadPoolNums", "sendThreadPoolQueueCapacity", "putThreadPoolQueueCapacity",
        "pullThreadPoolQueueCapacity", "replyThreadPoolQueueCapacity", "queryThreadPoolQueueCapacity",
        "clientManagerThreadPoolQueueCapacity", "consumerManagerThreadPoolQueueCapacity",
        "heartbeatThreadPoolQueueCapacity", "endTransactionPoolQueueCapacity", "brokerFastFailureEnable",
        "waitTimeMillsInSendQueue", "waitTimeMillsInPullQueue", "waitTimeMillsInHeartbeatQueue",
        "waitTimeMillsInTransactionQueue", "useReentrantLockWhenPutMessage", "osPageCacheBusyTimeOutMills",
        "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
        "clientWorkerThreads", "clientCallbackExecutorThreads", "useEpollNativeSelector",
        "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "clientOnewaySemaphoreValue",
        "clientAsyncSemaphoreValue", "debugLockEnable",
    ),
    _ASYNCIO: (
        "serverSocketSndBufSize", "serverSocketRcvBufSize", "writeBufferHighWaterMark",
        "writeBufferLowWaterMark", "serverSocketBacklog", "serverPooledByteBufAllocatorEnable",
        "clientPooledByteBufAllocatorEnable", "clientSocketSndBufSize", "clientSocketRcvBufSize",
        "connectTimeoutMillis", "channelNotActiveInterval", "clientChannelMaxIdleTimeSeconds",
        "clientCloseSocketIfTimeout", "transferMsgByHeap",
    ),
    _STORE: (
        "commitIntervalCommitLog", "flushCommitLogTimed", "flushCommitLogLeastPages",
        "commitCommitLogLeastPages", "flushLeastPagesWhenWarmMapedFile", "flushConsumeQueueLeastPages",
        "flushCommitLogThoroughInterval", "commitCommitLogThoroughInterval",
        "flushConsumeQueueThoroughInterval", "deleteCommitLogFilesInterval",
        "deleteConsumeQueueFilesInterval", "destroyMapedFileIntervalForcibly", "redeleteHangedFileInterval",
        "cleanFileForciblyEnable", "diskFallRecorded", "putMsgIndexHightWater", "messageIndexSafe",
        "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInDisk", "maxTransferCountOnMessageInDisk", "maxMsgsNumBatch",
        "defaultQueryMaxNum", "enableConsumeQueueExt", "mappedFileSizeConsumeQueueExt",
        "bitMapLengthConsumeQueueExt", "readOnlyCommitLogStorePaths", "duplicationEnable",
        "flushConsumerOffsetHistoryInterval", "maxDelayTime", "enableScheduleMessageStats",
        "enableScheduleAsyncDeliver", "scheduleAsyncDeliverMaxPendingLimit",
        "scheduleAsyncDeliverMaxResendNum2Blocked",
    ),
    _NO_POOL: ("transientStorePoolEnable", "transientStorePoolSize", "fastFailIfNoBufferInStorePool"),
    _REPLICATION: (
        "slaveTimeout", "offsetCheckInSlave", "disableConsumeIfConsumerReadSlowly",
        "consumerFallbehindThreshold",
    ),
    _DLEDGER: (
        "enableDLegerCommitLog", "dLegerGroup", "dLegerPeers", "dLegerSelfId", "preferredLeaderId",
        "enableBatchPush", "storePathDLedgerCommitLog",
    ),
    _ALWAYS: (
        "longPollingEnable", "enablePropertyFilter", "filterSupportRetry", "clusterTopicEnable",
        "brokerTopicEnable", "notifyConsumerIdsChangedEnable", "storeReplyMessageEnable",
    ),
    _NOT_BUILT: (
        "rocketmqHome", "messageStorePlugIn", "msgTraceTopicName", "traceTopicEnable", "traceOn",
        "rejectTransactionMessage", "filterServerNums", "highSpeedMode", "commercialEnable",
        "commercialTimerCount", "commercialTransCount", "commercialBigCount", "commercialBaseCount",
        "regionId", "enableCalcFilterBitMap", "expectConsumerNumUseFilter", "maxErrorRateOfBloomFilter",
        "filterDataCleanTimeSpan", "isolateLogEnable", "configBlackList", "brokerPermission",
        "useTLS", "shortPollingTimeMills", "enableLmq", "enableMultiDispatch", "maxLmqConsumeQueueNum",
        "startAcceptSendRequestTimeStamp",
    ),
    _NAMESRV: (
        "fetchNamesrvAddrByAddressServer", "registerBrokerTimeoutMills", "compressedRegister",
        "forceRegister", "registerNameServerPeriod",
    ),
    _STATS: ("enableDetailStat", "autoDeleteUnusedStats"),
}

# key -> why it has no effect here
INERT_KEYS: Final[dict[str, str]] = {key: why for why, keys in _GROUPS.items() for key in keys}

# Values of inert keys that ask for what is not built: the broker refuses to start on them,
# since running without would silently break the deployment the file describes.
REFUSED_VALUES: Final[dict[tuple[str, str], str]] = {
    ("enableDLegerCommitLog", "true"): "enableDLegerCommitLog=true: DLedger (Raft) CommitLog groups are "
                                       "not built; run masters without it",
}
