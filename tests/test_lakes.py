"""Lakes where they live: a hive lake in an S3-compatible store (moto's server on 127.0.0.1), a
Delta table with an overwritten version and a deleted partition, an Iceberg table with two
snapshots. Each evaluates on both engines (and through the CLI) to what the same rows give in
memory or on local disk. No test reaches an address outside this machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.fs as pafs
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.lakes.stores import Location, arrow_options
from mleval_sql.schema import InputError
from mleval_sql.sources import as_source
from tests.data import make_predictions
from tests.helpers import assert_same_rows

METRICS = ["roc_auc", "average_precision", "f1", "precision", "log_loss"]
BUCKET = "preds"


def evaluate(source: Any, engine: str, **options: Any) -> pl.DataFrame:
    options.setdefault("by", ["model", "region"])
    return me.evaluate(source, METRICS, task="multilabel", engine=engine,
                       average=["none", "macro"], **options)


def assert_equal(got: pl.DataFrame, want: pl.DataFrame, by: list[str]) -> None:
    assert got.schema == want.schema
    assert_same_rows(got, want, by)


# -- an S3-compatible server on this machine --------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_store(**environ: str) -> tuple[subprocess.Popen[bytes], str]:
    """moto's S3 server on a free port of 127.0.0.1, and its endpoint once it answers."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **environ})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            if server.poll() is not None:
                break
            time.sleep(0.1)
    server.kill()
    pytest.fail("moto's S3 server did not start")


CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
               "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    pytest.importorskip("moto.server")
    server, endpoint = _start_store()
    yield endpoint
    server.terminate()
    server.wait(10)


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> pafs.S3FileSystem:
    """The store's endpoint and keys in the standard variables (for this test only), and a
    filesystem on it to upload with."""
    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(name, value)
    return pafs.S3FileSystem(endpoint_override=s3_endpoint.removeprefix("http://"),
                             scheme="http", region="us-east-1", allow_bucket_creation=True)


def upload(fs: pafs.S3FileSystem, folder: Path, prefix: str) -> str:
    fs.create_dir(BUCKET)
    pafs.copy_files(str(folder), f"{BUCKET}/{prefix}", destination_filesystem=fs)
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture(scope="module")
def rows() -> pl.DataFrame:
    return make_predictions("multilabel", seed=18)


