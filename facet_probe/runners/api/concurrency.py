"""The async call engine of the API runners: adaptive concurrency, bounded jittered retries, timeouts.

Calls run as asyncio tasks on an event loop in a worker thread. The number in flight follows an AIMD
limit: while calls wait for a slot it grows with each success (doubling per round trip until the first
429, then +1 per round trip), and it is cut by `decrease_factor` when 429s exceed a tolerated share of
recent answers (`rate_limit_share`, a moving average; at most one cut per round trip, since a 429 for a
call sent before the last cut carries no news). Starts are paced `latency / limit` apart, so they come in
no bursts. A rejected call waits its Retry-After (plus jitter) before its own retry; other calls hold back
only for one start interval (`latency / limit`, the time a slot takes to free), never for the whole
Retry-After: whole-second values are an upper bound, and freezing every call for a second on each 429 cut
throughput to a third of the limit. A 429 without a hint is retried after a jittered backoff on the same
short scale. Where the provider reports its quota in headers (remaining requests/tokens and when they
refill, see `ratelimit.py`), starts are paced by them, so the 429 rarely comes. 5xx, timeouts, dropped
connections and malformed bodies are retried with jittered exponential backoff and never shrink the limit.
Tolerating a few 429s keeps the provider saturated: a 429 is cheap, an idle slot is not.

Each request ends as exactly one (request, response): an answer, or, after `max_retries` retries or a
non-retryable error, a `Response(error=...)`. `CallEngine.run` yields each one the moment it is done, so
the caller can store it before the next arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from facet_probe.runners.api.failures import Failure, FailureKind, classify_exception
from facet_probe.runners.api.ratelimit import (
    HeaderPacer,
    RateLimitReport,
    capture_headers,
    parse_rate_limit_headers,
)
from facet_probe.runners.base import Request, Response, RunnerError

log = logging.getLogger(__name__)

Call = Callable[[Request], Awaitable[Response]]
#: Opens a client inside the engine's event loop and yields the coroutine function that makes one call.
SessionFactory = Callable[[], contextlib.AbstractAsyncContextManager[Call]]


@dataclass(frozen=True)
class ConcurrencySettings:
    """How hard to push a provider (from the model config's `concurrency:` block)."""

    max_in_flight: int = 16
    initial: int = 4
    min_in_flight: int = 1
    max_retries: int = 6
    timeout_s: float = 600.0
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    decrease_factor: float = 0.75
    rate_limit_share: float = 0.1  # cut when 429s exceed this share of recent answers (moving average)

    def __post_init__(self) -> None:
        if not 1 <= self.min_in_flight <= self.initial <= self.max_in_flight:
            raise ValueError("need 1 <= min_in_flight <= initial <= max_in_flight, got "
                             f"{self.min_in_flight}, {self.initial}, {self.max_in_flight}")
        if self.max_retries < 0 or self.timeout_s <= 0 or self.backoff_base_s < 0:
            raise ValueError("max_retries must be >= 0, timeout_s > 0 and backoff_base_s >= 0")
        if not 0 < self.decrease_factor < 1:
            raise ValueError(f"decrease_factor must be in (0, 1), got {self.decrease_factor}")
        if not 0 <= self.rate_limit_share < 1:
            raise ValueError(f"rate_limit_share must be in [0, 1), got {self.rate_limit_share}")

    @classmethod
    def from_config(cls, cfg: dict[str, Any] | None) -> ConcurrencySettings:
        """Build from a config mapping; unknown keys are an error that lists the known ones."""
        cfg = dict(cfg or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown concurrency settings {unknown}; known: {sorted(known)}")
        return cls(**cfg)


@dataclass
class EngineStats:
    """What a run took: attempts, failures by kind, how the concurrency limit moved."""

    requests: int = 0
    attempts: int = 0
    answered: int = 0
    final_errors: int = 0
    failures: Counter = field(default_factory=Counter)
    limit_min: float = math.inf
    limit_max: float = 0.0
    limit_final: float = 0.0
    quota_reports: int = 0  # answers that carried the provider's rate-limit headers
    header_waits: int = 0  # starts held back because those headers said the quota was spent
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "attempts": self.attempts, "answered": self.answered,
                "final_errors": self.final_errors, "failures": dict(self.failures),
                "limit_min": self.limit_min, "limit_max": self.limit_max, "limit_final": self.limit_final,
                "quota_reports": self.quota_reports, "header_waits": self.header_waits,
                "wall_s": round(self.wall_s, 3)}


class Turnstile:
    """Lets one waiter through at a time, lowest rank first, then in arrival order (event-loop local)."""

    def __init__(self) -> None:
        self._held = False
        self._queue: list[tuple[int, int, asyncio.Future]] = []
        self._arrivals = itertools.count()

    def locked(self) -> bool:
        return self._held

    @contextlib.asynccontextmanager
    async def enter(self, rank: int) -> AsyncIterator[None]:
        """Hold the turnstile for the block; a lower `rank` goes ahead of those already waiting."""
        if self._held or self._queue:
            entry = (rank, next(self._arrivals), asyncio.get_running_loop().create_future())
            heapq.heappush(self._queue, entry)
            try:
                await entry[2]  # handed over by the previous holder, still held
            except asyncio.CancelledError:
                if entry[2].cancelled():
                    self._queue.remove(entry)
                    heapq.heapify(self._queue)
                else:  # handed over, then cancelled: pass it on
                    self._leave()
                raise
        self._held = True
        try:
            yield
        finally:
            self._leave()

    def _leave(self) -> None:
        while self._queue:
            _, _, granted = heapq.heappop(self._queue)
            if not granted.done():
                granted.set_result(None)
                return
        self._held = False


class AdaptiveLimit:
    """AIMD limit on calls in flight, paced by the provider's quota headers when it sends them, with a
    short gate after each 429 (event-loop local)."""

    def __init__(self, settings: ConcurrencySettings, stats: EngineStats, clock: Callable[[], float]) -> None:
        self._s = settings
        self._stats = stats
        self._clock = clock
        self.limit = float(settings.initial)
        self.in_flight = 0
        self._slow_start = True
        self._last_cut = -math.inf
        self._resume_at = -math.inf
        self._limited_share = 0.0  # moving average of "this answer was a 429"
        self._latency = 0.0  # moving average of a successful call's duration
        self._next_start = -math.inf  # starts are paced latency / capacity apart, so they come in no waves
        self._turnstile = Turnstile()
        self._freed = asyncio.Event()
        self.pacer = HeaderPacer()
        self._track()

    @property
    def capacity(self) -> int:
        return max(self._s.min_in_flight, math.floor(self.limit))

    @property
    def start_interval(self) -> float:
        """Seconds between starts at the current limit (0 until a call has succeeded)."""
        return self._latency / self.capacity

    def _track(self) -> None:
        self._stats.limit_min = min(self._stats.limit_min, self.limit)
        self._stats.limit_max = max(self._stats.limit_max, self.limit)
        self._stats.limit_final = self.limit

    async def acquire(self, retry: bool = False) -> float:
        """Wait for a free slot, the Retry-After gate and the pacing interval; return the start time.

        Waiters queue on a turnstile, so only the head of the queue sleeps on timers or slot releases;
        retries go ahead of first attempts, so a rejected call does not wait its turn twice.
        """
        async with self._turnstile.enter(0 if retry else 1):
            while True:
                now = self._clock()
                wait = max(self._resume_at, self._next_start) - now
                quota_wait = self.pacer.wait_s(now)
                if quota_wait > 0:
                    self._stats.header_waits += 1
                if max(wait, quota_wait) > 0:
                    await asyncio.sleep(max(wait, quota_wait))
                    continue
                if self.in_flight < self.capacity:
                    self.in_flight += 1
                    self._next_start = now + self.start_interval
                    self.pacer.started(now)
                    return now
                self._freed.clear()
                await self._freed.wait()

    def release(self, started: float, failure: Failure | None, report: RateLimitReport | None = None,
                tokens_used: int = 0) -> None:
        """Free the slot and adapt: grow on success, cut when 429s pile up, keep on anything else; take
        the quota the answer reported."""
        self.in_flight -= 1
        if report is not None:
            self._stats.quota_reports += 1
            self.pacer.observe(report, started, self._clock())
        self.pacer.used_tokens(tokens_used)
        if failure is None:
            self.pacer.accepted()
        limited = failure is not None and failure.kind == FailureKind.RATE_LIMIT
        weight = 1.0 / max(self.limit, 4.0)  # about one round trip of answers
        self._limited_share += weight * (float(limited) - self._limited_share)
        if failure is None:
            took = self._clock() - started
            self._latency = took if self._latency == 0 else self._latency + 0.1 * (took - self._latency)
            if self._turnstile.locked():  # calls are waiting: the limit is the bottleneck, so grow it
                step = 1.0 if self._slow_start else 1.0 / max(self.limit, 1.0)
                self.limit = min(float(self._s.max_in_flight), self.limit + step)
        elif limited:
            self._slow_start = False  # the first 429 ends the doubling phase
            self.pacer.rejected()
            if self._limited_share > self._s.rate_limit_share and started >= self._last_cut:
                self.limit = max(float(self._s.min_in_flight), self.limit * self._s.decrease_factor)
                self._last_cut = self._clock()
            if failure.retry_after_s:  # hold new starts one start interval (or the whole wait if none known)
                hold = min(failure.retry_after_s, self.start_interval or failure.retry_after_s)
                self._resume_at = max(self._resume_at, self._clock() + hold)
        self._track()
        self._freed.set()


class _AttemptFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class CallEngine:
    """Runs requests through an async call function under the adaptive limit; yields as each completes."""

    def __init__(self, settings: ConcurrencySettings, *,
                 classify: Callable[[BaseException], Failure] = classify_exception,
                 scrub: Callable[[str], str] = lambda s: s, seed: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._classify = classify
        self._scrub = scrub
        self._rng = random.Random(seed)
        self._clock = clock
        self.stats = EngineStats()
        self._limit: AdaptiveLimit | None = None

    # -- public ------------------------------------------------------------------------------------
    def run(self, requests: Sequence[Request], session: SessionFactory) -> Iterator[tuple[Request, Response]]:
        """Answer every request once; yield (request, response) in completion order.

        Stopping the iteration early cancels the calls still in flight (their results are not yielded).
        """
        reqs = list(requests)
        counts = Counter(r.key for r in reqs)
        if len(counts) != len(reqs):
            dupes = sorted(k for k, n in counts.items() if n > 1)[:5]
            raise ValueError(f"duplicate request keys {dupes}: each request must be a distinct call")
        self.stats = EngineStats(requests=len(reqs))
        if not reqs:
            return
        out: queue.Queue = queue.Queue()
        finished = threading.Event()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True, name="api-call-engine")
        thread.start()
        t0 = time.perf_counter()
        future = asyncio.run_coroutine_threadsafe(self._main(reqs, session, out, finished), loop)
        try:
            for _ in range(len(reqs)):
                item = out.get()
                if isinstance(item, BaseException):
                    raise RunnerError(f"the API client could not start: {self._scrub(str(item))}") from None
                yield item
        finally:
            future.cancel()
            finished.wait(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()
            self.stats.wall_s = time.perf_counter() - t0

    # -- inside the event loop ---------------------------------------------------------------------
    async def _main(self, reqs: list[Request], session: SessionFactory, out: queue.Queue,
                    finished: threading.Event) -> None:
        try:
            limit = self._limit = AdaptiveLimit(self.settings, self.stats, self._clock)
            async with session() as call:
                tasks = [asyncio.create_task(self._one(call, req, limit, out)) for req in reqs]
                try:
                    await asyncio.gather(*tasks)
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # the session itself failed (e.g. a bad base_url)
            out.put(exc)
        finally:
            finished.set()

    async def _one(self, call: Call, request: Request, limit: AdaptiveLimit, out: queue.Queue) -> None:
        attempts = 0
        t0 = time.perf_counter()
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            retry=retry_if_exception(lambda e: isinstance(e, _AttemptFailed) and e.failure.retryable),
            wait=self._wait, reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    attempts += 1
                    response = await self._attempt(call, request, limit, retry=attempts > 1)
            self.stats.answered += 1
        except _AttemptFailed as exc:
            failure = exc.failure
            self.stats.final_errors += 1
            log.warning("request %s failed for good after %d attempt(s): %s", request.key, attempts,
                        failure.kind)
            response = Response(text="", error=self._scrub(f"{failure.kind}: {failure.message} "
                                                           f"(gave up after {attempts} attempt(s))"))
        response.latency_s = round(time.perf_counter() - t0, 4)
        response.provenance = {**response.provenance, "attempts": attempts}
        out.put((request, response))

    async def _attempt(self, call: Call, request: Request, limit: AdaptiveLimit, retry: bool) -> Response:
        started = await limit.acquire(retry)
        self.stats.attempts += 1
        failure: Failure | None = None
        response: Response | None = None
        seen: list = []
        try:
            with capture_headers() as seen:
                response = await asyncio.wait_for(call(request), self.settings.timeout_s)
            return response
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            failure = Failure(FailureKind.TIMEOUT, f"no answer within {self.settings.timeout_s:g} s")
            raise _AttemptFailed(failure) from None
        except Exception as exc:
            failure = self._classify(exc)
            failure = Failure(failure.kind, self._scrub(failure.message), failure.status,
                              failure.retry_after_s)
            raise _AttemptFailed(failure) from None
        finally:
            if failure is not None:
                self.stats.failures[str(failure.kind)] += 1
            report = parse_rate_limit_headers(seen[-1]) if seen else None
            usage = response.usage if response is not None else {}
            tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
            limit.release(started, failure, report, tokens)

    def _wait(self, state: RetryCallState) -> float:
        """Retry-After (plus up to 20% jitter) when the provider gave one, else full-jitter exponential
        backoff; for a 429 without a hint the backoff starts from two start intervals (capped by
        `backoff_base_s`), since the limit's own AIMD cut is what makes room."""
        exc = state.outcome.exception() if state.outcome else None
        failure = exc.failure if isinstance(exc, _AttemptFailed) else None
        if failure is not None and failure.retry_after_s is not None:
            return failure.retry_after_s * (1 + 0.2 * self._rng.random())
        base = self.settings.backoff_base_s
        interval = self._limit.start_interval if self._limit is not None else 0.0
        if failure is not None and failure.kind == FailureKind.RATE_LIMIT and interval > 0:
            base = min(base, 2 * interval)
        cap = min(self.settings.backoff_max_s, base * 2 ** (state.attempt_number - 1))
        return self._rng.uniform(0, cap)
