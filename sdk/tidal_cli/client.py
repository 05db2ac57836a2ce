"""A thin HTTP client for the Tidal API that turns every error into one readable line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tidal_cli.digits import is_digits


class CliError(Exception):
    """Printed to stderr as one line (`tidal: <message>`), or with --json as one JSON object (`as_json`); the
    command exits with `exit_status`. `code` is stable for scripts; `status` is the HTTP status when the server
    answered."""

    code = "error"
    exit_status = 1

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        if code:
            self.code = code
        self.status = status
        self.fields = fields or {}

    def text(self) -> str:
        return f"tidal: {self}"

    def as_json(self) -> dict[str, Any]:
        """The API's error shape, plus the HTTP status (None when the server never answered)."""
        return {"error": {"code": self.code, "message": str(self), "fields": self.fields, "status": self.status}}

    def reworded(self, message: str) -> CliError:
        """The same error (code, status, fields) told in the command's own words."""
        return type(self)(message, code=self.code, status=self.status, fields=self.fields)


class UsageError(CliError):
    """Wrong arguments: exit status 2, as for argparse's own usage errors."""

    code = "usage"
    exit_status = 2


class ApiError(CliError):
    """An HTTP error answer from the server: the status, its stable code, the fields it names, and for a 429 the
    seconds its Retry-After asks to wait."""

    status: int  # an answer's: never None here

    def __init__(self, message: str, *, status: int, code: str | None = None,
                 fields: dict[str, list[str]] | None = None, retry_after: float | None = None):
        super().__init__(message, code=code, status=status, fields=fields)
        self.retry_after = retry_after

    def reworded(self, message: str) -> ApiError:
        return ApiError(message, status=self.status, code=self.code, fields=self.fields, retry_after=self.retry_after)


def config_path() -> Path:
    """Read on every call, so TIDAL_CONFIG set after import (tests, wrappers) still counts."""
    return Path(os.environ.get("TIDAL_CONFIG") or Path.home() / ".config" / "tidal" / "config.json")


def load_config() -> dict[str, str]:
    config: dict[str, str] = {}
    path = config_path()
    if path.exists():
        try:
            config = json.loads(path.read_text())
        except ValueError:
            raise CliError(f"{path} is not valid JSON: fix it or run `tidal login` again.", code="bad_config") from None
    # The environment wins, so scripts and CI need no config file.
    for key, env in (("url", "TIDAL_URL"), ("token", "TIDAL_TOKEN"), ("project", "TIDAL_PROJECT")):
        if os.environ.get(env):
            config[key] = os.environ[env]
    return config


def save_config(config: dict[str, str]) -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)  # it holds a secret


def _field_details(message: str, fields: dict[str, list[str]]) -> str:
    """The named fields the message does not already mention, e.g. `groups[0].flavor: Unknown flavor`."""
    parts = []
    for name, reasons in fields.items():
        text = " ".join(str(r) for r in reasons)
        if message.startswith(f"{name}:"):
            continue
        parts.append(f"field {name}" if text == message else f"{name}: {text}")
    return f" ({'; '.join(parts)})" if parts else ""


def error_from_response(response: httpx.Response) -> ApiError:
    status = response.status_code
    try:
        error = response.json()["error"]
        message = str(error.get("message") or "error")
        code, fields = str(error.get("code") or ""), dict(error.get("fields") or {})
    except (ValueError, KeyError, TypeError, AttributeError):
        url = response.request.url.copy_with(query=None)
        if status >= 500:
            why = "the server failed; its logs say why" if status == 500 else "the server or a proxy is unavailable"
        else:
            why = "not an answer of the Tidal API: is the server URL right?"
        return ApiError(f"HTTP {status} {response.reason_phrase} from {url} ({why})", status=status,
                        code="server_error" if status >= 500 else "bad_response")
    if status == 401:
        message = f"The server rejected your token ({message}). Log in again: tidal login --token TOKEN"
    elif code == "read_only_token":
        message += " Log in with a token that can write: tidal login --token TOKEN"
    wait = response.headers.get("Retry-After", "")
    return ApiError(message + _field_details(message, fields), status=status, code=code, fields=fields,
                    retry_after=float(wait) if is_digits(wait) else None)


class Api:
    _open: list[Api] = []

    def __init__(self, url: str, token: str, timeout: float = 30.0):
        Api._open.append(self)
        self.url = url.rstrip("/")
        self.http = httpx.Client(
            base_url=self.url + "/api/v1/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                     "User-Agent": "tidal-cli/0.1"},
            timeout=timeout,
        )

    @classmethod
    def close_all(cls) -> None:
        """Close keep-alive connections when a command ends (main() may run many times in one process)."""
        while cls._open:
            cls._open.pop().http.close()

    @classmethod
    def from_config(cls) -> Api:
        config = load_config()
        if not config.get("url") or not config.get("token"):
            raise CliError(
                "Not logged in: run `tidal login --url URL --token TOKEN` (or set TIDAL_URL and TIDAL_TOKEN).",
                code="not_logged_in",
            )
        return cls(config["url"], config["token"])

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        """Transport failures as one readable CliError."""
        try:
            yield
        except httpx.ConnectError as error:
            raise CliError(f"Cannot connect to Tidal at {self.url} ({error}). Is the server running and the URL "
                           "right? (tidal login --url URL, or TIDAL_URL)", code="unreachable") from None
        except httpx.TimeoutException:
            raise CliError(f"Tidal at {self.url} did not answer within {self.http.timeout.read}s.",
                           code="timeout") from None
        except httpx.HTTPError as error:
            raise CliError(f"Cannot reach Tidal at {self.url}: {error}", code="unreachable") from None

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        with self._reaching():
            response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise error_from_response(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise CliError(f"{self.url} answered {method} {path} with something that is not JSON: is it a Tidal "
                           "server?", code="bad_response", status=response.status_code) from None

    def stream_lines(self, path: str, **params: Any) -> Iterator[str]:
        """GET a text/plain stream and yield its lines as they arrive. No read timeout: a followed log may be quiet
        for a long time; the server bounds the stream's duration."""
        query = {k: v for k, v in params.items() if v is not None}
        with self._reaching(), self.http.stream(
                "GET", path, params=query, headers={"Accept": "text/plain, application/json"},
                timeout=httpx.Timeout(self.http.timeout.connect, read=None)) as response:
            if response.status_code >= 400:
                response.read()
                raise error_from_response(response)
            yield from response.iter_lines()

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None) -> Any:
        if body is None:
            return self.request("POST", path)
        # default=str: YAML dates and the like travel as text, the server validates them.
        content = json.dumps(body, default=str).encode()
        return self.request("POST", path, content=content, headers={"Content-Type": "application/json"})

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        content = json.dumps(body, default=str).encode()
        return self.request("PATCH", path, content=content, headers={"Content-Type": "application/json"})

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def all_pages(self, path: str, limit: int | None = None, **params: Any) -> list[dict]:
        """Every row of a paginated list (or the first `limit` rows)."""
        rows: list[dict] = []
        page = 1
        while True:
            body = self.get(path, page=page, page_size=200 if limit is None else min(limit, 200), **params)
            rows.extend(body["results"])
            if not body.get("next") or (limit is not None and len(rows) >= limit):
                return rows if limit is None else rows[:limit]
            page += 1
