import pytest

from rocketport.config_file import load_config, parse_properties
from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.core.errors import ConfigError


def test_default_yaml_loads(tmp_path):
    cfg = load_config("conf/broker.yaml")
    assert cfg.flush_disk_type == "ASYNC_FLUSH" and cfg.listen_port == 10911
    assert cfg.kafka.port == 9092 and cfg.message_delay_level.startswith("1s 5s")


def test_properties_file(tmp_path):
    path = tmp_path / "broker.properties"
    path.write_text("# comment\nbrokerName = b1\nflushDiskType:SYNC_FLUSH\nlistenPort 10922\n"
                    "storePathRootDir=/tmp/x\\\n/y\nkafka.port=19092\n")
    cfg = load_config(str(path))
    assert cfg.broker_name == "b1" and cfg.sync_flush and cfg.listen_port == 10922
    assert cfg.store_path_root_dir == "/tmp/x/y" and cfg.kafka.port == 19092


def test_unknown_keys_and_bad_values_reported_together():
    with pytest.raises(ConfigError) as err:
        BrokerConfig.from_mapping({"flushDiskTyp": "SYNC_FLUSH", "listenPort": "abc",
                                   "flushDiskType": "SOMETIMES", "deleteWhen": "noon",
                                   "autoCreateTopicEnable": "maybe"})
    text = str(err.value)
    for part in ("unknown key 'flushDiskTyp'", "did you mean 'flushDiskType'", "listenPort",
                 "SOMETIMES", "deleteWhen", "autoCreateTopicEnable"):
        assert part in text


def test_bad_yaml_is_a_config_error(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("listenPort: [1, 2\n")
    with pytest.raises(ConfigError):
        load_config(str(path))
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError):
        load_config(str(path))


def test_parse_properties_separators():
    assert parse_properties("a=1\nb: 2\nc 3\n! x\nd\n") == {"a": "1", "b": "2", "c": "3", "d": ""}


def test_as_properties_names_every_setting_and_reads_back(tmp_path):
    config = BrokerConfig(broker_name="b-7", max_message_size=8192, flush_disk_type="SYNC_FLUSH",
                          kafka=ProtocolConfig(True, 19092))
    props = config.as_properties()
    assert props["brokerName"] == "b-7" and props["maxMessageSize"] == "8192"
    assert props["kafka.enabled"] == "true" and props["kafka.port"] == "19092"
    path = tmp_path / "broker.properties"  # what GET_BROKER_CONFIG sends, loaded as a file
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    assert load_config(str(path)) == config


def problems_of(values, **kw) -> list[str]:
    with pytest.raises(ConfigError) as err:
        BrokerConfig.from_mapping(values, **kw)
    return str(err.value).splitlines()


def test_nested_unknown_key_named_in_full_with_a_suggestion():
    assert problems_of({"kafka": {"prot": 9092}}) == ["unknown key 'kafka.prot' (did you mean 'kafka.port'?)"]


def test_every_problem_on_its_own_line_nested_sections_included():
    lines = problems_of({"flushDiskTyp": "SYNC_FLUSH", "kafka": {"prot": 9092, "port": "abc", "enabled": "maybe"},
                         "namesrv": {"port": 70000}, "stomp": 61613, "brokerId": -1,
                         "flushDiskType": "SOMETIMES", "listenPort": "x1"})
    assert lines == [
        "unknown key 'flushDiskTyp' (did you mean 'flushDiskType'?)",
        "unknown key 'kafka.prot' (did you mean 'kafka.port'?)",
        "kafka.port: expected an integer, got 'abc'",
        "kafka.enabled: expected true or false, got 'maybe'",
        "namesrv.port: must be <= 65535, got 70000",
        "stomp: expected a section with enabled, port, host, wsPort, wssPort, tlsPort, maxMessageSize, got 61613",
        "brokerId: must be >= 0, got -1",
        "flushDiskType: must be one of ASYNC_FLUSH, SYNC_FLUSH, got 'SOMETIMES'",
        "listenPort: expected an integer, got 'x1'",
    ]


def test_suggestions_for_other_spellings_of_a_key():
    assert problems_of({"listen_port": 1}) == ["unknown key 'listen_port' (did you mean 'listenPort'?)"]
    assert problems_of({"flushdisktype": "SYNC_FLUSH"}) == \
        ["unknown key 'flushdisktype' (did you mean 'flushDiskType'?)"]
    assert problems_of({"kafka": {"Port": 1}}) == ["unknown key 'kafka.Port' (did you mean 'kafka.port'?)"]
    assert problems_of({"zzzz": 1}) == ["unknown key 'zzzz'"]


def test_port_bounds():
    assert problems_of({"listenPort": 65536}) == ["listenPort: must be <= 65535, got 65536"]
    assert problems_of({"kafka": {"port": -1}}) == ["kafka.port: must be >= 0, got -1"]
    assert BrokerConfig.from_mapping({"listenPort": "0", "kafka": {"port": "0"}}).kafka.port == 0
    # TLS ports: -1 = a free port the OS picks; below that refused
    config = BrokerConfig.from_mapping({"kafka": {"tlsPort": "-1"}, "stomp": {"wssPort": -1}})
    assert (config.kafka.tls_port, config.stomp.wss_port) == (-1, -1)
    assert problems_of({"amqp": {"tlsPort": -2}}) == ["amqp.tlsPort: must be >= -1, got -2"]


