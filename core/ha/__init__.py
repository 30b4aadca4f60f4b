"""Master/slave replication as RocketMQ 4.x runs it (its store/ha: HAService, HAConnection,
GroupTransferService): a slave streams its master's CommitLog bytes and keeps them
byte-identical; a SYNC_MASTER answers a put once a slave acknowledged it.

    codec.py     the wire: the slave's 8-byte offset reports, the master's frames (sans-IO)
    transfer.py  SYNC_MASTER's wait for a slave's acknowledgement (GroupTransferService)
    master.py    the master's HA port: one connection per slave, bytes pushed from its offset
    slave.py     the slave's client: connect, report, append and dispatch what arrives
    service.py   the role's side, started and stopped with the broker; switchable at run time

Nothing here knows a front-end protocol; the facade (core/facade/produce.py) waits through
`HAService.wait`.
"""
