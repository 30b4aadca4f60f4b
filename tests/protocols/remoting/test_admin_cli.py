"""`rocketport admin` verbs against a live broker, run as the CLI (subprocess)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time

import orjson
import pytest

from rocketport.core.config import ProtocolConfig

from tests.support.live_broker import start_live_broker
from tests.support.remoting import free_port


def admin(live, *args: str, expect: int = 0, columns: int = 400) -> str:
    """stdout of the CLI run with stdout captured (not a TTY: plain output unless --output);
    on a failure expected, stderr, where errors go."""
    env = dict(os.environ, COLUMNS=str(columns), TERM="dumb")
    proc = subprocess.run([sys.executable, "-m", "rocketport", "admin", args[0], "-n", live.namesrv,
                           *args[1:]], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return proc.stdout if expect == 0 else proc.stderr


def plain_rows(text: str) -> list[dict[str, str]]:
    """--output plain's first section as row dicts keyed by its header line."""
    header, *rows = text.split("\n\n")[0].splitlines()
    return [dict(zip(header.split("\t"), row.split("\t"))) for row in rows]


@pytest.mark.timeout(240)
def test_admin_verbs_round_trip(live_broker):
    assert "success" in admin(live_broker, "updateTopic", "-t", "AdminTopic", "-r", "2", "-w", "2")
    assert "AdminTopic" in admin(live_broker, "topicList").split()
    assert '"writeQueueNums": 2' in admin(live_broker, "topicRoute", "-t", "AdminTopic")
    [sent] = plain_rows(admin(live_broker, "sendMessage", "-t", "AdminTopic", "-p", "hello admin", "-k", "K1",
                              "-c", "TagX", "-i", "1"))
    assert sent["status"] == "SEND_OK" and sent["queueId"] == "1", sent
    offset_id = sent["offsetMsgId"]
    status = plain_rows(admin(live_broker, "topicStatus", "-t", "AdminTopic"))
    assert {"brokerName": "broker-a", "queueId": "1", "minOffset": "0", "maxOffset": "1"}.items() \
        <= status[1].items(), status
    assert "hello admin" in admin(live_broker, "queryMsgByKey", "-t", "AdminTopic", "-k", "K1")
    assert "hello admin" in admin(live_broker, "queryMsgById", "-i", offset_id)
    assert "hello admin" in admin(live_broker, "queryMsgByOffset", "-t", "AdminTopic", "-b", "broker-a",
                                  "-i", "1", "-o", "0")
    assert "hello admin" in admin(live_broker, "consumeMessage", "-t", "AdminTopic")
    assert "DefaultCluster" in admin(live_broker, "clusterList")
    assert "msgPutTotalTodayNow" in admin(live_broker, "brokerStatus")
    config = {r["key"]: r["value"] for r in plain_rows(admin(live_broker, "getBrokerConfig"))}
    assert config["brokerClusterName"] == "DefaultCluster" and config["flushDiskType"] == "ASYNC_FLUSH"
    table = admin(live_broker, "getBrokerConfig", "--output", "table")
    assert re.search(r"│\s*flushDiskType\s*│\s*ASYNC_FLUSH\s*│", table), table
    assert "success" in admin(live_broker, "updateSubGroup", "-g", "AdminGroup")
    progress = orjson.loads(admin(live_broker, "consumerProgress", "-g", "AdminGroup", "-t", "AdminTopic",
                                  "--output", "json"))
    assert progress["diffTotal"] == 1 and len(progress["progress"]) == 2, progress
    assert "Diff Total: 1" in admin(live_broker, "consumerProgress", "-g", "AdminGroup", "-t", "AdminTopic",
                                    "--output", "table")
    assert "hello admin" in admin(live_broker, "printMsg", "-t", "AdminTopic")
    reset = plain_rows(admin(live_broker, "resetOffsetByTime", "-g", "AdminGroup", "-t", "AdminTopic", "-s", "now"))
    assert {"brokerName": "broker-a", "queueId": "1", "offset": "1"} in reset, reset
    assert "diffTotal\n0" in admin(live_broker, "consumerProgress", "-g", "AdminGroup", "-t", "AdminTopic")
    assert "success" in admin(live_broker, "cloneGroupOffset", "-s", "AdminGroup", "-d", "AdminCopy",
                              "-t", "AdminTopic")
    assert "diffTotal\n0" in admin(live_broker, "consumerProgress", "-g", "AdminCopy", "-t", "AdminTopic")
    assert "not online" in admin(live_broker, "consumerConnection", "-g", "AdminGroup", "--output", "table")
    assert "clientId" in admin(live_broker, "producerConnection", "-g", "TOOLS_PRODUCER")
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


