"""AMQP 0-9-1 front-end: RabbitMQ clients (pika, aio-pika, kombu, amqplib) on the shared store.

The codec (`codec`, pamqp underneath) and `connection` are sans-IO; `exchanges` turns
bindings into delivery-group Sources, `vhost` keeps the declarations and their rules,
`channel` one channel's state, and `session` maps events to Broker-facade calls (the only
part that touches asyncio). The mapping is written down in docs/protocol-amqp.md.
"""
