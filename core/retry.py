"""Consumer send-back: where a message a group failed to consume goes next.

RocketMQ's CONSUMER_SEND_MSG_BACK decides between the group's retry topic
``%RETRY%{group}`` (delivered again after delay level ``3 + reconsumeTimes``, through the
schedule) and its dead-letter topic ``%DLQ%{group}`` once ``reconsumeTimes`` reaches the
group's ``retryMaxTimes`` (16 by default) or the client asks for a negative delay level.
This module builds that message; it never stores anything, so every front-end's NACK,
send-back or failed delivery produces the same copy with the same properties.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketport.common.message import (
    INNER_BATCH_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
    MessageExt,
)

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
DEFAULT_MAX_RECONSUME_TIMES = 16
RETRY_BASE_DELAY_LEVEL = 3  # RocketMQ: delay level 3 + reconsumeTimes when the client says 0
DLQ_QUEUE_NUMS = 1


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


@dataclass(slots=True)
class SendBack:
    """The copy to store and whether it is a dead letter."""

    message: Message
    dead_letter: bool


def build_send_back(msg: MessageExt, group: str, *, delay_level: int, max_reconsume_times: int,
                    origin_msg_id: str | None, offset_msg_id: str) -> SendBack:
    """The retry (or dead-letter) copy of ``msg`` for ``group``.

    ``reconsumeTimes`` is the stored message's count; the copy carries one more, in the
    record field and in ``RECONSUME_TIME``. ``RETRY_TOPIC`` keeps the topic the message was
    first sent to, ``ORIGIN_MESSAGE_ID`` the id it first had, so a consumer sees one message
    however many times it comes back.
    """
    props = dict(msg.properties)
    props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
    if not props.get(PROPERTY_ORIGIN_MESSAGE_ID):
        props[PROPERTY_ORIGIN_MESSAGE_ID] = origin_msg_id or offset_msg_id
    props.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
    reconsume = msg.reconsume_times
    props[PROPERTY_RECONSUME_TIME] = str(reconsume + 1)
    dead = reconsume >= max_reconsume_times or delay_level < 0
    if dead:
        topic = dlq_topic(group)
        props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    else:
        topic = retry_topic(group)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level or RETRY_BASE_DELAY_LEVEL + reconsume)
    # a record read out of a stored batch is sent back as a message of its own
    copy = Message(topic, msg.body, props, msg.flag, 0, msg.sys_flag & ~INNER_BATCH_FLAG, msg.born_timestamp,
                   msg.born_host, reconsume + 1, 0)
    return SendBack(copy, dead)
