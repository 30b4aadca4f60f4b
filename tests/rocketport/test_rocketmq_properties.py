"""A RocketMQ operator's broker.properties starts a broker as it is: keys Rocketport honours
take effect, RocketMQ keys it has no use for are named at start with why, a role that
contradicts its brokerId refuses in one line, and a key no RocketMQ version knows is still an error. The files
below carry the keys and values of RocketMQ 4.9's distribution/conf layouts. Real broker
processes throughout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocketport.core.config import BrokerConfig
from rocketport.core.inert_keys import INERT_KEYS
from tests.support.processes import REPO, stop, wait_ready

_EPHEMERAL = ("listenPort=0", "namesrv.port=0", "kafka.port=0", "amqp.port=0", "stomp.port=0",
              "stomp.wsPort=0")

# RocketMQ 4.9's stock files (distribution/conf), key for key
_STOCK_HEAD = "brokerClusterName = DefaultCluster\nbrokerName = broker-a\n"
_STOCK_TAIL = "deleteWhen = 04\nfileReservedTime = 48\nflushDiskType = ASYNC_FLUSH\n"
BROKER_CONF = _STOCK_HEAD + "brokerId = 0\n" + _STOCK_TAIL + "brokerRole = ASYNC_MASTER\n"
ASYNC_MASTER = BROKER_CONF.replace(" = ", "=")
SYNC_MASTER = ASYNC_MASTER.replace("ASYNC_MASTER", "SYNC_MASTER")
SLAVE = ASYNC_MASTER.replace("brokerId=0", "brokerId=1").replace("ASYNC_MASTER", "SLAVE")
DLEDGER = """brokerClusterName = RaftCluster
brokerName=RaftNode00
listenPort=30911
namesrvAddr=127.0.0.1:9876
storePathRootDir=/tmp/rmqstore/node00
storePathCommitLog=/tmp/rmqstore/node00/commitlog
enableDLegerCommitLog=true
dLegerGroup=RaftNode00
dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913
dLegerSelfId=n0
sendMessageThreadPoolNums=16
"""


def _command(conf: Path, root: Path, *flags: str) -> list[str]:
    sets = [arg for s in (f"storePathRootDir={root}", *_EPHEMERAL) for arg in ("--set", s)]
    return [sys.executable, "-m", "rocketport", "broker", "-c", str(conf), *flags, *sets]


def _conf(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, text", [("broker.conf", BROKER_CONF),
                                        ("broker-a.properties", ASYNC_MASTER),
                                        ("broker-a.properties", SYNC_MASTER),
                                        ("broker-a-s.properties", SLAVE)])
def test_the_stock_master_files_start_a_broker(tmp_path, name, text):
    proc = subprocess.Popen(_command(_conf(tmp_path, name, text), tmp_path / "store"),
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        wait_ready(proc)
    finally:
        stop(proc)
    assert proc.returncode == 0


@pytest.mark.parametrize("text, says", [
    (SLAVE.replace("brokerId=1", "brokerId=0"), "brokerId=0 names the master: a SLAVE needs brokerId > 0"),
    (SYNC_MASTER.replace("brokerId=0", "brokerId=2"), "brokerId=2 names a slave: a master (SYNC_MASTER)"),
    (DLEDGER, "enableDLegerCommitLog=true: DLedger (Raft) CommitLog groups are not built"),
])
def test_roles_that_cannot_hold_refuse_in_one_line(tmp_path, text, says):
    done = subprocess.run(_command(_conf(tmp_path, "broker.properties", text), tmp_path / "store"),
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "store").exists()  # nothing was created


def test_inert_keys_are_named_at_start_and_honoured_ones_take_effect(tmp_path):
    cq, index = tmp_path / "cq", tmp_path / "idx"
    text = ASYNC_MASTER + ("sendMessageThreadPoolNums=16\nuseReentrantLockWhenPutMessage=true\n"
                           "transientStorePoolEnable=false\noffsetCheckInSlave=false\n"
                           f"storePathConsumerQueue={cq}\nstorePathIndex={index}\n")
    proc = subprocess.Popen(_command(_conf(tmp_path, "broker.properties", text), tmp_path / "store"),
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        seen = wait_ready(proc)
        namesrv = re.search(r"name server\S* listening on (\S+)", seen).group(1)
        sent = subprocess.run([sys.executable, "-m", "rocketport", "admin", "sendMessage", "-n", namesrv,
                               "-t", "PathsTopic", "-p", "hello", "-k", "key-1"],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        found = subprocess.run([sys.executable, "-m", "rocketport", "admin", "queryMsgByKey", "-n", namesrv,
                                "-t", "PathsTopic", "-k", "key-1"], capture_output=True, text=True, timeout=60,
                               cwd=REPO)  # a lookup builds the index up to the log's end first
        assert "hello" in found.stdout, found.stdout + found.stderr
    finally:
        stop(proc)
    lines = seen.splitlines()
    for key in ("sendMessageThreadPoolNums", "useReentrantLockWhenPutMessage", "transientStorePoolEnable",
                "offsetCheckInSlave"):
        named = [line for line in lines if f"{key}: {INERT_KEYS[key]}" in line]
        assert len(named) == 1, seen
    assert "useReentrantLockWhenPutMessage: no effect: requests are served on one event loop" in seen
    assert (cq / "PathsTopic").is_dir() and any(index.iterdir())
    assert not (tmp_path / "store" / "consumequeue").exists()
    assert not (tmp_path / "store" / "index").exists()


def test_a_key_no_rocketmq_version_knows_is_still_an_error(tmp_path):
    text = ASYNC_MASTER + "sendMessageThreadPoolNum=16\n"
    done = subprocess.run(_command(_conf(tmp_path, "broker.properties", text), tmp_path / "store"),
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2
    assert "unknown key 'sendMessageThreadPoolNum' (did you mean 'sendMessageThreadPoolNums'?)" in done.stderr


def test_mqbroker_flags_n_and_p(tmp_path):
    done = subprocess.run(_command(_conf(tmp_path, "broker.conf", BROKER_CONF), tmp_path / "store",
                                   "-n", "127.0.0.1:19876", "-p"),
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    settings = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert settings["namesrvAddr"] == "127.0.0.1:19876"
    assert settings["fileReservedTime"] == "48"
    assert settings["brokerRole"] == "ASYNC_MASTER"


def test_inert_keys_are_not_keys_rocketport_honours():
    honoured = set(BrokerConfig().as_properties())
    assert not honoured & set(INERT_KEYS)
