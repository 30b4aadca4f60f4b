"""Log compaction for topics whose ``cleanup.policy`` includes ``compact`` (Kafka's name) or is
``COMPACTION`` (RocketMQ 5's attribute value).

The CommitLog holds every topic, so it cannot be rewritten per topic: as in RocketMQ 5's
compaction topics (its ``store/kv``: a per-queue compaction log built from the CommitLog,
reads of compacted topics served from it), each compacted queue gets a compacted log of its
own, kept beside the store, and reads below its end are served from it:

    policy.py    the topic configs that drive compaction (Kafka's names and defaults)
    snapshot.py  one queue's compacted log: a complete, immutable file, and reads from it
    cleaner.py   the work of one compaction (offset map, then rewrite), in plain functions
    worker.py    the process that does that work, away from the broker's GIL
    service.py   the queues' compacted logs, the schedule, the reads and the retention pin

Never imports a protocol.
"""
