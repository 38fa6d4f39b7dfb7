"""Pacing by the provider's own rate-limit headers, before any 429 comes.

OpenAI sends `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (reset as a duration: "17ms", "1.5s",
"6m0s"); Anthropic sends `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (reset as an RFC 3339
time). Both describe a token bucket: its size, what is left, and when it is full again, so it refills at
(limit - remaining) / reset per second. The headers are read off every HTTP response by an httpx event hook
(`event_hooks()`, installed in the SDK's client) into the attempt that made the call (`capture_headers()`),
so no adapter has to unpack raw responses. `BucketMirror` keeps the client's copy of the provider's bucket:
re-synced from the newest report, drained by every call started since.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import contextvars
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_GO_PART = re.compile(r"([0-9]*\.?[0-9]+)(ms|us|µs|ns|h|m|s)")


def parse_duration(text: str) -> float | None:
    """Seconds in a Go-style duration ("6m0s", "1.5s", "250ms", "1h2m3s"); None if it is not one."""
    text = text.strip()
    parts = _GO_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def parse_reset_time(text: str, now: datetime | None = None) -> float | None:
    """Seconds from now until an RFC 3339 time ("2026-12-01T10:00:00Z"), negative if it has passed; None if
    it is not one."""
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        return None
    return (at - (now or datetime.now(UTC))).total_seconds()


@dataclass(frozen=True)
class Quota:
    """One rate-limit dimension as a response reported it: bucket size, what is left, seconds until full."""

    limit: float
    remaining: float
    reset_s: float
    absolute: bool = False  # the reset came as a time of day: seconds from when it was read (maybe < 0)

    def as_of(self, seconds_ago: float) -> Quota:
        """The same report with an absolute reset counted from `seconds_ago` (when the call was admitted)."""
        if not self.absolute:
            return self
        return Quota(self.limit, self.remaining, max(0.0, self.reset_s + max(0.0, seconds_ago)))

    @property
    def refill_bounds(self) -> tuple[float, float] | None:
        """The refill rate per second this report allows, as (low, high): `remaining` is a whole number
        rounded down, so between it and one more is left; None when nothing is used or no time is given."""
        used = self.limit - self.remaining
        if used <= 0 or self.reset_s <= 0:
            return None
        return max(0.0, used - 1) / self.reset_s, used / self.reset_s


@dataclass(frozen=True)
class RateLimitReport:
    """The request and token quotas one response reported (either may be absent)."""

    requests: Quota | None = None
    tokens: Quota | None = None


def _number(raw: Any) -> float | None:
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


def _quota(headers: Mapping[str, str], names: tuple[str, ...], now: datetime | None) -> Quota | None:
    limit, remaining, reset = (headers.get(n) for n in names)
    limit_n, remaining_n = _number(limit), _number(remaining)
    if limit_n is None or remaining_n is None or not reset or limit_n <= 0 or remaining_n < 0:
        return None  # absent, or Azure's -1 placeholders
    reset_s = parse_duration(reset)
    if reset_s is None:
        reset_s = _number(reset)
    if reset_s is not None:
        return Quota(limit_n, min(remaining_n, limit_n), reset_s)
    at = parse_reset_time(reset, now)
    return None if at is None else Quota(limit_n, min(remaining_n, limit_n), at, absolute=True)


def parse_rate_limit_headers(headers: Mapping[str, str] | None, now: datetime | None = None
                             ) -> RateLimitReport | None:
    """The OpenAI or Anthropic rate-limit headers of a response; None when it carries neither."""
    if not headers:
        return None
    found = {}
    for dim in ("requests", "tokens"):
        openai = tuple(f"x-ratelimit-{f}-{dim}" for f in ("limit", "remaining", "reset"))
        anthropic = tuple(f"anthropic-ratelimit-{dim}-{f}" for f in ("limit", "remaining", "reset"))
        found[dim] = _quota(headers, openai, now) or _quota(headers, anthropic, now)
    return RateLimitReport(**found) if any(found.values()) else None


# -- reading headers off the SDK's HTTP responses --------------------------------------------------
_attempt_headers: contextvars.ContextVar[list[Mapping[str, str]] | None] = contextvars.ContextVar(
    "facet_probe_attempt_headers", default=None)


async def _record_response(response: Any) -> None:
    seen = _attempt_headers.get()
    if seen is not None:
        seen.append(response.headers)


def event_hooks() -> dict[str, list[Any]]:
    """httpx event hooks that hand each HTTP response's headers to the attempt that is making the call."""
    return {"response": [_record_response]}


@contextlib.contextmanager
def capture_headers() -> Iterator[list[Mapping[str, str]]]:
    """Collect the headers of the HTTP responses made inside this block (this task and those it starts)."""
    seen: list[Mapping[str, str]] = []
    token = _attempt_headers.set(seen)
    try:
        yield seen
    finally:
        _attempt_headers.reset(token)


