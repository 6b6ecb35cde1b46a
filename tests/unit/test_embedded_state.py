"""The embedded cluster's helpers: the port check, who holds a port, the idle stop's lock."""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.embedded import ports, state
from flink_runtime.embedded.state import LOCK_FILE, STATE_FILE


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_listened_port_is_in_use_and_a_closed_one_is_free(listener: int) -> None:
    assert ports.port_in_use("127.0.0.1", listener) is True
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]  # bound, not listening, closed below
    assert ports.port_in_use("127.0.0.1", free) is False


def test_the_holder_of_a_port_is_named_by_pid_and_command(listener: int) -> None:
    assert ports.describe_holder(listener).startswith(f"pid {os.getpid()} (")


def test_a_port_nobody_visible_holds_says_so() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert "one this user cannot see" in ports.describe_holder(port)


@pytest.mark.parametrize(
    ("output", "port"),
    [
        ("error: cannot bind the REST API to 127.0.0.1:18081: Address already in use; set rest.port", 18081),
        ("MiniCluster ready rest=http://127.0.0.1:18081", None),
        ("", None),
    ],
)
def test_a_bind_failure_is_read_from_the_output(output: str, port: int | None) -> None:
    assert ports.bind_failure_port(output) == port


def write_state(directory: Path, pid: int) -> None:
    (directory / STATE_FILE).write_text(json.dumps({"pid": pid, "rest_url": "http://127.0.0.1:1"}))


@pytest.fixture
def released() -> Iterator[None]:
    yield
    # What a stopping cluster keeps until it exits; this process goes on.
    while state._held_until_exit:
        state._held_until_exit.pop().close()


def test_an_idle_stop_waits_while_a_caller_holds_the_lock(tmp_path: Path, released: None) -> None:
    write_state(tmp_path, os.getpid())
    with state.locked(tmp_path):
        assert state.release_for_idle_stop(tmp_path, lambda: True) is False
    assert (tmp_path / STATE_FILE).exists()


def test_an_idle_stop_is_called_off_when_activity_came_meanwhile(tmp_path: Path, released: None) -> None:
    write_state(tmp_path, os.getpid())
    assert state.release_for_idle_stop(tmp_path, lambda: False) is False
    assert (tmp_path / STATE_FILE).exists()
    with open(tmp_path / LOCK_FILE) as other:  # the lock was given back
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_an_idle_stop_removes_its_own_state_file_and_keeps_the_lock(tmp_path: Path, released: None) -> None:
    write_state(tmp_path, os.getpid())
    assert state.release_for_idle_stop(tmp_path, lambda: True) is True
    assert not (tmp_path / STATE_FILE).exists()
    with open(tmp_path / LOCK_FILE) as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_an_idle_stop_leaves_another_clusters_state_file(tmp_path: Path, released: None) -> None:
    write_state(tmp_path, os.getpid() + 1)  # a newer cluster's file, not this process's
    assert state.release_for_idle_stop(tmp_path, lambda: True) is True
    assert (tmp_path / STATE_FILE).exists()
