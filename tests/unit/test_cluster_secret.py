"""Where the RPC's cluster secret comes from (security/cluster_secret.py): the
configuration, this user's 0600 file on loopback (real files, real processes racing to
make it), or a refusal off loopback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from flink_runtime.configuration import Configuration
from flink_runtime.jobmanager.jobmanager import JobManager
from flink_runtime.security.cluster_secret import RpcSecurityError, cluster_secret, runtime_folder, user_secret
from flink_runtime.taskmanager.taskexecutor import TaskExecutor


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_first_use_makes_a_private_file_that_later_uses_read(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "flink-runtime"
    secret = user_secret(folder)
    assert mode(folder) == 0o700 and mode(folder / "rpc-secret") == 0o600
    assert (folder / "rpc-secret").read_text().strip() == secret and len(secret) >= 40
    assert user_secret(folder) == secret
    assert os.listdir(folder) == ["rpc-secret"]


def test_processes_starting_at_once_agree_on_one_secret(tmp_path: Path) -> None:
    folder = tmp_path / "flink-runtime"
    code = "import sys; from pathlib import Path; from flink_runtime.security.cluster_secret import user_secret; "
    code += "print(user_secret(Path(sys.argv[1])))"
    processes = [
        subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True) for _ in range(6)
    ]
    answers = {process.communicate(timeout=120)[0].strip() for process in processes}
    assert all(process.returncode == 0 for process in processes)
    assert answers == {(folder / "rpc-secret").read_text().strip()}
    assert os.listdir(folder) == ["rpc-secret"]  # every temporary file removed


def test_a_folder_others_may_read_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "flink-runtime"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with pytest.raises(RpcSecurityError, match=r"mode 755.*chmod 700"):
        user_secret(folder)
    assert not (folder / "rpc-secret").exists()


def test_a_file_others_may_read_is_refused(tmp_path: Path) -> None:
    user_secret(tmp_path)
    (tmp_path / "rpc-secret").chmod(0o644)
    with pytest.raises(RpcSecurityError, match=r"rpc-secret has mode 644.*Delete it"):
        user_secret(tmp_path)


def test_links_are_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    user_secret(elsewhere)
    (tmp_path / "linked-folder").symlink_to(elsewhere)
    with pytest.raises(RpcSecurityError, match="should be a folder"):
        user_secret(tmp_path / "linked-folder")
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o700)
    (folder / "rpc-secret").symlink_to(elsewhere / "rpc-secret")
    with pytest.raises(RpcSecurityError, match="cannot read or make the RPC secret file"):
        user_secret(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_file_of_another_user_is_refused(tmp_path: Path) -> None:
    user_secret(tmp_path)
    os.chown(tmp_path / "rpc-secret", 65534, 65534)
    with pytest.raises(RpcSecurityError, match="belongs to user id 65534"):
        user_secret(tmp_path)


def test_the_folder_is_per_user() -> None:
    assert runtime_folder({"XDG_RUNTIME_DIR": "/run/user/7"}) == Path("/run/user/7/flink-runtime")
    assert runtime_folder({"XDG_STATE_HOME": "/home/u/.state"}) == Path("/home/u/.state/flink-runtime")
    assert runtime_folder({}) == Path.home() / ".local" / "state" / "flink-runtime"


def test_a_configured_secret_is_used_as_it_is_and_makes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    config = Configuration({"security.cluster.secret": "configured"})
    assert cluster_secret(config, "JobManager", {"jobmanager.rpc.address": "0.0.0.0"}) == "configured"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "::1", "[::1]"])
def test_loopback_without_a_secret_uses_this_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    secret = cluster_secret(Configuration(), "JobManager", {"jobmanager.rpc.address": address})
    assert secret == (tmp_path / "flink-runtime" / "rpc-secret").read_text().strip()


@pytest.mark.parametrize(
    "properties",
    [
        {"jobmanager.rpc.address": "0.0.0.0"},
        {"jobmanager.rpc.address": "10.1.2.3"},
        {"jobmanager.rpc.address": "jobmanager"},  # a host name may resolve anywhere
    ],
)
def test_a_jobmanager_off_loopback_without_a_secret_is_refused(tmp_path: Path, properties: dict[str, str]) -> None:
    with pytest.raises(RpcSecurityError, match=r"jobmanager\.rpc\.address=.*Set security\.cluster\.secret"):
        JobManager(Configuration(properties))


@pytest.mark.parametrize(
    ("properties", "key"),
    [
        ({"taskmanager.host": "0.0.0.0"}, "taskmanager.host"),
        ({"jobmanager.rpc.address": "10.1.2.3"}, "jobmanager.rpc.address"),
    ],
)
def test_a_taskmanager_off_loopback_without_a_secret_is_refused(properties: dict[str, str], key: str) -> None:
    with pytest.raises(RpcSecurityError, match=rf"{key}=.*Set security\.cluster\.secret"):
        TaskExecutor(Configuration(properties))
