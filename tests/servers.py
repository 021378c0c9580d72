"""The database engines the tests run SQL on, one of each for the whole run.

``postgres``: Debian's PostgreSQL server (``.ci/system-packages`` installs it), started on a
temporary data directory with a Unix socket in a temporary folder, as the ``postgres`` user when
the tests run as root, and stopped at the end. ``spark``: one local SparkSession (``local[2]``,
two shuffle partitions, no UI, quiet logs; code generation and adaptive execution off for the
tests' tiny tables, which ``spark_defaults`` turns back on for a test of what users run). Neither
skips: a missing component fails the run.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Postgres:
    """A running server: ``socket_dir`` is the host libpq connects to."""

    bin_dir: Path
    socket_dir: str
    port: int
    user: str

    @property
    def uri(self) -> str:
        return f"postgresql://{self.user}@/postgres?host={self.socket_dir}&port={self.port}"

    def psql(self, sql: str) -> subprocess.CompletedProcess[str]:
        """Run ``sql`` in ``psql`` (CSV out, stop at the first error)."""
        return subprocess.run(
            [str(self.bin_dir / "psql"), "-X", "-q", "--csv", "-v", "ON_ERROR_STOP=1",
             "-h", self.socket_dir, "-p", str(self.port), "-U", self.user, "-d", "postgres"],
            input=sql, capture_output=True, text=True, timeout=120, check=False)


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: run `bash .ci/system-packages`")
    return Path(found[-1]).parent


def _as_owner(user: str | None) -> list[str]:
    return ["runuser", "-u", user, "--"] if user else []


@contextlib.contextmanager
def running_postgres(port: int = 54329) -> Iterator[Postgres]:
    """A server on a temporary data directory, stopped and removed on exit (the tests' and
    benchmarks/sql.py's)."""
    bin_dir = _pg_bin()
    root = os.geteuid() == 0
    owner = "postgres" if root else None
    user = owner or pwd.getpwuid(os.geteuid()).pw_name
    base = tempfile.mkdtemp(prefix="mleval-pg-")
    data, sockets = os.path.join(base, "data"), os.path.join(base, "socket")
    os.makedirs(sockets)
    if root:
        entry = pwd.getpwnam("postgres")
        for path in (base, sockets):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    run = _as_owner(owner)
    subprocess.run([*run, str(bin_dir / "initdb"), "-D", data, "-U", user, "--auth=trust",
                    "-E", "UTF8", "--locale=C"], check=True, capture_output=True)
    subprocess.run([*run, str(bin_dir / "pg_ctl"), "-D", data, "-w", "-l",
                    os.path.join(base, "log"), "-o",
                    f"-k {sockets} -p {port} -c listen_addresses='' -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        yield Postgres(bin_dir, sockets, port, user)
    finally:
        subprocess.run([*run, str(bin_dir / "pg_ctl"), "-D", data, "-m", "immediate", "stop"],
                       check=False, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    with running_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("mleval-tests")
               # not a spark-warehouse folder in the checkout
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               # tiny tables: planning and code generation cost more than the data, so
               # interpret the plans and skip adaptive re-planning
               .config("spark.sql.codegen.wholeStage", "false")
               .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=error")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


#: What the shared session changes for the tests' tiny tables (above), put back to Spark's
#: defaults by :func:`spark_defaults`.
TINY_TABLE_SETTINGS = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode",
                       "spark.sql.adaptive.enabled")


@pytest.fixture
def spark_defaults(spark: Any) -> Iterator[Any]:
    """The shared session with Spark's defaults for the test's duration (code generation and
    adaptive execution on), as a user's session runs."""
    saved = {key: spark.conf.get(key, None) for key in TINY_TABLE_SETTINGS}
    for key in TINY_TABLE_SETTINGS:
        spark.conf.unset(key)
    try:
        yield spark
    finally:
        for key, value in saved.items():
            if value is not None:
                spark.conf.set(key, value)


@pytest.fixture(scope="session")
def pg_connection(postgres: Postgres) -> Iterator[object]:
    """An ADBC connection to the test server (autocommit)."""
    import adbc_driver_postgresql.dbapi as pg

    con = pg.connect(postgres.uri, autocommit=True)
    yield con
    con.close()
