"""The run page's artifacts: the list with sizes, previews of images, text, JSON and CSV, downloads; another
tenant's run or a path the run lacks is a 404, and a logged HTML file is never served as a page."""

from __future__ import annotations

import io

import pytest
from django.test import Client

from tracking.artifacts import services

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")


def log(run, path: str, data: bytes) -> None:
    services.artifact_put(run=run, path=path, body=services.Body(io.BytesIO(data).read, len(data)))


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def logged(run):
    log(run, "plots/loss.png", PNG)
    log(run, "config/train.yaml", b"lr: 0.001\nname: <script>alert(1)</script>\n")
    log(run, "metrics/summary.json", b'{"accuracy":0.91,"classes":["cat","dog"]}')
    log(run, "eval/scores.csv", b"step,loss,acc\n0,2.5,0.1\n100,1.25,0.5\n")
    log(run, "checkpoints/model.bin", b"\x00" * 2048)
    log(run, "report.html", b"<html><script>document.cookie</script></html>")
    return run


@pytest.mark.django_db
def test_the_run_page_lists_artifacts_with_sizes_and_links(tenant, logged):
    page = browser(tenant.users["viewer"]).get(f"/runs/{logged.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="run-artifacts"' in html
    assert "6 files, 2.2\xa0KB" in html
    for path in ("checkpoints/model.bin", "config/train.yaml", "eval/scores.csv", "metrics/summary.json",
                 "plots/loss.png", "report.html"):
        assert f"<code>{path}</code>" in html
        assert f'href="/runs/{logged.pk}/artifacts/download/{path}"' in html
    assert f"/runs/{logged.pk}/artifacts/preview/plots/loss.png" in html
    assert f"/runs/{logged.pk}/artifacts/preview/checkpoints/model.bin" not in html  # nothing to preview
    assert "2.0\xa0KB" in html  # model.bin's size


@pytest.mark.django_db
def test_a_run_without_artifacts_says_so(tenant, run):
    html = browser(tenant.users["viewer"]).get(f"/runs/{run.pk}/").content.decode()
    assert "No artifacts logged." in html and 'id="run-artifacts"' not in html


@pytest.mark.django_db
def test_previews_show_images_text_json_and_csv(tenant, logged):
    client = browser(tenant.users["viewer"])
    base = f"/runs/{logged.pk}/artifacts"
    image = client.get(f"{base}/preview/plots/loss.png").content.decode()
    assert f'<img src="{base}/download/plots/loss.png?inline=1"' in image
    text = client.get(f"{base}/preview/config/train.yaml").content.decode()
    assert "lr: 0.001" in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>alert" not in text
    summary = client.get(f"{base}/preview/metrics/summary.json").content.decode()
    assert '"accuracy": 0.91,\n  "classes": [' in summary.replace("&quot;", '"')
    table = client.get(f"{base}/preview/eval/scores.csv").content.decode()
    assert "<th>step</th><th>loss</th><th>acc</th>" in table and "<td>100</td><td>1.25</td><td>0.5</td>" in table


@pytest.mark.django_db
def test_downloads_stream_the_bytes_as_attachments_and_only_images_inline(tenant, logged):
    client = browser(tenant.users["viewer"])
    base = f"/runs/{logged.pk}/artifacts/download"
    response = client.get(f"{base}/checkpoints/model.bin")
    assert b"".join(response.streaming_content) == b"\x00" * 2048
    assert response["Content-Length"] == "2048"
    assert response["Content-Disposition"] == 'attachment; filename="model.bin"'
    html = client.get(f"{base}/report.html?inline=1")  # a page of Tidal's origin it must never become
    assert html["Content-Type"] == "application/octet-stream" and html["Content-Disposition"].startswith("attachment")
    image = client.get(f"{base}/plots/loss.png?inline=1")
    assert image["Content-Type"] == "image/png" and image["Content-Disposition"].startswith("inline")
    assert b"".join(image.streaming_content) == PNG


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["download/plots/loss.png", "preview/plots/loss.png"])
def test_another_tenants_run_and_a_missing_path_are_404(tenant, logged, address):
    outsider = browser(tenant.users["outsider"])
    response = outsider.get(f"/runs/{logged.pk}/artifacts/{address}")
    assert response.status_code == 404 and PNG not in response.content
    assert browser(tenant.users["viewer"]).get(f"/runs/{logged.pk}/artifacts/{address}").status_code == 200
    viewer = browser(tenant.users["viewer"])
    assert viewer.get(f"/runs/{logged.pk}/artifacts/{address.replace('loss', 'nothing')}").status_code == 404
    assert viewer.get(f"/runs/{logged.pk}/artifacts/{address.split('/')[0]}/../../etc/passwd").status_code == 404


@pytest.mark.django_db
def test_a_file_name_beyond_ascii_downloads_under_its_name(tenant, run):
    log(run, "résultats/courbe d'été.csv", b"a,b\n1,2\n")
    client = browser(tenant.users["viewer"])
    html = client.get(f"/runs/{run.pk}/").content.decode()
    link = f"/runs/{run.pk}/artifacts/download/r%C3%A9sultats/courbe%20d'%C3%A9t%C3%A9.csv"
    shown = link.replace("'", "&#x27;")  # the quote escaped in HTML, which the browser reads back
    assert f'href="{shown}"' in html
    response = client.get(link)
    assert b"".join(response.streaming_content) == b"a,b\n1,2\n"
    assert response["Content-Disposition"] == "attachment; filename*=utf-8''courbe%20d%27%C3%A9t%C3%A9.csv"
