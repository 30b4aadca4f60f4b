"""`rocketport admin` verbs against a live broker, run as the CLI (subprocess)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest


def admin(live, *args: str, expect: int = 0) -> str:
    env = dict(os.environ, COLUMNS="400", TERM="dumb")
    proc = subprocess.run([sys.executable, "-m", "rocketport", "admin", args[0], "-n", live.namesrv,
                           *args[1:]], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.timeout(240)
def test_admin_verbs_round_trip(live_broker):
    assert "success" in admin(live_broker, "updateTopic", "-t", "AdminTopic", "-r", "2", "-w", "2")
    assert "AdminTopic" in admin(live_broker, "topicList").split()
    assert '"writeQueueNums": 2' in admin(live_broker, "topicRoute", "-t", "AdminTopic")
    sent = admin(live_broker, "sendMessage", "-t", "AdminTopic", "-p", "hello admin", "-k", "K1",
                 "-c", "TagX", "-i", "1")
    offset_id = re.search(r"\b[0-9A-F]{32}\b(?=\s*│\s*SEND_OK)", sent)
    assert offset_id, sent
    status = admin(live_broker, "topicStatus", "-t", "AdminTopic")
    assert re.search(r"│\s*1\s*│\s*0\s*│\s*1\s*│", status), status
    assert "hello admin" in admin(live_broker, "queryMsgByKey", "-t", "AdminTopic", "-k", "K1")
    assert "hello admin" in admin(live_broker, "queryMsgById", "-i", offset_id.group(0))
    assert "hello admin" in admin(live_broker, "queryMsgByOffset", "-t", "AdminTopic", "-b", "broker-a",
                                  "-i", "1", "-o", "0")
    assert "hello admin" in admin(live_broker, "consumeMessage", "-t", "AdminTopic")
    assert "DefaultCluster" in admin(live_broker, "clusterList")
    assert "msgPutTotalTodayNow" in admin(live_broker, "brokerStatus")
    config = admin(live_broker, "getBrokerConfig")
    assert re.search(r"│\s*brokerClusterName\s*│\s*DefaultCluster\s*│", config), config
    assert re.search(r"│\s*flushDiskType\s*│\s*ASYNC_FLUSH\s*│", config), config
    assert "success" in admin(live_broker, "updateSubGroup", "-g", "AdminGroup")
    assert "Diff Total: 1" in admin(live_broker, "consumerProgress", "-g", "AdminGroup", "-t", "AdminTopic")
    assert "hello admin" in admin(live_broker, "printMsg", "-t", "AdminTopic")
    assert re.search(r"│\s*1\s*│\s*1\s*│", admin(live_broker, "resetOffsetByTime", "-g", "AdminGroup",
                                                  "-t", "AdminTopic", "-s", "now"))
    assert "Diff Total: 0" in admin(live_broker, "consumerProgress", "-g", "AdminGroup", "-t", "AdminTopic")
    assert "success" in admin(live_broker, "cloneGroupOffset", "-s", "AdminGroup", "-d", "AdminCopy",
                              "-t", "AdminTopic")
    assert "Diff Total: 0" in admin(live_broker, "consumerProgress", "-g", "AdminCopy", "-t", "AdminTopic")
    assert "not online" in admin(live_broker, "consumerConnection", "-g", "AdminGroup")
    assert "client id" in admin(live_broker, "producerConnection", "-g", "TOOLS_PRODUCER")
    assert "success" in admin(live_broker, "deleteSubGroup", "-g", "AdminGroup")
    assert "success" in admin(live_broker, "deleteTopic", "-t", "AdminTopic")
    assert "AdminTopic" not in admin(live_broker, "topicList").split()
    assert "code 17" in admin(live_broker, "topicRoute", "-t", "AdminTopic", expect=1)


def run_cli(*args: str, namesrv_env: str | None = None) -> subprocess.CompletedProcess:
    """The CLI with stdout captured (not a TTY), NAMESRV_ADDR set or removed as asked."""
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    if namesrv_env is not None:
        env["NAMESRV_ADDR"] = namesrv_env
    return subprocess.run([sys.executable, "-m", "rocketport", "admin", *args], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(120)
def test_namesrv_addr_environment_used_without_flag(live_broker):
    assert "success" in admin(live_broker, "updateTopic", "-t", "EnvTopic", "-r", "1", "-w", "1")
    proc = run_cli("topicList", namesrv_env=live_broker.namesrv)
    assert proc.returncode == 0 and "EnvTopic" in proc.stdout.split(), proc.stdout + proc.stderr
    # the first of several ';'-separated name servers that answers (mqadmin's form)
    proc = run_cli("topicList", namesrv_env=f"127.0.0.1:1;{live_broker.namesrv}")
    assert proc.returncode == 0 and "EnvTopic" in proc.stdout.split(), proc.stdout + proc.stderr


def test_namesrv_addr_environment_names_the_server_asked():
    proc = run_cli("topicList", namesrv_env="127.0.0.1:1")
    assert proc.returncode == 1 and "cannot reach 127.0.0.1:1" in proc.stdout + proc.stderr


@pytest.mark.timeout(120)
def test_namesrv_flag_wins_over_environment(live_broker):
    proc = run_cli("topicList", "-n", live_broker.namesrv, namesrv_env="127.0.0.1:1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