def run_in_terminal(*args: str, columns: int = 80, timeout: float = 60.0) -> tuple[int, str]:
    """The CLI with stdout on a pseudo-terminal ``columns`` wide: what a user at a terminal sees."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NAMESRV_ADDR")}
    env["TERM"] = "xterm"
    proc = subprocess.Popen([sys.executable, "-m", "rocketport", "admin", *args], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)
    text = b"".join(chunks).decode("utf-8", "replace")
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r\n", "\n")


OFFSET_ID = re.compile(r"\b[0-9A-F]{32}\b")


@pytest.mark.timeout(180)
def test_piped_output_keeps_ids_whole_for_query_msg_by_id(live_broker):
    assert "success" in admin(live_broker, "updateTopic", "-t", "IdTopic", "-r", "1", "-w", "1")
    # plain, the default when stdout is not a terminal; an 80-column COLUMNS changes nothing
    [sent] = plain_rows(admin(live_broker, "sendMessage", "-t", "IdTopic", "-p", "first body", columns=80))
    assert OFFSET_ID.fullmatch(sent["offsetMsgId"]) and OFFSET_ID.fullmatch(sent["msgId"]), sent
    [found] = plain_rows(admin(live_broker, "queryMsgById", "-i", sent["offsetMsgId"], columns=80))
    assert found["body"] == "first body" and found["msgId"] == sent["msgId"], found
    # json: one document
    sent = orjson.loads(admin(live_broker, "sendMessage", "-t", "IdTopic", "-p", "second body",
                              "--output", "json", columns=80))
    found = orjson.loads(admin(live_broker, "queryMsgById", "-i", sent["offsetMsgId"], "--output", "json"))
    assert found["body"] == "second body" and found["offsetMsgId"] == sent["offsetMsgId"]
    # a listing's offsetMsgId is what queryMsgById takes too
    listed = orjson.loads(admin(live_broker, "consumeMessage", "-t", "IdTopic", "--output", "json"))
    assert sent["offsetMsgId"] in {m["offsetMsgId"] for m in listed}
    # a table asked for in 80 columns shows the ids whole as well
    table = admin(live_broker, "sendMessage", "-t", "IdTopic", "-p", "third body", "--output", "table",
                  columns=80)
    assert "…" not in table and len(OFFSET_ID.findall(table)) == 2, table


@pytest.mark.timeout(180)
def test_terminal_80_columns_table_keeps_ids_whole(live_broker):
    assert "success" in admin(live_broker, "updateTopic", "-t", "TtyTopic", "-r", "1", "-w", "1")
    code, text = run_in_terminal("sendMessage", "-n", live_broker.namesrv, "-t", "TtyTopic", "-p", "tty body")
    assert code == 0, text
    assert "│" in text and "…" not in text, text  # a rich table, nothing elided
    ids = OFFSET_ID.findall(text)
    assert len(ids) == 2, text
    offset_id = re.search(r"offsetMsgId\s*│\s*([0-9A-F]{32})\b", text)
    assert offset_id, text
    code, text = run_in_terminal("queryMsgById", "-n", live_broker.namesrv, "-i", offset_id.group(1))
    assert code == 0 and "tty body" in text and offset_id.group(1) in text, text
    code, text = run_in_terminal("consumeMessage", "-n", live_broker.namesrv, "-t", "TtyTopic")
    assert code == 0 and offset_id.group(1) in text and "…" not in text, text


@pytest.mark.timeout(180)
def test_send_message_creates_a_missing_topic_when_the_broker_auto_creates(live_broker):
    assert "NewOnSend" not in admin(live_broker, "topicList").split()
    [sent] = plain_rows(admin(live_broker, "sendMessage", "-t", "NewOnSend", "-p", "first of its topic"))
    assert sent["status"] == "SEND_OK", sent
    assert "NewOnSend" in admin(live_broker, "topicList").split()
    assert "first of its topic" in admin(live_broker, "queryMsgById", "-i", sent["offsetMsgId"])
    [again] = plain_rows(admin(live_broker, "sendMessage", "-t", "NewOnSend", "-p", "second"))
    assert again["queueOffset"] == "1", again  # the topic's own route now, same queue


@pytest.mark.timeout(180)
def test_send_message_creates_a_missing_topic_through_a_standalone_name_server(remoting_config):
    import time

    port = free_port()  # `rocketport namesrv` has no TBW102 route: brokers register real topics only
    namesrv = subprocess.Popen([sys.executable, "-m", "rocketport", "namesrv", "--host", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while run_cli("clusterList", "-n", f"127.0.0.1:{port}").returncode != 0:
            assert time.monotonic() < deadline, "name server did not start"
            time.sleep(0.2)
        # a master with namesrvAddr offers its HA port (listenPort + 1 unless set): a free one
        config = dataclasses.replace(remoting_config, namesrv=ProtocolConfig(False, 0),
                                     namesrv_addr=f"127.0.0.1:{port}", ha_listen_port=free_port())
        live = start_live_broker(config)
        try:
            while live.addr not in run_cli("clusterList", "-n", f"127.0.0.1:{port}").stdout:
                assert time.monotonic() < deadline, "broker did not register"
                time.sleep(0.2)
            proc = run_cli("sendMessage", "-n", f"127.0.0.1:{port}", "-t", "ViaRegistry", "-p", "registered")
            assert proc.returncode == 0, proc.stdout + proc.stderr
            [sent] = plain_rows(proc.stdout)
            assert sent["status"] == "SEND_OK" and sent["broker"] == live.addr, sent
            assert live.call(lambda: live.server.broker.get_topic("ViaRegistry")) is not None
        finally:
            live.stop()
    finally:
        namesrv.terminate()
        namesrv.wait(30)


@pytest.mark.timeout(180)
def test_send_message_to_a_missing_topic_says_why_when_auto_create_is_off(remoting_config):
    live = start_live_broker(dataclasses.replace(remoting_config, auto_create_topic_enable=False))
    try:
        error = admin(live, "sendMessage", "-t", "NotMadeOnSend", "-p", "x", expect=1)
        assert "NotMadeOnSend" in error and "autoCreateTopicEnable" in error and "updateTopic" in error, error
        assert live.call(lambda: live.server.broker.get_topic("NotMadeOnSend")) is None
    finally:
        live.stop()


def test_consumer_progress_shows_the_metadata_a_kafka_consumer_committed(live_broker):
    assert "success" in admin(live_broker, "updateTopic", "-t", "MetaTopic", "-r", "2", "-w", "2")
    broker = live_broker.server.broker
    live_broker.run(broker.commit_offset, "MetaGroup", "MetaTopic", 0, 0, "job-7 checkpoint")
    live_broker.run(broker.commit_offset, "MetaGroup", "MetaTopic", 1, 0)
    progress = orjson.loads(admin(live_broker, "consumerProgress", "-g", "MetaGroup", "-t", "MetaTopic",
                                  "--output", "json"))
    assert [(row["queueId"], row["metadata"]) for row in progress["progress"]] == \
        [(0, "job-7 checkpoint"), (1, "")], progress
    live_broker.run(broker.commit_offset, "MetaGroup", "MetaTopic", 0, 0)  # a plain commit clears it
    plain = admin(live_broker, "consumerProgress", "-g", "MetaGroup", "-t", "MetaTopic", "--output", "plain")
    assert "metadata" not in plain.splitlines()[0]


def test_update_sub_group_takes_mqadmins_flags(live_broker):
    """-q is retryQueueNums in mqadmin (a script written for it must not set retryMaxTimes)."""
    done = orjson.loads(admin(live_broker, "updateSubGroup", "-g", "FlagGroup", "-q", "3", "-r", "5",
                              "-s", "false", "-m", "false", "-d", "false", "-i", "1", "-w", "2",
                              "-a", "false", "--output", "json"))
    assert done == [{"broker": live_broker.addr, "group": "FlagGroup", "result": "success"}]
    group = live_broker.call(lambda: live_broker.server.broker.find_group("FlagGroup"))
    assert (group.retry_queue_nums, group.retry_max_times, group.consume_enable, group.consume_from_min_enable,
            group.consume_broadcast_enable, group.broker_id, group.which_broker_when_consume_slowly,
            group.notify_consumer_ids_changed_enable) == (3, 5, False, False, False, 1, 2, False)
    admin(live_broker, "updateSubGroup", "-g", "FlagGroup")
    group = live_broker.call(lambda: live_broker.server.broker.find_group("FlagGroup"))
    assert (group.retry_queue_nums, group.retry_max_times, group.consume_enable) == (1, 16, True)


def test_every_verb_takes_output_json_and_numbers_stay_numbers(live_broker):
    created = orjson.loads(admin(live_broker, "updateTopic", "-t", "JsonTopic", "--output", "json"))
    assert created == [{"broker": live_broker.addr, "topic": "JsonTopic", "result": "success"}]
    admin(live_broker, "sendMessage", "-t", "JsonTopic", "-p", "counted")
    for _ in range(100):  # bounded: the counters are sampled once a second
        [broker] = orjson.loads(admin(live_broker, "clusterList", "-m", "--output", "json"))
        if isinstance(broker["putToday"], int) and broker["putToday"] >= 1:
            break
        time.sleep(0.1)
    assert isinstance(broker["putToday"], int) and broker["putToday"] >= 1, broker
    assert broker["putYesterday"] == 0 and isinstance(broker["inTps"], float), broker
    runtime = {r["key"]: r["value"] for r in orjson.loads(admin(live_broker, "brokerStatus", "--output", "json"))}
    assert isinstance(runtime["msgPutTotalTodayNow"], int)
    deleted = orjson.loads(admin(live_broker, "deleteTopic", "-t", "JsonTopic", "--output", "json"))
    assert deleted == [{"broker": live_broker.addr, "topic": "JsonTopic", "result": "success"}]


def _json(live, *args: str):
    return orjson.loads(admin(live, *args, "--output", "json"))


def test_topic_verbs_of_the_operations_guide(live_broker):
    admin(live_broker, "updateTopic", "-t", "GuideTopic", "-r", "2", "-w", "2")
    assert _json(live_broker, "topicClusterList", "-t", "GuideTopic") == [{"cluster": "DefaultCluster"}]
    admin(live_broker, "sendMessage", "-t", "GuideTopic", "-p", "first", "-i", "1")
    sent = _json(live_broker, "sendMessage", "-t", "GuideTopic", "-p", "by queue", "-i", "1")
    by_queue = _json(live_broker, "printMsgByQueue", "-t", "GuideTopic", "-a", "broker-a", "-i", "1")
    assert [m["body"] for m in by_queue] == ["first", "by queue"]
    assert _json(live_broker, "printMsgByQueue", "-t", "GuideTopic", "-a", "broker-a", "-i", "0") == []
    found = _json(live_broker, "queryMsgByUniqueKey", "-i", sent["msgId"], "-t", "GuideTopic")
    assert found["body"] == "by queue" and found["msgId"] == sent["msgId"], found
    assert "no message with unique key" in admin(live_broker, "queryMsgByUniqueKey", "-i", "0A00000000",
                                                 "-t", "GuideTopic", expect=1)
    allocation = _json(live_broker, "allocateMQ", "-t", "GuideTopic", "-i", "client-b,client-a")
    assert [(r["client"], r["queueId"]) for r in allocation] == [("client-a", 0), ("client-b", 1)]
    changed = _json(live_broker, "updateTopicPerm", "-t", "GuideTopic", "-p", "4")
    assert changed == [{"broker": live_broker.addr, "topic": "GuideTopic", "perm": 4, "result": "success"}]
    assert '"perm": 4' in admin(live_broker, "topicRoute", "-t", "GuideTopic")
    assert "is not writable" in admin(live_broker, "sendMessage", "-t", "GuideTopic", "-p", "refused", expect=1)
    admin(live_broker, "updateTopicPerm", "-t", "GuideTopic", "-p", "6")
    assert "perm must be 2" in admin(live_broker, "updateTopicPerm", "-t", "GuideTopic", "-p", "7", expect=1)


def test_send_round_trip_verbs(live_broker):
    admin(live_broker, "updateTopic", "-t", "RtTopic", "-r", "2", "-w", "2")
    assert len(_json(live_broker, "sendMsgStatus", "-b", "broker-a", "-c", "3", "-s", "64")) == 3
    queues = _json(live_broker, "checkMsgSendRT", "-t", "RtTopic", "-a", "2", "-s", "16")
    assert [(q["queueId"], q["sends"]) for q in queues] == [(0, 2), (1, 2)]
    assert all(q["maxRtMs"] >= q["avgRtMs"] > 0 for q in queues)
    [broker] = _json(live_broker, "clusterRT", "-a", "2")
    assert (broker["brokerName"], broker["sends"]) == ("broker-a", 2)
    status = _json(live_broker, "topicStatus", "-t", "RtTopic")
    assert [q["maxOffset"] for q in status] == [2, 2]


def test_name_server_kv_config_settings_and_write_perm(live_broker):
    assert _json(live_broker, "updateKvConfig", "-s", "NS", "-k", "k1", "-v", "v1")[0]["result"] == "success"
    admin(live_broker, "updateOrderConf", "-t", "OrderedTopic", "-v", "broker-a:4", "-m", "put")
    [got] = _json(live_broker, "updateOrderConf", "-t", "OrderedTopic", "-m", "get")
    assert got["orderConf"] == "broker-a:4"
    config = {r["key"]: r["value"] for r in _json(live_broker, "getNamesrvConfig")}
    assert config["orderMessageEnable"] == "false" and config["kvConfigPath"].endswith("kvConfig.json")
    admin(live_broker, "updateTopic", "-t", "OrderedTopic")
    assert "orderTopicConf" not in admin(live_broker, "topicRoute", "-t", "OrderedTopic")
    admin(live_broker, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert '"orderTopicConf": "broker-a:4"' in admin(live_broker, "topicRoute", "-t", "OrderedTopic")
    assert "cannot change while the name server runs" in admin(
        live_broker, "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x", expect=1)
    admin(live_broker, "deleteKvConfig", "-s", ORDER_NS, "-k", "OrderedTopic")
    assert _json(live_broker, "updateOrderConf", "-t", "OrderedTopic", "-m", "get")[0]["orderConf"] is None
    [wiped] = _json(live_broker, "wipeWritePerm", "-b", "broker-a")
    assert wiped["wipeTopicCount"] >= 1
    assert '"perm": 4' in admin(live_broker, "topicRoute", "-t", "OrderedTopic")
    admin(live_broker, "addWritePerm", "-b", "broker-a")
    assert '"perm": 6' in admin(live_broker, "topicRoute", "-t", "OrderedTopic")
    admin(live_broker, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")


ORDER_NS = "ORDER_TOPIC_CONFIG"


def test_a_standalone_name_servers_kv_config_survives_its_restart(tmp_path):
    kv = tmp_path / "kvConfig.json"

    def namesrv() -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen([sys.executable, "-m", "rocketport", "namesrv", "--host", "127.0.0.1", "-p", "0",
                                 "--kv-config", str(kv)], stderr=subprocess.PIPE, text=True)
        seen = ""
        while "listening on" not in seen and proc.poll() is None:
            seen += proc.stderr.readline()
        return proc, re.search(r"listening on (\S+)", seen).group(1)

    def order_conf(addr: str) -> str | None:
        got = run_cli("updateOrderConf", "-n", addr, "-t", "Kept", "-m", "get", "--output", "json")
        assert got.returncode == 0, got.stderr
        return orjson.loads(got.stdout)[0]["orderConf"]

    proc, addr = namesrv()
    try:
        put = run_cli("updateOrderConf", "-n", addr, "-t", "Kept", "-v", "broker-a:2", "-m", "put")
        assert put.returncode == 0, put.stderr
        assert order_conf(addr) == "broker-a:2"
    finally:
        proc.terminate()
        proc.wait(30)
    proc, addr = namesrv()
    try:
        assert order_conf(addr) == "broker-a:2"  # read back from kvConfigPath
        deleted = run_cli("deleteKvConfig", "-n", addr, "-s", ORDER_NS, "-k", "Kept")
        assert deleted.returncode == 0, deleted.stderr
        assert order_conf(addr) is None
    finally:
        proc.terminate()
        proc.wait(30)
    assert orjson.loads(kv.read_text()) == {"configTable": {}}


def test_broker_consume_stats_lists_every_groups_lag(live_broker):
    admin(live_broker, "updateTopic", "-t", "StatsTopic", "-r", "1", "-w", "1")
    for body in ("a", "b", "c"):
        admin(live_broker, "sendMessage", "-t", "StatsTopic", "-p", body)
    admin(live_broker, "updateSubGroup", "-g", "StatsGroup")
    admin(live_broker, "resetOffsetByTime", "-g", "StatsGroup", "-t", "StatsTopic", "-s", "0")
    stats = _json(live_broker, "brokerConsumeStats")
    rows = [r for r in stats["queues"] if r["group"] == "StatsGroup"]
    assert [(r["topic"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"]) for r in rows] \
        == [("StatsTopic", 0, 3, 0, 3)]
    assert stats["diffTotal"] >= 3
    assert not [r for r in _json(live_broker, "brokerConsumeStats", "-l", "4")["queues"]
                if r["group"] == "StatsGroup"]


def _broker_process(root, *settings: str) -> tuple[subprocess.Popen, str]:
    from tests.support.processes import start_broker, wait_ready
    proc = start_broker(root, "listenPort=0", "namesrv.port=0", "kafka.port=0", *settings)
    seen = wait_ready(proc)
    return proc, re.search(r"name server listening on (\S+)", seen).group(1)


def test_store_maintenance_verbs_and_a_live_config_change_that_survives_a_restart(tmp_path):
    from tests.support.processes import stop
    root = tmp_path / "store"
    small = ("mappedFileSizeCommitLog=65536", "mappedFileSizeConsumeQueue=320")
    proc, namesrv = _broker_process(root, *small)
    try:
        for topic in ("Keep", "Gone"):
            assert run_cli("updateTopic", "-n", namesrv, "-t", topic, "-r", "1", "-w", "1").returncode == 0
        sent = run_cli("checkMsgSendRT", "-n", namesrv, "-t", "Keep", "-a", "40", "-s", "4096")
        assert sent.returncode == 0, sent.stderr
        assert run_cli("sendMessage", "-n", namesrv, "-t", "Gone", "-p", "x").returncode == 0
        refused = run_cli("updateBrokerConfig", "-n", namesrv, "-k", "listenPort", "-v", "1")
        assert refused.returncode == 1 and "listenPort: needs a restart" in refused.stderr
        changed = run_cli("updateBrokerConfig", "-n", namesrv, "-k", "fileReservedTime", "-v", "0")
        assert changed.returncode == 0, changed.stderr
        queue_files = sorted((root / "consumequeue" / "Keep" / "0").iterdir())
        assert len(queue_files) == 3
        assert run_cli("deleteExpiredCommitLog", "-n", namesrv).returncode == 0
        status = orjson.loads(run_cli("topicStatus", "-n", namesrv, "-t", "Keep", "--output", "json").stdout)
        assert status[0]["minOffset"] > 0 and status[0]["maxOffset"] == 40, status
        assert run_cli("cleanExpiredCQ", "-n", namesrv).returncode == 0
        assert len(list((root / "consumequeue" / "Keep" / "0").iterdir())) < len(queue_files)
    finally:
        stop(proc)
    # a topic table restored from before the topic existed (the table and its change log)
    from rocketport.core.metadata.topics import TopicConfigManager
    table = TopicConfigManager(str(root / "config"))
    table.load()  # folds the change log into topics.json
    del table.table["Gone"]
    table.persist()
    proc, namesrv = _broker_process(root, *small)
    try:
        config = {r["key"]: r["value"] for r in orjson.loads(
            run_cli("getBrokerConfig", "-n", namesrv, "--output", "json").stdout)}
        assert config["fileReservedTime"] == "0"  # updateBrokerConfig's change outlived the broker
        assert config["amqp.defaultUser"] == "guest" and config["amqp.defaultPass"] == "******"  # never sent
        assert (root / "consumequeue" / "Gone").is_dir()
        assert run_cli("cleanUnusedTopic", "-n", namesrv).returncode == 0
        assert not (root / "consumequeue" / "Gone").exists()
        assert (root / "consumequeue" / "Keep").is_dir()
    finally:
        stop(proc)


def test_message_verbs_take_the_guides_options(live_broker):
    admin(live_broker, "updateTopic", "-t", "OptTopic", "-r", "2", "-w", "2")
    for body, tag, queue in (("a0", "TagA", "0"), ("b0", "TagB", "0"), ("a1", "TagA", "1")):
        admin(live_broker, "sendMessage", "-t", "OptTopic", "-p", body, "-c", tag, "-i", queue)
    bodies = lambda rows: sorted(r["body"] for r in rows)  # noqa: E731
    assert bodies(_json(live_broker, "consumeMessage", "-t", "OptTopic", "-i", "0", "-o", "1")) == ["b0"]
    assert bodies(_json(live_broker, "consumeMessage", "-t", "OptTopic", "-b", "broker-a", "-i", "1")) == ["a1"]
    assert bodies(_json(live_broker, "consumeMessage", "-t", "OptTopic", "-s", "now")) == []
    assert bodies(_json(live_broker, "printMsg", "-t", "OptTopic", "-s", "TagA")) == ["a0", "a1"]
    assert bodies(_json(live_broker, "printMsg", "-t", "OptTopic", "-s", "TagA || TagB", "-d", "false")) \
        == ["", "", ""]
    admin(live_broker, "updateSubGroup", "-g", "OptGroup")
    admin(live_broker, "resetOffsetByTime", "-g", "OptGroup", "-t", "OptTopic", "-s", "now")
    kept = _json(live_broker, "resetOffsetByTime", "-g", "OptGroup", "-t", "OptTopic", "-s", "0", "-f", "false")
    assert [r["offset"] for r in kept] == [0, 0]  # moving back is allowed without force
    admin(live_broker, "resetOffsetByTime", "-g", "OptGroup", "-t", "OptTopic", "-s", "0")
    kept = _json(live_broker, "resetOffsetByTime", "-g", "OptGroup", "-t", "OptTopic", "-s", "now", "-f", "false")
    assert [r["offset"] for r in kept] == [0, 0]  # without force a queue never moves forward
    listed = _json(live_broker, "topicList", "-c")
    assert {"cluster": "DefaultCluster", "topic": "OptTopic", "consumerGroup": "OptGroup"} in listed, listed


def test_consumer_progress_of_a_group_that_is_not_online_needs_no_topic(live_broker):
    """An AMQP queue or a Kafka group between polls is not online over remoting: its
    progress comes from the offsets it committed, as RocketMQ's broker answers it."""
    admin(live_broker, "updateTopic", "-t", "OfflineTopic", "-r", "1", "-w", "1")
    admin(live_broker, "sendMessage", "-t", "OfflineTopic", "-p", "one")
    admin(live_broker, "sendMessage", "-t", "OfflineTopic", "-p", "two")
    assert "no committed offsets" in admin(live_broker, "consumerProgress", "-g", "OfflineGroup", expect=1)
    admin(live_broker, "resetOffsetByTime", "-g", "OfflineGroup", "-t", "OfflineTopic", "-s", "0")
    progress = _json(live_broker, "consumerProgress", "-g", "OfflineGroup")
    assert [(r["topic"], r["diff"]) for r in progress["progress"]] == [("OfflineTopic", 2)]
    assert progress["diffTotal"] == 2


