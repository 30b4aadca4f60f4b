"""What the broker and its clients share (RocketMQ's `common` module): the message model and
its property names, message ids, tag hash codes, the batch formats (RocketMQ message
batches, Kafka record batches, their compression), request signing, and the errors these
raise. The core, the protocols, the native client and the pipeline import it; it imports
nothing else of Rocketport.
"""
