"""Spark's file:// paths on NioLocalFileSystem (spark/local_filesystem.py), in the suite's
one SparkSession: the same permissions Hadoop sets, without a `chmod` process each."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_runtime.minicluster import MiniCluster
from flink_runtime.spark.local_filesystem import (
    CLASS_PATH_KEY,
    FILE_SYSTEM_CLASS,
    FILE_SYSTEM_KEY,
    JAR,
    compile_classes,
    use_nio_local_filesystem,
)
from flink_runtime.spark.session import acquire_session, release_session

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark(minicluster: MiniCluster) -> Iterator:
    session = acquire_session(minicluster.config.to_dict(), default_cores=4)
    yield session
    release_session()


def local_filesystem(spark) -> object:
    jvm = spark._jvm
    return jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())


def set_permission(spark, path: Path, mode: int) -> None:
    jvm = spark._jvm
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission(mode)
    local_filesystem(spark).setPermission(jvm.org.apache.hadoop.fs.Path(str(path)), permission)


def test_the_session_uses_it_for_local_paths(spark) -> None:
    assert spark.sparkContext.getConf().get(FILE_SYSTEM_KEY) == FILE_SYSTEM_CLASS
    assert local_filesystem(spark).getClass().getName() == FILE_SYSTEM_CLASS


def test_permissions_set_are_the_mode_asked(spark, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    for mode in (0o640, 0o600, 0o755, 0o444, 0o000, 0o777):
        set_permission(spark, target, mode)
        assert stat.S_IMODE(os.stat(target).st_mode) == mode, oct(mode)
    # java.nio has no sticky bit: Hadoop's own way sets it, as before.
    folder = tmp_path / "shared"
    folder.mkdir()
    set_permission(spark, folder, 0o1777)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o1777


def test_a_spark_write_gets_hadoops_default_modes(spark, tmp_path: Path) -> None:
    """Files 0644 and folders 0755 (Hadoop's fs.permissions.umask-mode 022), as with
    Hadoop's LocalFileSystem; the checksums (.crc) are still written."""
    out = tmp_path / "out"
    spark.range(10).repartition(2).write.parquet(str(out))
    files = [path for path in out.rglob("*") if path.is_file()]
    assert any(path.suffix == ".parquet" for path in files) and any(path.name.endswith(".crc") for path in files)
    assert {stat.S_IMODE(os.stat(path).st_mode) for path in files} == {0o644}
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o755
    assert sorted(row.id for row in spark.read.parquet(str(out)).collect()) == list(range(10))


def test_setting_a_missing_files_permission_is_an_error(spark, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="NoSuchFileException"):
        set_permission(spark, tmp_path / "missing", 0o644)


def test_only_local_masters_without_a_file_system_of_their_own_get_it() -> None:
    local = {"spark.master": "local[2]", CLASS_PATH_KEY: "/opt/driver.jar"}
    use_nio_local_filesystem(local)
    assert local[FILE_SYSTEM_KEY] == FILE_SYSTEM_CLASS
    assert local[CLASS_PATH_KEY] == f"{JAR}{os.pathsep}/opt/driver.jar"
    for master in ("spark://host:7077", "yarn", "k8s://https://host"):
        cluster = {"spark.master": master}
        use_nio_local_filesystem(cluster)
        assert cluster == {"spark.master": master}
    chosen = {"spark.master": "local[2]", FILE_SYSTEM_KEY: "org.example.MyFileSystem"}
    use_nio_local_filesystem(chosen)
    assert chosen == {"spark.master": "local[2]", FILE_SYSTEM_KEY: "org.example.MyFileSystem"}


def disassembled(classes: list[Path]) -> dict[str, str]:
    """javap's listing of each class, without constant-pool numbers (a compiler's detail)."""
    listings = {}
    for path in classes:
        text = subprocess.run(["javap", "-c", "-p", str(path)], capture_output=True, text=True, check=True).stdout
        listings[path.name] = re.sub(r"#\d+(, *\d+)?", "#", text)
    return listings


def test_the_jar_is_built_from_the_sources(tmp_path: Path) -> None:
    """Edit a .java file and forget `python -m flink_runtime.spark.local_filesystem --build`:
    this fails."""
    import zipfile

    built = compile_classes(tmp_path / "built")
    shipped = tmp_path / "shipped"
    with zipfile.ZipFile(JAR) as jar:
        jar.extractall(shipped)
    assert disassembled(built) == disassembled(sorted(shipped.rglob("*.class")))


def test_both_file_systems_read_a_parquet_files_rows_from_its_footer(spark, tmp_path: Path) -> None:
    """The rows a chunk manifest records (io/partitions.py): pyarrow on local paths,
    Spark's Parquet library through Hadoop's FileSystem on any other URI."""
    from flink_runtime.io.filesystem import HadoopFileSystem, LocalFileSystem, NotParquet

    spark.range(1234).coalesce(1).write.parquet(str(tmp_path / "data"))
    [file] = (tmp_path / "data").glob("part-*.parquet")
    assert LocalFileSystem().parquet_rows(str(file)) == 1234
    assert HadoopFileSystem(spark).parquet_rows(file.as_uri()) == 1234
    (tmp_path / "text").write_text("not parquet")
    with pytest.raises(NotParquet, match=r"/text is not a readable Parquet file: .*not a Parquet file"):
        HadoopFileSystem(spark).parquet_rows((tmp_path / "text").as_uri())
    with pytest.raises(NotParquet, match=r"/text is not a readable Parquet file: .*magic"):
        LocalFileSystem().parquet_rows(str(tmp_path / "text"))
