"""The local spool: requests that could not reach the server, kept as JSON lines until they can.

One file per server, run and process: `<dir>/<server hash>-run<id>-<pid>.jsonl`, one record a line (a log-batch
body, or a status change). A sender claims a file by renaming it (`...-<pid>.<n>.sending`), so two processes never
send the same file at once; it claims its own files and those of processes that are gone. What it fails to send
goes back into its own file, before what was spooled meanwhile (`put_back`: the requests keep the order they were
made in, so a run's status never goes before its points), so nothing is lost, and since the server keeps one point
per (run, key, step, attempt) a record sent twice changes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("tidal")
Record = dict[str, Any]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    except OSError:
        return False
    return True


class Spool:
    """The spool files of one run on one server."""

    _claims = itertools.count()

    def __init__(self, directory: Path, url: str, run_id: int) -> None:
        self.directory = directory
        server = hashlib.sha256(url.encode()).hexdigest()[:12]
        self.prefix = f"{server}-run{run_id}-"
        self.pid = os.getpid()
        # This process's file is written by the training thread (a full queue spills) and the sender's: one at a
        # time, so a put-back's rewrite never loses an append made meanwhile.
        self.writing = threading.Lock()

    @property
    def path(self) -> Path:
        """This process's file (the pid is read each time: a forked child writes its own)."""
        return self.directory / f"{self.prefix}{os.getpid()}.jsonl"

    def append(self, records: list[Record]) -> bool:
        """Add records to this process's file; False (and a warning) when the disk refuses."""
        if not records:
            return True
        try:
            with self.writing:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as out:
                    out.write(_lines(records))
        except OSError as error:
            log.warning("tidal: cannot write the spool file %s (%s): %d records are lost", self.path, error,
                        len(records))
            return False
        return True

    def put_back(self, records: list[Record]) -> bool:
        """Put records a sender claimed and could not send back into this process's file, before what it holds:
        they were made before anything spooled since they were claimed. False (and a warning) when the disk
        refuses."""
        if not records:
            return True
        path = self.path
        staged = path.with_name(path.name + ".new")
        try:
            with self.writing:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                held = path.read_text(encoding="utf-8") if path.exists() else ""
                fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(_lines(records) + held)
                os.replace(staged, path)
        except OSError as error:
            log.warning("tidal: cannot write the spool file %s (%s): %d records are lost", path, error, len(records))
            return False
        return True

    def _owner(self, path: Path) -> tuple[int, bool] | None:
        """(pid, claimed) of a spool file of this run, from its name."""
        match = re.fullmatch(re.escape(self.prefix) + r"(\d+)(\.jsonl|\.\d+\.sending)", path.name)
        return (int(match.group(1)), match.group(2) != ".jsonl") if match else None

    def files(self) -> list[Path]:
        """Every spool file of this run, claimed or not."""
        try:
            return sorted(p for p in self.directory.glob(f"{self.prefix}*") if self._owner(p))
        except OSError:
            return []

    def pending(self) -> bool:
        """Whether this process's own file holds records."""
        try:
            return self.path.stat().st_size > 0
        except OSError:
            return False

    def claim(self) -> list[Path]:
        """Take the files this process may send: its own, and those of processes that are gone (also files they
        had claimed and not finished)."""
        claimed = []
        me = os.getpid()
        for path in self.files():
            pid, was_claimed = self._owner(path) or (0, False)
            if (pid == me and was_claimed) or (pid != me and _alive(pid)):
                continue
            target = path.with_name(f"{self.prefix}{me}.{next(self._claims)}.sending")
            try:
                path.rename(target)
            except OSError:  # another process claimed it first
                continue
            claimed.append(target)
        return claimed

    @staticmethod
    def read(path: Path) -> list[Record]:
        """The records of a claimed file; a line cut short by a crash is skipped."""
        records = []
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    @staticmethod
    def remove(path: Path) -> None:
        with contextlib.suppress(OSError):
            path.unlink()


def _lines(records: list[Record]) -> str:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
