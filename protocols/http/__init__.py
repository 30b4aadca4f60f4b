"""The broker's HTTP listener (config section ``http``): Prometheus ``/metrics`` and the
JSON API under ``/api/``, read from the Broker facade and the other front-ends' figures
when a client asks (docs/observability.md).

HTTP/1.1 is parsed by h11 (sans-IO); `session` is the only module here that touches a
transport. Nothing here counts anything per message: every figure is computed at scrape
time from totals the broker and the front-ends already keep.
"""
