"""MLflow 3's logged models through Tidal (a live server, MLflow's own client): what `log_model` calls, as Hugging
Face's MLflowCallback does with HF_MLFLOW_LOG_ARTIFACTS=1; the model's files kept as its run's; a job's run token;
tenancy; bad input refused naming the field.

Here `log_checkpoint` makes the call its callback's `on_save` makes (transformers.integrations.MLflowCallback),
`mlflow.pyfunc.log_model(ckpt_dir, artifacts={"model_path": <output_dir>/<ckpt_dir>},
python_model=mlflow.pyfunc.PythonModel())`, on a checkpoint folder laid out as the Trainer saves one, so each rule is
tried in a second; test_hf_trainer.py runs the Trainer itself."""

from __future__ import annotations

import filecmp
from pathlib import Path

import mlflow
import mlflow.pyfunc
import pytest
import requests
from mlflow.artifacts import download_artifacts

from tests.tracking.test_artifacts_mlflow import http_refused
from tests.tracking.test_mlflow import live, refused, use_mlflow, user_token  # noqa: F401  (use_mlflow: fixture)
from tracking import services as run_services
from tracking.models import Artifact, LoggedModel, LoggedModelStatus
from tracking.tokens import run_token


@pytest.fixture(autouse=True)
def _no_requirements_inference(monkeypatch):
    """`log_model` infers the model's pip requirements from the installed packages' metadata (seconds, nothing the
    server sees): the model gets none, as when inference finds nothing."""
    import mlflow.utils.environment as environment

    monkeypatch.setattr(environment, "_infer_requirements", lambda *args, **kwargs: [])


