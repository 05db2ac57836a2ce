"""Job files: read a YAML spec locally (errors name the line), and find the line of a field the server rejected."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tidal_cli.client import CliError
from tidal_cli.digits import is_digits

MAX_BYTES = 1_000_000


class JobFileError(CliError):
    """The job file cannot be read or parsed: nothing was sent."""

    code = "bad_job_file"


@dataclass
class JobFile:
    path: str
    text: str
    spec: dict[str, Any]

    def line_of(self, field: str) -> int | None:
        """1-based line of a dotted field path such as `groups[0].flavor`, or of its closest existing parent."""
        try:
            node = yaml.compose(self.text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            return None
        line = None
        for part in re.findall(r"[^.\[\]]+", field):
            if isinstance(node, yaml.MappingNode):
                match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
                if match is None:
                    break
                line, node = match[0].start_mark.line + 1, match[1]
            elif isinstance(node, yaml.SequenceNode) and is_digits(part) and int(part) < len(node.value):
                node = node.value[int(part)]
                line = node.start_mark.line + 1
            else:
                break
        return line


def _yaml_problem(path: str, error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{path}{where}: invalid YAML: {problem}"


def load(path: str) -> JobFile:
    file = Path(path)
    if path == "-":
        import sys

        text = sys.stdin.read()
    else:
        if not file.exists():
            raise JobFileError(f"{path}: no such file")
        if file.is_dir():
            raise JobFileError(f"{path}: is a directory, not a job file")
        if file.stat().st_size > MAX_BYTES:
            raise JobFileError(f"{path}: larger than {MAX_BYTES // 1000} kB, not a job file")
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise JobFileError(f"{path}: not UTF-8 text") from None
        except OSError as error:
            raise JobFileError(f"{path}: cannot read it ({error.strerror})") from None
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise JobFileError(_yaml_problem(path, error)) from None
    if spec is None:
        raise JobFileError(f"{path}: the file is empty")
    if not isinstance(spec, dict):
        raise JobFileError(f"{path} line 1: a job file is a mapping of field names to values (name, image, "
                           f"command, groups, ...), not a {type(spec).__name__}")
    return JobFile(path=path, text=text, spec=spec)
