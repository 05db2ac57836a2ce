"""Reads of a run's artifacts, from their rows (never the store): a folder's entries, one file, the page's list.
The run is already one the caller may see (tracking.selectors, tracking.mlflow.selectors)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Sum

from tracking.models import Artifact, Run


@dataclass(frozen=True)
class Entry:
    """A file or a folder directly inside a folder of a run's artifacts; a folder's size is None."""

    path: str  # from the run's artifact root
    is_dir: bool
    size: int | None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def entries(run: Run, folder: str) -> list[Entry]:
    """What `folder` ('' the root) holds directly, folders and files, by path. A run's files are read once, with
    their paths and sizes only: 10,000 files list in a few milliseconds."""
    prefix = f"{folder}/" if folder else ""
    rows = Artifact.objects.filter(run=run)
    if prefix:
        rows = rows.filter(path__startswith=prefix)
    found: dict[str, Entry] = {}
    for path, size in rows.values_list("path", "size").iterator(chunk_size=5000):
        head, slash, _ = path[len(prefix):].partition("/")
        if slash:
            found.setdefault(head, Entry(prefix + head, True, None))
        else:
            found[head] = Entry(path, False, size)
    return [found[name] for name in sorted(found)]


def artifact_at(run: Run, path: str) -> Artifact | None:
    return Artifact.objects.filter(run=run, path=path).first()


def is_folder(run: Run, path: str) -> bool:
    return Artifact.objects.filter(run=run, path__startswith=f"{path}/").exists()


def files(run: Run, limit: int) -> list[Artifact]:
    """The run's files by path, at most `limit` (the run page's list)."""
    return list(Artifact.objects.filter(run=run).order_by("path").only("path", "size", "updated_at")[:limit])


def totals(run: Run) -> tuple[int, int]:
    """How many files a run has and their bytes."""
    found = Artifact.objects.filter(run=run).aggregate(count=Count("id"), size=Sum("size"))
    return found["count"], found["size"] or 0
