"""Accept YAML request bodies (e.g. `tidal submit job.yaml`) with errors that name the line."""

from __future__ import annotations

import yaml
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser


class YAMLParser(BaseParser):
    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = yaml.safe_load(stream.read().decode("utf-8"))
        except UnicodeDecodeError:
            raise ParseError("The body is not UTF-8 text.") from None
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(error, "problem", None) or "could not parse"
            raise ParseError(f"Invalid YAML{where}: {problem}.") from None
        if not isinstance(data, dict):
            raise ParseError("The YAML document must be a mapping of field names to values.")
        return data
