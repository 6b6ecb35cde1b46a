"""Keyed state backends: the hashmap and rocksdb backends behind one API, their
snapshots, and restores that refuse damaged snapshots with a message naming the file."""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.checkpoint.state import (
    FORMAT_VERSION,
    KeyedStateBackend,
    StateBackendClosedError,
    StateRestoreError,
    create_state_backend,
    restore_state_backend,
)

KINDS = ["hashmap", "rocksdb"]


def add(old: list, new: list) -> list:
    """An aggregate's partial state: (count, sum)."""
    return [old[0] + new[0], old[1] + new[1]]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def local_dir(tmp_path: Path) -> Path:
    return tmp_path / "local"


@pytest.fixture
def backend(kind: str, local_dir: Path) -> Iterator[KeyedStateBackend]:
    state = create_state_backend(kind, str(local_dir))
    yield state
    state.close()


def restore(handle: dict, local_dir: Path) -> KeyedStateBackend:
    return restore_state_backend(handle, str(local_dir))


def working_dirs(local_dir: Path) -> list[Path]:
    return list(local_dir.iterdir()) if local_dir.exists() else []


def snapshot_files(handle: dict) -> list[Path]:
    return [path for path in Path(handle["path"]).rglob("*") if path.is_file()]


# --- reading and writing ---------------------------------------------------------------


def test_put_get_merge_items_len(backend: KeyedStateBackend) -> None:
    assert backend.get(("a", 1)) is None
    assert len(backend) == 0

    backend.put(("a", 1), [1, 10.0])
    backend.put(("a", 1), [2, 20.0])  # overwrite: still one entry
    backend.merge(("b", 2), [1, 5.0], add)  # absent: stored as given
    backend.merge(("b", 2), [1, 7.5], add)
    backend.merge(("a", 1), [3, 1.0], add)

    assert backend.get(("a", 1)) == [5, 21.0]
    assert backend.get(("b", 2)) == [2, 12.5]
    assert len(backend) == 2
    assert sorted(backend.items()) == [(("a", 1), [5, 21.0]), (("b", 2), [2, 12.5])]


def test_keys_are_canonical(backend: KeyedStateBackend) -> None:
    backend.put((1, "a"), "tuple")
    assert backend.get([1, "a"]) == "tuple"
    backend.put([1, "a"], "list")
    assert backend.get((1, "a")) == "list"

    backend.put(5, "scalar")  # a one-column key
    assert backend.get((5,)) == "scalar"

    backend.put(({"x": 1, "y": 2},), "map")  # maps inside keys are ordered
    assert backend.get(({"y": 2, "x": 1},)) == "map"

    backend.put((1.0, "a"), "float")  # msgpack keeps 1 and 1.0 apart
    assert backend.get((1, "a")) == "list"

    assert len(backend) == 4
    assert sorted(key for key, _ in backend.items() if isinstance(key[0], (int, float))) == [(1, "a"), (1.0, "a"), (5,)]
    assert all(isinstance(key, tuple) for key, _ in backend.items())


def test_values_are_copies(backend: KeyedStateBackend) -> None:
    backend.put(("k",), {"seen": [1, 2]})
    value = backend.get(("k",))
    value["seen"].append(3)
    assert backend.get(("k",)) == {"seen": [1, 2]}


def test_unencodable_key_is_refused(backend: KeyedStateBackend) -> None:
    with pytest.raises(TypeError):
        backend.put((object(),), 1)
    assert len(backend) == 0


# --- snapshots -------------------------------------------------------------------------


def test_snapshot_restore_round_trip(backend: KeyedStateBackend, kind: str, tmp_path: Path, local_dir: Path) -> None:
    for i in range(100):
        backend.merge((f"k{i % 10}", i % 3), [1, float(i)], add)
    expected = dict(backend.items())

    handle = backend.snapshot(str(tmp_path / "chk-1"))

    assert json.loads(json.dumps(handle)) == handle
    assert handle["backend"] == kind
    assert handle["path"] == str(tmp_path / "chk-1")
    assert handle["entries"] == len(expected) == 30
    assert handle["format_version"] == FORMAT_VERSION == 1
    assert handle["bytes"] == sum(path.stat().st_size for path in snapshot_files(handle))

    restored = restore(handle, local_dir)
    try:
        assert dict(restored.items()) == expected
        assert len(restored) == 30
        assert restored.get(("k1", 1)) == expected[("k1", 1)]
    finally:
        restored.close()


