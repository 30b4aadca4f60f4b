"""aclEnable: RocketMQ 4.x plain ACL on the remoting port, with our client, the PyPI
`rocketmq` (C++) client and `rocketport admin`, all signing as RocketMQ clients do."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketport.protocols.remoting.acl_sign import sign_request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.server import BrokerServer

from tests.support.live_broker import start_live_broker
from tests.support.remoting import remoting_client, request
from .test_session import pull_request, run_with_server, send_request

APP = ("app", "app-secret")
CLIENT = Path(__file__).parents[3] / "interop" / "rocketmq_py" / "client.py"


def stored(server: BrokerServer, topic: str) -> int:
    cfg = server.broker.get_topic(topic)
    return sum(server.broker.max_offset(topic, q) for q in range(cfg.write_queue_nums)) if cfg else 0


def test_requests_are_checked_and_refusals_answered_in_rocketmq_terms(acl_config):
    async def scenario(server: BrokerServer) -> None:
        for topic in ("Open", "Closed", "ReadOnly"):
            server.broker.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        addr = server.front_ends["remoting"].broker_addr()

        async def send(topic: str, credentials) -> tuple[int, str]:
            async with remoting_client(addr, credentials=credentials) as client:
                resp = await client.invoke(send_request(topic, b"payload"))
            return resp.code, resp.remark or ""

        assert (await send("Open", APP))[0] == ResponseCode.SUCCESS
        for topic, credentials, reason in [
            ("Open", None, "No accessKey is configured"),
            ("Open", ("app", "wrong-secret"), "Check signature failed for accessKey=app"),
            ("Open", ("stranger", "whatever"), "No acl config for stranger"),
            ("Closed", APP, "No permission for topic Closed (accessKey=app)"),
            ("ReadOnly", APP, "No permission for topic ReadOnly (accessKey=app)"),
            ("Unlisted", APP, "No permission for topic Unlisted (accessKey=app)"),
        ]:
            code, remark = await send(topic, credentials)
            assert code == ResponseCode.SYSTEM_ERROR and remark == f"AclException: {reason}", (topic, remark)
        assert [stored(server, t) for t in ("Open", "Closed", "ReadOnly")] == [1, 0, 0]

        async with remoting_client(addr, credentials=APP) as client:
            resp = await client.invoke(pull_request("ReadOnly", 0, 0))  # SUB on topic and group
            assert resp.code == ResponseCode.PULL_NOT_FOUND
            resp = await client.invoke(pull_request("Closed", 0, 0))
            assert resp.remark == "AclException: No permission for topic Closed (accessKey=app)"
            # a body changed after signing is refused
            cmd = send_request("Open", b"signed body")
            client.credentials = None
            sign_request(cmd, *APP)
            cmd.body = b"other body"
            resp = await client.invoke(cmd)
            assert resp.remark == "AclException: Check signature failed for accessKey=app"
            # admin requests need an admin account
            create = request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "Made", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
            client.credentials = APP
            resp = await client.invoke(create)
            assert resp.remark.startswith("AclException: Need admin permission")
            assert server.broker.get_topic("Made") is None
            client.credentials = ("ops", "ops-secret")
            resp = await client.invoke(create)
            assert resp.code == ResponseCode.SUCCESS and server.broker.get_topic("Made") is not None
        assert stored(server, "Open") == 1
    run_with_server(acl_config, scenario)


def run_client(home: Path, *args: str, expect_ok: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(CLIENT), *args], env=dict(os.environ, HOME=str(home)),
                          timeout=120, capture_output=True, text=True)
    assert (proc.returncode == 0) == expect_ok, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_cpp_client_with_credentials_produces_and_consumes_and_a_wrong_secret_stores_nothing(
        acl_config, tmp_path, caplog):
    pytest.importorskip("rocketmq.client", reason="needs the rocketmq test extra")
    caplog.set_level(logging.INFO, logger="rocketport.protocols.remoting.acl_hook")
    live = start_live_broker(acl_config)
    try:
        live.call(lambda: live.server.broker.create_topic("Open", read_queue_nums=2, write_queue_nums=2))
        ns = live.namesrv
        run_client(tmp_path, "produce", ns, "Open", "3", "--credentials", "app:app-secret")
        got = run_client(tmp_path, "push", ns, "Open", "AclGroup", "3", "--timeout", "60",
                         "--linger", "1", "--credentials", "app:app-secret")
        assert {line for line in got.stdout.splitlines() if '"body"' in line} and \
            all(f"body-{i}" in got.stdout for i in range(3))
        run_client(tmp_path, "produce", ns, "Open", "1", "--credentials", "app:not-the-secret",
                   expect_ok=False)
        assert "refused: Check signature failed for accessKey=app" in caplog.text
        run_client(tmp_path, "produce", ns, "Open", "1", expect_ok=False)
        assert "refused: No accessKey is configured" in caplog.text
        assert live.call(lambda: stored(live.server, "Open")) == 3
    finally:
        live.stop()


def test_admin_cli_signs_with_credentials_from_the_environment(acl_config):
    live = start_live_broker(acl_config)
    try:
        def admin(*args: str, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "rocketport", "admin", args[0], "-n", live.namesrv,
                                   *args[1:]], env=dict(os.environ, COLUMNS="400", TERM="dumb", **env),
                                  capture_output=True, text=True, timeout=60)

        refused = admin("updateTopic", "-t", "ByCli", "-b", live.addr)
        assert refused.returncode != 0 and "AclException: No accessKey" in refused.stdout + refused.stderr
        done = admin("updateTopic", "-t", "ByCli", "-b", live.addr,
                     ROCKETPORT_ACCESS_KEY="ops", ROCKETPORT_SECRET_KEY="ops-secret")
        assert done.returncode == 0, done.stdout + done.stderr
        deadline = time.monotonic() + 5
        while live.call(lambda: live.server.broker.get_topic("ByCli")) is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        live.stop()


def test_every_served_code_has_an_access_rule_and_an_unlisted_code_is_refused(acl_config):
    from rocketport.core.auth.plain_acl import AclError
    from rocketport.protocols.remoting.acl_hook import RULES, needed_resources

    async def scenario(server: BrokerServer) -> None:
        for topic in ("Open", "Closed"):
            server.broker.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        served = set(server.front_ends["remoting"].handlers._routes)
        assert served, "the router serves codes"
        assert served - set(RULES) == set(), "a served code without an access rule"
        with pytest.raises(AclError, match="no access rule"):
            needed_resources(RequestCode.GET_KV_CONFIG, {}, b"")
        addr = server.front_ends["remoting"].broker_addr()
        ops = ("ops", "ops-secret")  # even an admin account is refused a code with no rule
        async with remoting_client(addr, credentials=ops) as client:
            resp = await client.invoke(request(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"}))
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert resp.remark == f"AclException: request code {int(RequestCode.GET_KV_CONFIG)} has no access rule: refused"
        # the offset queries on a topic now need SUB on it (they were unchecked)
        async with remoting_client(addr, credentials=APP) as client:
            resp = await client.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": "Closed", "queueId": "0"}))
            assert resp.remark == "AclException: No permission for topic Closed (accessKey=app)"
            resp = await client.invoke(request(RequestCode.GET_MAX_OFFSET, {"topic": "Open", "queueId": "0"}))
            assert resp.code == ResponseCode.SUCCESS

    run_with_server(acl_config, scenario)
