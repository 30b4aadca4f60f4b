"""protocols.eager: a handler that never waits needs no Task; one that waits behaves as a Task."""

import asyncio

import pytest

from rocketport.protocols import eager


async def _immediate(value):
    return value


async def _fails_at_once():
    raise ValueError("bad request")


def test_a_coroutine_that_never_waits_is_done_without_a_loop():
    outcome = eager.start(_immediate(42))
    assert type(outcome) is eager.Done and outcome.done() and outcome.result() == 42
    assert outcome.cancel() is False


def test_an_error_raised_at_once_surfaces_from_result():
    outcome = eager.start(_fails_at_once())
    assert outcome.done()
    with pytest.raises(ValueError, match="bad request"):
        outcome.result()


def test_a_coroutine_that_waits_becomes_a_task_and_resumes_where_it_stopped():
    async def main():
        steps = []
        gate = asyncio.get_running_loop().create_future()

        async def handler():
            steps.append("before")
            got = await gate
            steps.append(got)
            await asyncio.sleep(0)  # a bare yield to the loop, then a timer
            await asyncio.sleep(0.01)
            return got * 2

        outcome = eager.start(handler())
        assert isinstance(outcome, asyncio.Task) and steps == ["before"] and not outcome.done()
        gate.set_result(21)
        assert await asyncio.wait_for(outcome, 5) == 42
        assert steps == ["before", 21]

    asyncio.run(main())


def test_an_error_after_waiting_fails_the_task():
    async def main():
        async def handler():
            await asyncio.sleep(0)
            raise KeyError("late")

        outcome = eager.start(handler())
        with pytest.raises(KeyError):
            await outcome

    asyncio.run(main())


def test_cancelling_the_task_reaches_the_coroutine():
    async def main():
        cleaned = []

        async def handler():
            try:
                await asyncio.sleep(60)
            finally:
                cleaned.append(True)

        outcome = eager.start(handler())
        await asyncio.sleep(0)
        outcome.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outcome
        assert cleaned == [True]

    asyncio.run(main())


def test_a_coroutine_may_catch_cancellation_and_return():
    async def main():
        async def handler():
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                return "stopped"

        outcome = eager.start(handler())
        await asyncio.sleep(0)
        outcome.cancel()
        assert await outcome == "stopped"

    asyncio.run(main())
