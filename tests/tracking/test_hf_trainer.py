"""Hugging Face's Trainer, for real, logging to a live Tidal through its MLflow integration: a tiny random GPT-2
built in code (no download: HF_HUB_OFFLINE) trains a few steps on CPU with `report_to=["mlflow"]` and
HF_MLFLOW_LOG_ARTIFACTS=1, as a user outside a job (MLFLOW_TRACKING_URI, a personal token, MLFLOW_EXPERIMENT_NAME)
and as a job (its run token and MLFLOW_RUN_ID). What arrived is read back through Tidal, not the client: the run
in the right project and experiment with the Trainer's params and every logged metric at its step, each checkpoint's
files stored as its logged model's, byte for byte what the Trainer wrote on disk, and the run FINISHED. A token
pointed at another project stops the Trainer before its first step with MLflow's RESOURCE_DOES_NOT_EXIST, and
nothing is written anywhere."""

from __future__ import annotations

import math
from pathlib import Path

import mlflow
import pytest
import torch
from mlflow.exceptions import MlflowException
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from tests.tracking.test_logged_models import _no_requirements_inference  # noqa: F401  (autouse: client-side only)
from tests.tracking.test_mlflow import live, use_mlflow, user_token  # noqa: F401  (use_mlflow: fixture)
from tracking.artifacts import services as artifact_services
from tracking.models import Artifact, Experiment, LoggedModel, LoggedModelStatus, Run, RunStatus, Series
from tracking.points import stored_points
from tracking.tokens import run_token

STEPS, SAVE_STEPS = 4, 2


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """No download (the model is built in code) and the callback logs every checkpoint it sees saved."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_MLFLOW_LOG_ARTIFACTS", "1")


def tiny_trainer(output_dir: Path) -> Trainer:
    """A randomly initialised one-layer GPT-2 (vocabulary 64, width 16) and 16 sequences of 8 tokens (trained on and
    evaluated on)."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                       bos_token_id=0, eos_token_id=0))
    tokens = torch.randint(0, 64, (16, 8))
    dataset = [{"input_ids": row, "labels": row} for row in tokens]
    args = TrainingArguments(output_dir=str(output_dir), run_name="tiny-gpt2", report_to=["mlflow"], max_steps=STEPS,
                             per_device_train_batch_size=4, learning_rate=1e-3, logging_steps=1,
                             save_steps=SAVE_STEPS, use_cpu=True, disable_tqdm=True, seed=0)
    return Trainer(model=model, args=args, train_dataset=dataset, eval_dataset=dataset)


def trained(trainer: Trainer) -> dict[str, str]:
    """Train; returns the params the callback logs as training begins: the TrainingArguments and the model's config,
    each as str() of its value (saving a checkpoint later fills in the config's `architectures` and `dtype`)."""
    params = {key: str(value) for key, value in {**trainer.model.config.to_dict(), **trainer.args.to_dict()}.items()}
    trainer.train()
    return params


def assert_kept(run: Run, trainer: Trainer, output_dir: Path) -> None:
    """The run holds every metric of the Trainer's log history at its step and every checkpoint it saved, and ended."""
    assert run.status == RunStatus.FINISHED
    logged = {(key, entry["step"]): float(value) for entry in trainer.state.log_history
              for key, value in entry.items() if key != "step" and isinstance(value, (int, float))}
    stored = {(point.key, point.step): point.value for point in stored_points(run.pk)}
    assert stored.keys() == logged.keys()
    assert all(math.isclose(stored[at], value, rel_tol=1e-9) for at, value in logged.items())
    assert {step for key, step in logged if key == "loss"} == set(range(1, STEPS + 1))
    assert {"learning_rate", "epoch", "grad_norm", "train_runtime"} <= {key for key, _ in logged}

    # One logged model a checkpoint, its files the run's artifacts, byte for byte what the Trainer saved.
    saved = sorted(path.name for path in output_dir.glob("checkpoint-*"))
    assert saved == [f"checkpoint-{step}" for step in range(SAVE_STEPS, STEPS + 1, SAVE_STEPS)]
    models = {model.name: model for model in LoggedModel.objects.filter(run=run)}
    assert sorted(models) == saved
    for name, model in models.items():
        assert model.status == LoggedModelStatus.READY
        folder = output_dir / name
        on_disk = {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*")
                   if path.is_file()}
        assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= on_disk.keys()
        prefix = f"models/{model.pk}/artifacts/{name}/"
        kept = {artifact.path.removeprefix(prefix): artifact
                for artifact in Artifact.objects.filter(run=run, path__startswith=prefix)}
        assert kept.keys() == on_disk.keys()
        for path, artifact in kept.items():
            assert artifact.size == len(on_disk[path])
            with artifact_services.read(run, artifact) as stream:
                assert stream.read() == on_disk[path], path


