"""Object stores (``s3://``, ``gs://``, ``az://``, ``abfss://``): locations, the storage options
each reader takes, pyarrow filesystems, and one listing of a lake's files.

``storage_options`` use the keys of polars and deltalake (the Rust ``object_store`` crate's:
``aws_endpoint_url``, ``aws_region``, ``azure_storage_account_name``...; the cloud's prefix may be
left out); the same keys are turned into pyarrow filesystem arguments for the DuckDB engine. What
is not given comes from each cloud's standard environment variables and configuration files.

>>> Location.parse("s3://preds/lake/")
Location(cloud='s3', root='s3://preds', container='preds', key='lake', account=None)
>>> Location.parse("abfss://preds@acct.dfs.core.windows.net/lake").account
'acct'
>>> arrow_options("s3", {"aws_endpoint_url": "http://127.0.0.1:9000", "region": "eu-west-1"})
{'endpoint_override': '127.0.0.1:9000', 'scheme': 'http', 'region': 'eu-west-1'}
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mleval_sql.files import not_data
from mleval_sql.schema import InputError

Cloud = Literal["s3", "gcs", "azure"]
SCHEMES: dict[str, Cloud] = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure",
                             "azure": "azure", "abfs": "azure", "abfss": "azure", "adl": "azure"}
GLOB = re.compile(r"[*?\[]")
#: What the environment does not say about a store: object_store keys (see above) to values.
StorageOptions = Mapping[str, str]

if TYPE_CHECKING:  # pyarrow's filesystems are imported where a store is used
    import pyarrow.fs as pafs

# object_store key (without the cloud prefix) -> pyarrow filesystem argument
_ARROW_KEYS: dict[Cloud, dict[str, str]] = {
    "s3": {"access_key_id": "access_key", "secret_access_key": "secret_key",
           "session_token": "session_token", "token": "session_token", "region": "region",
           "default_region": "region", "endpoint": "endpoint_override",
           "endpoint_url": "endpoint_override", "skip_signature": "anonymous",
           "virtual_hosted_style_request": "force_virtual_addressing",
           "allow_http": "", "role_arn": "role_arn", "role_session_name": "session_name"},
    "gcs": {"skip_signature": "anonymous", "endpoint": "endpoint_override",
            "endpoint_url": "endpoint_override", "project_id": "project_id"},
    "azure": {"storage_account_name": "account_name", "account_name": "account_name",
              "storage_account_key": "account_key", "account_key": "account_key",
              "access_key": "account_key", "storage_sas_token": "sas_token",
              "sas_token": "sas_token", "sas_key": "sas_token", "client_id": "client_id",
              "storage_client_id": "client_id", "client_secret": "client_secret",
              "storage_client_secret": "client_secret", "tenant_id": "tenant_id",
              "storage_tenant_id": "tenant_id", "authority_id": "tenant_id",
              "endpoint": "blob_storage_authority", "storage_endpoint": "blob_storage_authority",
              "allow_http": ""},
}
_PREFIXES: dict[Cloud, tuple[str, ...]] = {"s3": ("aws_",), "gcs": ("google_", "gcs_"),
                                           "azure": ("azure_",)}
# what pyarrow does not read from the environment by itself (object_store does)
_ENVIRONMENT: dict[Cloud, dict[str, tuple[str, ...]]] = {
    "s3": {"endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
           "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
           # pyarrow reads these itself, but not one of them beside the other given explicitly
           "access_key_id": ("AWS_ACCESS_KEY_ID",),
           "secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
           "session_token": ("AWS_SESSION_TOKEN",)},
    "gcs": {},
    "azure": {"storage_account_name": ("AZURE_STORAGE_ACCOUNT_NAME",),
              "storage_account_key": ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY"),
              "storage_sas_token": ("AZURE_STORAGE_SAS_TOKEN",),
              "endpoint": ("AZURE_STORAGE_ENDPOINT",)},
}


@dataclass(frozen=True)
class Location:
    """An object-store URL split into its parts, without a trailing slash."""

    cloud: Cloud
    root: str  # scheme://authority
    container: str
    key: str
    account: str | None = None

    @staticmethod
    def parse(text: str) -> Location:
        scheme, _, rest = text.partition("://")
        cloud = SCHEMES.get(scheme.lower())
        if cloud is None:
            raise InputError(f"unknown object store in {text}; schemes are {sorted(SCHEMES)}")
        authority, _, key = rest.partition("/")
        container, account = authority, None
        if "@" in authority:  # abfss://container@account.dfs.core.windows.net/path
            container, _, host = authority.partition("@")
            account = host.split(".")[0]
        key = key.strip("/")
        if not container:
            raise InputError(f"no bucket or container in {text}")
        return Location(cloud, f"{scheme}://{authority}", container, key, account)

    @property
    def url(self) -> str:
        return f"{self.root}/{self.key}" if self.key else self.root

    @property
    def arrow_path(self) -> str:
        """The path pyarrow's filesystems take: ``container/key``."""
        return f"{self.container}/{self.key}" if self.key else self.container

    def url_of(self, arrow_path: str) -> str:
        """The URL of ``container/key`` under this location's scheme and authority."""
        return f"{self.root}/{arrow_path.split('/', 1)[1]}"


