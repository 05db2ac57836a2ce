"""A thin HTTP client for the Tidal API that turns every error body into one readable message."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx

CONFIG_PATH = Path(os.environ.get("TIDAL_CONFIG", Path.home() / ".config" / "tidal" / "config.json"))


class CliError(Exception):
    """Printed to stderr as is; the command exits with status 1."""


def load_config() -> dict[str, str]:
    config: dict[str, str] = {}
    if CONFIG_PATH.exists():
        config = json.loads(CONFIG_PATH.read_text())
    # The environment wins, so scripts and CI need no config file.
    for key, env in (("url", "TIDAL_URL"), ("token", "TIDAL_TOKEN"), ("project", "TIDAL_PROJECT")):
        if os.environ.get(env):
            config[key] = os.environ[env]
    return config


def save_config(config: dict[str, str]) -> None:
    CONFIG_PATH.parent.mkdir(parents=True, exist_ok=True)
    CONFIG_PATH.write_text(json.dumps(config, indent=2))
    CONFIG_PATH.chmod(0o600)  # it holds a secret


def describe_error(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200]}"
    fields = error.get("fields") or {}
    details = "; ".join(f"{name}: {' '.join(reasons)}" for name, reasons in fields.items())
    return f"{error.get('message', 'error')}" + (f" ({details})" if details and len(fields) > 1 else "")


class Api:
    def __init__(self, url: str, token: str, timeout: float = 30.0):
        self.http = httpx.Client(
            base_url=url.rstrip("/") + "/api/v1/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
        )

    @classmethod
    def from_config(cls) -> Api:
        config = load_config()
        if not config.get("url") or not config.get("token"):
            raise CliError(
                "Not logged in: run `tidal login --url URL --token TOKEN` (or set TIDAL_URL and TIDAL_TOKEN)."
            )
        return cls(config["url"], config["token"])

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise CliError(f"Cannot reach Tidal at {self.http.base_url}: {error}") from None
        if response.status_code >= 400:
            raise CliError(describe_error(response))
        return response.json() if response.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def all_pages(self, path: str, **params: Any) -> list[dict]:
        """Every row of a paginated list."""
        rows: list[dict] = []
        page = 1
        while True:
            body = self.get(path, page=page, page_size=200, **params)
            rows.extend(body["results"])
            if not body.get("next"):
                return rows
            page += 1