@pytest.fixture(scope="module")
def local_lake(rows: pl.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hive lake: ``model=*/region=*/*.parquet``."""
    folder = tmp_path_factory.mktemp("lake")
    rows.write_parquet(folder, partition_by=["model", "region"])
    return folder


@pytest.fixture
def s3_lake(s3: pafs.S3FileSystem, local_lake: Path) -> str:
    """The local lake uploaded, with a Spark job's leftovers beside it, which are not data."""
    url = upload(s3, local_lake, "lake")
    for junk in ("lake/_temporary/0/part-9.parquet", "lake/model=m1/.part-0.parquet",
                 "lake/_SUCCESS"):
        with s3.open_output_stream(f"{BUCKET}/{junk}") as out:
            out.write(b"half written")
    return url


# -- object storage --------------------------------------------------------------------------

@pytest.mark.parametrize("spelling", ["{}", "{}/", "{}/model=*/*/*.parquet", "{}/model=*",
                                      "{}/**/*.parquet"])
def test_s3_lake_equals_the_lake_on_disk(spelling: str, engine: str, s3_lake: str,
                                         local_lake: Path) -> None:
    want = evaluate(str(local_lake), engine)
    assert_equal(evaluate(spelling.format(s3_lake), engine), want, ["model", "region"])


def test_s3_lake_under_a_memory_budget(engine: str, s3_lake: str, local_lake: Path) -> None:
    """One segment at a time, each reading its own partitions through the reader's filters."""
    want = evaluate(str(local_lake), engine)
    assert_equal(evaluate(s3_lake, engine, memory_limit="256MB"), want, ["model", "region"])


def test_s3_lake_is_listed_once(engine: str, s3: pafs.S3FileSystem, s3_lake: str,
                                local_lake: Path) -> None:
    """An object written after the input was opened is not read: the list is a snapshot."""
    source = as_source(s3_lake)
    src = "lake/model=m1/region=north"
    name = next(i.path for i in s3.get_file_info(pafs.FileSelector(f"{BUCKET}/{src}"))
                if i.path.endswith(".parquet"))
    s3.copy_file(name, f"{BUCKET}/{src}/copy.parquet")
    try:
        assert_equal(evaluate(source, engine), evaluate(str(local_lake), engine),
                     ["model", "region"])
        with pytest.raises(InputError, match="duplicate"):
            evaluate(s3_lake, engine)
    finally:
        s3.delete_file(f"{BUCKET}/{src}/copy.parquet")


def test_storage_options_instead_of_the_environment(engine: str, s3_lake: str, s3_endpoint: str,
                                                    local_lake: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    options = {"aws_endpoint_url": s3_endpoint, "aws_allow_http": "true",
               "aws_secret_access_key": "testing"}
    assert_equal(evaluate(s3_lake, engine, storage_options=options),
                 evaluate(str(local_lake), engine), ["model", "region"])


def test_cli_reads_object_storage(engine: str, s3_lake: str, s3_endpoint: str, local_lake: Path,
                                  monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    def cli(*args: str) -> pl.DataFrame:
        assert main(["evaluate", *args, "--metric", "roc_auc,f1", "--by", "model", "--by",
                     "region", "--engine", engine, "--format", "csv"]) == 0
        return pl.read_csv(capsys.readouterr().out.encode())

    want = cli(str(local_lake))
    assert_equal(cli(s3_lake), want, ["model", "region"])
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert_equal(cli(s3_lake + "/", "--storage-option", f"aws_endpoint_url={s3_endpoint}",
                     "--storage-option", "aws_allow_http=true"), want, ["model", "region"])


@pytest.mark.parametrize(("path", "says"), [
    ("s3://no-such-bucket/lake", "no such bucket or container: s3://no-such-bucket/lake"),
    ("s3://preds/no/such/prefix", "no parquet files are below s3://preds/no/such/prefix"),
    ("s3://preds/lake/model=m1/part-7.parquet",
     "no such object: s3://preds/lake/model=m1/part-7.parquet"),
])
def test_missing_bucket_prefix_or_object(path: str, says: str, engine: str, s3_lake: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", path, "--engine", engine]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "<" not in err


def test_refused_credentials(engine: str, local_lake: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """A store that checks keys (moto's IAM on from the first request) refuses unknown ones."""
    server, endpoint = _start_store(INITIAL_NO_AUTH_ACTION_COUNT="0")
    try:
        for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(name, value)
        assert main(["evaluate", "s3://preds/lake", "--engine", engine]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "access to s3://preds/lake refused" in err
    finally:
        server.terminate()
        server.wait(10)


def test_report_job_reads_object_storage_and_tables(engine: str, s3: pafs.S3FileSystem,
                                                    s3_endpoint: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's source: the demo lake in S3 (its endpoint in storage_options), or a Delta table
    of it at its first version."""
    pytest.importorskip("jinja2")
    pytest.importorskip("deltalake")
    from mleval_sql.reporting.job import Job
    from mleval_sql.reporting.run import Progress, run

    demo = Path(__file__).resolve().parent.parent / "fixtures" / "lake"
    url = upload(s3, demo, "demo")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    table = pl.read_parquet(demo, hive_partitioning=True)
    table.write_delta(tmp_path / "delta")
    table.with_columns(score=1 - pl.col("score")).write_delta(tmp_path / "delta", mode="overwrite")

    def metrics(path: str, **source: Any) -> pl.DataFrame:
        job = {"sources": [{"path": path, "model_column": "model", **source}],
               "segments": ["region"], "metrics": ["roc_auc", "f1"], "average": ["macro"],
               "curves": {"kinds": []}, "task": "multilabel", "engine": engine}
        return run(Job.from_dict(job), Progress(1, show=False)).metrics

    want = metrics(str(demo))
    options = {"aws_endpoint_url": s3_endpoint, "aws_allow_http": "true"}
    assert_same_rows(metrics(url, storage_options=options), want, ["model", "segment"])
    assert_same_rows(metrics(str(tmp_path / "delta"), as_of=0), want, ["model", "segment"])


# -- Azure: Azurite's blob service on 127.0.0.1 (skipped where it is not installed) -------------

AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")  # the emulator's published development key


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    program = shutil.which("azurite-blob")
    if program is None:
        pytest.skip("Azurite is not installed (npm install -g azurite)")
    port = _free_port()
    server = subprocess.Popen(
        [program, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent", "--loose",
         "--skipApiVersionCheck", "--location", str(tmp_path_factory.mktemp("azurite"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("Azurite did not start")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/devstoreaccount1"
    server.terminate()
    server.wait(10)


@pytest.mark.parametrize("spelling", ["az://preds/lake", "abfss://preds@devstoreaccount1"
                                      ".dfs.core.windows.net/lake/"])
def test_azure_lake_equals_the_lake_on_disk(spelling: str, engine: str, azurite: str,
                                            local_lake: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
                        "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
                        "AZURE_STORAGE_ENDPOINT": azurite, "AZURE_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(name, value)
    fs = pafs.AzureFileSystem(account_name="devstoreaccount1", account_key=AZURITE_KEY,
                              **arrow_options("azure", {"endpoint": azurite}, {}))
    fs.create_dir("preds")
    pafs.copy_files(str(local_lake), "preds/lake", destination_filesystem=fs)
    assert_equal(evaluate(spelling, engine), evaluate(str(local_lake), engine),
                 ["model", "region"])


# -- locations and options of every cloud (no server needed) ----------------------------------

@pytest.mark.parametrize(("url", "cloud", "container", "key", "account"), [
    ("s3://b/lake/", "s3", "b", "lake", None),
    ("gs://b/a/lake", "gcs", "b", "a/lake", None),
    ("az://c/lake", "azure", "c", "lake", None),
    ("abfss://c@acct.dfs.core.windows.net/lake/", "azure", "c", "lake", "acct"),
])
def test_locations(url: str, cloud: str, container: str, key: str, account: str | None) -> None:
    where = Location.parse(url)
    assert (where.cloud, where.container, where.key, where.account) \
        == (cloud, container, key, account)
    assert where.url == url.rstrip("/")
    assert where.url_of(f"{container}/{key}/x.parquet") == f"{url.rstrip('/')}/x.parquet"


def test_storage_options_become_pyarrow_arguments() -> None:
    env = {"AWS_ENDPOINT_URL": "https://store.example:9000", "AWS_REGION": "eu-west-1",
           "AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": "k"}
    assert arrow_options("s3", {"aws_access_key_id": "a", "SECRET_ACCESS_KEY": "s"}, env) == {
        "access_key": "a", "secret_key": "s", "endpoint_override": "store.example:9000",
        "scheme": "https", "region": "eu-west-1"}
    assert arrow_options("s3", {"aws_region": "us-west-2"}, env)["region"] == "us-west-2"
    assert arrow_options("azure", {"azure_storage_sas_token": "t"}, env) == {
        "sas_token": "t", "account_name": "acct", "account_key": "k"}
    assert arrow_options("gcs", {"google_skip_signature": "true"}, {}) == {"anonymous": True}
    with pytest.raises(InputError, match="storage option 'bogus'"):
        arrow_options("s3", {"aws_bogus": "1"}, {})


def test_options_that_do_not_apply(local_lake: Path) -> None:
    with pytest.raises(InputError, match="storage_options apply to object-store paths"):
        me.evaluate(str(local_lake), storage_options={"aws_region": "x"})
    with pytest.raises(InputError, match=r"as_of .* applies to Delta and Iceberg"):
        me.evaluate(str(local_lake), as_of=1)
    with pytest.raises(InputError, match="not to a DataFrame"):
        me.evaluate(pl.DataFrame({"sample": [1]}), as_of=1)


# -- Delta ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def delta_table(rows: pl.DataFrame, tmp_path_factory: pytest.TempPathFactory,
                ) -> tuple[Path, dict[int, pl.DataFrame]]:
    """Version 0: the rows of model m1 with scores shifted; 1: overwritten by all rows; 2:
    partition model=m2 deleted. Returns the folder and each version's rows."""
    deltalake = pytest.importorskip("deltalake")
    folder = tmp_path_factory.mktemp("delta") / "table"
    first = rows.filter(pl.col("model") == "m1").with_columns(score=1 - pl.col("score"))
    first.write_delta(folder, delta_write_options={"partition_by": ["model"]})
    rows.write_delta(folder, mode="overwrite", delta_write_options={"partition_by": ["model"]})
    deltalake.DeltaTable(folder).delete("model = 'm2'")
    return folder, {0: first, 1: rows, 2: rows.filter(pl.col("model") == "m1")}


@pytest.mark.parametrize("version", [None, 0, 1])
def test_delta_table_at_a_version(version: int | None, engine: str,
                                  delta_table: tuple[Path, dict[int, pl.DataFrame]]) -> None:
    folder, versions = delta_table
    want = evaluate(versions[2 if version is None else version], engine)
    assert_equal(evaluate(str(folder), engine, as_of=version), want, ["model", "region"])


def test_delta_named_and_in_object_storage(engine: str, s3: pafs.S3FileSystem, s3_endpoint: str,
                                           delta_table: tuple[Path, dict[int, pl.DataFrame]],
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder, versions = delta_table
    url = upload(s3, folder, "delta")
    assert_equal(evaluate(url, engine), evaluate(versions[2], engine), ["model", "region"])
    assert_equal(evaluate(f"delta://{url}/", engine, as_of=0), evaluate(versions[0], engine),
                 ["model", "region"])
    with monkeypatch.context() as env:
        env.delenv("AWS_ENDPOINT_URL")
        options = {"aws_endpoint_url": s3_endpoint, "aws_allow_http": "true"}
        assert_equal(evaluate(url, engine, storage_options=options, as_of="1"),
                     evaluate(versions[1], engine), ["model", "region"])
    with pytest.raises(InputError, match="is a Delta table, which is read alone"):
        me.evaluate([str(folder), str(folder)])
    assert main(["evaluate", f"delta://{folder}", "--as-of", "1", "--by", "model", "--by",
                 "region", "--engine", engine, "--format", "csv", "--metric", "roc_auc"]) == 0
    got = pl.read_csv(capsys.readouterr().out.encode())
    want = me.evaluate(versions[1], "roc_auc", by=["model", "region"], engine=engine)
    assert_same_rows(got, want, ["model", "region"])


def test_delta_version_that_does_not_exist(delta_table: tuple[Path, dict[int, pl.DataFrame]],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder, _ = delta_table
    assert main(["evaluate", str(folder), "--as-of", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot read the Delta table {folder} at version 9" in err


# -- Iceberg -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def iceberg_table(rows: pl.DataFrame, tmp_path_factory: pytest.TempPathFactory,
                  ) -> tuple[Path, dict[str, str], list[int], dict[int, pl.DataFrame]]:
    """A SQL catalog on SQLite; table ``ns.preds`` partitioned by model, with a first snapshot
    (model m1, scores shifted) and a second that overwrote it with all rows. Returns the
    table's folder, the catalog's settings, the snapshot ids and each snapshot's rows."""
    pytest.importorskip("pyiceberg")
    pytest.importorskip("sqlalchemy")
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    folder = tmp_path_factory.mktemp("iceberg")
    settings = {"uri": f"sqlite:///{folder}/catalog.db", "warehouse": f"file://{folder}"}
    catalog = SqlCatalog("test", **settings)
    catalog.create_namespace("ns")
    first = rows.filter(pl.col("model") == "m1").with_columns(score=1 - pl.col("score"))
    arrow = rows.to_arrow()
    table = catalog.create_table("ns.preds", schema=arrow.schema)
    with table.update_spec() as spec:
        spec.add_field("model", IdentityTransform(), "model")
    assert table.spec() != PartitionSpec() and PartitionField  # partitioned
    table.append(first.to_arrow().cast(arrow.schema))
    table.overwrite(arrow)
    ids = [s.snapshot_id for s in table.snapshots()]
    location = Path(table.location().removeprefix("file://"))
    return location, settings, ids, {ids[0]: first, ids[-1]: rows}


def test_iceberg_table_at_a_snapshot(engine: str, iceberg_table: Any) -> None:
    folder, _, ids, snapshots = iceberg_table
    assert_equal(evaluate(str(folder), engine), evaluate(snapshots[ids[-1]], engine),
                 ["model", "region"])
    assert_equal(evaluate(str(folder), engine, as_of=ids[0]),
                 evaluate(snapshots[ids[0]], engine), ["model", "region"])


@pytest.mark.slow
def test_iceberg_catalog_table(iceberg_table: Any, tmp_path: Path) -> None:
    """``iceberg://CATALOG/NAMESPACE.TABLE`` with the catalog in pyiceberg's variables, which it
    reads when imported: so in a process of its own, through the CLI."""
    _, settings, ids, snapshots = iceberg_table
    env = {**os.environ, "PYICEBERG_CATALOG__TEST__TYPE": "sql",
           **{f"PYICEBERG_CATALOG__TEST__{k.upper()}": v for k, v in settings.items()}}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mleval_sql.cli", "evaluate", *args,
                               "--by", "model", "--by", "region", "--metric", "roc_auc",
                               "--format", "csv"], env=env, capture_output=True, text=True,
                              timeout=120)

    done = cli("iceberg://test/ns.preds", "--as-of", str(ids[0]))
    assert done.returncode == 0, done.stderr
    assert_same_rows(pl.read_csv(done.stdout.encode()),
                     me.evaluate(snapshots[ids[0]], "roc_auc", by=["model", "region"]),
                     ["model", "region"])
    missing = cli("iceberg://test/ns.nope")
    assert missing.returncode == 2
    assert missing.stderr == "mleval: error: no Iceberg table ns.nope in catalog 'test'\n"


# -- optional extras -----------------------------------------------------------------------------

@pytest.mark.parametrize(("module", "extra", "path"), [("deltalake", "delta", "delta://x"),
                                                       ("pyiceberg", "iceberg", "iceberg://c/n.t")])
def test_missing_extra_is_named(module: str, extra: str, path: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(InputError, match=rf"pip install 'mleval_sql\[{extra}\]'"):
        as_source(path)
