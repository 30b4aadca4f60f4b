"""core.periodic: a failed step is survived (or not, as the owner says), and nothing runs
once the stop event is set."""

from __future__ import annotations

import asyncio

import pytest

from rocketport.core.periodic import run_every, stopped_within


def test_a_failing_step_is_logged_and_the_next_one_runs(caplog):
    async def main() -> list[int]:
        stop = asyncio.Event()
        calls: list[int] = []

        def step() -> None:
            calls.append(len(calls))
            if len(calls) == 1:
                raise RuntimeError("first round fails")
            stop.set()  # the second round ends the loop

        await asyncio.wait_for(run_every(0, step, stop, name="the test step"), 10)
        return calls

    assert asyncio.run(main()) == [0, 1]
    assert "the test step failed" in caplog.text


def test_an_error_it_is_not_told_to_survive_ends_the_loop():
    async def main() -> None:
        async def step() -> None:
            raise OSError("disk gone")
        await asyncio.wait_for(run_every(0, step, asyncio.Event(), name="s", survives=(ValueError,)), 10)

    with pytest.raises(OSError, match="disk gone"):
        asyncio.run(main())


def test_no_step_runs_once_stopped():
    async def main() -> tuple[bool, list[int]]:
        stop = asyncio.Event()
        stop.set()
        calls: list[int] = []
        await run_every(3600, lambda: calls.append(1), stop, name="s")
        return await stopped_within(stop, 3600), calls

    assert asyncio.run(main()) == (True, [])
