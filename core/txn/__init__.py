"""In-place transactions (Kafka's KIP-98) owned by the core: the coordinator (states,
timeouts, markers, the coordinator log) and the per-queue read rule (last stable offset,
aborted ranges). The design is docs/semantics.md's "Transactions that write in place"."""