def is_remote(text: str) -> bool:
    """Whether ``text`` names an object-store location."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def local_dir(text: str) -> Path | None:
    """``text`` as a local folder, if it is one."""
    path = Path(text)
    return path if path.is_dir() else None


def _bare(cloud: Cloud, key: str) -> str:
    key = key.lower()
    for prefix in _PREFIXES[cloud]:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def arrow_options(cloud: Cloud, options: Mapping[str, str] | None,
                  environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """pyarrow filesystem arguments from object_store ``options`` and the environment."""
    environ = os.environ if environ is None else environ
    given = {_bare(cloud, k): str(v) for k, v in (options or {}).items()}
    for key, names in _ENVIRONMENT[cloud].items():
        if key not in given and _ARROW_KEYS[cloud][key] not in {
                _ARROW_KEYS[cloud].get(k) for k in given}:
            value = next((environ[n] for n in names if environ.get(n)), None)
            if value is not None:
                given[key] = value
    out: dict[str, object] = {}
    for key, value in given.items():
        if key not in _ARROW_KEYS[cloud]:
            raise InputError(f"storage option {key!r} is not one the DuckDB engine's reader "
                             f"(pyarrow) takes for {cloud}; it takes "
                             f"{sorted(_ARROW_KEYS[cloud])} (with or without the "
                             f"{_PREFIXES[cloud][0]!r} prefix)")
        name = _ARROW_KEYS[cloud][key]
        if not name:  # pyarrow takes http from the endpoint's scheme
            continue
        if name in ("anonymous", "force_virtual_addressing"):
            out[name] = value.strip().lower() in ("1", "true", "yes")
        elif name in ("endpoint_override", "blob_storage_authority"):
            # pyarrow takes the host and the scheme apart (Azure: the account goes in the path
            # of an emulator's endpoint, which pyarrow adds itself)
            scheme, sep, rest = value.partition("://")
            host = (rest if sep else value).split("/")[0]
            if cloud == "azure":
                out.update(blob_storage_authority=host, dfs_storage_authority=host)
                if sep:
                    out.update(blob_storage_scheme=scheme, dfs_storage_scheme=scheme)
            else:
                out[name] = host
                if sep:
                    out["scheme"] = scheme
        else:
            out[name] = value
    return out


def filesystem(location: Location, options: Mapping[str, str] | None) -> pafs.FileSystem:
    """A pyarrow filesystem for ``location``, configured as polars' reader would be."""
    import pyarrow.fs as pafs

    kwargs = arrow_options(location.cloud, options)
    try:
        if location.cloud == "s3":
            return pafs.S3FileSystem(**kwargs)  # type: ignore[arg-type]
        if location.cloud == "gcs":
            return pafs.GcsFileSystem(**kwargs)  # type: ignore[arg-type]
        kwargs.setdefault("account_name", location.account)
        if not kwargs.get("account_name"):
            raise InputError(f"no Azure storage account for {location.url}: set "
                             "AZURE_STORAGE_ACCOUNT_NAME or the storage option account_name, "
                             "or write abfss://container@account.dfs.core.windows.net/path")
        return pafs.AzureFileSystem(**kwargs)  # type: ignore[arg-type]
    except (ValueError, TypeError, OSError) as error:
        raise InputError(f"cannot connect to {location.url} with these settings: "
                         f"{' '.join(str(error).split())}") from None


def polars_options(location: Location,
                   options: Mapping[str, str] | None) -> dict[str, str] | None:
    """The storage options polars and deltalake take: the user's, plus an Azure account named
    in an ``abfss://container@account...`` URL."""
    out = {k: str(v) for k, v in (options or {}).items()}
    if location.account and not any(_bare("azure", k) in ("storage_account_name", "account_name")
                                    for k in out):
        out["azure_storage_account_name"] = location.account
    return out or None


def hidden(relative: str) -> bool:
    """Whether a path below a lake's root is not data: a part of it starts with ``_`` or ``.``
    (Spark's ``_temporary/``, ``_SUCCESS``, dot-files), as Spark, Hive and pyarrow skip them."""
    return any(not_data(part) for part in relative.split("/") if part)