def test_start_monitoring_prints_each_groups_lag_every_round(live_broker):
    admin(live_broker, "updateTopic", "-t", "WatchTopic", "-r", "1", "-w", "1")
    admin(live_broker, "sendMessage", "-t", "WatchTopic", "-p", "watched")
    admin(live_broker, "updateSubGroup", "-g", "WatchGroup")
    admin(live_broker, "resetOffsetByTime", "-g", "WatchGroup", "-t", "WatchTopic", "-s", "0")
    text = admin(live_broker, "startMonitoring", "-r", "2", "-i", "0.1", "--output", "plain")
    rounds = [plain_rows(block) for block in text.strip().split("\n\n")]
    assert len(rounds) == 2
    for n, rows in enumerate(rounds, 1):
        assert {"round": str(n), "broker": live_broker.addr, "group": "WatchGroup", "diff": "1"}.items() \
            <= next(r for r in rows if r["group"] == "WatchGroup").items()


def test_cluster_list_counts_today_across_a_restart(tmp_path):
    """-m's counts are RocketMQ's (today since midnight, yesterday), kept across a restart;
    -i prints again each interval."""
    from tests.support.processes import stop
    root = tmp_path / "store"
    proc, namesrv = _broker_process(root)
    try:
        assert run_cli("updateTopic", "-n", namesrv, "-t", "CountedTopic", "-r", "2", "-w", "2").returncode == 0
        sent = run_cli("checkMsgSendRT", "-n", namesrv, "-t", "CountedTopic", "-a", "7", "-s", "8")
        assert sent.returncode == 0, sent.stderr
    finally:
        stop(proc)  # a clean stop samples and saves the day's counts
    proc, namesrv = _broker_process(root)
    try:
        listed = run_cli("clusterList", "-n", namesrv, "-m", "-i", "0.1", "-r", "2", "--output", "json")
        assert listed.returncode == 0, listed.stderr
        rounds = [orjson.loads(doc) for doc in listed.stdout.strip().split("\n\n")]
        assert len(rounds) == 2
        assert rounds[-1][0]["putToday"] == 2 * 7, rounds  # 2 queues x 7 sends, before the restart
    finally:
        stop(proc)