def checkpoint(output_dir: Path, step: int) -> Path:
    """A Trainer's checkpoint folder (its file names; tiny random contents)."""
    folder = output_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert", "hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 64 + step.to_bytes(4, "big"))
    (folder / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    (folder / "training_args.bin").write_bytes(b"\x80\x04args")
    return folder


def log_checkpoint(output_dir: Path, step: int):
    """What MLflowCallback.on_save calls with HF_MLFLOW_LOG_ARTIFACTS=1."""
    ckpt_dir = f"checkpoint-{step}"
    return mlflow.pyfunc.log_model(ckpt_dir, artifacts={"model_path": str(output_dir / ckpt_dir)},
                                   python_model=mlflow.pyfunc.PythonModel())


@live
def test_hugging_faces_checkpoints_are_logged_models_kept_with_the_run(tenant, use_mlflow, tmp_path):  # noqa: F811
    client = use_mlflow(user_token(tenant.users["member"]))
    output_dir = tmp_path / "out"
    mlflow.set_experiment("bert sft")
    with mlflow.start_run() as active:
        mlflow.log_params({"learning_rate": "5e-05"})
        mlflow.log_metrics({"loss": 2.5}, step=500)
        folder = checkpoint(output_dir, 500)
        info = log_checkpoint(output_dir, 500)
    run_id = active.info.run_id

    model = LoggedModel.objects.get()
    assert (model.pk, model.name, model.status, str(model.run_id)) == (
        info.model_id, "checkpoint-500", LoggedModelStatus.READY, run_id)
    assert model.params == {"learning_rate": "5e-05"}  # the run's params, as the client sends them
    fetched = client.get_logged_model(model.pk)
    assert (fetched.name, fetched.source_run_id, fetched.status.to_proto()) == (
        "checkpoint-500", run_id, 2)  # LOGGED_MODEL_READY
    # Its files are the run's artifacts, in the model's folder: the checkpoint and pyfunc's own files.
    stored = set(Artifact.objects.filter(run_id=run_id).values_list("path", flat=True))
    assert {f"models/{model.pk}/{name}" for name in ("MLmodel", "python_model.pkl")} <= stored
    assert {f"models/{model.pk}/artifacts/checkpoint-500/{f.name}" for f in folder.iterdir()} <= stored
    assert all(path.startswith(f"models/{model.pk}/") for path in stored)
    assert {(f.path, f.is_dir) for f in client.list_logged_model_artifacts(model.pk)} >= {
        ("MLmodel", False), ("artifacts", True)}
    # Back through the client, byte for byte: by the model's id, and by its name in the run (a runs:/ URI finds
    # the run's model of that name with logged-models/search).
    for uri in (f"models:/{model.pk}", f"runs:/{run_id}/checkpoint-500"):
        local = Path(download_artifacts(uri, dst_path=str(tmp_path / uri.split(":")[0])))
        same = filecmp.dircmp(folder, local / "artifacts" / "checkpoint-500")
        assert not same.left_only and not same.right_only and not same.diff_files, uri
    assert not client.search_logged_models([active.info.experiment_id], filter_string="name = 'checkpoint-7'")


@live
def test_a_jobs_run_token_logs_models_to_its_own_run_only(tenant, run, job_of_run, use_mlflow,  # noqa: F811
                                                          monkeypatch, tmp_path, live_server):
    neighbour = run_services.run_create(project=tenant.project, experiment=run.experiment, name="neighbour")
    theirs = LoggedModel.objects.create(id="m-" + "a" * 32, project=tenant.project, run=neighbour, name="n",
                                        created_at=neighbour.started_at, updated_at=neighbour.started_at)
    client = use_mlflow(run_token(run.pk, 1))
    monkeypatch.setenv("MLFLOW_RUN_ID", str(run.pk))
    with mlflow.start_run():
        checkpoint(tmp_path, 10)
        info = log_checkpoint(tmp_path, 10)
    assert LoggedModel.objects.get(pk=info.model_id).run_id == run.pk
    assert Artifact.objects.filter(run=run, path=f"models/{info.model_id}/MLmodel").exists()
    # Another run's model, of the same project, is no model for the token.
    refused("RESOURCE_DOES_NOT_EXIST", client.get_logged_model, theirs.pk)
    assert [m.model_id for m in client.search_logged_models([str(run.experiment_id)])] == [info.model_id]
    refused("PERMISSION_DENIED", client.create_logged_model, str(run.experiment_id), source_run_id=str(neighbour.pk))
    url = (f"{live_server.url}/mlflow/vision/api/2.0/mlflow-artifacts/artifacts/{run.experiment_id}/models/"
           f"{theirs.pk}/artifacts/x.txt")
    response = requests.put(url, data=b"x", headers={"Authorization": f"Bearer {run_token(run.pk, 1)}"}, timeout=10)
    assert response.status_code == 404 and response.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    assert not Artifact.objects.filter(run=neighbour).exists()


@live
def test_another_tenants_logged_model_does_not_exist_and_a_viewer_writes_none(tenant, run, other_run,
                                                                                 use_mlflow,  # noqa: F811
                                                                                 tmp_path, live_server):
    member = use_mlflow(user_token(tenant.users["member"]))
    model = member.create_logged_model(str(run.experiment_id), name="vision-model", source_run_id=str(run.pk))
    (tmp_path / "weights.bin").write_bytes(b"the weights of vision")
    member.log_model_artifacts(model.model_id, str(tmp_path))
    token = user_token(tenant.users["outsider"])
    for project in ("vision", "secret"):
        outsider = use_mlflow(token, project=project)
        refused("RESOURCE_DOES_NOT_EXIST", outsider.get_logged_model, model.model_id)
        # By hand: the client asks get_logged_model before some writes and words the refusal its own way.
        api = f"{live_server.url}/mlflow/{project}/api/2.0/mlflow/logged-models/{model.model_id}"
        artifacts = (f"{live_server.url}/mlflow/{project}/api/2.0/mlflow-artifacts/artifacts/{run.experiment_id}/"
                     f"models/{model.model_id}/artifacts")
        for method, url, body in [
            ("patch", api, {"status": "LOGGED_MODEL_UPLOAD_FAILED"}),
            ("patch", f"{api}/tags", {"tags": [{"key": "stolen", "value": "yes"}]}),
            ("post", f"{api}/params", {"params": [{"key": "stolen", "value": "yes"}]}),
            ("delete", f"{api}/tags/mlflow.user", None),
            ("get", f"{api}/artifacts/directories", None),
            ("get", f"{artifacts}/weights.bin", None),
            ("get", f"{live_server.url}/mlflow/{project}/api/2.0/mlflow-artifacts/artifacts?path="
                    f"{run.experiment_id}/models/{model.model_id}/artifacts", None),
            ("put", f"{artifacts}/weights.bin", None),
            ("delete", f"{artifacts}/weights.bin", None),
        ]:
            response = getattr(requests, method)(url, json=body, headers={"Authorization": f"Bearer {token}"},
                                                 timeout=10)
            assert response.status_code == 404, (project, method, url, response.text)
            assert response.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
            assert "weights of vision" not in response.text and "vision-model" not in response.text
    outsider = use_mlflow(token, project="secret")
    assert not outsider.search_logged_models([str(run.experiment_id)])
    assert not outsider.search_logged_models([str(other_run.experiment_id)])
    refused("RESOURCE_DOES_NOT_EXIST", outsider.create_logged_model, str(other_run.experiment_id),
            source_run_id=str(run.pk))

    viewer = use_mlflow(user_token(tenant.users["viewer"]))
    assert viewer.get_logged_model(model.model_id).name == "vision-model"  # the positive control
    refused("PERMISSION_DENIED", viewer.create_logged_model, str(run.experiment_id), source_run_id=str(run.pk))
    refused("PERMISSION_DENIED", viewer.set_logged_model_tags, model.model_id, {"k": "v"})
    (tmp_path / "more.bin").write_bytes(b"more")
    assert http_refused(403, "PERMISSION_DENIED", viewer.log_model_artifacts, model.model_id, str(tmp_path))
    model_row = LoggedModel.objects.get()
    assert (model_row.tags, model_row.status) == ({}, LoggedModelStatus.PENDING)
    assert list(Artifact.objects.values_list("path", flat=True)) == [f"models/{model.model_id}/weights.bin"]


@live
@pytest.mark.parametrize(("fields", "named"), [
    ({"name": "bad\nname"}, "'name'"),
    ({"name": "a/b"}, "'name'"),
    ({"name": "x" * 251}, "'name'"),
    ({"source_run_id": ""}, "'source_run_id'"),
    ({"experiment_id": ""}, "'experiment_id'"),
    ({"params": [{"key": "bad\x01key", "value": "1"}]}, "params.key"),
    ({"tags": [{"key": "t", "value": "v" * 8001}]}, "tags.t"),
    ({"model_type": "bad\x07type"}, "'model_type'"),
])
def test_a_bad_logged_model_is_refused_naming_the_field_and_nothing_is_kept(tenant, run, live_server, fields, named):
    body = {"experiment_id": str(run.experiment_id), "source_run_id": str(run.pk), "name": "ok", **fields}
    response = requests.post(f"{live_server.url}/mlflow/vision/api/2.0/mlflow/logged-models", json=body,
                             headers={"Authorization": f"Bearer {user_token(tenant.users['member'])}"}, timeout=10)
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE" and named in response.json()["message"]
    assert not LoggedModel.objects.exists()


@live
def test_bad_requests_of_a_logged_model_are_refused_and_change_nothing(tenant, run, live_server):
    token = {"Authorization": f"Bearer {user_token(tenant.users['member'])}"}
    api = f"{live_server.url}/mlflow/vision/api/2.0/mlflow"
    created = requests.post(f"{api}/logged-models", headers=token, timeout=10, json={
        "experiment_id": str(run.experiment_id), "source_run_id": str(run.pk), "name": "m"}).json()["model"]
    model = f"{api}/logged-models/{created['info']['model_id']}"
    for method, url, body, status, named in [
        ("patch", model, {"status": "DONE"}, 400, "'status'"),
        ("patch", model, {"status": True}, 400, "'status'"),
        ("patch", f"{model}/tags", {"tags": [{"key": "", "value": "v"}]}, 400, "tags.key"),
        ("post", f"{model}/params", {"params": "lr=1"}, 400, "params"),
        ("delete", f"{model}/tags/absent", None, 404, "absent"),
        ("get", f"{model}/artifacts/directories?artifact_directory_path=../x", None, 400,
         "'artifact_directory_path'"),
        ("get", f"{api}/logged-models/m-{'0' * 32}", None, 404, "m-0000"),
        ("get", f"{api}/logged-models/m-bad%0Aid", None, 404, "not found"),
        ("post", f"{api}/logged-models/search", {"filter": "metrics.x > 1"}, 400, "filter"),
        ("post", f"{api}/logged-models/search", {"max_results": 0}, 400, "'max_results'"),
        ("post", f"{api}/logged-models/search", {"order_by": [{"field_name": "params.x"}]}, 400, "order_by[0]"),
        ("post", f"{api}/runs/outputs", {"run_id": str(run.pk), "models": [{"model_id": "m-x"}]}, 404, "m-x"),
    ]:
        response = getattr(requests, method)(url, headers=token, timeout=10, json=body)
        assert response.status_code == status, (method, url, response.text)
        assert named in response.json()["message"], (method, url, response.text)
    row = LoggedModel.objects.get()
    assert (row.status, row.tags, row.params) == (LoggedModelStatus.PENDING, {}, {})
