"""The exchange and queue classes: declare, bind, unbind, purge and delete, as vhost calls.

One object per connection (`DeclareHandlers`): each method that changes something is
refused on a slave (406, the front-end's `require_writable`: its master takes them), each
checks the account (admin to change a declaration, SUB to purge), asks the virtual host,
which keeps the declarations and their rules, and answers on the channel unless
``nowait``. The connection is the owner the vhost checks exclusive queues against. Never
touches the transport: answers go out through the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pamqp.commands import Exchange, Queue

from rocketport.core.auth.plain_acl import SUB

from . import codec
from .access import require, require_admin
from .channel import Channel, MethodHandler
from .direct_reply import PSEUDO_QUEUE
from .errors import ChannelError, Reply

_DECLARATIONS = "declarations, bindings, purges and deletes go to"  # on a slave (`not_master`)

if TYPE_CHECKING:
    from .session import AmqpSession


class DeclareHandlers:
    """The declaration methods of one connection's channels."""

    def __init__(self, session: AmqpSession) -> None:
        self.session = session
        self.vhost = session.vhost
        self._writable = session.front_end.require_writable
        self.table: dict[type, MethodHandler] = {
            Exchange.Declare: self.exchange_declare, Exchange.Delete: self.exchange_delete,
            Exchange.Bind: self.exchange_bind, Exchange.Unbind: self.exchange_unbind,
            Queue.Declare: self.queue_declare, Queue.Bind: self.queue_bind,
            Queue.Unbind: self.queue_unbind, Queue.Purge: self.queue_purge,
            Queue.Delete: self.queue_delete,
        }

    # ---------------------------------------------------------------- exchange class
    def exchange_declare(self, channel: Channel, method: Exchange.Declare) -> None:
        if not method.passive:
            self._writable(_DECLARATIONS)
            require_admin(self.session.account, f"declare exchange '{method.exchange}'")
        self.vhost.declare_exchange(method.exchange, method.exchange_type, passive=method.passive,
                                    durable=method.durable, auto_delete=method.auto_delete,
                                    internal=method.internal, arguments=method.arguments)
        if not method.nowait:
            self.session.send(channel.number, Exchange.DeclareOk())

    def exchange_delete(self, channel: Channel, method: Exchange.Delete) -> None:
        self._writable(_DECLARATIONS)
        require_admin(self.session.account, f"delete exchange '{method.exchange}'")
        self.vhost.delete_exchange(method.exchange, if_unused=method.if_unused)
        if not method.nowait:
            self.session.send(channel.number, Exchange.DeleteOk())

    def exchange_bind(self, channel: Channel, method: Exchange.Bind) -> None:
        self._writable(_DECLARATIONS)
        require_admin(self.session.account, f"bind exchange '{method.destination}'")
        self.vhost.bind_exchange(method.destination, method.source, method.routing_key, method.arguments)
        if not method.nowait:
            self.session.send(channel.number, Exchange.BindOk())

    def exchange_unbind(self, channel: Channel, method: Exchange.Unbind) -> None:
        self._writable(_DECLARATIONS)
        require_admin(self.session.account, f"unbind exchange '{method.destination}'")
        self.vhost.bind_exchange(method.destination, method.source, method.routing_key, method.arguments,
                                 unbind=True)
        if not method.nowait:
            self.session.send(channel.number, Exchange.UnbindOk())

    # ---------------------------------------------------------------- queue class
    def queue_declare(self, channel: Channel, method: Queue.Declare) -> None:
        session = self.session
        if method.queue.startswith(PSEUDO_QUEUE):  # direct reply-to's names, passive or not: as RabbitMQ answers
            if not session.vhost.direct_replies.exists(method.queue):
                raise ChannelError(Reply.NOT_FOUND, f"no queue '{method.queue}' in vhost '/'")
            if not method.nowait:
                session.write(codec.declare_ok_frame(channel.number, method.queue, 0, 1))
            return
        if not method.passive:
            self._writable(_DECLARATIONS)
            require_admin(session.account, f"declare queue '{method.queue}'")
        state = self.vhost.declare_queue(method.queue, passive=method.passive, durable=method.durable,
                                         exclusive=method.exclusive, auto_delete=method.auto_delete,
                                         arguments=method.arguments, owner=session)
        name = state.entity.name
        channel.last_queue = name
        self.vhost.limits.enforce(state)  # what has expired is not counted
        if not method.nowait:
            session.write(codec.declare_ok_frame(channel.number, name, state.group.message_count,
                                                 state.group.consumer_count))

    def queue_bind(self, channel: Channel, method: Queue.Bind) -> None:
        self._writable(_DECLARATIONS)
        session = self.session
        require_admin(session.account, f"bind queue '{method.queue}'")
        self.vhost.bind(channel.queue_named(method.queue), method.exchange, method.routing_key,
                        method.arguments, session)
        if not method.nowait:
            session.send(channel.number, Queue.BindOk())

    def queue_unbind(self, channel: Channel, method: Queue.Unbind) -> None:
        self._writable(_DECLARATIONS)
        session = self.session
        require_admin(session.account, f"unbind queue '{method.queue}'")
        self.vhost.unbind(channel.queue_named(method.queue), method.exchange, method.routing_key,
                          method.arguments, session)
        session.send(channel.number, Queue.UnbindOk())

    async def queue_purge(self, channel: Channel, method: Queue.Purge) -> None:
        self._writable(_DECLARATIONS)
        session = self.session
        name = channel.queue_named(method.queue)
        require(session.account, name, SUB)
        count = await self.vhost.purge_queue(name, session)
        if not method.nowait:
            session.send(channel.number, Queue.PurgeOk(count))

    async def queue_delete(self, channel: Channel, method: Queue.Delete) -> None:
        self._writable(_DECLARATIONS)
        session = self.session
        name = channel.queue_named(method.queue)
        require_admin(session.account, f"delete queue '{name}'")
        count = await self.vhost.delete_queue(name, if_unused=method.if_unused, if_empty=method.if_empty,
                                              owner=session)
        if not method.nowait:
            session.send(channel.number, Queue.DeleteOk(count))