@pytest.fixture
def kafka_live_broker(remoting_config):
    live = start_live_broker(dataclasses.replace(remoting_config, kafka=ProtocolConfig(True, 0)))
    try:
        yield live
    finally:
        live.stop()


def test_stats_all_shows_each_topics_rate_and_each_groups_consumption_and_lag(kafka_live_broker):
    """statsAll (VIEW_BROKER_STATS_DATA): messages in over 24 hours per topic, messages a
    group consumed (its committed offsets, here a Kafka consumer's) and its lag; -a hides
    idle topics."""
    from confluent_kafka import Consumer, TopicPartition
    live_broker = kafka_live_broker
    admin(live_broker, "updateTopic", "-t", "RateTopic", "-r", "1", "-w", "1")
    admin(live_broker, "updateTopic", "-t", "IdleTopic", "-r", "1", "-w", "1")
    for body in ("a", "b", "c", "d", "e"):
        admin(live_broker, "sendMessage", "-t", "RateTopic", "-p", body)
    admin(live_broker, "updateSubGroup", "-g", "RateGroup")
    admin(live_broker, "resetOffsetByTime", "-g", "RateGroup", "-t", "RateTopic", "-s", "0")
    consumer = Consumer({"bootstrap.servers": live_broker.bootstrap, "group.id": "RateGroup",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("RateTopic", 0, 0)])
        got = []
        for _ in range(100):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
            if len(got) == 3:
                break
        assert got == [b"a", b"b", b"c"]
        consumer.commit(offsets=[TopicPartition("RateTopic", 0, 3)], asynchronous=False)
    finally:
        consumer.close()
    rows = {(r["topic"], r["consumerGroup"]): r for r in plain_rows(admin(live_broker, "statsAll"))}
    rate = rows[("RateTopic", "RateGroup")]
    assert (rate["accumulation"], rate["inMsg24Hour"], rate["outMsg24Hour"]) == ("2", "5", "3"), rate
    assert float(rate["inTps"]) > 0 and float(rate["outTps"]) > 0, rate
    assert rows[("IdleTopic", "")]["outMsg24Hour"] == "NO_CONSUMER"
    assert not any(r["topic"].startswith(("%RETRY%", "%DLQ%")) for r in rows.values())
    active = {r["topic"] for r in plain_rows(admin(live_broker, "statsAll", "-a"))}
    assert "RateTopic" in active and "IdleTopic" not in active
    assert {r["topic"] for r in plain_rows(admin(live_broker, "statsAll", "-t", "IdleTopic"))} == {"IdleTopic"}
