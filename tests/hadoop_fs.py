"""The tests' Hadoop file systems (``tests/hadoop_fs/*.java``), compiled once with the
installed JDK against pyspark's own Hadoop API jar into one jar that every test session has on
its classpath:

- ``NioLocalFileSystem``: the local file system of every test session (:data:`LOCAL_FS`);
- ``ObjStoreFileSystem``: the ``objstore://`` scheme of :mod:`tests.objstore`.

The jar also holds empty ``yarn-default.xml`` and ``mapred-default.xml``, which hide Hadoop's
own: Spark loads them into every Hadoop ``Configuration`` (714 of its 1,118 settings), and Spark
serializes that ``Configuration`` for each file scan, compressing each setting's source on its
own. A local session uses neither YARN nor MapReduce; without them a 100-event demo took
103-116 s of CPU, not 124-142 s.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pyspark

SOURCES = Path(__file__).with_name("hadoop_fs")
BUILD = Path(__file__).resolve().parent.parent / "build" / "hadoop_fs"

#: Spark settings that make ``file:`` paths use ``NioLocalFileSystem``: Hadoop's local file
#: system, but setting permissions and reading links through Java instead of a ``chmod`` or
#: ``readlink`` process (Hadoop's native library is absent here), about 10 ms per file created
#: or renamed. What is written, renamed and listed is unchanged; ``make demo`` and users' runs
#: keep Hadoop's own.
LOCAL_FS = {
    "spark.hadoop.fs.file.impl": "lakehouse.tests.NioLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "lakehouse.tests.NioLocalFs",
}


def fs_jar() -> Path:
    """The compiled file systems (built on first use; named by the hash of their sources)."""
    sources = sorted(SOURCES.glob("*.java"))
    resources = sorted(SOURCES.glob("*.xml"))
    digest = hashlib.sha256(
        b"".join(path.read_bytes() for path in [*sources, *resources])
    ).hexdigest()
    jar = BUILD / f"test-fs-{digest[:16]}.jar"
    if jar.exists():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found: the tests' file systems need a JDK 17")
    hadoop_api = next((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD) as classes:
        subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", str(hadoop_api), "-d", classes]
            + [str(path) for path in sources],
            check=True,
            capture_output=True,
        )
        partial = Path(classes) / jar.name  # renamed into place whole, as two workers may race
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(Path(classes).rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
            for path in resources:
                archive.write(path, path.name)
        partial.replace(jar)
    return jar
