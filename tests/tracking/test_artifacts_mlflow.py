"""MLflow's own client logging, listing and downloading artifacts through Tidal's artifact proxy (a live server), on
the filesystem store and on an S3 server over HTTP (moto in server mode); a large file through the multipart path;
a job's run token; tenancy; and bad input refused whole, by the real client and by hand-written requests."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import boto3
import mlflow
import pytest
import requests
from mlflow.artifacts import download_artifacts

from tests.tracking.s3server import CREDENTIALS, moto_server
from tests.tracking.test_mlflow import live, refused, use_mlflow, user_token  # noqa: F401  (use_mlflow: fixture)
from tracking import services as run_services
from tracking.artifacts import services
from tracking.models import Artifact, ArtifactUpload
from tracking.tokens import run_token


@dataclass
class Store:
    kind: str
    root: Path | None = None  # the filesystem store's folder
    bucket: str = ""
    endpoint: str = ""

    def contents(self) -> dict[str, int]:
        """Every key the store holds with its size (the filesystem store's spool and upload folders apart, which
        must be empty)."""
        if self.kind == "file":
            assert self.root is not None
            found = {str(p.relative_to(self.root)): p.stat().st_size for p in self.root.rglob("*") if p.is_file()}
            return found
        client = boto3.client("s3", endpoint_url=self.endpoint)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        return {item["Key"]: item["Size"] for page in pages for item in page.get("Contents", [])}


@pytest.fixture(scope="session")
def s3_endpoint():
    with moto_server() as endpoint:
        yield endpoint


def s3_store(request, settings, monkeypatch) -> Store:
    endpoint = request.getfixturevalue("s3_endpoint")
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    bucket = f"tidal-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_URL": f"s3://{bucket}/artifacts",
                      "ARTIFACT_S3_ENDPOINT_URL": endpoint}
    return Store("s3", bucket=bucket, endpoint=endpoint)


@pytest.fixture(params=["file", "s3"])
def store(request, settings, monkeypatch, _artifacts_in_a_temporary_folder) -> Store:
    if request.param == "file":
        return Store("file", root=_artifacts_in_a_temporary_folder)
    return s3_store(request, settings, monkeypatch)


@pytest.fixture
def file_store(_artifacts_in_a_temporary_folder) -> Store:
    return Store("file", root=_artifacts_in_a_temporary_folder)


def under(store: Store, run) -> dict[str, int]:
    """The run's files in the store, by path in its artifacts."""
    lead = services.key_of(run, "")
    if store.kind == "s3":
        lead = f"artifacts/{lead}"
    return {key[len(lead):]: size for key, size in store.contents().items() if key.startswith(lead)}


def leftovers(store: Store) -> list[str]:
    """Spooled files and parts that were not cleaned away."""
    return [key for key in store.contents() if key.startswith((".incoming/", ".uploads/"))]