def list_files(location: Location, fs: pafs.FileSystem) -> list[str]:
    """The lake's data files once, as ``container/key`` paths, sorted: the object itself, or
    every ``.parquet`` object below the prefix but those :func:`hidden` skips; a pattern only
    when no object or prefix has that literal name."""
    import pyarrow.fs as pafs

    try:
        info = fs.get_file_info(location.arrow_path)
        if info.type == pafs.FileType.File:
            return [location.arrow_path]
        root, pattern = location.arrow_path, None
        if GLOB.search(location.key):
            literal = fs.get_file_info(pafs.FileSelector(location.arrow_path, recursive=True,
                                                         allow_not_found=True))
            if not literal:
                root, pattern = _glob_root(location.arrow_path), location.arrow_path
        found = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    except (OSError, ValueError) as error:
        raise store_error(location.url, error) from None
    files = sorted(i.path for i in found if i.type == pafs.FileType.File
                   and not hidden(i.path[len(root):])
                   and (_matches(i.path, pattern) if pattern
                        else i.path.lower().endswith(".parquet")))
    if not files:
        raise _nothing_at(location, fs, pattern)
    return files


def _nothing_at(location: Location, fs: pafs.FileSystem, pattern: str | None) -> InputError:
    """Why nothing was found: no bucket, no such object, or no data files there."""
    import pyarrow.fs as pafs

    try:
        bucket = fs.get_file_info(location.container).type
    except OSError as error:
        return store_error(location.url, error)
    if bucket == pafs.FileType.NotFound:
        return InputError(f"no such bucket or container: {location.url}")
    if pattern:
        return InputError(f"no parquet files match {location.url}")
    if location.key.lower().endswith(".parquet"):
        return InputError(f"no such object: {location.url}")
    return InputError(f"no parquet files are below {location.url} (no such prefix, or only "
                      "names starting with _ or .)")


def _matches(path: str, pattern: str) -> bool:
    """Whether ``pattern`` names the object ``path``: the object itself, or a ``.parquet`` object
    below a folder it names (``*`` within a name, ``**`` across folders, as in glob).

    >>> _matches("b/lake/m=a/d=1/x.parquet", "b/lake/m=*"), _matches("b/lake/m=a/y.txt", "b/*")
    (True, False)
    >>> _matches("b/lake/m=a/x.parquet", "b/lake/*.parquet"), _matches("b/a/c/x.csv", "b/**/*.csv")
    (False, True)
    """
    matched = _match_parts(path.split("/"), pattern.split("/"))
    return matched == "itself" or (matched == "below" and path.lower().endswith(".parquet"))


def _match_parts(parts: list[str], pattern: list[str]) -> str | None:
    if not pattern:
        return "below" if parts else "itself"
    if pattern[0] == "**":
        found = {_match_parts(parts[i:], pattern[1:]) for i in range(len(parts) + 1)}
        return next((m for m in ("itself", "below") if m in found), None)
    if parts and fnmatch.fnmatchcase(parts[0], pattern[0]):
        return _match_parts(parts[1:], pattern[1:])
    return None


def _glob_root(pattern: str) -> str:
    """The folders of ``pattern`` before its first wildcard: ``b/lake/m=*/x`` -> ``b/lake``."""
    parts = pattern.split("/")
    first = next(i for i, p in enumerate(parts) if GLOB.search(p))
    return "/".join(parts[:first])


def store_error(path: str, error: BaseException) -> InputError:
    """A one-line error naming ``path`` for what an object store answered."""
    text = str(error)
    said = re.sub(r"[\s_-]", "", text.lower())  # "NoSuchBucket", "ACCESS_DENIED", "not found"
    if any(s in said for s in ("nosuchbucket", "bucketdoesnotexist", "containernotfound")):
        return InputError(f"no such bucket or container: {path}")
    if any(s in said for s in ("accessdenied", "invalidaccesskeyid", "signaturedoesnotmatch",
                               "forbidden", "403", "authorization", "authentication",
                               "expiredtoken", "credentials")):
        return InputError(f"access to {path} refused: check the credentials (the cloud's "
                          "environment variables, or storage options)")
    if any(s in said for s in ("nosuchkey", "notfound", "404")):
        return InputError(f"no such object: {path}")
    if any(s in said for s in ("network", "resolve", "connect", "timedout", "timeout")):
        return InputError(f"cannot reach the object store for {path}: check the endpoint "
                          "and the network")
    first = next((line for line in text.splitlines() if line.strip()), type(error).__name__)
    return InputError(f"cannot read {path}: {re.sub(r'<[^>]*>.*', '', first).strip()}")
