"""Where artifacts' bytes live, behind one small interface: a folder of the local filesystem (the default,
`var/artifacts` under `make run`) or an S3-compatible bucket through boto3 (AWS S3, MinIO), chosen by
`TIDAL_ARTIFACT_URL` (file:///... or s3://bucket/prefix).

Nothing is ever half-written under a key: uploads are spooled to a temporary file first (`spool_file`), checked,
then committed whole (`put`: a rename on the filesystem, an upload S3 makes visible only once complete), and a
multipart upload's parts are assembled the same way (`complete`). Reads are file objects read in chunks, so
neither direction holds a whole file in memory."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import unquote, urlparse

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.digits import is_digits

CHUNK_BYTES = 1024 * 1024  # what uploads are read and files copied by
FULL = (errno.ENOSPC, errno.EDQUOT)

logger = logging.getLogger(__name__)


class StoreError(Exception):
    """The store refused an operation in a way the client caused (S3's EntityTooSmall for a short part)."""


class StoreUnavailable(Exception):
    """The store could not be reached or refused for its own reasons (a network error, S3 answering 5xx, a missing
    bucket or wrong credentials, a full disk): the request may succeed later, or once an operator fixed it."""


class ArtifactStore(Protocol):
    def spool_dir(self) -> Path:
        """Where uploads are written before they are committed (on the filesystem store, its own disk, so a commit
        is a rename)."""

    def put(self, key: str, source: Path) -> None:
        """Commit a complete file under `key`, replacing what was there; `source` is gone after."""

    def open(self, key: str) -> IO[bytes]:
        """The file under `key` to read in chunks; FileNotFoundError if there is none."""

    def delete(self, keys: list[str]) -> None:
        """Remove these keys; a missing one is no error."""

    def delete_prefix(self, prefix: str) -> None:
        """Remove every key under `prefix` (a folder: it ends with '/')."""

    def begin(self, key: str) -> str:
        """Start a multipart upload to `key`; its id in the store."""

    def put_part(self, key: str, upload: str, number: int, source: Path) -> str:
        """Store part `number` (from 1) of an upload, replacing an earlier copy; its tag. `source` is gone after."""

    def parts(self, key: str, upload: str) -> dict[int, tuple[int, str]]:
        """The parts an upload holds: number -> (size, tag)."""

    def complete(self, key: str, upload: str, parts: list[tuple[int, str]]) -> None:
        """Assemble the parts (number, tag), in that order, into the file under `key`."""

    def abort(self, key: str, upload: str) -> None:
        """Drop an upload's parts."""


def spool_file(store: ArtifactStore) -> tuple[IO[bytes], Path]:
    """A new temporary file in the store's spool folder, open for writing, and its path."""
    folder = store.spool_dir()
    folder.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=folder, prefix="incoming-")
    return os.fdopen(handle, "wb"), Path(name)