def test_set_overrides_go_through_the_same_checks():
    with pytest.raises(ConfigError) as err:
        load_config(None, {"kafka.prot": "1", "listenPort": "abc", "kafka.enabled": "false"})
    assert str(err.value).splitlines() == [
        "--set: unknown key 'kafka.prot' (did you mean 'kafka.port'?)",
        "--set: listenPort: expected an integer, got 'abc'",
    ]


def test_file_and_override_problems_together_each_naming_its_source(tmp_path):
    path = tmp_path / "broker.yaml"
    path.write_text("brokerName: b1\nkafka:\n  prot: 9092\n  enabled: true\nmaxMessageSize: 12\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path), {"flushDiskTyp": "SYNC_FLUSH", "kafka.host": "0.0.0.0"})
    assert str(err.value).splitlines() == [
        f"{path}: unknown key 'kafka.prot' (did you mean 'kafka.port'?)",
        f"{path}: maxMessageSize: must be >= 1024, got 12",
        "--set: unknown key 'flushDiskTyp' (did you mean 'flushDiskType'?)",
    ]
    props = tmp_path / "broker.properties"
    props.write_text("kafka.prot=9092\nlistenPort=ten\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(props))
    assert str(err.value).splitlines() == [
        f"{props}: unknown key 'kafka.prot' (did you mean 'kafka.port'?)",
        f"{props}: listenPort: expected an integer, got 'ten'",
    ]


def test_an_override_fixes_a_file_value(tmp_path):
    path = tmp_path / "broker.yaml"
    path.write_text("listenPort: abc\nkafka: 9092\n")
    config = load_config(str(path), {"listenPort": "10999", "kafka.port": "19092"})
    assert config.listen_port == 10999 and config.kafka.port == 19092


def test_yaml_dotted_keys_and_empty_sections(tmp_path):
    path = tmp_path / "broker.yaml"
    path.write_text("kafka.port: 19092\nstomp:\n")  # as broker.properties and --set spell a section key
    config = load_config(str(path))
    assert config.kafka.port == 19092 and config.stomp == BrokerConfig().stomp


def test_yaml_syntax_error_is_one_line_naming_the_place(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("brokerName: b1\nlistenPort: [1, 2\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    [line] = str(err.value).splitlines()
    assert line.startswith(f"{path}: not valid YAML at line ") and "column" in line, line


def test_cli_prints_every_problem_and_exits_2(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "broker.yaml"
    path.write_text("kafka:\n  prot: 9092\nlistenPort: abc\n")
    proc = subprocess.run([sys.executable, "-m", "rocketport", "broker", "-c", str(path), "--set", "kafka.prot=1",
                           "--set", f"storePathRootDir={tmp_path / 'store'}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"rocketport: {path}: listenPort: expected an integer, got 'abc'",
        "--set: unknown key 'kafka.prot' (did you mean 'kafka.port'?)",
    ]
    assert not (tmp_path / "store").exists()


def test_stomp_and_amqp_take_rabbitmqs_message_size_and_the_store_the_largest_limit():
    """STOMP's and AMQP's limit is RabbitMQ's max_message_size (128 MiB) unless
    stomp.maxMessageSize / amqp.maxMessageSize says otherwise; RocketMQ's maxMessageSize
    stays the broker's (remoting, Kafka). The store takes the largest limit of the enabled
    front-ends."""
    config = BrokerConfig.from_mapping({})
    assert config.message_size_of(config.stomp) == config.message_size_of(config.amqp) == 128 << 20
    assert config.max_message_size == 4 << 20
    assert config.largest_message_size == 128 << 20
    config = BrokerConfig.from_mapping({"stomp.maxMessageSize": 1 << 20, "amqp.maxMessageSize": 1 << 20,
                                        "maxMessageSize": 2 << 20})
    assert config.message_size_of(config.stomp) == config.message_size_of(config.amqp) == 1 << 20
    assert config.largest_message_size == 2 << 20
    config = BrokerConfig.from_mapping({"stomp": {"enabled": False}, "amqp.maxMessageSize": 64 << 20})
    assert config.largest_message_size == 64 << 20
    config = BrokerConfig.from_mapping({"stomp": {"enabled": False}, "amqp": {"enabled": False}})
    assert config.largest_message_size == 4 << 20
    assert problems_of({"stomp.maxMessageSize": 10}) == ["stomp.maxMessageSize: must be >= 1024, got 10"]
    assert problems_of({"kafka.maxMessageSize": 1 << 20})[0].startswith("unknown key 'kafka.maxMessageSize'")


def test_amqp_takes_rabbitmqs_default_account_and_loopback_users():
    """amqp.defaultUser / defaultPass / loopbackUsers: RabbitMQ's default_user, default_pass
    (guest / guest) and loopback_users ([guest]); a list or names separated by commas."""
    config = BrokerConfig.from_mapping({})
    assert (config.amqp.default_user, config.amqp.default_pass, config.amqp.loopback_users) == (
        "guest", "guest", ("guest",))
    config = BrokerConfig.from_mapping({"amqp.defaultUser": "app", "amqp.defaultPass": "pw",
                                        "amqp.loopbackUsers": "app, ops"})
    assert (config.amqp.default_user, config.amqp.default_pass, config.amqp.loopback_users) == (
        "app", "pw", ("app", "ops"))
    assert BrokerConfig.from_mapping({"amqp": {"loopbackUsers": []}}).amqp.loopback_users == ()
    assert BrokerConfig.from_mapping({"amqp.loopbackUsers": ""}).amqp.loopback_users == ()
    assert problems_of({"stomp.defaultUser": "x"})[0].startswith("unknown key 'stomp.defaultUser'")
    assert problems_of({"amqp.loopbackUsers": 5}) == ["amqp.loopbackUsers: expected a list of names, got 5"]