# -- the client's copy of the provider's bucket ------------------------------------------------------
def agreed_rate(bounds: Sequence[tuple[float, float]]) -> float:
    """The middle of the range every (low, high) bound allows; if they disagree (the limit changed), the
    median of their middles."""
    low, high = max(lo for lo, _ in bounds), min(hi for _, hi in bounds)
    if low <= high:
        return (low + high) / 2
    mids = sorted((lo + hi) / 2 for lo, hi in bounds)
    return mids[len(mids) // 2]


class BucketMirror:
    """The provider's bucket for one dimension as the client can know it (event-loop local).

    A report describes the bucket just after the server admitted the call that got it, so the level now is
    what it said, plus the refill since that call started, minus what every call started after it costs.
    Calls sent together can reach the server in another order than they left, so the level is the lowest
    that the last few reports imply.
    """

    KEEP = 4  # reports kept: those of the calls started last

    def __init__(self) -> None:
        self.refill_per_s: float | None = None  # the rate the recent reports agree on
        self._bounds: collections.deque[tuple[float, float]] = collections.deque(maxlen=32)
        self._reports: list[tuple[float, Quota]] = []  # (start time of the call, its report), by start

    def observe(self, quota: Quota, started: float) -> None:
        """Take a report from the answer to a call started at `started`."""
        bounds = quota.refill_bounds
        if bounds is not None:
            self._bounds.append(bounds)
            self.refill_per_s = agreed_rate(self._bounds)
        bisect.insort(self._reports, (started, quota), key=lambda r: r[0])
        del self._reports[:-self.KEEP]

    def wait_s(self, now: float, starts: Sequence[float], cost: float, need: float | None = None) -> float:
        """Seconds until the bucket holds `need` (default `cost`), given every call's start time (ascending;
        each cost `cost`; the bucket refills between them, never above its size)."""
        if not self._reports or cost <= 0:
            return 0.0
        need = min(cost if need is None else need, self._reports[-1][1].limit)  # never more than it holds
        rate = self.refill_per_s
        if rate is None:  # nothing used yet, or no pace known: the bucket is full again at its reset
            at, quota = self._reports[-1]
            level = quota.limit if now - at >= quota.reset_s else quota.remaining
            if level - cost * (len(starts) - bisect.bisect_right(starts, at)) >= need:
                return 0.0
            return max(0.0, at + quota.reset_s - now)
        level = min(self._level(at, quota, now, starts, cost, rate) for at, quota in self._reports)
        return 0.0 if level >= need else (need - level) / rate

    @staticmethod
    def _level(at: float, quota: Quota, now: float, starts: Sequence[float], cost: float, rate: float) -> float:
        """The level now implied by one report: replay the starts made after its call."""
        level, t = quota.remaining, at
        for start in starts[bisect.bisect_right(starts, at):]:
            level = min(quota.limit, level + rate * (start - t)) - cost
            t = start
        return min(quota.limit, level + rate * max(0.0, now - t))

    @property
    def reported(self) -> bool:
        return bool(self._reports)


class HeaderPacer:
    """Spaces call starts so that neither the request nor the token bucket the provider reports runs dry."""

    def __init__(self) -> None:
        self.requests = BucketMirror()
        self.tokens = BucketMirror()
        self.tokens_per_call = 0.0  # moving average of a call's usage (what it costs the token bucket)
        # Extra room asked for, in calls: a call reaches the server some time after it starts, so the
        # bucket has refilled less than the start times say; each 429 despite the pacing adds some.
        self.margin = 0.5
        self._starts: list[float] = []  # start times, ascending

    def started(self, at: float) -> None:
        self._starts.append(at)
        if len(self._starts) > 20000:
            del self._starts[:10000]

    def observe(self, report: RateLimitReport, started: float, now: float) -> None:
        """Take the report of a call started at `started`, read at `now` (the bucket is as of its start)."""
        if report.requests is not None:
            self.requests.observe(report.requests.as_of(now - started), started)
        if report.tokens is not None:
            self.tokens.observe(report.tokens.as_of(now - started), started)

    def rejected(self) -> None:
        """A 429 came although the reports said there was room: ask for more room from now on."""
        if self.requests.reported or self.tokens.reported:
            self.margin = min(2.0, self.margin + 0.5)

    def accepted(self) -> None:
        self.margin = max(0.0, self.margin - 0.01)

    def used_tokens(self, n: int) -> None:
        """A finished call's token usage (input + output), which estimates what the next one costs."""
        if n > 0:
            self.tokens_per_call = n if self.tokens_per_call == 0 else self.tokens_per_call + 0.1 * (
                n - self.tokens_per_call)

    def wait_s(self, now: float) -> float:
        """Seconds to hold the next start (0: go)."""
        waits = [self.requests.wait_s(now, self._starts, 1.0, 1.0 + self.margin)]
        cost = self.tokens_per_call
        if cost > 0:
            waits.append(self.tokens.wait_s(now, self._starts, cost, cost * (1.0 + self.margin)))
        return max(waits)