class FileStore:
    """Artifacts as files under a root folder: `<root>/<key>`. Incoming files wait in `<root>/.incoming`, parts
    of multipart uploads in `<root>/.uploads/<upload>/`: the same filesystem, so committing is an atomic rename.
    Keys start with `projects/`, so they never meet those two folders."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):  # keys are checked before (tracking.artifacts.paths)
            raise ValueError(f"Artifact key {key!r} leaves the store's folder.")
        return path

    def spool_dir(self) -> Path:
        return self.root / ".incoming"

    def put(self, key: str, source: Path) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)

    def open(self, key: str) -> IO[bytes]:
        return self._path(key).open("rb")

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                self._path(key).unlink()

    def delete_prefix(self, prefix: str) -> None:
        shutil.rmtree(self._path(prefix), ignore_errors=True)

    def _upload_dir(self, upload: str) -> Path:
        if not upload.isalnum():
            raise ValueError(f"No upload {upload!r}.")
        return self.root / ".uploads" / upload

    def begin(self, key: str) -> str:
        upload = secrets.token_hex(16)
        self._upload_dir(upload).mkdir(parents=True)
        return upload

    def put_part(self, key: str, upload: str, number: int, source: Path) -> str:
        size = source.stat().st_size
        os.replace(source, self._upload_dir(upload) / str(number))
        return _file_tag(number, size)

    def parts(self, key: str, upload: str) -> dict[int, tuple[int, str]]:
        found = {}
        for entry in os.scandir(self._upload_dir(upload)):
            if is_digits(entry.name):
                size = entry.stat().st_size
                found[int(entry.name)] = (size, _file_tag(int(entry.name), size))
        return found

    def complete(self, key: str, upload: str, parts: list[tuple[int, str]]) -> None:
        folder = self._upload_dir(upload)
        out, assembled = spool_file(self)
        try:
            with out:
                for number, _ in parts:
                    with (folder / str(number)).open("rb") as part:
                        shutil.copyfileobj(part, out, CHUNK_BYTES)
            self.put(key, assembled)
        except BaseException:
            assembled.unlink(missing_ok=True)
            raise
        shutil.rmtree(folder, ignore_errors=True)

    def abort(self, key: str, upload: str) -> None:
        shutil.rmtree(self._upload_dir(upload), ignore_errors=True)


def _s3_errors(method: Callable) -> Callable:
    """S3's failures that are not the client's, as StoreUnavailable (logged): a network error, a 5xx after boto3's
    retries, a missing bucket, refused credentials."""
    @functools.wraps(method)
    def wrapped(self: S3Store, *args: Any, **kwargs: Any) -> Any:
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return method(self, *args, **kwargs)
        except (StoreError, FileNotFoundError):
            raise
        except (ClientError, S3UploadFailedError) as error:
            code = error.response.get("Error", {}).get("Code", "") if isinstance(error, ClientError) else "upload"
            if code in ("NoSuchUpload", "NoSuchKey"):  # what the filesystem store says with FileNotFoundError
                raise FileNotFoundError(code) from error
            logger.warning("artifact store s3://%s refused %s: %s", self.bucket, method.__name__, error)
            raise StoreUnavailable(f"The artifact store refused the request ({code}).") from error
        except BotoCoreError as error:
            logger.warning("artifact store s3://%s unreachable in %s: %s", self.bucket, method.__name__, error)
            raise StoreUnavailable("The artifact store could not be reached.") from error
    return wrapped


def _file_tag(number: int, size: int) -> str:
    return f'"{number}-{size}"'


class S3Store:
    """Artifacts as objects of a bucket: `<prefix>/<key>`, through boto3 (AWS S3, or an S3-compatible store such as
    MinIO at `endpoint_url`). A committed upload is one PutObject (or S3's own multipart upload, which s3transfer
    uses above its threshold), visible only once complete; Tidal's multipart uploads are S3 multipart uploads."""

    def __init__(self, bucket: str, prefix: str, endpoint_url: str = "", region: str = "") -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        config = Config(
            # S3-compatible stores (MinIO, moto) serve buckets on their path, not as host names.
            s3={"addressing_style": "path"} if endpoint_url else {},
            # Checksums only where S3 requires them: the trailing ones botocore adds by default are not understood
            # by every S3-compatible store.
            request_checksum_calculation="when_required", response_checksum_validation="when_required",
            retries={"max_attempts": 3, "mode": "standard"},
        )
        self.client = boto3.client("s3", endpoint_url=endpoint_url or None, region_name=region or None,
                                   config=config)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def spool_dir(self) -> Path:
        return Path(tempfile.gettempdir()) / "tidal-artifacts"

    @_s3_errors
    def put(self, key: str, source: Path) -> None:
        from boto3.s3.transfer import TransferConfig

        try:
            # Above 64 MiB s3transfer sends parts of 16 MiB, at most 4 at a time: bounded memory for any size.
            self.client.upload_file(str(source), self.bucket, self._key(key),
                                    Config=TransferConfig(multipart_threshold=64 * 2**20,
                                                          multipart_chunksize=16 * 2**20, max_concurrency=4))
        finally:
            source.unlink(missing_ok=True)

    @_s3_errors
    def open(self, key: str) -> IO[bytes]:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        except self.client.exceptions.NoSuchKey:
            raise FileNotFoundError(key) from None

    @_s3_errors
    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes 1,000 keys a call
            objects = [{"Key": self._key(key)} for key in keys[start:start + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})

    @_s3_errors
    def delete_prefix(self, prefix: str) -> None:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix))
        for page in pages:
            objects = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if objects:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True})

    @_s3_errors
    def begin(self, key: str) -> str:
        return self.client.create_multipart_upload(Bucket=self.bucket, Key=self._key(key))["UploadId"]

    @_s3_errors
    def put_part(self, key: str, upload: str, number: int, source: Path) -> str:
        try:
            with source.open("rb") as body:
                found = self.client.upload_part(Bucket=self.bucket, Key=self._key(key), UploadId=upload,
                                                PartNumber=number, Body=body)
        finally:
            source.unlink(missing_ok=True)
        return found["ETag"]

    @_s3_errors
    def parts(self, key: str, upload: str) -> dict[int, tuple[int, str]]:
        pages = self.client.get_paginator("list_parts").paginate(Bucket=self.bucket, Key=self._key(key),
                                                                 UploadId=upload)
        return {part["PartNumber"]: (part["Size"], part["ETag"]) for page in pages for part in page.get("Parts", [])}

    @_s3_errors
    def complete(self, key: str, upload: str, parts: list[tuple[int, str]]) -> None:
        from botocore.exceptions import ClientError

        try:
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=self._key(key), UploadId=upload,
                MultipartUpload={"Parts": [{"PartNumber": number, "ETag": tag} for number, tag in parts]})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("EntityTooSmall", "InvalidPart", "InvalidPartOrder"):
                raise StoreError(error.response["Error"].get("Message") or str(error)) from None
            raise

    @_s3_errors
    def abort(self, key: str, upload: str) -> None:
        self.client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(key), UploadId=upload)


