"""The tx class: a channel's publishes, acks, nacks and rejects held until tx.commit.

Inside tx.select the publish and deliver handlers only record what the client asked
(`Channel.tx_publishes`, `Channel.tx_answers`); commit stores the publishes one by one in
order, then settles the answers through the deliver handlers, then answers commit-ok;
rollback forgets both (the deliveries stay unacknowledged). One object per connection;
never touches the transport.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pamqp.commands import Tx

from .channel import Channel, MethodHandler
from .errors import ChannelError, Reply

if TYPE_CHECKING:
    from .deliver import DeliverHandlers
    from .session import AmqpSession


class TxHandlers:
    """tx.select, tx.commit and tx.rollback of one connection's channels."""

    def __init__(self, session: AmqpSession, deliver: DeliverHandlers) -> None:
        self.session = session
        self.broker = session.broker
        self.deliver = deliver
        self.table: dict[type, MethodHandler] = {
            Tx.Select: self.tx_select, Tx.Commit: self.tx_commit, Tx.Rollback: self.tx_rollback,
        }

    def tx_select(self, channel: Channel, method: Tx.Select) -> None:
        if channel.confirm:
            raise ChannelError(Reply.PRECONDITION_FAILED, "cannot switch from confirm to tx mode")
        channel.tx = True
        self.session.send(channel.number, Tx.SelectOk())

    async def tx_commit(self, channel: Channel, method: Tx.Commit) -> None:
        if not channel.tx:
            raise ChannelError(Reply.PRECONDITION_FAILED, "channel is not transactional")
        publishes, channel.tx_publishes = channel.tx_publishes, []
        answers, channel.tx_answers = channel.tx_answers, []
        for message in publishes:
            await self.broker.put_message(message)
        for tag, multiple, requeue in answers:
            taken = channel.take(tag, multiple)
            if requeue is None:
                self.deliver.ack(taken)
            else:
                await self.deliver.settle_nack(taken, requeue)
        self.session.send(channel.number, Tx.CommitOk())

    def tx_rollback(self, channel: Channel, method: Tx.Rollback) -> None:
        if not channel.tx:
            raise ChannelError(Reply.PRECONDITION_FAILED, "channel is not transactional")
        channel.tx_publishes.clear()
        channel.tx_answers.clear()  # the deliveries stay unacknowledged
        self.session.send(channel.number, Tx.RollbackOk())
