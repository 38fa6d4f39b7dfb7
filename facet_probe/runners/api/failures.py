"""What went wrong with an API call, and whether retrying can help.

One classifier serves the three SDKs: openai and anthropic raise status errors with `status_code` and an
HTTP `response`; google-genai raises `APIError` with `code` and the JSON `details`; timeouts, dropped
connections and truncated JSON bodies surface as httpx2 or `json` exceptions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

import httpx2
import pydantic


class FailureKind(StrEnum):
    RATE_LIMIT = "rate_limit"  # 429: shrink concurrency, wait for Retry-After
    SERVER = "server"  # 5xx, 408, 409, 529: retry, keep concurrency
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    MALFORMED = "malformed"  # a 200 whose body is not the expected JSON
    FATAL = "fatal"  # a 4xx (bad request, auth, not found) or a local bug: retrying cannot help


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    message: str
    status: int | None = None
    retry_after_s: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind != FailureKind.FATAL


RETRYABLE_STATUS = {408, 409, 425, 500, 502, 503, 504, 529}


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None if absent."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        from datetime import UTC, datetime

        return max(0.0, (parsedate_to_datetime(raw) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def retry_delay_from_details(details: Any) -> float | None:
    """Google's `RetryInfo.retryDelay` ("13s", "0.020s") from an error body, if present."""
    err = details.get("error", details) if isinstance(details, dict) else {}
    for entry in err.get("details", []) if isinstance(err, dict) else []:
        if isinstance(entry, dict) and str(entry.get("@type", "")).endswith("RetryInfo"):
            match = re.fullmatch(r"([0-9.]+)s", str(entry.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def classify_status(status: int, message: str, retry_after_s: float | None = None) -> Failure:
    """Failure for an HTTP error status."""
    if status == 429:
        return Failure(FailureKind.RATE_LIMIT, message, status, retry_after_s)
    if status in RETRYABLE_STATUS or status >= 500:
        return Failure(FailureKind.SERVER, message, status, retry_after_s)
    return Failure(FailureKind.FATAL, message, status)


def classify_exception(exc: BaseException) -> Failure:
    """Map any exception raised by an SDK call (or our own parsing of its reply) to a `Failure`."""
    text = f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, TimeoutError | httpx2.TimeoutException):
        return Failure(FailureKind.TIMEOUT, text)
    if type(exc).__name__ == "APITimeoutError":
        return Failure(FailureKind.TIMEOUT, text)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):  # openai / anthropic APIStatusError
        if getattr(exc, "code", None) == "insufficient_quota":
            return Failure(FailureKind.FATAL, f"{text} (quota exhausted: add credit)", status)
        response = getattr(exc, "response", None)
        return classify_status(status, text, parse_retry_after(getattr(response, "headers", None)))
    code = getattr(exc, "code", None)
    if isinstance(code, int) and hasattr(exc, "details"):  # google-genai APIError
        response = getattr(exc, "response", None)
        wait = retry_delay_from_details(exc.details) or parse_retry_after(getattr(response, "headers", None))
        return classify_status(code, text, wait)
    if isinstance(exc, json.JSONDecodeError | pydantic.ValidationError) or type(exc).__name__ == (
            "APIResponseValidationError"):
        return Failure(FailureKind.MALFORMED, text)
    if isinstance(exc, httpx2.TransportError) or type(exc).__name__ == "APIConnectionError":
        return Failure(FailureKind.CONNECTION, text)
    return Failure(FailureKind.FATAL, text)
