"""The broker runs on asyncio but can be hosted inside a Trio program via trio-asyncio.

Run in a child interpreter: importing trio_asyncio installs its event-loop policy for the
whole process, which would change the loop every other test runs on.
"""

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent('''
    import sys
    import trio
    import trio_asyncio

    from rocketport.core.broker import Broker
    from rocketport.core.config import BrokerConfig
    from rocketport.common.message import Message

    async def trio_main(root):
        async with trio_asyncio.open_loop():
            broker = Broker(BrokerConfig(store_path_root_dir=root, flush_disk_type="SYNC_FLUSH",
                                         mapped_file_size_commit_log=64 * 1024))
            await trio_asyncio.aio_as_trio(broker.start)()
            try:
                async with trio.open_nursery() as nursery:
                    for i in range(5):
                        nursery.start_soon(trio_asyncio.aio_as_trio(broker.put_message),
                                           Message("Trio", f"m{i}".encode(), queue_id=0))
                res = broker.get_messages("Trio", 0, 0, 10)
                print(sorted(m.body.decode() for m in res.messages()))
            finally:
                await trio_asyncio.aio_as_trio(broker.stop)()

    trio.run(trio_main, sys.argv[1])
''')


def test_broker_inside_trio(tmp_path):
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['m0', 'm1', 'm2', 'm3', 'm4']"