_stores: dict[tuple[str, str, str], ArtifactStore] = {}


def store_for(url: str, endpoint_url: str = "", region: str = "") -> ArtifactStore:
    """The store a `TIDAL_ARTIFACT_URL` names (one per process and configuration: a boto3 client is thread-safe
    and costly to make)."""
    config = (url, endpoint_url, region)
    if config not in _stores:
        parsed = urlparse(url)
        if parsed.scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise ImproperlyConfigured(f"TIDAL_ARTIFACT_URL {url!r}: a file URL names a local folder "
                                           "(file:///absolute/path).")
            _stores[config] = FileStore(Path(unquote(parsed.path)))
        elif parsed.scheme == "s3":
            if not parsed.netloc:
                raise ImproperlyConfigured(f"TIDAL_ARTIFACT_URL {url!r}: an s3 URL names a bucket (s3://bucket/prefix).")
            _stores[config] = S3Store(parsed.netloc, unquote(parsed.path), endpoint_url, region)
        else:
            raise ImproperlyConfigured(f"TIDAL_ARTIFACT_URL {url!r}: the scheme must be file or s3.")
    return _stores[config]


def configured() -> ArtifactStore:
    tidal = settings.TIDAL
    return store_for(tidal["ARTIFACT_URL"], tidal["ARTIFACT_S3_ENDPOINT_URL"], tidal["ARTIFACT_S3_REGION"])


def chunks(file: IO[bytes]) -> Iterator[bytes]:
    """A stored file's bytes in chunks, closing it at the end (or when the response is closed early)."""
    with contextlib.closing(file):
        while chunk := file.read(CHUNK_BYTES):
            yield chunk
