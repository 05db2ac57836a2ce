"""MLflow's artifact proxy (`mlflow server --serve-artifacts`) as its client calls it for runs whose artifact URI is
`mlflow-artifacts:/<experiment>/<run>/artifacts` (tracking.mlflow.translate): under `mlflow/<project>/api/2.0/
mlflow-artifacts/`, `artifacts/<path>` downloads (GET), uploads (PUT) and deletes (DELETE), `artifacts?path=` lists
a folder, and `mpu/create|complete|abort/<folder>` carry a large file's multipart upload, whose parts the client
PUTs, without its credentials, to the signed part URLs `mpu/create` hands out. `api/3.0/mlflow/server-info` tells
the client that multipart uploads are served.

The tenancy is the MLflow endpoints' (tracking.mlflow.selectors): the URL's project, a run of it the caller may see
to read, may write to to write; a run token reads and writes its own run's artifacts only. Every path is checked
(tracking.artifacts.paths) before anything is read or stored, and a refusal is MLflow's error naming the field."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils.crypto import constant_time_compare, salted_hmac
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response

from core.digits import is_digits
from core.errors import DATABASE_RETRY_AFTER_SECONDS
from tracking.artifacts import paths, services
from tracking.artifacts import selectors as artifact_selectors
from tracking.artifacts.services import Body, LengthRequired
from tracking.artifacts.views import streamed
from tracking.auth import LoggingThrottle
from tracking.bodies import body_of
from tracking.mlflow import errors, logged_models
from tracking.mlflow.errors import MlflowError, invalid, not_found
from tracking.mlflow.selectors import Scope, run_in, scope_of, writable_run
from tracking.mlflow.translate import integer, text
from tracking.mlflow.views import MlflowEndpoint
from tracking.models import Artifact, Run

# <experiment id>/<run id>/artifacts[/<path in the run's artifacts>]: where a run's artifact URI points; and
# <experiment id>/models/<model id>/artifacts[/<path>], a logged model's (its files are its run's, in their folder).
RUN_ROOT = re.compile(r"(?P<experiment>[^/]+)/(?P<run>[^/]+)/artifacts(?:/(?P<rest>.+))?")
MODEL_ROOT = re.compile(rf"(?P<experiment>[^/]+)/{logged_models.FOLDER}/(?P<model>[^/]+)/artifacts(?:/(?P<rest>.+))?")
_PART_SALT = "tidal.tracking.artifacts.part"


def locate(scope: Scope, raw: str, field: str = "path") -> tuple[Run, str]:
    """The run and the path inside its artifacts that an artifact path of the proxy names (a logged model's files
    are in their folder of its run's artifacts)."""
    try:
        cleaned = paths.clean(raw, field)
    except paths.PathError as error:
        raise invalid(str(error)) from None
    model = MODEL_ROOT.fullmatch(cleaned)
    if model is not None:
        logged = logged_models.model_in(scope, model["model"])
        if str(logged.run.experiment_id) != model["experiment"]:
            raise not_found(f"Logged model with id={model['model'][:50]!r} not found in experiment "
                            f"{model['experiment'][:50]}.")
        return logged.run, paths.join(logged_models.folder_of(logged), model["rest"] or "")
    found = RUN_ROOT.fullmatch(cleaned)
    if found is None:
        raise not_found(f"Parameter '{field}' names no run's artifacts ({cleaned[:100]!r}); they are under "
                        "<experiment id>/<run id>/artifacts.")
    run = run_in(scope, found["run"])
    if str(run.experiment_id) != found["experiment"]:
        raise not_found(f"Run with id={found['run'][:50]} not found in experiment {found['experiment'][:50]}.")
    return run, found["rest"] or ""


def _writable(scope: Scope, run: Run) -> Run:
    return writable_run(scope, str(run.pk))


def _body(request: HttpRequest | Request) -> Body:
    """The request's body to read in chunks, never whole: its Content-Length is required (a chunked body without
    one cannot be bounded before it is read)."""
    raw = request.META.get("CONTENT_LENGTH")
    if raw is None or raw == "":
        raise LengthRequired("An artifact upload needs a Content-Length header.", field="Content-Length")
    if not is_digits(raw):
        raise invalid(f"Header 'Content-Length' must be a number of bytes; got {raw[:40]!r}.")
    length = int(raw)
    stream = request.stream if isinstance(request, Request) else request
    return Body(stream.read if length and stream is not None else None, length)


class ArtifactEndpoint(MlflowEndpoint):
    """`artifacts/<path>`: GET downloads, PUT uploads, DELETE deletes (a file or a folder)."""

    http_method_names = ["get", "put", "delete", "options"]
    throttle_classes = [LoggingThrottle]  # a folder logged is a request a file: counted as logging is

    def get(self, request: Request, project: str, artifact_path: str = "") -> Any:
        run, path = locate(scope_of(request, project), artifact_path)
        artifact = artifact_selectors.artifact_at(run, path)
        if artifact is None:
            raise not_found(f"Run {run.pk} has no artifact {path!r}.")
        return download(run, artifact)

    def put(self, request: Request, project: str, artifact_path: str = "") -> Response:
        scope = scope_of(request, project)
        run, path = locate(scope, artifact_path)
        if not path:
            raise invalid("Parameter 'path' names the run's artifact folder; an upload needs a file name.")
        services.artifact_put(run=_writable(scope, run), path=path, body=_body(request))
        return Response({})

    def delete(self, request: Request, project: str, artifact_path: str = "") -> Response:
        scope = scope_of(request, project)
        run, path = locate(scope, artifact_path)
        services.artifacts_delete(run=_writable(scope, run), path=path)
        return Response({})


def download(run: Run, artifact: Artifact) -> StreamingHttpResponse:
    """A stored file streamed in chunks, with its length."""
    try:
        file = services.read(run, artifact)
    except FileNotFoundError:
        raise not_found(f"Artifact {artifact.path!r} of run {run.pk} is missing from the store.") from None
    return streamed(file, artifact)


class ArtifactListEndpoint(MlflowEndpoint):
    """`artifacts?path=<folder>`: the folder's files (name, size) and folders, as MLflow's ListArtifacts."""

    http_method_names = ["get", "options"]
    throttle_classes = [LoggingThrottle]

    def get(self, request: Request, project: str) -> Response:
        run, folder = locate(scope_of(request, project), text(request.query_params.dict(), "path"))
        files = []
        for entry in artifact_selectors.entries(run, folder):
            shown: dict[str, Any] = {"path": entry.name, "is_dir": entry.is_dir}
            if entry.size is not None:
                shown["file_size"] = entry.size
            files.append(shown)
        return Response({"files": files})


class MultipartEndpoint(MlflowEndpoint):
    """`mpu/<step>/<folder>`: create (the part URLs), complete, abort; the body names the file and the upload."""

    http_method_names = ["post", "options"]
    throttle_classes = [LoggingThrottle]
    step = ""  # create, complete or abort: set per URL

    def post(self, request: Request, project: str, artifact_path: str = "") -> Response:
        body = body_of(request)
        if not isinstance(body, dict):
            raise invalid("The request body must be a JSON object.")
        scope = scope_of(request, project)
        run, folder = locate(scope, artifact_path)
        run = _writable(scope, run)
        # Only the file's name counts: clients before MLflow 3.18 sent the whole local path.
        name = posixpath.basename(text(body, "path").replace("\\", "/"))
        try:
            path = paths.clean(paths.join(folder, name), "path")
        except paths.PathError as error:
            raise invalid(str(error)) from None
        if self.step == "create":
            return Response(_created(request, project, run, path, _num_parts(body)))
        upload = services.open_upload(text(body, "upload_id"))
        if upload.run_id != run.pk or upload.path != path:
            raise not_found(f"No multipart upload {upload.pk} of {path!r} in run {run.pk}.")
        if self.step == "complete":
            services.upload_complete(upload=upload, numbers=_part_numbers(body.get("parts")))
        else:
            services.upload_abort(upload=upload)
        return Response({})


def _created(request: Request, project: str, run: Run, path: str, parts: int) -> dict:
    upload = services.upload_create(run=run, path=path, parts=parts)
    credentials = []
    for number in range(1, parts + 1):
        url = reverse("mlflow-artifact-part", kwargs={"project": project, "upload": upload.pk, "number": number})
        credentials.append({"url": request.build_absolute_uri(f"{url}?signature={_signature(upload.pk, number)}"),
                            "part_number": number, "headers": {}})
    return {"upload_id": upload.pk, "credentials": credentials}


def _num_parts(body: dict) -> int:
    parts = integer(body, "num_parts")
    return 1 if parts is None else parts


def _part_numbers(parts: object) -> list[int]:
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise invalid("Parameter 'parts' must be a list of {part_number, etag} objects.")
    numbers = [p.get("part_number") for p in parts]
    bad = [n for n in numbers if isinstance(n, bool) or not isinstance(n, int)]
    if bad:
        raise invalid(f"Parameter 'parts' holds a part_number that is no integer ({bad[0]!r}).")
    return numbers


def _signature(upload: str, number: int) -> str:
    return salted_hmac(_PART_SALT, f"{upload}:{number}", algorithm="sha256").hexdigest()


@csrf_exempt
def upload_part(request: HttpRequest, project: str, upload: str, number: int) -> HttpResponse:
    """PUT of one part to the signed URL `mpu/create` gave: the signature is the credential (MLflow's client sends
    these without its token, as it would to S3's presigned URLs)."""
    try:
        if request.method != "PUT":
            raise MlflowError("BAD_REQUEST", f"Method {request.method} not allowed; a part is PUT.", status=405)
        if not constant_time_compare(request.GET.get("signature", ""), _signature(upload, number)):
            raise MlflowError("PERMISSION_DENIED", "Parameter 'signature' is not this part's: use the URL "
                                                   "mpu/create returned.")
        found = services.open_upload(upload)
        if found.run.project.slug != project:
            raise not_found(f"No multipart upload {upload[:40]!r} open.")
        etag = services.upload_part(upload=found, number=number, body=_body(request))
    except Exception as exc:  # noqa: BLE001 - MLflow's error shape for what it knows; anything else is re-raised
        error = errors.as_mlflow_error(exc)
        if error is None:
            raise
        response = JsonResponse(errors.body(error.code, error.message), status=error.status)
        if error.status == 503:
            response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        return response
    response = HttpResponse(status=200)
    response["ETag"] = etag
    return response


def server_info(request: HttpRequest, project: str) -> JsonResponse:
    """What MLflow's client asks a server before it uploads a large file: Tidal serves artifacts, and multipart
    uploads through its own part URLs (downloads stream, in one request). Nothing of any tenant: the same answer
    for every project name, as MLflow serves it before any login."""
    return JsonResponse({"store_type": None, "artifact_serving_enabled": True, "workspaces_enabled": False,
                         "multipart_uploads_enabled": True, "multipart_downloads_enabled": False,
                         "artifacts_presigned_only": False})
