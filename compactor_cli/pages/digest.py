"""What the dataset page shows, gathered item by item in constant memory: a page for 100,000
conversations is made of aggregates and top lists, never one row per conversation.

The sample of points for the before/after chart is a bottom-k sketch over a hash of each
conversation's place (file:line): the same conversations are drawn whatever order the items
come in (a local run, -j N, a Ray run, a report read back), and it needs no random state to
survive a resumed run."""

from __future__ import annotations

import heapq
import zlib
from dataclasses import dataclass, field
from typing import Any

from ..status import Status

#: reclaimed_fraction histogram: 20 bins of 5% over [0, 1].
FRACTION_BINS = 20
#: Points drawn on the before/after chart, conversations in the largest list, rows in each problem list.
SAMPLE_POINTS = 1000
LARGEST = 20
LISTED = 200

FAILED_STATUSES = frozenset(s.value for s in Status if s.failed)


def _where(item: dict[str, Any]) -> str:
    """file:line, as text JSON and the page can hold (a name's bytes that are not UTF-8 become U+FFFD)."""
    line = item.get("line")
    where = f"{item.get('source')}:{line}" if line is not None else str(item.get("source"))
    return where.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _size(item: dict[str, Any], key: str) -> int | None:
    """tokens_KEY when counted, else the estimated length (characters)."""
    value = item.get(f"tokens_{key}")
    if value is None:
        value = item.get(f"length_{key}")
    return value if isinstance(value, int) else None


def _rank(row: list[Any]) -> tuple[int, str]:
    """An offender's place in the list: the largest first (a report read back may hold anything
    as the size), then by where it is."""
    size = row[1] if isinstance(row[1], int) and not isinstance(row[1], bool) else -1
    return -size, str(row[0])


@dataclass
class DatasetDigest:
    """Aggregates of a run's report items (``add``), serialisable for a resumed run (``state``)."""

    fraction_bins: list[int] = field(default_factory=lambda: [0] * FRACTION_BINS)
    sample: list[list[Any]] = field(default_factory=list)  # heap of [-hash, where, before, after, status]
    largest: list[list[Any]] = field(default_factory=list)  # heap of [before, where, after, status]
    failures: list[list[Any]] = field(default_factory=list)  # [where, status, error]
    failure_count: int = 0
    warnings: list[list[Any]] = field(default_factory=list)  # [where, first warning, count]
    warning_records: int = 0
    offenders: list[list[Any]] = field(default_factory=list)  # [where, size, unit, threshold]: the largest
    offender_count: int = 0
    threshold: Any = None  # the threshold and its unit the items were measured against (--check, compact)
    threshold_unit: str | None = None
    sized: int = 0  # conversations with a size before and after (the sample is drawn from them)

    def add(self, item: dict[str, Any]) -> None:
        status = str(item.get("status"))
        where = _where(item)
        if status in FAILED_STATUSES or item.get("error"):
            self.failure_count += 1
            if len(self.failures) < LISTED:
                self.failures.append([where, status, str(item.get("error") or "")])
        warnings = item.get("warnings") or []
        if warnings:
            self.warning_records += 1
            if len(self.warnings) < LISTED:
                self.warnings.append([where, str(warnings[0]), int(item.get("warning_count") or len(warnings))])
        if isinstance(item.get("threshold"), int) and not isinstance(item.get("threshold"), bool):
            self.threshold = item["threshold"]
            self.threshold_unit = str(item.get("threshold_unit") or "tokens")
        if status == "OVER_THRESHOLD":
            self.offender_count += 1
            row = [where, item.get("size_before"), item.get("threshold_unit") or "tokens", item.get("threshold")]
            if len(self.offenders) < LISTED:
                self.offenders.append(row)
            else:  # the largest LISTED are kept (a page leads with them)
                last = max(range(len(self.offenders)), key=lambda j: _rank(self.offenders[j]))
                if _rank(row) < _rank(self.offenders[last]):
                    self.offenders[last] = row
        fraction = item.get("reclaimed_fraction")
        if isinstance(fraction, (int, float)) and status != "INVALID_INPUT":
            self.fraction_bins[min(FRACTION_BINS - 1, max(0, int(fraction * FRACTION_BINS)))] += 1
        before, after = _size(item, "before"), _size(item, "after")
        if before is None or after is None or status == "INVALID_INPUT":
            return
        self.sized += 1
        entry = [before, where, after, status]
        if len(self.largest) < LARGEST:
            heapq.heappush(self.largest, entry)
        elif before > self.largest[0][0]:
            heapq.heapreplace(self.largest, entry)
        h = zlib.crc32(where.encode("utf-8", "surrogatepass"))
        point = [-h, where, before, after, status]
        if len(self.sample) < SAMPLE_POINTS:
            heapq.heappush(self.sample, point)
        elif -h > self.sample[0][0]:  # a smaller hash than the largest kept
            heapq.heapreplace(self.sample, point)

    def largest_offenders(self) -> list[list[Any]]:
        """The conversations over the threshold that the page lists, largest first."""
        return sorted(self.offenders, key=_rank)

    def largest_first(self) -> list[dict[str, Any]]:
        return [{"where": w, "before": b, "after": a, "status": s} for b, w, a, s in sorted(self.largest, reverse=True)]

    def points(self) -> list[tuple[int, int, str]]:
        """(before, after, status) of the sampled conversations, in a stable order."""
        return [(b, a, s) for _, _, b, a, s in sorted(self.sample, key=lambda p: (-p[0], p[1]))]

    def state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> DatasetDigest:
        digest = cls()
        for name, value in (state or {}).items():
            if name in cls.__dataclass_fields__:
                setattr(digest, name, value)
        return digest
