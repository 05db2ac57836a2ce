"""Times, durations and usage bars as a person reads them: `in 1h 20m`, `5m ago`, `[###+..|  ]`."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def duration(seconds: float | None) -> str:
    """Two largest units: 90061 -> `1d 1h`, 3900 -> `1h 5m`, 42 -> `42s`."""
    if seconds is None:
        return "-"
    seconds = int(round(abs(seconds)))
    units = [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)]
    parts: list[str] = []
    for name, size in units:
        if seconds >= size or (name == "s" and not parts):
            parts.append(f"{seconds // size}{name}")
            seconds %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def relative(value: str | None, now: datetime | None = None) -> str:
    """`in 1h 5m` for the future, `3m ago` for the past, `-` for nothing."""
    moment = parse_time(value)
    if moment is None:
        return "-"
    delta = (moment - (now or datetime.now(UTC))).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(delta)} ago"


def eta(value: str | None, now: datetime | None = None) -> str:
    """A start estimate: `unknown` when the scheduler has none, `any moment` when it is already due."""
    moment = parse_time(value)
    if moment is None:
        return "unknown"
    if moment <= (now or datetime.now(UTC)):
        return "any moment"
    return relative(value, now)


NO_EARLIER = "no earlier than"  # the scheduler's eta_note when its eta is a bound


def estimate(waiting: dict | None, now: datetime | None = None) -> str:
    """A waiting job's estimated start with its range: `in 25m (range 10m-1h 5m)`, `in 25m (range 10m or later)`;
    `no earlier than 3h from now` when the forecast did not reach it; else why it has none (`beyond 24 h`, `no
    runtime known`, ...), or `unknown`."""
    waiting = waiting or {}
    note = waiting.get("eta_note") or ""
    if not waiting.get("eta"):
        return note or "unknown"
    now = now or datetime.now(UTC)

    def ahead(key: str) -> str:
        moment = parse_time(waiting.get(key))
        return duration((moment - now).total_seconds()) if moment and moment > now else "now"

    if note == NO_EARLIER:
        bound = ahead("eta")
        return "any moment" if bound == "now" else f"{NO_EARLIER} {bound} from now"
    text = eta(waiting["eta"], now)
    if not waiting.get("eta_low"):
        return text
    if not waiting.get("eta_high"):
        return f"{text} (range {ahead('eta_low')} or later)"
    low, high = ahead("eta_low"), ahead("eta_high")
    return text if low == high else f"{text} (range {low}-{high})"


def timestamp(value: str | None) -> str:
    """A local, second-precision time for timelines: `2025-01-31 14:05:09`."""
    moment = parse_time(value)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def usage_bar(guaranteed: int, borrow_limit: int | None, used: int, borrowed: int, lent: int, width: int = 20) -> str:
    """`[####~~..|++    ]`: inside the guarantee `#` used, `~` lent to others, `.` free; after `|` the borrowable
    part, `+` borrowed. Scaled to guarantee + borrow limit (or to use, when that is larger)."""
    borrow_limit = borrow_limit or 0
    total = max(guaranteed + borrow_limit, used, 1)

    def cells(amount: int) -> int:
        return round(amount * width / total)

    own = min(used - borrowed, guaranteed)
    borrowed = max(borrowed, used - own)  # use above guarantee + borrow limit (a lowered quota) shows as well
    lent = min(lent, max(guaranteed - own, 0))
    inside = cells(guaranteed)
    used_cells, lent_cells = min(cells(own), inside), cells(lent)
    lent_cells = min(lent_cells, inside - used_cells)
    left = "#" * used_cells + "~" * lent_cells + "." * (inside - used_cells - lent_cells)
    outside = max(width - inside, cells(borrowed))
    right = ("+" * min(cells(borrowed), outside)).ljust(outside)
    return f"[{left}|{right}]" if guaranteed and (borrow_limit or borrowed) else f"[{left}{right}]"
