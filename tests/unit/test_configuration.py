"""Configuration: defaults, YAML file, FLINK_PROPERTIES, -D, typed getters, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_runtime.configuration import (
    ASK_TIMEOUT,
    FRAMESIZE,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_TIMEOUT,
    JOBMANAGER_RPC_ADDRESS,
    JOBMANAGER_RPC_PORT,
    OPTIONS,
    PARALLELISM_DEFAULT,
    REGISTRATION_INITIAL_TIMEOUT,
    REST_PORT,
    TASKMANAGER_SLOTS,
    Configuration,
    ConfigurationError,
    parse_duration_ms,
    parse_size_bytes,
)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- defaults ----------------------------------------------------------------------------------


def test_defaults_without_any_source() -> None:
    config = Configuration.load(environ={})
    assert config.get(JOBMANAGER_RPC_ADDRESS) == "127.0.0.1"
    assert config.get(JOBMANAGER_RPC_PORT) == 6123
    assert config.get(REST_PORT) == 8081
    assert config.get(HEARTBEAT_INTERVAL) == 10_000.0
    assert config.get_seconds(HEARTBEAT_TIMEOUT) == 50.0
    assert config.get(REGISTRATION_INITIAL_TIMEOUT) == 100.0
    assert config.get(ASK_TIMEOUT) == 10_000.0
    assert config.get(FRAMESIZE) == 10 * 1024 * 1024
    assert config.get(PARALLELISM_DEFAULT) == 1
    assert config.to_dict() == {}
    assert "rest.port" not in config


def test_every_default_parses_with_its_kind() -> None:
    config = Configuration()
    for option in OPTIONS.values():
        config.get(option)  # no ConfigurationError for any shipped default


# -- YAML file -------------------------------------------------------------------------------


def test_yaml_file_flat_keys(tmp_path: Path) -> None:
    path = write(tmp_path / "conf.yaml", "rest.port: 9000\njobmanager.rpc.address: jm.example\n")
    config = Configuration.load(path, environ={})
    assert config.get(REST_PORT) == 9000
    assert config.get(JOBMANAGER_RPC_ADDRESS) == "jm.example"


def test_yaml_file_nested_keys(tmp_path: Path) -> None:
    text = "rest:\n  port: 9001\njobmanager:\n  rpc:\n    address: nested.example\n    port: 7000\n"
    config = Configuration.load(write(tmp_path / "conf.yaml", text), environ={})
    assert config.get(REST_PORT) == 9001
    assert config.get(JOBMANAGER_RPC_ADDRESS) == "nested.example"
    assert config.get(JOBMANAGER_RPC_PORT) == 7000
    assert config.to_dict() == {
        "rest.port": 9001,
        "jobmanager.rpc.address": "nested.example",
        "jobmanager.rpc.port": 7000,
    }


def test_yaml_file_mixed_flat_and_nested(tmp_path: Path) -> None:
    text = "taskmanager:\n  numberOfTaskSlots: 4\nheartbeat.interval: 2 s\n"
    config = Configuration.load(write(tmp_path / "conf.yaml", text), environ={})
    assert config.get(TASKMANAGER_SLOTS) == 4
    assert config.get(HEARTBEAT_INTERVAL) == 2000.0


def test_empty_yaml_file_gives_defaults(tmp_path: Path) -> None:
    config = Configuration.load(write(tmp_path / "conf.yaml", ""), environ={})
    assert config.get(REST_PORT) == 8081


def test_flink_conf_dir_discovery(tmp_path: Path) -> None:
    write(tmp_path / "config.yaml", "rest.port: 9100\n")
    config = Configuration.load(environ={"FLINK_CONF_DIR": str(tmp_path)})
    assert config.get(REST_PORT) == 9100


def test_flink_conf_dir_without_config_file_is_fine(tmp_path: Path) -> None:
    config = Configuration.load(environ={"FLINK_CONF_DIR": str(tmp_path)})
    assert config.get(REST_PORT) == 8081


def test_explicit_config_file_wins_over_flink_conf_dir(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    write(conf_dir / "config.yaml", "rest.port: 1111\n")
    explicit = write(tmp_path / "explicit.yaml", "rest.port: 2222\n")
    config = Configuration.load(explicit, environ={"FLINK_CONF_DIR": str(conf_dir)})
    assert config.get(REST_PORT) == 2222


def test_missing_explicit_config_file_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        Configuration.load(tmp_path / "missing.yaml", environ={})


# -- FLINK_PROPERTIES and -D, precedence ---------------------------------------------------------


def test_flink_properties_env() -> None:
    config = Configuration.load(environ={"FLINK_PROPERTIES": "rest.port: 9200\ntaskmanager.numberOfTaskSlots: 3\n"})
    assert config.get(REST_PORT) == 9200
    assert config.get(TASKMANAGER_SLOTS) == 3


def test_precedence_defaults_file_properties_dynamic(tmp_path: Path) -> None:
    path = write(
        tmp_path / "conf.yaml",
        "rest.port: 1001\njobmanager.rpc.port: 1002\nparallelism.default: 1003\ntaskmanager.numberOfTaskSlots: 1004\n",
    )
    environ = {"FLINK_PROPERTIES": "jobmanager.rpc.port: 2002\nparallelism.default: 2003\n"}
    config = Configuration.load(path, ["parallelism.default=3003"], environ=environ)
    assert config.get(REST_PORT) == 1001  # file only
    assert config.get(JOBMANAGER_RPC_PORT) == 2002  # FLINK_PROPERTIES beats the file
    assert config.get(PARALLELISM_DEFAULT) == 3003  # -D beats both
    assert config.get(TASKMANAGER_SLOTS) == 1004
    assert config.get(HEARTBEAT_INTERVAL) == 10_000.0  # default untouched


def test_dynamic_property_overrides_nested_file_key(tmp_path: Path) -> None:
    path = write(tmp_path / "conf.yaml", "rest:\n  port: 1001\n")
    config = Configuration.load(path, ["rest.port=4004"], environ={"FLINK_PROPERTIES": "rest:\n  port: 2002\n"})
    assert config.get(REST_PORT) == 4004


def test_dynamic_property_values_are_typed_by_the_getters() -> None:
    config = Configuration.load(
        dynamic_properties=[" rest.port = 8082", "heartbeat.interval=2 min", "security.cluster.secret="],
        environ={},
    )
    assert config.get(REST_PORT) == 8082
    assert config.get(HEARTBEAT_INTERVAL) == 120_000.0
    assert config.raw("security.cluster.secret") == ""


def test_dynamic_property_value_may_contain_equals() -> None:
    config = Configuration.load(dynamic_properties=["security.cluster.secret=a=b"], environ={})
    assert config.raw("security.cluster.secret") == "a=b"


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ("security.cluster.secret=0123", "0123"),
        ("security.cluster.secret=yes", "yes"),
        ("security.cluster.secret=%abc", "%abc"),
        ("security.cluster.secret=a: b", "a: b"),
        ("taskmanager.resource-id=0x1F", "0x1F"),
    ],
)
def test_dynamic_property_string_values_are_kept_verbatim(prop: str, expected: str) -> None:
    key = prop.partition("=")[0]
    assert Configuration.load(dynamic_properties=[prop], environ={}).get(OPTIONS[key]) == expected


def test_dynamic_property_with_unparsable_value_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"rest\.port"):
        Configuration.load(dynamic_properties=["rest.port=["], environ={}).get(REST_PORT)


# -- durations and sizes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("10 s", 10_000.0),
        ("500ms", 500.0),
        ("2 min", 120_000.0),
        ("1h", 3_600_000.0),
        ("1 d", 86_400_000.0),
        ("10000", 10_000.0),
        ("1.5 s", 1500.0),
        (" 3 SECONDS ", 3000.0),
        (250, 250.0),
        (0.5, 0.5),
    ],
)
def test_parse_duration(text: object, millis: float) -> None:
    assert parse_duration_ms(text) == millis


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("10 mb", 10 << 20),
        ("10485760b", 10485760),
        ("10485760", 10485760),
        ("64m", 64 << 20),
        ("1 kb", 1024),
        ("2g", 2 << 30),
        ("512KiB", 512 << 10),
        ("1.5 gb", 3 << 29),
        ("1t", 1 << 40),
        ("3 mebibytes", 3 << 20),
        (4096, 4096),
    ],
)
def test_parse_size(text: object, size: int) -> None:
    assert parse_size_bytes(text) == size


@pytest.mark.parametrize("bad", ["64x", "", "-1", "1.2.3m", True, None, [64]])
def test_bad_size_names_where_and_the_units(bad: object) -> None:
    with pytest.raises(
        ConfigurationError, match=r"^read_text\(split_size=\.\.\.\) must be a number of bytes .*units b, k, m, g, t"
    ):
        parse_size_bytes(bad, "read_text(split_size=...)")


def test_size_below_the_minimum_is_refused() -> None:
    assert parse_size_bytes(0, "x") == 0
    with pytest.raises(ConfigurationError, match="x must be at least 1 byte, got 0"):
        parse_size_bytes(0, "x", minimum=1)


def test_duration_option_from_config_in_seconds() -> None:
    config = Configuration({"heartbeat.interval": "500ms", "pekko.ask.timeout": 2500})
    assert config.get(HEARTBEAT_INTERVAL) == 500.0
    assert config.get_seconds(HEARTBEAT_INTERVAL) == 0.5
    assert config.get_seconds(ASK_TIMEOUT) == 2.5


def test_size_option_from_config() -> None:
    assert Configuration({"pekko.framesize": "10 mb"}).get(FRAMESIZE) == 10 << 20
    assert Configuration({"pekko.framesize": "10485760b"}).get(FRAMESIZE) == 10485760


# -- errors name the key -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["ten seconds", "10 fortnights", "", "-5 s", True])
def test_bad_duration_names_the_key(bad: object) -> None:
    config = Configuration({"heartbeat.interval": bad})
    with pytest.raises(ConfigurationError, match=r"heartbeat\.interval"):
        config.get(HEARTBEAT_INTERVAL)


def test_bad_size_names_the_key() -> None:
    with pytest.raises(ConfigurationError, match=r"pekko\.framesize"):
        Configuration({"pekko.framesize": "huge"}).get(FRAMESIZE)


def test_bad_int_names_the_key() -> None:
    with pytest.raises(ConfigurationError, match=r"rest\.port"):
        Configuration({"rest.port": "eighty"}).get(REST_PORT)
    with pytest.raises(ConfigurationError, match=r"rest\.port"):
        Configuration({"rest.port": None}).get(REST_PORT)


def test_bad_duration_from_dynamic_property_names_the_key() -> None:
    config = Configuration.load(dynamic_properties=["heartbeat.timeout=soon"], environ={})
    with pytest.raises(ConfigurationError, match=r"heartbeat\.timeout.*soon"):
        config.get(HEARTBEAT_TIMEOUT)


@pytest.mark.parametrize("prop", ["rest.port", "=8081", "  =1"])
def test_dynamic_property_without_key_value_is_refused(prop: str) -> None:
    with pytest.raises(ConfigurationError, match="key=value") as info:
        Configuration.load(dynamic_properties=[prop], environ={})
    assert repr(prop) in str(info.value)


def test_yaml_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path / "conf.yaml", "- rest.port\n- 8081\n")
    with pytest.raises(ConfigurationError, match="must be a mapping") as info:
        Configuration.load(path, environ={})
    assert str(path) in str(info.value)


def test_scalar_yaml_file_is_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="mapping"):
        Configuration.load(write(tmp_path / "conf.yaml", "just a string\n"), environ={})


def test_invalid_yaml_file(tmp_path: Path) -> None:
    path = write(tmp_path / "conf.yaml", "rest: [port: 8081\n")
    with pytest.raises(ConfigurationError, match="not valid YAML") as info:
        Configuration.load(path, environ={})
    assert str(path) in str(info.value)


def test_invalid_flink_properties_names_the_source() -> None:
    with pytest.raises(ConfigurationError, match="FLINK_PROPERTIES"):
        Configuration.load(environ={"FLINK_PROPERTIES": "rest: {port: 1"})
    with pytest.raises(ConfigurationError, match="FLINK_PROPERTIES.*mapping"):
        Configuration.load(environ={"FLINK_PROPERTIES": "[1, 2]"})


# -- copy ------------------------------------------------------------------------------------


def test_copy_with_overrides_leaves_original_unchanged() -> None:
    original = Configuration({"rest.port": 9000, "heartbeat.interval": "1 s"})
    clone = original.copy({"rest.port": 9999, "taskmanager": {"numberOfTaskSlots": 8}})
    assert clone.get(REST_PORT) == 9999
    assert clone.get(TASKMANAGER_SLOTS) == 8
    assert clone.get(HEARTBEAT_INTERVAL) == 1000.0
    assert original.get(REST_PORT) == 9000
    assert original.get(TASKMANAGER_SLOTS) == 0
    assert "taskmanager.numberOfTaskSlots" not in original


def test_copy_then_set_is_independent() -> None:
    original = Configuration({"rest.port": 9000})
    clone = original.copy()
    clone.set("rest.port", 1)
    original.set("parallelism.default", 4)
    assert original.get(REST_PORT) == 9000
    assert clone.get(REST_PORT) == 1
    assert "parallelism.default" not in clone


def test_raw_of_unknown_key() -> None:
    config = Configuration({"my.custom.key": "x"})
    assert config.raw("my.custom.key") == "x"
    assert config.raw("not.set") is None
    assert config.raw("rest.port") == 8081  # known option: its default
