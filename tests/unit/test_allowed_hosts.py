"""security/hosts.py: which Host headers the REST API answers to (no DNS rebinding), and
how `rest.allowed-hosts` is read. The guard that applies it is tested in
test_rest_guard.py; a real cluster in tests/integration/test_rest_security.py."""

from __future__ import annotations

import socket

import pytest

from flink_runtime.configuration import Configuration, ConfigurationError
from flink_runtime.rest.server import RestServer
from flink_runtime.security.hosts import AllowedHosts, split_host


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8081", ("127.0.0.1", 8081)),
        ("[::1]:8081", ("::1", 8081)),
        ("[::1]", ("::1", None)),
        ("JobManager:80", ("jobmanager", 80)),
        ("localhost.", ("localhost", None)),
        ("a b", None),
        ("::1", None),  # an IPv6 address goes in brackets
        ("user@host", None),
        ("host:port", None),
        ("", None),
    ],
)
def test_host_headers_are_split_into_name_and_port(value: str, expected: tuple[str, int | None] | None) -> None:
    assert split_host(value) == expected


@pytest.mark.parametrize(
    "host",
    [None, "", "localhost", "localhost:1", "127.0.0.1", "127.8.9.10:8081", "[::1]:8081", "10.1.2.3:8081", "[fe80::1]"],
)
def test_addresses_and_localhost_are_always_answered(host: str | None) -> None:
    assert AllowedHosts().allows(host)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8081",
        "dev.localhost",  # names under .localhost go through DNS on some resolvers
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "2130706433",  # 127.0.0.1 as a number: browsers send the dotted form
        "[::1",
        "evil.example@127.0.0.1",
    ],
)
def test_other_names_are_not(host: str) -> None:
    assert not AllowedHosts().allows(host)
    assert not AllowedHosts.from_config(Configuration()).allows(host)


def test_rest_address_and_bind_address_are_answered() -> None:
    config = Configuration({"rest.address": "JobManager.Internal", "rest.bind-address": "jm-bind"})
    hosts = AllowedHosts.from_config(config)
    assert hosts.allows("jobmanager.internal:8081") and hosts.allows("jm-bind") and hosts.allows("JM-BIND:1")
    assert not hosts.allows("evil.example")


def test_every_interface_answers_the_machines_own_names() -> None:
    # A container bound to 0.0.0.0 is reached by its host name (`jobmanager:8081` in the
    # compose file) although rest.address may say otherwise.
    own = [socket.gethostname(), socket.getfqdn()]
    for wildcard in ("0.0.0.0", "::"):
        hosts = AllowedHosts.from_config(Configuration({"rest.bind-address": wildcard}))
        assert all(hosts.allows(f"{name}:8081") for name in own), (wildcard, own)
    loopback = AllowedHosts.from_config(Configuration())
    if socket.gethostname().lower() != "localhost":
        assert not loopback.allows(socket.gethostname())


@pytest.mark.parametrize(
    "value",
    [
        ["flink.lb.example", "flink.lb.example.:443", "*.svc.example"],
        "flink.lb.example, flink.lb.example:443 ,*.svc.example",
    ],
    ids=["yaml-list", "comma-separated"],
)
def test_allowed_hosts_let_a_load_balancers_names_in(value: object) -> None:
    hosts = AllowedHosts.from_config(Configuration({"rest.allowed-hosts": value}))
    assert hosts.allows("flink.lb.example") and hosts.allows("FLINK.LB.EXAMPLE:9000")
    assert hosts.allows("jm.ns.svc.example:8081") and hosts.allows("a.b.svc.example")
    assert not hosts.allows("svc.example")  # *.svc.example: names under it only
    assert not hosts.allows("evilsvc.example") and not hosts.allows("evil.example")


def test_an_entry_with_a_port_allows_that_port_only() -> None:
    hosts = AllowedHosts.of(["lb.example:443"])
    assert hosts.allows("lb.example:443")
    assert not hosts.allows("lb.example:8081") and not hosts.allows("lb.example")


def test_a_star_answers_every_name() -> None:
    hosts = AllowedHosts.from_config(Configuration({"rest.allowed-hosts": "*"}))
    assert hosts.any_host and hosts.allows("evil.example:8081")


@pytest.mark.parametrize("entry", ["http://lb.example", "lb.example/path", "lb example", "lb.example:https", "*lb"])
def test_a_malformed_entry_is_refused_naming_the_key(entry: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        AllowedHosts.from_config(Configuration({"rest.allowed-hosts": [entry]}))
    assert "rest.allowed-hosts" in str(refused.value) and repr(entry) in str(refused.value)


def test_a_malformed_entry_stops_the_rest_server_before_it_listens() -> None:
    with pytest.raises(ConfigurationError, match="rest.allowed-hosts"):
        RestServer(None, Configuration({"rest.allowed-hosts": "https://lb.example"}))  # type: ignore[arg-type]
