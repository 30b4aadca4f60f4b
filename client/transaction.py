"""The transaction producer: half message, local transaction, commit or rollback, check-backs.

`send_in_transaction` sends the message as a half (prepared) message, invisible to
consumers; runs `execute(msg, arg)`; and ends the transaction with END_TRANSACTION:
COMMIT makes the message visible, ROLLBACK discards it, UNKNOWN leaves it to the broker,
which later asks this producer group (CHECK_TRANSACTION_STATE) and gets `check(msg)`'s
answer. `execute` or `check` raising counts as UNKNOWN.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from rocketport.common.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketport.protocols.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import (
    CheckTransactionStateRequestHeader,
    HeaderError,
    decode_header,
)
from rocketport.protocols.remoting.messages import MessageFormatError, unpack_message_ext_records

from .errors import ClientError
from .message import LocalTransactionState, Message, MessageExt, SendResult, SendStatus
from .producer import Producer
from .runtime import log
from .transport import Connection

Execute = Callable[[Message, Any], Awaitable[LocalTransactionState]]
Check = Callable[[MessageExt], Awaitable[LocalTransactionState]]

_END_TYPE = {LocalTransactionState.COMMIT: TRANSACTION_COMMIT_TYPE,
             LocalTransactionState.ROLLBACK: TRANSACTION_ROLLBACK_TYPE,
             LocalTransactionState.UNKNOWN: TRANSACTION_NOT_TYPE}


class TransactionProducer(Producer):
    def __init__(self, namesrv: str | None = None, group: str = "DEFAULT_PRODUCER", *,
                 execute: Execute, check: Check, **options: Any) -> None:
        super().__init__(namesrv, group, **options)
        self._execute = execute
        self._check = check
        self._checks: set[asyncio.Task[None]] = set()
        self.runtime.handlers[RequestCode.CHECK_TRANSACTION_STATE] = self._on_check

    async def shutdown(self) -> None:
        for task in self._checks:
            task.cancel()
        await asyncio.gather(*self._checks, return_exceptions=True)
        await super().shutdown()

    async def send_in_transaction(self, msg: Message, arg: Any = None) -> SendResult:
        """Send `msg` as a half message, run the local transaction, end it; the half
        message's SendResult. Raises ClientError when the half message was not stored."""
        if msg.delay_level or msg.deliver_at is not None:
            raise ClientError("a transactional message cannot be delayed", ResponseCode.MESSAGE_ILLEGAL)
        half = Message(msg.topic, msg.body, tags=msg.tags, keys=msg.keys, properties={
            **(msg.properties or {}), PROPERTY_TRANSACTION_PREPARED: "true",
            PROPERTY_PRODUCER_GROUP: self.group})
        body, props, sys_flag, uniq = self._prepare(half)
        result = await self._send(msg.topic, body, props, sys_flag | TRANSACTION_PREPARED_TYPE,
                                  uniq, False, False, None, None)
        if result.status is not SendStatus.SEND_OK:
            state = LocalTransactionState.ROLLBACK
        else:
            try:
                state = await self._execute(msg, arg)
            except Exception as exc:
                log.warning("local transaction of %s raised %r: state unknown", uniq, exc)
                state = LocalTransactionState.UNKNOWN
        await self._end(self.runtime.routes.broker_addr(result.queue.broker_name), state,
                        result.queue_offset, _commit_log_offset(result.offset_msg_id),
                        uniq, result.transaction_id or uniq, from_check=False)
        return result

    async def _end(self, addr: str, state: LocalTransactionState, queue_offset: int,
                   commit_log_offset: int, msg_id: str, transaction_id: str, *,
                   from_check: bool) -> None:
        if not isinstance(state, LocalTransactionState):
            log.warning("transaction state %r is not a LocalTransactionState: unknown", state)
            state = LocalTransactionState.UNKNOWN
        request = RemotingCommand(RequestCode.END_TRANSACTION, ext_fields={
            "producerGroup": self.group, "tranStateTableOffset": str(queue_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(_END_TYPE[state]), "msgId": msg_id,
            "transactionId": transaction_id,
            "fromTransactionCheck": "true" if from_check else "false"})
        conn = await self.runtime.pool.get(addr)
        conn.invoke_oneway(request)  # as RocketMQ: the broker's answer carries nothing

    def _on_check(self, conn: Connection, command: RemotingCommand) -> None:
        task = asyncio.create_task(self._answer_check(conn, command))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, conn: Connection, command: RemotingCommand) -> None:
        brokers = {addr: name for name, addr in self.runtime.routes.brokers.items()}
        try:
            h = decode_header(CheckTransactionStateRequestHeader, command.ext_fields)
            msgs = [MessageExt(raw, brokers.get(conn.addr, ""))
                    for raw in unpack_message_ext_records(command.body)]
        except (HeaderError, MessageFormatError, zlib.error) as exc:
            log.warning("bad transaction check from %s: %s", conn.addr, exc)
            return
        if not msgs:
            return
        msg = msgs[0]
        try:
            state = await self._check(msg)
        except Exception as exc:
            log.warning("transaction check of %s raised %r: state unknown", msg.msg_id, exc)
            state = LocalTransactionState.UNKNOWN
        msg_id = h.msg_id or msg.msg_id
        try:
            await self._end(conn.addr, state, h.tran_state_table_offset, h.commit_log_offset,
                            msg_id, h.transaction_id or msg_id, from_check=True)
        except ClientError as exc:
            log.warning("answering the check of %s failed: %s", msg_id, exc)


def _commit_log_offset(offset_msg_id: str) -> int:
    """The commit-log offset an offset message id ends with (its last 16 hex digits)."""
    try:
        return int(offset_msg_id[-16:], 16)
    except ValueError:
        raise ClientError(f"broker returned a malformed message id {offset_msg_id!r}") from None
