"""Consumer and producer management: held pulls, queue locks, group membership, queue
allocation and delay levels.

These are self-contained in-memory services that the Broker facade owns. They hold no
sockets and speak no protocol; they must never import the store or a protocol package.
"""
