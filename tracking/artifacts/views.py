"""The run page's artifacts: a download of each file (streamed, never read whole) and a preview page for images,
text, JSON and CSV. Runs are looked up among those the caller may see (tracking.selectors.runs_for_user): another
tenant's run, or a path it does not have, is a 404 as a missing one.

Downloads are attachments of `application/octet-stream`: a file a run logged is never shown by the browser as a
page of Tidal's own (an HTML or SVG artifact would run its scripts there). Only the raster image types the preview
shows in an <img> are served inline, with their own type."""

from __future__ import annotations

import csv
import io
import json
import posixpath
from dataclasses import dataclass, field
from typing import IO

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils.http import content_disposition_header

from tracking import selectors
from tracking.artifacts import paths, services
from tracking.artifacts import selectors as artifact_selectors
from tracking.artifacts import store as stores
from tracking.models import Artifact, Run

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp"}
TEXT_SUFFIXES = {".txt", ".log", ".md", ".yaml", ".yml", ".py", ".cfg", ".toml", ".ini", ".sh", ".out", ".err"}
CSV_DELIMITERS = {".csv": ",", ".tsv": "\t"}
PREVIEW_BYTES = 256 * 1024  # read of a file for its preview; the rest is left to the download
PREVIEW_ROWS = 200
PAGE_FILES = 500  # files the run page lists; the MLflow client lists them all


def kind_of(path: str) -> str:
    """How a file is previewed: image, text, json, csv, or "" (download only)."""
    suffix = posixpath.splitext(path)[1].lower()
    if suffix in IMAGE_TYPES:
        return "image"
    if suffix == ".json":
        return "json"
    if suffix in CSV_DELIMITERS:
        return "csv"
    return "text" if suffix in TEXT_SUFFIXES else ""


@dataclass
class Panel:
    """The run page's artifact list."""

    files: list[dict] = field(default_factory=list)
    count: int = 0
    size: int = 0

    @property
    def more(self) -> int:
        return self.count - len(self.files)


def panel(run: Run) -> Panel:
    count, size = artifact_selectors.totals(run)
    files = [{"path": a.path, "size": a.size, "updated_at": a.updated_at, "preview": bool(kind_of(a.path))}
             for a in artifact_selectors.files(run, PAGE_FILES)] if count else []
    return Panel(files, count, size)


def streamed(file: IO[bytes], artifact: Artifact, *, inline_type: str = "") -> StreamingHttpResponse:
    """A stored file as a response, in chunks, with its length; an attachment unless `inline_type` is given."""
    response = StreamingHttpResponse(stores.chunks(file), content_type=inline_type or "application/octet-stream")
    response["Content-Length"] = str(artifact.size)
    response["Content-Disposition"] = content_disposition_header(not inline_type, posixpath.basename(artifact.path))
    return response


def _artifact_or_404(request: HttpRequest, pk: int, path: str) -> tuple[Run, Artifact]:
    run = selectors.runs_for_user(request.user).filter(pk=pk).first()
    if run is None:
        raise Http404("No such run.")
    try:
        path = paths.clean(path)
    except paths.PathError as error:
        raise Http404(str(error)) from None
    artifact = artifact_selectors.artifact_at(run, path)
    if artifact is None:
        raise Http404(f"Run {run.name} has no artifact {path[:200]!r}.")
    return run, artifact


def _opened(run: Run, artifact: Artifact) -> IO[bytes]:
    try:
        return services.read(run, artifact)
    except FileNotFoundError:
        raise Http404(f"Artifact {artifact.path!r} is missing from the store.") from None


def _store_down(error: stores.StoreUnavailable) -> HttpResponse:
    response = HttpResponse(f"{error} Try again shortly.", status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = "5"
    return response


@login_required
def artifact_download(request: HttpRequest, pk: int, path: str) -> HttpResponse:
    try:
        return _download(request, pk, path)
    except stores.StoreUnavailable as error:
        return _store_down(error)


def _download(request: HttpRequest, pk: int, path: str) -> HttpResponse:
    run, artifact = _artifact_or_404(request, pk, path)
    inline = request.GET.get("inline") == "1" and kind_of(artifact.path) == "image"
    content_type = IMAGE_TYPES[posixpath.splitext(artifact.path)[1].lower()] if inline else ""
    return streamed(_opened(run, artifact), artifact, inline_type=content_type)


@login_required
def artifact_preview(request: HttpRequest, pk: int, path: str) -> HttpResponse:
    try:
        return _preview(request, pk, path)
    except stores.StoreUnavailable as error:
        return _store_down(error)


def _preview(request: HttpRequest, pk: int, path: str) -> HttpResponse:
    run, artifact = _artifact_or_404(request, pk, path)
    kind = kind_of(artifact.path)
    context: dict = {"run": run, "artifact": artifact, "kind": kind, "truncated": artifact.size > PREVIEW_BYTES}
    if kind in ("text", "json", "csv"):
        with _opened(run, artifact) as file:
            head = file.read(PREVIEW_BYTES)
        text = head.decode("utf-8", errors="replace")
        if context["truncated"] and "\n" in text:
            text = text[:text.rindex("\n") + 1]  # whole lines only
        context["text"] = text
        if kind == "json" and not context["truncated"]:
            try:
                context["text"] = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                context["invalid_json"] = True
        if kind == "csv":
            delimiter = CSV_DELIMITERS[posixpath.splitext(artifact.path)[1].lower()]
            rows = []
            for row in csv.reader(io.StringIO(text), delimiter=delimiter):
                rows.append(row)
                if len(rows) > PREVIEW_ROWS:
                    break
            context["header"], context["rows"] = (rows[0], rows[1:PREVIEW_ROWS + 1]) if rows else ([], [])
            context["more_rows"] = len(rows) > PREVIEW_ROWS or context["truncated"]
    return render(request, "tracking/artifact_preview.html", context)