def test_snapshot_is_independent_of_later_writes(backend: KeyedStateBackend, tmp_path: Path, local_dir: Path) -> None:
    backend.put(("a",), 1)
    handle = backend.snapshot(str(tmp_path / "chk-1"))
    backend.put(("a",), 2)
    backend.put(("b",), 3)

    first = restore(handle, local_dir)
    try:
        assert dict(first.items()) == {("a",): 1}
        first.put(("c",), 4)  # writes to a restored backend touch neither the snapshot ...
        assert dict(backend.items()) == {("a",): 2, ("b",): 3}  # ... nor the original
        second = restore(handle, local_dir)
        try:
            assert dict(second.items()) == {("a",): 1}
            assert len(second) == 1
        finally:
            second.close()
    finally:
        first.close()


def test_restored_backend_snapshots_again(backend: KeyedStateBackend, tmp_path: Path, local_dir: Path) -> None:
    backend.merge(("a",), [1, 1.0], add)
    restored = restore(backend.snapshot(str(tmp_path / "chk-1")), local_dir)
    restored.merge(("a",), [1, 2.0], add)
    restored.merge(("b",), [1, 3.0], add)
    again = restore(restored.snapshot(str(tmp_path / "chk-2")), local_dir)
    try:
        assert dict(again.items()) == {("a",): [2, 3.0], ("b",): [1, 3.0]}
        assert len(again) == 2
    finally:
        again.close()
        restored.close()


def test_many_keys_round_trip(backend: KeyedStateBackend, tmp_path: Path, local_dir: Path) -> None:
    count = 100_000
    for i in range(count):
        backend.put((f"key-{i}", i), [i, i * 0.5])
    handle = backend.snapshot(str(tmp_path / "chk-1"))
    assert handle["entries"] == count

    restored = restore(handle, local_dir)
    try:
        assert len(restored) == count
        seen = 0
        for (name, i), value in restored.items():
            assert name == f"key-{i}" and value == [i, i * 0.5]
            seen += 1
        assert seen == count
    finally:
        restored.close()


def test_empty_backend_round_trip(backend: KeyedStateBackend, tmp_path: Path, local_dir: Path) -> None:
    restored = restore(backend.snapshot(str(tmp_path / "chk-1")), local_dir)
    try:
        assert len(restored) == 0 and list(restored.items()) == []
    finally:
        restored.close()


def test_snapshot_never_overwrites_a_snapshot(backend: KeyedStateBackend, tmp_path: Path) -> None:
    backend.put(("a",), 1)
    backend.snapshot(str(tmp_path / "chk-1"))
    with pytest.raises(FileExistsError, match="already holds"):
        backend.snapshot(str(tmp_path / "chk-1"))


# --- damaged snapshots -----------------------------------------------------------------


@pytest.fixture
def closed_snapshot(backend: KeyedStateBackend, tmp_path: Path) -> dict:
    """A snapshot whose backend is closed: RocksDB hard-links SST files into a snapshot
    on the same file system, so damaging them while the DB is open would damage it too."""
    for i in range(1000):
        backend.put((f"k{i}",), [i, float(i)])
    handle = backend.snapshot(str(tmp_path / "chk-1"))
    backend.close()
    return handle


def largest_file(handle: dict) -> Path:
    return max(snapshot_files(handle), key=lambda path: path.stat().st_size)


