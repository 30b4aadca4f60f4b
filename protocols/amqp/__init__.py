"""AMQP 0-9-1 front-end: RabbitMQ clients (pika, aio-pika, kombu, amqplib) on the shared store.

The codec (`codec`, pamqp underneath) and `connection` are sans-IO; `exchanges` turns
bindings into delivery-group Sources, `vhost` keeps the declarations and their rules,
`channel` one channel's state. `session` is the transport (bytes through the connection,
frames out, connection state, heart-beats, channels); the handlers turn channel methods into
vhost and Broker-facade calls by role: `publish` (publishes, confirms, returns), `deliver`
(consumers, get, acks, dead-lettering), `declare` (exchanges and queues), `tx`; `access`
checks the login and the permissions. The mapping is written down in docs/protocol-amqp.md.
"""
