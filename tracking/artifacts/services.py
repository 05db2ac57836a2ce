"""Writes of artifacts: a whole file, a multipart upload's creation, parts, completion and abort, deletion.

Every upload is spooled to a temporary file while its size is counted against the largest artifact
(`TIDAL_ARTIFACT_MAX_BYTES`) and the project's room (`TIDAL_ARTIFACT_QUOTA_BYTES` less what its artifacts and the
uploads being committed hold), and reserved under the project's row lock before the store commits it, so two
uploads at once cannot both take the last room. The store commits a file whole (tracking.artifacts.store): a
refused or broken upload leaves nothing under its path, and the path's earlier file, if any, as it was. The
database row is written after the store has the bytes, in a short transaction: the store's transfer never holds a
lock.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from core.errors import DomainError, NotFound, QuotaExceeded
from tenancy.models import Project
from tracking.artifacts import store as stores
from tracking.models import Artifact, ArtifactUpload, Run

logger = logging.getLogger(__name__)

MAX_PARTS = 10_000  # S3's limit of a multipart upload
UPLOAD_TTL = timedelta(days=2)  # an upload neither completed nor aborted by then takes no more parts nor room


class TooLarge(DomainError):
    code = "too_large"
    status_code = 413


class LengthRequired(DomainError):
    code = "length_required"
    status_code = 411


@dataclass(frozen=True)
class Body:
    """An upload's body: something to read it from in chunks, and its Content-Length (None when not given)."""

    read: Callable[[int], bytes] | None  # None for an empty body
    length: int | None


def key_of(run: Run, path: str) -> str:
    return f"projects/{run.project_id}/runs/{run.pk}/{path}"


def max_bytes() -> int:
    return settings.TIDAL["ARTIFACT_MAX_BYTES"]


def quota_bytes(project: Project) -> int:
    """The project's own quota (set in the admin console) or the default, TIDAL_ARTIFACT_QUOTA_BYTES."""
    own = project.artifact_quota_bytes
    return settings.TIDAL["ARTIFACT_QUOTA_BYTES"] if own is None else own


def used_bytes(project_id: int) -> int:
    """What a project's artifacts hold, with the room reserved by its uploads being committed."""
    stored = Artifact.objects.filter(project_id=project_id).aggregate(total=Sum("size"))["total"] or 0
    pending = ArtifactUpload.objects.filter(run__project_id=project_id, reserved__gt=0,
                                            created_at__gte=timezone.now() - UPLOAD_TTL)
    return stored + (pending.aggregate(total=Sum("reserved"))["total"] or 0)


def _size_of(run: Run, path: str) -> int:
    return Artifact.objects.filter(run=run, path=path).values_list("size", flat=True).first() or 0


def _quota_error(project: Project, size: int, used: int) -> QuotaExceeded:
    source = ("the project's artifact quota" if project.artifact_quota_bytes is not None
              else "the default, TIDAL_ARTIFACT_QUOTA_BYTES")
    return QuotaExceeded(
        f"Project {project.slug}'s artifacts would hold {used + size:,} bytes; its quota is {quota_bytes(project):,} "
        f"({source}), and {used:,} are used. Delete artifacts, or ask an administrator for more.", field="quota")


def _spool(body: Body, path: str, limit: int, room: int, project: Project, used: int) -> tuple[Path, int]:
    """The body in a temporary file of the store's spool folder, and its size; refused as soon as it is longer than
    `limit` (what an artifact, or the part, may still be) or than the project has room for."""
    if body.length is not None:
        if body.length > limit:
            raise _too_large(path, body.length)
        if body.length > room:
            raise _quota_error(project, body.length, used)
    out, spooled = stores.spool_file(stores.configured())
    size = 0
    try:
        with out:
            while body.read is not None and (chunk := body.read(stores.CHUNK_BYTES)):
                size += len(chunk)
                if size > limit:
                    raise _too_large(path, size)
                if size > room:
                    raise _quota_error(project, size, used)
                out.write(chunk)
        if body.length is not None and size < body.length:
            raise DomainError(f"The upload of {path!r} ended after {size:,} of its {body.length:,} bytes "
                              "(Content-Length); nothing was stored.", field="Content-Length")
    except BaseException:
        spooled.unlink(missing_ok=True)
        raise
    return spooled, size


def _too_large(path: str, size: int) -> TooLarge:
    return TooLarge(f"The upload of artifact {path!r} (Content-Length) is over {max_bytes():,} bytes ({size:,} at "
                    "least), the largest a single artifact may be (TIDAL_ARTIFACT_MAX_BYTES).", field="Content-Length")


