"""Finds the jars a Spark session needs (the Iceberg runtime, the relocated Jackson jar
built by scripts/setup.sh, and the JDBC drivers) and the driver JVM's class-data archive
for a class path.

Looks in $CUMULUS_JARS_DIR, else <cache>/jars (cumulus.config.cache_dir: a checkout's
.cache, filled by `make setup`), then falls back to the installed packages (the runtime)
and /usr/share/java (drivers).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from cumulus.config import cache_dir
from cumulus.errors import ConfigError

SYSTEM_JARS = Path("/usr/share/java")

ICEBERG_RUNTIME = "iceberg-spark-runtime.jar"
ICEBERG_JACKSON = "iceberg-jackson-shaded.jar"
SQLITE_JDBC = "sqlite-jdbc.jar"
POSTGRESQL_JDBC = "postgresql.jar"


def jars_dir() -> Path:
    return Path(os.environ.get("CUMULUS_JARS_DIR") or cache_dir() / "jars")


def _cached(name: str) -> Path | None:
    path = jars_dir() / name
    return path if path.is_file() else None  # is_file follows symlinks: a dangling link is missing


def iceberg_runtime_jar() -> Path | None:
    """The Iceberg Spark 3.5 / Scala 2.12 runtime (snowpark-connect-deps-iceberg ships it)."""
    if found := _cached(ICEBERG_RUNTIME):
        return found
    try:
        import snowpark_connect_deps_iceberg as deps
    except ImportError:
        return None
    jars = [p for p in deps.list_jars() if p.name.startswith("iceberg-spark-runtime-3.5_2.12-")]
    return jars[-1] if jars else None


def iceberg_jackson_jar() -> Path | None:
    """Jackson relocated to org.apache.iceberg.shaded (built by scripts/setup.sh)."""
    return _cached(ICEBERG_JACKSON)


def jdbc_driver_jar(name: str) -> Path | None:
    if found := _cached(name):
        return found
    system = SYSTEM_JARS / name
    return system if system.is_file() else None


def class_archive(class_path: Sequence[Path]) -> Path | None:
    """Where the class-data archive of a driver JVM with `class_path` (the jars before
    Spark's own) is: $CUMULUS_CLASS_ARCHIVE, else
    <cache>/jvm/spark-<pyspark>-java-<java>-<class path's hash>.jsa (scripts/class_archive.py
    builds it; docs/STACK.md, "A cold JVM"). An archive holds for one JVM and one class
    path, jars' sizes and times included, and a JVM ignores a mismatched one silently: the
    name changes with any of them, so a stale archive is missing, not quietly useless.
    None when the Java version is unknown (another JVM might not even take the options)."""
    if found := os.environ.get("CUMULUS_CLASS_ARCHIVE"):
        return Path(found)
    import pyspark

    java = _java_version()
    if not java:
        return None
    digest = hashlib.sha256()
    for jar in class_path:
        stat = jar.stat()
        digest.update(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return cache_dir() / "jvm" / f"spark-{pyspark.__version__}-java-{java}-{digest.hexdigest()[:12]}.jsa"


def _java_version() -> str | None:
    """JAVA_VERSION of the `release` file of the JDK that runs `java` ($JAVA_HOME first)."""
    import shutil

    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else shutil.which("java")
    try:
        release = Path(os.path.realpath(java)).parents[1] / "release"
        for line in release.read_text().splitlines():
            if line.startswith("JAVA_VERSION="):
                return line.split("=", 1)[1].strip('"')
    except (OSError, TypeError, IndexError):
        pass
    return None


def spark_jars(catalog_uri: str) -> list[Path]:
    """Every jar a session needs for a catalog at `catalog_uri` (the catalog's JDBC driver
    must be there; the other driver goes along when installed, so the class path, and so
    the class-data archive, is one for both catalogs), or a ConfigError that says which
    are missing and to run `make setup`."""
    needed = {ICEBERG_RUNTIME, ICEBERG_JACKSON}
    if catalog_uri.startswith("jdbc:sqlite:"):
        needed.add(SQLITE_JDBC)
    elif catalog_uri.startswith("jdbc:postgresql:"):
        needed.add(POSTGRESQL_JDBC)
    found = {
        ICEBERG_RUNTIME: iceberg_runtime_jar(),
        ICEBERG_JACKSON: iceberg_jackson_jar(),
        SQLITE_JDBC: jdbc_driver_jar(SQLITE_JDBC),
        POSTGRESQL_JDBC: jdbc_driver_jar(POSTGRESQL_JDBC),
    }
    missing = [name for name, path in found.items() if path is None and name in needed]
    if missing:
        raise ConfigError(
            f"Spark jars not found: {', '.join(missing)} (looked in {jars_dir()}). "
            "Run `make setup` (scripts/setup.sh) to install and build them."
        )
    return [path for path in found.values() if path is not None]


def build_jackson_jar(jarjar: Path = SYSTEM_JARS / "jarjar.jar") -> Path:
    """Build <jars>/iceberg-jackson-shaded.jar when missing or built from other inputs:
    the Iceberg runtime refers to org.apache.iceberg.shaded.com.fasterxml.jackson but lacks
    those classes, so pyspark's Jackson jars are merged and relocated there with jarjar
    (docs/STACK.md). `make setup` and the image (Dockerfile) run it:
    `python -m cumulus.spark.jars`."""
    import subprocess
    import tempfile
    import zipfile

    import pyspark

    inputs = sorted((Path(pyspark.__file__).parent / "jars").glob("jackson-*.jar"))
    inputs = [j for j in inputs if j.name.startswith(("jackson-core-2.", "jackson-databind-2.", "jackson-annotations-2."))]
    if len(inputs) != 3:
        raise ConfigError(f"expected jackson-core, -databind and -annotations in pyspark's jars, found {inputs}")
    target = jars_dir() / ICEBERG_JACKSON
    stamp = target.with_name(target.name + ".inputs")
    want = "\n".join(j.name for j in inputs)
    if target.is_file() and target.stat().st_size and stamp.is_file() and stamp.read_text().strip() == want:
        return target
    if not jarjar.is_file():
        raise ConfigError(f"{jarjar} not found: install jarjar (apt install libjarjar-java) to build {ICEBERG_JACKSON}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        merged, rules, out = Path(tmp) / "merged.jar", Path(tmp) / "rules.txt", Path(tmp) / "out.jar"
        seen: set[str] = set()
        with zipfile.ZipFile(merged, "w", zipfile.ZIP_DEFLATED) as dst:
            for path in inputs:
                with zipfile.ZipFile(path) as src:
                    for info in src.infolist():
                        name = info.filename
                        if name in seen or name.endswith("module-info.class") or name.startswith("META-INF/versions/"):
                            continue
                        seen.add(name)
                        dst.writestr(info, src.read(name))
        rules.write_text("rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n")
        subprocess.run(["java", "-jar", str(jarjar), "process", str(rules), str(merged), str(out)], check=True)
        out.replace(target)
    stamp.write_text(want + "\n")
    return target


if __name__ == "__main__":
    print(build_jackson_jar())
