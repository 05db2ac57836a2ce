"""Hand-written requests to the artifact proxy: every endpoint's tenancy (an outsider finds nothing, a viewer writes
nothing, a member does), and bad input (paths leaving the run's folder, control characters, oversized uploads,
quotas, forged part URLs, missing parts) answered by a 4xx naming the field, with nothing half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import client_for
from tracking.artifacts import services
from tracking.models import Artifact, ArtifactUpload

BASE = "/mlflow/{project}/api/2.0/mlflow-artifacts"


def root(run) -> str:
    return f"{run.experiment_id}/{run.pk}/artifacts"


def url(run, rest: str = "", project: str = "vision") -> str:
    return BASE.format(project=project) + rest.replace("<root>", root(run))


def put(client, run, path: str, data: bytes, project: str = "vision", **extra):
    return client.generic("PUT", url(run, f"/artifacts/<root>/{path}", project), data,
                          content_type="application/octet-stream", **extra)


def mpu(client, run, step: str, body: dict, folder: str = ""):
    return client.post(url(run, f"/mpu/{step}/<root>{folder}"), body, format="json")


def files_in(store_root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store_root)): p.read_bytes() for p in store_root.rglob("*") if p.is_file()}


def refusal(response, status: int, *words: str) -> str:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error_code", "message"}
    for word in words:
        assert word in body["message"], body["message"]
    return body["error_code"]


@pytest.fixture
def member(tenant):
    return client_for(tenant.users["member"])


# Tenancy of every endpoint.

ENDPOINTS = [  # (method, path, body, a write?)
    ("get", "/artifacts?path=<root>", None, False),
    ("get", "/artifacts/<root>/model.bin", None, False),
    ("put", "/artifacts/<root>/new.bin", b"new", True),
    ("delete", "/artifacts/<root>/model.bin", None, True),
    ("post", "/mpu/create/<root>", {"path": "big.bin", "num_parts": 2}, True),
    ("post", "/mpu/complete/<root>", {"path": "big.bin", "upload_id": "0" * 32, "parts": []}, True),
    ("post", "/mpu/abort/<root>", {"path": "big.bin", "upload_id": "0" * 32}, True),
]


def call(client, method: str, address: str, body):
    if method == "put":
        return client.generic("PUT", address, body, content_type="application/octet-stream")
    if method == "post":
        return client.post(address, body, format="json")
    return getattr(client, method)(address)


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body", "write"), ENDPOINTS)
def test_an_outsider_finds_no_artifact_endpoint_of_another_tenant(tenant, run, method, path, body, write):
    services.artifact_put(run=run, path="model.bin", body=_body(b"weights"))
    outsider = client_for(tenant.users["outsider"])
    for project in ("vision", "secret"):  # not their project; theirs, naming vision's run
        response = call(outsider, method, url(run, path, project), body)
        assert refusal(response, 404) == "RESOURCE_DOES_NOT_EXIST"
        assert b"weights" not in response.content
    assert list(Artifact.objects.values_list("path", flat=True)) == ["model.bin"]
    assert not ArtifactUpload.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path", "body", "write"), ENDPOINTS)
def test_a_viewer_reads_artifacts_and_writes_none(tenant, run, method, path, body, write):
    services.artifact_put(run=run, path="model.bin", body=_body(b"weights"))
    response = call(client_for(tenant.users["viewer"]), method, url(run, path), body)
    if write:
        assert refusal(response, 403) == "PERMISSION_DENIED"
        assert list(Artifact.objects.values_list("path", "size")) == [("model.bin", 7)]
    else:
        assert response.status_code == 200


@pytest.mark.django_db
def test_a_member_uses_every_endpoint(tenant, run, member, _artifacts_in_a_temporary_folder):
    """The positive control of the two tests above, endpoint by endpoint."""
    assert put(member, run, "model.bin", b"weights").status_code == 200
    listed = member.get(url(run, "/artifacts?path=<root>")).json()
    assert listed == {"files": [{"path": "model.bin", "is_dir": False, "file_size": 7}]}
    download = member.get(url(run, "/artifacts/<root>/model.bin"))
    assert b"".join(download.streaming_content) == b"weights" and download["Content-Length"] == "7"
    created = mpu(member, run, "create", {"path": "big.bin", "num_parts": 2}).json()
    assert [c["part_number"] for c in created["credentials"]] == [1, 2]
    for credential, data in zip(created["credentials"], (b"first-", b"second"), strict=True):
        assert member.generic("PUT", credential["url"], data).status_code == 200
    assert mpu(member, run, "complete", {"path": "big.bin", "upload_id": created["upload_id"],
                                         "parts": [{"part_number": 1}, {"part_number": 2}]}).status_code == 200
    assert b"".join(member.get(url(run, "/artifacts/<root>/big.bin")).streaming_content) == b"first-second"
    other = mpu(member, run, "create", {"path": "dropped.bin", "num_parts": 1}).json()
    assert mpu(member, run, "abort", {"path": "dropped.bin", "upload_id": other["upload_id"]}).status_code == 200
    assert member.delete(url(run, "/artifacts/<root>/model.bin")).status_code == 200
    assert list(Artifact.objects.values_list("path", "size")) == [("big.bin", 12)]
    assert not ArtifactUpload.objects.exists()
    assert list(files_in(_artifacts_in_a_temporary_folder).values()) == [b"first-second"]


# Bad input.

@pytest.mark.django_db
@pytest.mark.parametrize(("path", "reason"), [
    ("a/../../../escape.txt", "'..' segment"),
    ("../other-run/x", "'..' segment"),
    ("./x", "'.' segment"),
    ("/etc/passwd", "empty segment"),  # <root>//etc/passwd
    ("dir//x", "empty segment"),
    ("a\\..\\b", "backslash"),
    ("bell%07.txt", "control character (U+0007)"),
    ("new%0Aline.txt", "control character (U+000A)"),
    ("x" * 300, "over 255 bytes"),
])
def test_an_artifact_path_leaving_the_run_or_holding_control_characters_is_refused(run, member, path, reason,
                                                                                   _artifacts_in_a_temporary_folder):
    assert refusal(put(member, run, path, b"payload"), 400, "'path'", reason) == "INVALID_PARAMETER_VALUE"
    assert refusal(member.get(url(run, f"/artifacts/<root>/{path}")), 400, "'path'", reason)
    assert not Artifact.objects.exists() and not files_in(_artifacts_in_a_temporary_folder)


@pytest.mark.django_db
def test_a_listing_path_and_a_multipart_file_name_are_checked_too(run, member, _artifacts_in_a_temporary_folder):
    refusal(member.get(url(run, "/artifacts"), {"path": f"{root(run)}/../.."}), 400, "'path'", "'..' segment")
    refusal(member.get(url(run, "/artifacts"), {"path": "elsewhere"}), 404, "'path'", "names no run's artifacts")
    refusal(member.get(url(run, "/artifacts")), 400, "'path'")
    refusal(mpu(member, run, "create", {"path": "tab\there.bin", "num_parts": 1}), 400, "'path'", "U+0009")
    refusal(mpu(member, run, "create", {"path": "x.bin", "num_parts": 0}), 400, "num_parts")
    refusal(mpu(member, run, "create", {"num_parts": 1}), 400, "'path'")
    assert not ArtifactUpload.objects.exists() and not files_in(_artifacts_in_a_temporary_folder)


@pytest.mark.django_db
def test_an_oversized_upload_is_refused_and_nothing_is_written(run, member, settings,
                                                               _artifacts_in_a_temporary_folder):
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_MAX_BYTES": 1000}
    assert put(member, run, "ok.bin", b"x" * 1000).status_code == 200
    refusal(put(member, run, "big.bin", b"x" * 1001), 413, "Content-Length", "TIDAL_ARTIFACT_MAX_BYTES")
    refusal(put(member, run, "ok.bin", b"y" * 5000), 413, "Content-Length")  # a replacement: the first stays
    assert list(Artifact.objects.values_list("path", "size")) == [("ok.bin", 1000)]
    assert files_in(_artifacts_in_a_temporary_folder) == {f"projects/{run.project_id}/runs/{run.pk}/ok.bin":
                                                          b"x" * 1000}
    assert not ArtifactUpload.objects.exists()


@pytest.mark.django_db
def test_an_upload_without_its_length_is_refused(run, member):
    refusal(put(member, run, "x.bin", b"data", CONTENT_LENGTH=""), 411, "Content-Length")
    refusal(put(member, run, "x.bin", b"data", CONTENT_LENGTH="-4"), 400, "Content-Length")
    assert not Artifact.objects.exists()


@pytest.mark.django_db
def test_the_projects_quota_holds_and_says_so(tenant, run, other_run, member, settings,
                                              _artifacts_in_a_temporary_folder):
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_QUOTA_BYTES": 3000}
    assert put(member, run, "a.bin", b"a" * 2000).status_code == 200
    refusal(put(member, run, "b.bin", b"b" * 1001), 400, "quota is 3,000", "2,000 are used",
            "TIDAL_ARTIFACT_QUOTA_BYTES")
    assert put(member, run, "a.bin", b"c" * 2900).status_code == 200  # a replacement gives its own room back
    assert put(member, run, "d.bin", b"d" * 100).status_code == 200
    refusal(put(member, run, "e.bin", b"e"), 400, "quota")
    # Another project has its own quota.
    services.artifact_put(run=other_run, path="theirs.bin", body=_body(b"t" * 3000))
    assert sorted(Artifact.objects.filter(run=run).values_list("path", "size")) == [("a.bin", 2900), ("d.bin", 100)]
    assert services.used_bytes(run.project_id) == 3000
    assert len(files_in(_artifacts_in_a_temporary_folder)) == 3 and not ArtifactUpload.objects.exists()


@pytest.mark.django_db
def test_multipart_refusals_leave_nothing(run, member, settings, _artifacts_in_a_temporary_folder):
    created = mpu(member, run, "create", {"path": "big.bin", "num_parts": 2}).json()
    first, second = (c["url"] for c in created["credentials"])
    forged = first.replace("signature=", "signature=0")
    refusal(member.generic("PUT", forged, b"part"), 403, "'signature'")
    refusal(member.generic("PUT", second.replace("/2?", "/3?"), b"part"), 403, "'signature'")  # another part's URL
    refusal(member.generic("POST", first, b"part"), 405)
    assert member.generic("PUT", first, b"part one").status_code == 200
    # Completing with a part that never arrived: refused, nothing stored, the upload still open.
    refusal(mpu(member, run, "complete", {"path": "big.bin", "upload_id": created["upload_id"],
                                          "parts": [{"part_number": 1}, {"part_number": 2}]}), 400, "[2]", "parts")
    refusal(mpu(member, run, "complete", {"path": "big.bin", "upload_id": created["upload_id"],
                                          "parts": [{"part_number": "one"}]}), 400, "'parts'")
    refusal(mpu(member, run, "complete", {"path": "other.bin", "upload_id": created["upload_id"],
                                          "parts": [{"part_number": 1}]}), 404)  # the upload is of big.bin
    assert not Artifact.objects.exists()
    # A part over the largest artifact, counting the parts before it.
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_MAX_BYTES": 12}
    refusal(member.generic("PUT", second, b"12345"), 413, "TIDAL_ARTIFACT_MAX_BYTES")
    # Over the quota as parts arrive: the part is refused.
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_MAX_BYTES": 1000, "ARTIFACT_QUOTA_BYTES": 10}
    refusal(member.generic("PUT", second, b"two"), 400, "quota is 10")
    # Over the quota at completion (another file took the room meanwhile): the whole upload is dropped.
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_QUOTA_BYTES": 20}
    assert member.generic("PUT", second, b"two").status_code == 200
    assert put(member, run, "meanwhile.bin", b"m" * 10).status_code == 200
    refusal(mpu(member, run, "complete", {"path": "big.bin", "upload_id": created["upload_id"],
                                          "parts": [{"part_number": 1}, {"part_number": 2}]}), 400, "quota is 20")
    refusal(member.generic("PUT", first, b"again"), 404, "No multipart upload")
    assert list(Artifact.objects.values_list("path", flat=True)) == ["meanwhile.bin"]
    assert not ArtifactUpload.objects.exists()
    assert list(files_in(_artifacts_in_a_temporary_folder)) == [
        f"projects/{run.project_id}/runs/{run.pk}/meanwhile.bin"]


def _body(data: bytes) -> services.Body:
    import io

    return services.Body(io.BytesIO(data).read, len(data))


@pytest.mark.django_db
def test_an_unreachable_store_is_a_503_the_client_retries_and_nothing_is_recorded(run, member, settings, monkeypatch):
    from tests.tracking.s3server import CREDENTIALS, free_port

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_URL": "s3://nowhere/artifacts",
                      "ARTIFACT_S3_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}  # nothing listens there
    response = put(member, run, "model.bin", b"weights")
    assert refusal(response, 503, "could not be reached") == "TEMPORARILY_UNAVAILABLE"
    assert response["Retry-After"]
    assert not Artifact.objects.exists() and not ArtifactUpload.objects.exists()
    created = mpu(member, run, "create", {"path": "big.bin", "num_parts": 1})
    assert refusal(created, 503) == "TEMPORARILY_UNAVAILABLE" and not ArtifactUpload.objects.exists()


@pytest.mark.django_db
def test_uploads_left_open_are_swept_with_their_parts(run, member, _artifacts_in_a_temporary_folder):
    from datetime import timedelta

    from django.utils import timezone

    stale = mpu(member, run, "create", {"path": "stale.bin", "num_parts": 2}).json()
    assert member.generic("PUT", stale["credentials"][0]["url"], b"part").status_code == 200
    fresh = mpu(member, run, "create", {"path": "fresh.bin", "num_parts": 1}).json()
    ArtifactUpload.objects.filter(pk=stale["upload_id"]).update(
        created_at=timezone.now() - services.UPLOAD_TTL - timedelta(minutes=1))
    assert any("/.uploads/" in f"/{key}" for key in files_in(_artifacts_in_a_temporary_folder))
    assert services.uploads_sweep() == 1
    assert list(ArtifactUpload.objects.values_list("pk", flat=True)) == [fresh["upload_id"]]
    assert not files_in(_artifacts_in_a_temporary_folder)  # the stale part is gone; the fresh upload has none yet
    refusal(member.generic("PUT", stale["credentials"][1]["url"], b"late"), 404, "No multipart upload")


@pytest.mark.django_db
def test_a_completion_tried_again_after_the_store_failed_counts_the_upload_once(run, member, settings, monkeypatch,
                                                                                _artifacts_in_a_temporary_folder):
    from tracking.artifacts import store as stores

    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_QUOTA_BYTES": 20}
    created = mpu(member, run, "create", {"path": "model.bin", "num_parts": 1}).json()
    assert member.generic("PUT", created["credentials"][0]["url"], b"x" * 12).status_code == 200
    real = stores.FileStore.complete

    def down_once(self, *args):
        monkeypatch.setattr(stores.FileStore, "complete", real)
        raise stores.StoreUnavailable("The artifact store could not be reached.")

    monkeypatch.setattr(stores.FileStore, "complete", down_once)
    body = {"path": "model.bin", "upload_id": created["upload_id"], "parts": [{"part_number": 1}]}
    assert refusal(mpu(member, run, "complete", body), 503) == "TEMPORARILY_UNAVAILABLE"
    assert mpu(member, run, "complete", body).status_code == 200  # 12 bytes of 20: its first reservation not again
    assert list(Artifact.objects.values_list("path", "size")) == [("model.bin", 12)]
    assert services.used_bytes(run.project_id) == 12 and not ArtifactUpload.objects.exists()


@pytest.mark.django_db
def test_a_part_of_an_upload_the_store_dropped_meanwhile_is_a_404(run, member, _artifacts_in_a_temporary_folder):
    import shutil

    created = mpu(member, run, "create", {"path": "model.bin", "num_parts": 1}).json()
    shutil.rmtree(_artifacts_in_a_temporary_folder / ".uploads")  # an abort racing this part
    refusal(member.generic("PUT", created["credentials"][0]["url"], b"part"), 404, "open any more")
    body = {"path": "model.bin", "upload_id": created["upload_id"], "parts": [{"part_number": 1}]}
    refusal(mpu(member, run, "complete", body), 404, "open any more")
    assert not Artifact.objects.exists()


@pytest.mark.django_db
def test_a_project_can_have_its_own_quota_set_by_staff(tenant, run, member, settings):
    from tenancy.models import Project
    from tenancy.services import project_save
    from tests.conftest import make_user

    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_QUOTA_BYTES": 10}
    project = Project.objects.get(pk=tenant.project.pk)
    project_save(actor=make_user("staff", is_staff=True), project=project, values={"artifact_quota_bytes": 100})
    assert put(member, run, "a.bin", b"a" * 90).status_code == 200  # over the default, within its own
    refusal(put(member, run, "b.bin", b"b" * 11), 400, "quota is 100", "the project's artifact quota", "90 are used")
    assert project.audit.latest("pk").changes == {"artifact_quota_bytes": [None, 100]}  # audited, as every setting
    assert list(Artifact.objects.values_list("path", flat=True)) == ["a.bin"]


@pytest.mark.django_db
def test_the_admin_consoles_project_form_holds_the_artifact_quota(tenant):
    from django.test import Client

    from tests.conftest import make_user

    staff = Client()
    staff.force_login(make_user("root", is_staff=True, is_superuser=True))
    page = staff.get(f"/admin/tenancy/project/{tenant.project.pk}/change/")
    assert page.status_code == 200 and 'name="artifact_quota_bytes"' in page.content.decode()


@pytest.mark.django_db
def test_a_file_cannot_take_a_folders_name_nor_go_under_a_file(run, member, _artifacts_in_a_temporary_folder):
    assert put(member, run, "ckpt/step-1/model.bin", b"weights").status_code == 200
    refusal(put(member, run, "ckpt", b"x"), 400, "'path'", "a folder")
    refusal(put(member, run, "ckpt/step-1", b"x"), 400, "'path'", "a folder")
    refusal(put(member, run, "ckpt/step-1/model.bin/extra", b"x"), 400, "'path'", "is a file")
    refusal(mpu(member, run, "create", {"path": "step-1", "num_parts": 1}, "/ckpt"), 400, "'path'", "a folder")
    assert put(member, run, "ckpt/step-1/model.bin", b"weights, again").status_code == 200  # a file replaces a file
    assert list(Artifact.objects.values_list("path", "size")) == [("ckpt/step-1/model.bin", 14)]
    assert list(files_in(_artifacts_in_a_temporary_folder).values()) == [b"weights, again"]
    assert not ArtifactUpload.objects.exists()


@pytest.mark.django_db
def test_a_deleted_runs_files_leave_the_store_once_the_deletion_commits(tenant, run, other_run,
                                                                      django_capture_on_commit_callbacks,
                                                                      _artifacts_in_a_temporary_folder):
    from tracking.models import Run

    services.artifact_put(run=run, path="ckpt/model.bin", body=_body(b"weights"))
    services.artifact_put(run=other_run, path="theirs.bin", body=_body(b"kept"))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        Run.objects.filter(pk=run.pk).delete()
    assert len(files_in(_artifacts_in_a_temporary_folder)) == 2  # nothing before the commit
    for callback in callbacks:
        callback()
    assert list(files_in(_artifacts_in_a_temporary_folder).values()) == [b"kept"]
    assert list(Artifact.objects.values_list("path", flat=True)) == ["theirs.bin"]