def _reserve(run: Run, path: str, size: int, upload: ArtifactUpload | None = None) -> ArtifactUpload:
    """Hold `size` bytes of the project's room for the upload of `path` (a new whole-file upload when None), less
    what the file it replaces holds, under the project's row lock: two uploads at once cannot both take the last
    room."""
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=run.project_id).exists()
        # Less what this upload reserved before (a completion tried again after the store failed).
        used = used_bytes(run.project_id) - _size_of(run, path) - (upload.reserved if upload else 0)
        if used + size > quota_bytes(run.project):
            raise _quota_error(run.project, size, used)
        if upload is None:
            return ArtifactUpload.objects.create(id=secrets.token_hex(16), run=run, path=path, parts=0,
                                                 reserved=size, created_at=timezone.now())
        upload.reserved = size
        upload.save(update_fields=["reserved"])
        return upload


def _record(run: Run, path: str, size: int, upload: ArtifactUpload) -> Artifact:
    """The artifact's row once the store has its bytes, and its reservation released, at once."""
    with transaction.atomic():
        artifact, _ = Artifact.objects.update_or_create(
            run=run, path=path, defaults={"project_id": run.project_id, "size": size, "updated_at": timezone.now()})
        upload.delete()
    return artifact


def _check_no_clash(run: Run, path: str) -> None:
    """A path is a file or a folder, not both: a file where the run has a folder, or under one of its files, is
    refused (a folder and a file of one name cannot both exist on a filesystem, and would not list apart)."""
    if Artifact.objects.filter(run=run, path__startswith=f"{path}/").exists():
        raise DomainError(f"Parameter 'path' names {path!r}, a folder of run {run.pk}'s artifacts; a file cannot "
                          "take its name.", field="path")
    parts = path.split("/")
    folders = ["/".join(parts[:i]) for i in range(1, len(parts))]
    clash = Artifact.objects.filter(run=run, path__in=folders).values_list("path", flat=True).first()
    if clash is not None:
        raise DomainError(f"Parameter 'path' puts {path!r} under {clash!r}, which is a file of run {run.pk}'s "
                          "artifacts, not a folder.", field="path")


def artifact_put(*, run: Run, path: str, body: Body) -> Artifact:
    """Store a whole file at `path` of the run's artifacts (MLflow's PUT `mlflow-artifacts/artifacts/<path>`)."""
    _check_no_clash(run, path)
    used = used_bytes(run.project_id) - _size_of(run, path)
    spooled, size = _spool(body, path, max_bytes(), quota_bytes(run.project) - used, run.project, used)
    try:
        upload = _reserve(run, path, size)
    except BaseException:
        spooled.unlink(missing_ok=True)
        raise
    try:
        stores.configured().put(key_of(run, path), spooled)
    except BaseException:
        spooled.unlink(missing_ok=True)
        upload.delete()
        raise
    return _record(run, path, size, upload)


# Multipart uploads: create, then parts through signed URLs (any order, in parallel), then complete or abort. A
# part writes nothing to the database: the store keeps the parts, whose sizes are counted against the largest
# artifact and the project's room as they arrive, and against the quota again, reserved under the lock, at
# completion, which drops the whole upload when the room is gone.

def upload_create(*, run: Run, path: str, parts: int) -> ArtifactUpload:
    if not 1 <= parts <= MAX_PARTS:
        raise DomainError(f"Parameter 'num_parts' must be between 1 and {MAX_PARTS:,}; got {parts}.", field="num_parts")
    _check_no_clash(run, path)
    used = used_bytes(run.project_id) - _size_of(run, path)
    if used >= quota_bytes(run.project):
        raise _quota_error(run.project, 0, used)
    store = stores.configured()
    return ArtifactUpload.objects.create(id=secrets.token_hex(16), run=run, path=path, parts=parts,
                                         store_upload=store.begin(key_of(run, path)), created_at=timezone.now())


def open_upload(upload_id: str) -> ArtifactUpload:
    """A multipart upload still open, or NotFound."""
    upload = (ArtifactUpload.objects.select_related("run__project").filter(pk=upload_id[:32], parts__gt=0)
              .first())
    if upload is None or upload.created_at < timezone.now() - UPLOAD_TTL:
        raise NotFound(f"No multipart upload {upload_id[:40]!r} open (completed, aborted, or older than "
                       f"{UPLOAD_TTL.days} days).")
    return upload