@live
def test_the_mlflow_client_logs_lists_and_downloads_artifacts(tenant, use_mlflow, store, tmp_path):  # noqa: F811
    use_mlflow(user_token(tenant.users["member"]))
    client = mlflow.MlflowClient()
    source = tmp_path / "source"
    (source / "plots" / "eval").mkdir(parents=True)
    (source / "config.yaml").write_text("lr: 0.001\nlayers: 12\n")
    (source / "plots" / "loss.csv").write_text("step,loss\n0,2.5\n1,1.25\n")
    (source / "plots" / "eval" / "samples.txt").write_text("the cat sat\n" * 50)
    weights = tmp_path / "weights.bin"
    weights.write_bytes(bytes(range(256)) * 400)  # 102,400 bytes, every byte value
    mlflow.set_experiment("artifacts")
    with mlflow.start_run() as active:
        mlflow.log_artifact(str(weights))
        mlflow.log_artifact(str(weights), artifact_path="checkpoints/step-100")
        mlflow.log_artifacts(str(source), artifact_path="run-files")
        mlflow.log_dict({"accuracy": 0.91, "classes": ["cat", "dog"]}, "metrics/summary.json")
        mlflow.log_text("élan vital ✓\n", "notes/readme.txt")
        figure = _figure()
        if figure is not None:
            mlflow.log_figure(figure, "plots/curve.png")
    run_id = active.info.run_id
    assert active.info.artifact_uri.startswith("mlflow-artifacts:/")

    top = client.list_artifacts(run_id)
    assert [(f.path, f.is_dir) for f in top] == [
        ("checkpoints", True), ("metrics", True), ("notes", True), *([("plots", True)] if figure else []),
        ("run-files", True), ("weights.bin", False)]
    assert top[-1].file_size == 102_400
    nested = client.list_artifacts(run_id, "run-files/plots")
    assert [(f.path, f.is_dir, f.file_size) for f in nested] == [
        ("run-files/plots/eval", True, None), ("run-files/plots/loss.csv", False, len("step,loss\n0,2.5\n1,1.25\n"))]

    # Everything back, byte for byte.
    target = Path(download_artifacts(run_id=run_id, dst_path=str(tmp_path / "back")))
    assert (target / "weights.bin").read_bytes() == weights.read_bytes()
    assert (target / "checkpoints" / "step-100" / "weights.bin").read_bytes() == weights.read_bytes()
    for name in ("config.yaml", "plots/loss.csv", "plots/eval/samples.txt"):
        assert (target / "run-files" / name).read_text() == (source / name).read_text()
    assert json.loads((target / "metrics" / "summary.json").read_text()) == {"accuracy": 0.91,
                                                                             "classes": ["cat", "dog"]}
    assert (target / "notes" / "readme.txt").read_text(encoding="utf-8") == "élan vital ✓\n"
    if figure is not None:
        assert (target / "plots" / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    one = download_artifacts(run_id=run_id, artifact_path="run-files/plots/loss.csv", dst_path=str(tmp_path / "one"))
    assert Path(one).read_text() == "step,loss\n0,2.5\n1,1.25\n"

    # The store holds exactly what the rows say, and nothing was left in spool or upload folders.
    from tracking.models import Run
    run = Run.objects.get(pk=int(run_id))
    rows = dict(Artifact.objects.filter(run=run).values_list("path", "size"))
    assert under(store, run) == rows
    assert rows["weights.bin"] == 102_400 and len(rows) == 7 + (1 if figure else 0)
    assert not leftovers(store) and not ArtifactUpload.objects.exists()
    # Deleting the run (committed at once here) takes its files out of the store.
    Run.objects.filter(pk=run.pk).delete()
    assert under(store, run) == {} and not Artifact.objects.exists()


def _figure():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots()
    axes.plot([0, 1, 2], [2.5, 1.25, 0.6])
    return figure


@live
def test_a_large_file_goes_through_the_multipart_upload(tenant, use_mlflow, store, tmp_path, monkeypatch):  # noqa: F811
    """11 MiB in parts of 5 MiB (S3's smallest but the last), PUT to the signed part URLs in parallel."""
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", str(1024 * 1024))
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_CHUNK_SIZE", str(5 * 1024 * 1024))
    parts = []
    real = services.upload_part

    def counted(**kwargs):
        parts.append(kwargs["number"])
        return real(**kwargs)

    monkeypatch.setattr(services, "upload_part", counted)
    big = tmp_path / "model.safetensors"
    with big.open("wb") as out:
        for i in range(11):
            out.write(bytes([i]) * (1024 * 1024))
    client = use_mlflow(user_token(tenant.users["member"]))
    run = client.create_run("0", run_name="big")
    client.log_artifact(run.info.run_id, str(big), "model")

    assert sorted(parts) == [1, 2, 3]
    back = Path(client.download_artifacts(run.info.run_id, "model/model.safetensors", str(tmp_path / "back")))
    assert back.read_bytes() == big.read_bytes()
    stored = Artifact.objects.get(run_id=int(run.info.run_id))
    assert (stored.path, stored.size) == ("model/model.safetensors", 11 * 1024 * 1024)
    assert not ArtifactUpload.objects.exists() and not leftovers(store)


@live
def test_a_job_logs_artifacts_to_its_own_run_only(tenant, run, job_of_run, use_mlflow,  # noqa: F811
                                                 monkeypatch, tmp_path, file_store, live_server):
    neighbour = run_services.run_create(project=tenant.project, experiment=run.experiment, name="neighbour")
    client = use_mlflow(run_token(run.pk, 1))
    monkeypatch.setenv("MLFLOW_RUN_ID", str(run.pk))
    with mlflow.start_run():
        mlflow.log_text("checkpoint 1", "ckpt/step-1.txt")
    assert [f.path for f in client.list_artifacts(str(run.pk), "ckpt")] == ["ckpt/step-1.txt"]
    note = tmp_path / "note.txt"
    note.write_text("not yours")
    refused("PERMISSION_DENIED", client.log_artifact, str(neighbour.pk), str(note))
    refused("PERMISSION_DENIED", client.list_artifacts, str(neighbour.pk))
    # The client stops at reading the run; the artifact proxy refuses the token as well, asked directly.
    base = f"{live_server.url}/mlflow/vision/api/2.0/mlflow-artifacts"
    token = {"Authorization": f"Bearer {run_token(run.pk, 1)}"}
    for method, url in [("put", f"{base}/artifacts/{run.experiment_id}/{neighbour.pk}/artifacts/x.txt"),
                        ("get", f"{base}/artifacts?path={run.experiment_id}/{neighbour.pk}/artifacts"),
                        ("post", f"{base}/mpu/create/{run.experiment_id}/{neighbour.pk}/artifacts")]:
        body = {"json": {"path": "x.bin", "num_parts": 1}} if method == "post" else {"data": b"x"}
        response = getattr(requests, method)(url, headers=token, timeout=10, **body)
        assert response.status_code == 403 and response.json()["error_code"] == "PERMISSION_DENIED", response.text
    assert not Artifact.objects.filter(run=neighbour).exists()
    assert list(Artifact.objects.values_list("run_id", "path")) == [(run.pk, "ckpt/step-1.txt")]


@live
def test_another_tenant_finds_no_artifacts_and_a_viewer_writes_none(tenant, run, other_run,
                                                                    use_mlflow,  # noqa: F811
                                                                    tmp_path, live_server, file_store):
    services.artifact_put(run=run, path="secret.txt", body=_body(b"the weights of vision"))
    services.artifact_put(run=other_run, path="theirs.txt", body=_body(b"globex"))
    note = tmp_path / "note.txt"
    note.write_text("intrusion")
    outsider = use_mlflow(user_token(tenant.users["outsider"]))  # project vision, where they are no member
    refused("RESOURCE_DOES_NOT_EXIST", outsider.list_artifacts, str(run.pk))
    refused("RESOURCE_DOES_NOT_EXIST", outsider.log_artifact, str(run.pk), str(note))
    outsider = use_mlflow(user_token(tenant.users["outsider"]), project="secret")  # their project, vision's run
    refused("RESOURCE_DOES_NOT_EXIST", outsider.list_artifacts, str(run.pk))
    assert [f.path for f in outsider.list_artifacts(str(other_run.pk))] == ["theirs.txt"]  # the positive control
    # By hand, the URL the client would build for vision's run under the outsider's project.
    token = user_token(tenant.users["outsider"])
    for project in ("vision", "secret"):
        url = (f"{live_server.url}/mlflow/{project}/api/2.0/mlflow-artifacts/artifacts/"
               f"{run.experiment_id}/{run.pk}/artifacts/secret.txt")
        for method in ("get", "put", "delete"):
            response = getattr(requests, method)(url, data=b"x", headers={"Authorization": f"Bearer {token}"},
                                                 timeout=10)
            assert response.status_code == 404, (project, method, response.text)
            assert response.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
            assert "weights" not in response.text
    viewer = use_mlflow(user_token(tenant.users["viewer"]))
    assert [f.path for f in viewer.list_artifacts(str(run.pk))] == ["secret.txt"]
    assert Path(viewer.download_artifacts(str(run.pk), "secret.txt", str(tmp_path))).read_bytes() == \
        b"the weights of vision"
    assert http_refused(403, "PERMISSION_DENIED", viewer.log_artifact, str(run.pk), str(note))
    assert set(Artifact.objects.values_list("path", flat=True)) == {"secret.txt", "theirs.txt"}


def http_refused(status: int, code: str, call, *args) -> bool:
    """The artifact repository raises requests' HTTPError with the server's answer."""
    with pytest.raises(requests.HTTPError) as raised:
        call(*args)
    assert raised.value.response.status_code == status, raised.value.response.text
    assert raised.value.response.json()["error_code"] == code
    return True


def _body(data: bytes) -> services.Body:
    import io

    stream = io.BytesIO(data)
    return services.Body(stream.read, len(data))