def test_truncated_snapshot_is_refused(closed_snapshot: dict, local_dir: Path) -> None:
    victim = largest_file(closed_snapshot)
    with open(victim, "r+b") as file:
        file.truncate(victim.stat().st_size // 2)
    with pytest.raises(StateRestoreError, match="truncated") as caught:
        restore(closed_snapshot, local_dir)
    assert str(victim) in str(caught.value)


def test_deleted_snapshot_file_is_refused(closed_snapshot: dict, local_dir: Path) -> None:
    victim = largest_file(closed_snapshot)
    victim.unlink()
    with pytest.raises(StateRestoreError, match="missing") as caught:
        restore(closed_snapshot, local_dir)
    assert victim.name in str(caught.value)


def test_flipped_byte_is_refused(closed_snapshot: dict, local_dir: Path) -> None:
    victim = largest_file(closed_snapshot)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(StateRestoreError, match="corrupt") as caught:
        restore(closed_snapshot, local_dir)
    assert str(victim) in str(caught.value)


def test_missing_snapshot_directory_is_refused(closed_snapshot: dict, local_dir: Path, tmp_path: Path) -> None:
    handle = {**closed_snapshot, "path": str(tmp_path / "nowhere")}
    with pytest.raises(StateRestoreError, match=f"{tmp_path / 'nowhere'} does not exist"):
        restore(handle, local_dir)


def test_wrong_format_version_is_refused(closed_snapshot: dict, local_dir: Path) -> None:
    with pytest.raises(StateRestoreError, match="format_version 2"):
        restore({**closed_snapshot, "format_version": 2}, local_dir)


def test_handle_of_another_snapshot_is_refused(closed_snapshot: dict, local_dir: Path) -> None:
    with pytest.raises(StateRestoreError, match="checksum"):
        restore({**closed_snapshot, "checksum": "crc32:00000000"}, local_dir)


def test_unknown_handle_is_refused(local_dir: Path) -> None:
    with pytest.raises(StateRestoreError, match="no known backend"):
        restore({"backend": "memory", "path": "/tmp"}, local_dir)
    with pytest.raises(StateRestoreError, match="lacks path"):
        restore({"backend": "hashmap", "format_version": 1, "checksum": "crc32:00000000"}, local_dir)


def test_hashmap_corrupt_msgpack_is_refused(tmp_path: Path, local_dir: Path) -> None:
    state = create_state_backend("hashmap", str(local_dir))
    state.put(("a",), 1)
    handle = state.snapshot(str(tmp_path / "chk-1"))
    path = Path(handle["path"]) / "hashmap-state.bin"
    header = struct.Struct("<8sHQQI")
    payload = b"\xc1\xc1\xc1"  # 0xc1 is never used in msgpack
    checksum = zlib.crc32(payload)
    path.write_bytes(header.pack(b"FLRTHMAP", 1, 1, len(payload), checksum) + payload)
    with pytest.raises(StateRestoreError, match="corrupt msgpack") as caught:
        restore({**handle, "checksum": f"crc32:{checksum:08x}"}, local_dir)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("kind", ["rocksdb"])
def test_rocksdb_failed_restore_leaves_no_working_dir(closed_snapshot: dict, local_dir: Path) -> None:
    largest_file(closed_snapshot).unlink()
    with pytest.raises(StateRestoreError):
        restore(closed_snapshot, local_dir)
    assert working_dirs(local_dir) == []


# --- choosing and closing --------------------------------------------------------------


@pytest.mark.parametrize("alias", ["filesystem", "jobmanager", "HashMap", " rocksdb "])
def test_flink_names_are_accepted(alias: str, local_dir: Path) -> None:
    state = create_state_backend(alias, str(local_dir))
    try:
        assert state.kind == ("rocksdb" if "rocksdb" in alias else "hashmap")
    finally:
        state.close()


def test_unknown_kind_names_the_option(local_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"state\.backend\.type 'memory'.*hashmap, rocksdb, filesystem, jobmanager"):
        create_state_backend("memory", str(local_dir))


def test_close_releases_the_backend(backend: KeyedStateBackend, kind: str, tmp_path: Path, local_dir: Path) -> None:
    backend.put(("a",), 1)
    handle = backend.snapshot(str(tmp_path / "chk-1"))
    if kind == "rocksdb":
        assert os.path.isdir(backend.working_dir)
    backend.close()
    backend.close()  # idempotent
    assert working_dirs(local_dir) == []
    with pytest.raises(StateBackendClosedError):
        backend.get(("a",))
    with pytest.raises(StateBackendClosedError):
        backend.put(("a",), 2)
    # The snapshot outlives the backend (RocksDB's hard links keep the SST files).
    restored = restore(handle, local_dir)
    try:
        assert dict(restored.items()) == {("a",): 1}
    finally:
        restored.close()
    assert working_dirs(local_dir) == []