def upload_part(*, upload: ArtifactUpload, number: int, body: Body) -> str:
    """Store part `number` of an upload; its ETag. A part sent again (a retry) replaces the earlier copy."""
    if not 1 <= number <= upload.parts:
        raise DomainError(f"Part {number} is not among the upload's {upload.parts} parts.", field="part_number")
    run = upload.run
    store = stores.configured()
    key = key_of(run, upload.path)
    with _gone_as_not_found(upload):
        received = sum(size for n, (size, _) in store.parts(key, upload.store_upload).items() if n != number)
    used = used_bytes(run.project_id) - _size_of(run, upload.path)
    room = quota_bytes(run.project) - used - received
    spooled, _ = _spool(body, upload.path, max_bytes() - received, room, run.project, used + received)
    try:
        with _gone_as_not_found(upload):
            return store.put_part(key, upload.store_upload, number, spooled)
    finally:
        spooled.unlink(missing_ok=True)


@contextlib.contextmanager
def _gone_as_not_found(upload: ArtifactUpload) -> Iterator[None]:
    """An upload the store no longer has (aborted or completed meanwhile, by a request racing this one)."""
    try:
        yield
    except FileNotFoundError:
        raise NotFound(f"No multipart upload {upload.pk} open any more (completed or aborted meanwhile).") from None


def upload_complete(*, upload: ArtifactUpload, numbers: list[int]) -> Artifact:
    """Assemble the parts named (all must have arrived), in order, into the artifact; over the quota, the whole
    upload is dropped."""
    run = upload.run
    store = stores.configured()
    key = key_of(run, upload.path)
    with _gone_as_not_found(upload):
        received = store.parts(key, upload.store_upload)
    missing = [n for n in numbers if n not in received]
    if not numbers or missing:
        raise DomainError(f"Parameter 'parts' names parts {missing[:10] or '(none)'} of upload {upload.pk} that never "
                          "arrived; nothing was stored.", field="parts")
    numbers = sorted(set(numbers))
    size = sum(received[n][0] for n in numbers)
    if size > max_bytes():
        raise _too_large(upload.path, size)
    try:
        _reserve(run, upload.path, size, upload)
    except QuotaExceeded:
        upload_abort(upload=upload)
        raise
    try:
        with _gone_as_not_found(upload):
            store.complete(key, upload.store_upload, [(n, received[n][1]) for n in numbers])
    except stores.StoreError as error:
        raise DomainError(f"The store refused the parts: {error}", field="parts") from None
    return _record(run, upload.path, size, upload)


def upload_abort(*, upload: ArtifactUpload) -> None:
    with contextlib.suppress(FileNotFoundError):  # the store dropped it already
        stores.configured().abort(key_of(upload.run, upload.path), upload.store_upload)
    upload.delete()


def uploads_sweep() -> int:
    """Drop the uploads left open past UPLOAD_TTL (a client that died between parts, a process killed while its
    store committed): their parts in the store and their rows, which count against no quota any more. Hourly
    (Celery beat, or the embedded loops); how many."""
    stale = list(ArtifactUpload.objects.select_related("run").filter(created_at__lt=timezone.now() - UPLOAD_TTL))
    for upload in stale:
        if upload.parts and upload.store_upload:
            with contextlib.suppress(stores.StoreUnavailable, OSError):  # the next sweep tries again
                stores.configured().abort(key_of(upload.run, upload.path), upload.store_upload)
                upload.delete()
        else:
            upload.delete()
    return len(stale)


def run_files_forget(run_id: int, project_id: int) -> None:
    """Remove a deleted run's files from the store (its rows went with it). Once the deletion committed; a store
    that fails leaves them, logged."""
    prefix = f"projects/{project_id}/runs/{run_id}/"
    try:
        stores.configured().delete_prefix(prefix)
    except (stores.StoreUnavailable, OSError) as error:
        logger.warning("the files of deleted run %s stay in the artifact store (%s): %s", run_id, prefix, error)


def artifacts_delete(*, run: Run, path: str) -> int:
    """Delete the file at `path`, or every file under it when it is a folder ('' is the whole run); how many."""
    found = Artifact.objects.filter(run=run)
    if path:
        found = found.filter(Q(path=path) | Q(path__startswith=path + "/"))
    paths = list(found.values_list("path", flat=True))
    if not paths:
        raise NotFound(f"Run {run.pk} has no artifact {path!r}.")
    found.delete()  # the rows first: a file whose row is gone is never listed nor served
    stores.configured().delete([key_of(run, p) for p in paths])
    return len(paths)


def read(run: Run, artifact: Artifact) -> IO[bytes]:
    return stores.configured().open(key_of(run, artifact.path))