@live
def test_a_users_trainer_logs_its_run_to_the_named_experiment(tenant, use_mlflow, monkeypatch,  # noqa: F811
                                                               tmp_path):
    use_mlflow(user_token(tenant.users["member"]))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "tiny gpt2")
    trainer = tiny_trainer(tmp_path / "out")
    params = trained(trainer)

    run = Run.objects.get()
    assert (run.project, run.experiment.name, run.name, run.user) == (
        tenant.project, "tiny gpt2", "tiny-gpt2", tenant.users["member"])
    assert run.params == params
    assert (params["learning_rate"], params["max_steps"], params["n_embd"]) == ("0.001", "4", "16")
    assert_kept(run, trainer, tmp_path / "out")


@live
def test_a_jobs_trainer_logs_into_the_jobs_run_with_its_run_token(tenant, run, job_of_run, use_mlflow,  # noqa: F811
                                                                  monkeypatch, tmp_path):
    """As docs/mlflow.md has it: the script opens the job's run around training and evaluation, so the callback logs
    into it and leaves it open for `evaluate()`, and the run ends as the script's `with` block does."""
    use_mlflow(run_token(run.pk, 1))
    monkeypatch.setenv("MLFLOW_RUN_ID", str(run.pk))  # as the job's environment has it
    trainer = tiny_trainer(tmp_path / "out")
    with mlflow.start_run():
        params = trained(trainer)
        assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
        trainer.evaluate()

    assert list(Run.objects.values_list("pk", flat=True)) == [run.pk]
    run.refresh_from_db()
    assert (run.experiment.name, run.params) == ("sweep", {"lr": "0.0003", **params})
    assert "eval_loss" in {point.key for point in stored_points(run.pk)}
    assert_kept(run, trainer, tmp_path / "out")


@live
@pytest.mark.parametrize("whose", ["an outsider's token", "a job's run token sent to another project's run"])
def test_a_token_pointed_at_another_project_stops_the_trainer_and_writes_nothing(
        tenant, run, other_run, job_of_run, use_mlflow, monkeypatch, tmp_path, whose):  # noqa: F811
    if whose == "an outsider's token":
        project = "vision"
        use_mlflow(user_token(tenant.users["outsider"]), project=project)
        monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "tiny gpt2")
    else:
        project = "secret"
        use_mlflow(run_token(run.pk, 1), project=project)
        monkeypatch.setenv("MLFLOW_RUN_ID", str(other_run.pk))
    trainer = tiny_trainer(tmp_path / "out")
    with pytest.raises(MlflowException) as raised:
        trainer.train()
    assert raised.value.error_code == "RESOURCE_DOES_NOT_EXIST", raised.value
    assert f"No project '{project}'" in str(raised.value)  # whether or not it exists, as for any project not yours
    assert trainer.state.global_step == 0  # stopped before training, not after a wasted run
    assert list(Run.objects.order_by("pk").values_list("pk", "name", "status", "params")) == [
        (run.pk, "lr-3e-4", RunStatus.RUNNING, {"lr": "0.0003"}), (other_run.pk, "secret-run", RunStatus.RUNNING, {})]
    assert not Experiment.objects.filter(name="tiny gpt2").exists()
    assert not Series.objects.exists() and not Artifact.objects.exists() and not LoggedModel.objects.exists()
