"""Kafka wire protocol front-end: schema-driven codec, framing, error codes.

The codec and connection are sans-IO (bytes in, events out); the session that maps events
to Broker-facade calls lives beside them and is the only part that touches asyncio.
"""
