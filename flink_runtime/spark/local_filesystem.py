"""Spark's file:// file system without a process per file.

Hadoop's LocalFileSystem, which Spark uses for local paths, sets the permissions of
every file it creates and every directory it makes by running `chmod` unless Hadoop's
native library is loaded, and PySpark ships none: about a dozen processes forked from
the driver's JVM per Spark write (12 per action in a 1 MB word count's two writes,
counted with strace). `hadoop/NioLocalFileSystem.java` is the same file system with
those permissions set through java.nio: same bits, no process. Measured on local[2]
(benchmarks/README.md, "Local file system"): 35-40 ms less per Spark action, a warm
1 MB word count's source write 231 -> 192 ms and its final write 160 -> 120 ms.

It applies to local masters only (`local[N]`: the driver is the executor, so the jar on
the driver's classpath is all it takes). A cluster's executors, a Spark Connect server
and a session whose configuration names its own `spark.hadoop.fs.file.impl` keep
Hadoop's. The jar is built from the two .java files beside it (`python -m
flink_runtime.spark.local_filesystem --build`); tests/unit/test_local_filesystem.py
checks that it matches them.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

SOURCES = Path(__file__).resolve().parent / "hadoop"
JAR = SOURCES / "flink-runtime-hadoop.jar"
FILE_SYSTEM_CLASS = "org.flinkruntime.hadoop.NioLocalFileSystem"
FILE_SYSTEM_KEY = "spark.hadoop.fs.file.impl"
CLASS_PATH_KEY = "spark.driver.extraClassPath"


def use_nio_local_filesystem(properties: dict[str, str]) -> None:
    """Point a local session's file:// paths at NioLocalFileSystem, unless its
    configuration chose a file system of its own."""
    if FILE_SYSTEM_KEY in properties or not properties.get("spark.master", "").startswith("local"):
        return
    if not JAR.is_file():  # a checkout or install without package data
        log.warning("%s is missing: Spark sets local file permissions with a process per file", JAR)
        return
    properties[FILE_SYSTEM_KEY] = FILE_SYSTEM_CLASS
    class_path = properties.get(CLASS_PATH_KEY)
    properties[CLASS_PATH_KEY] = f"{JAR}{os.pathsep}{class_path}" if class_path else str(JAR)


def compile_classes(output: Path) -> list[Path]:
    """The .class files of the .java sources, compiled against PySpark's Hadoop jars into
    `output` (javac, from a JDK, must be on the PATH)."""
    import pyspark

    javac = shutil.which("javac")
    if javac is None:
        raise FileNotFoundError("javac not found: install a JDK 17+ (scripts/ensure-java.sh does)")
    jars = Path(pyspark.__file__).parent / "jars"
    sources = sorted(SOURCES.glob("*.java"))
    command = [javac, "--release", "17", "-nowarn", "-cp", str(jars / "*"), "-d", str(output), *map(str, sources)]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    return sorted(output.rglob("*.class"))


def build_jar(jar: Path = JAR) -> Path:
    """Compile the sources and write them as `jar`."""
    with tempfile.TemporaryDirectory(prefix="flink-runtime-hadoop-") as folder:
        classes = compile_classes(Path(folder))
        with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in classes:
                # A fixed date: the same classes give the same jar, byte for byte.
                entry = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(entry, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return jar


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="store_true", help=f"compile the .java sources into {JAR.name}")
    if parser.parse_args().build:
        print(build_jar())
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
