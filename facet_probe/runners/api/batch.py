"""API models through their provider's batch API: OpenAI Batch, Anthropic Message Batches, Gemini batch mode.

`BatchRunner` wraps an interactive API runner and keeps the `Runner` contract: the planned calls go out as
batches, their ids are recorded in the run folder (`batches/<model>.jsonl`) the moment a batch is accepted,
the batches are polled, and each result is yielded for the trial store like an interactive reply. A re-run
after a kill finds the open batches in that record and collects them instead of submitting again (a call is
never paid twice; only a kill between the provider accepting a batch and the record's fsync, a few ms, could
lose its id). Requests a batch answers with an error are submitted again in a new batch, up to
`max_rounds`; what still fails is stored as an error trial and retried by the next run.

Each request inside a batch is built by the interactive runner's own `call`, stopped at the SDK method it
calls (`SdkStandIn`), so the batch sends exactly the settings, prompt translation and per-call values the
interactive runner sends; a result is read back through the same `call`, so its text, thinking, usage and
provenance are read as an interactive reply's are.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from facet_probe.runners.api.anthropic import AnthropicRunner
from facet_probe.runners.api.base import ApiRunner
from facet_probe.runners.api.gemini import GeminiRunner
from facet_probe.runners.api.openai import OpenAIRunner
from facet_probe.runners.base import CostReporting, Request, Response, RunnerError, RunnerWrapper
from facet_probe.store.jsonl import append_record, iter_records, repair_torn_tail

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- the interactive call, stopped at the SDK

class Captured(Exception):
    """Raised by `SdkStandIn` once it has the SDK arguments (no reply to return)."""


class SdkStandIn:
    """Stands in for an SDK client inside a runner's `call`: any attribute path (`client.responses.create`,
    `client.aio.models.generate_content`) ends at the one call, which records its keyword arguments and
    returns `reply` (an SDK response object), or raises `Captured` when there is none."""

    def __init__(self, reply: Any = None) -> None:
        self.kwargs: dict[str, Any] | None = None
        self.reply = reply

    def __getattr__(self, name: str) -> SdkStandIn:
        return self

    async def __call__(self, **kwargs: Any) -> Any:
        self.kwargs = kwargs
        if self.reply is None:
            raise Captured
        return self.reply


def _drive(coro: Any) -> Any:
    """Run a coroutine that never suspends (the runner's `call` on a stand-in) to its result."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("the runner's call waited on something other than its SDK call")


def sdk_arguments(runner: ApiRunner, request: Request) -> dict[str, Any]:
    """The keyword arguments the interactive runner passes to its SDK method for `request`."""
    stand_in = SdkStandIn()
    try:
        _drive(runner.call(stand_in, request))
    except Captured:
        return dict(stand_in.kwargs or {})
    raise RuntimeError(f"{type(runner).__name__}.call made no SDK call")


def read_reply(runner: ApiRunner, request: Request, reply: Any) -> Response:
    """A batch result (the SDK's response object) read as the interactive runner reads its reply."""
    return _drive(runner.call(SdkStandIn(reply), request))


# ---------------------------------------------------------------- the provider batch APIs

@dataclass
class Result:
    """One request's outcome in a finished batch: the SDK response object, or an error line."""

    key: str
    reply: Any = None
    error: str | None = None


class BatchApi:
    """One provider's batch API on its synchronous SDK client."""

    runner_type: ClassVar[type[ApiRunner]]
    name: ClassVar[str]

    def __init__(self, runner: ApiRunner) -> None:
        self.runner = runner
        self.client = self.open_client(runner.api_key())

    @classmethod
    def for_runner(cls, runner: ApiRunner) -> BatchApi | None:
        for sub in cls.__subclasses__():
            if isinstance(runner, sub.runner_type):
                return sub(runner)
        return None

    def open_client(self, api_key: str | None) -> Any:
        raise NotImplementedError

    def entry(self, request: Request) -> Any:
        """The batch's entry for one request (from the interactive runner's SDK arguments)."""
        raise NotImplementedError

    def submit(self, entries: list[Any], label: str) -> str:
        raise NotImplementedError

    def state(self, batch_id: str) -> tuple[bool, str]:
        """(ended, the provider's state name)."""
        raise NotImplementedError

    def results(self, batch_id: str) -> Iterator[Result]:
        raise NotImplementedError


class OpenAIBatch(BatchApi):
    """OpenAI Batch: a JSONL file of `/v1/responses` requests, uploaded, then `batches.create`."""

    runner_type = OpenAIRunner
    name = "openai batches (/v1/responses)"
    ENDED = ("completed", "failed", "expired", "cancelled")

    def open_client(self, api_key: str | None) -> Any:
        import openai

        r = self.runner
        return openai.OpenAI(api_key=api_key, base_url=r.base_url, timeout=r.concurrency.timeout_s)

    def entry(self, request: Request) -> dict[str, Any]:
        return {"custom_id": request.key, "method": "POST", "url": "/v1/responses",
                "body": sdk_arguments(self.runner, request)}

    def submit(self, entries: list[dict[str, Any]], label: str) -> str:
        data = "".join(json.dumps(e) + "\n" for e in entries).encode()
        upload = self.client.files.create(file=(f"{label}.jsonl", io.BytesIO(data), "application/jsonl"),
                                          purpose="batch")
        return self.client.batches.create(input_file_id=upload.id, endpoint="/v1/responses",
                                          completion_window="24h", metadata={"facet_probe": label}).id

    def state(self, batch_id: str) -> tuple[bool, str]:
        status = self.client.batches.retrieve(batch_id).status
        return status in self.ENDED, status

    def results(self, batch_id: str) -> Iterator[Result]:
        from openai.types.responses import Response as OpenAIResponse

        batch = self.client.batches.retrieve(batch_id)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for line in self.client.files.content(file_id).text.splitlines():
                if not line.strip():
                    continue
                rec = json.loads(line)
                resp = rec.get("response") or {}
                if resp.get("status_code") == 200:
                    # leniently, as the SDK reads its own replies (fields it does not require may be absent)
                    yield Result(rec["custom_id"], reply=OpenAIResponse.construct(**resp["body"]))
                else:
                    error = rec.get("error") or (resp.get("body") or {}).get("error") or {}
                    yield Result(rec["custom_id"], error=f"batch request failed ({resp.get('status_code')}): "
                                                         f"{error.get('message', error)}")


class AnthropicBatch(BatchApi):
    """Anthropic Message Batches: `messages.batches.create(requests=[{custom_id, params}])`."""

    runner_type = AnthropicRunner
    name = "anthropic messages.batches"

    def open_client(self, api_key: str | None) -> Any:
        import anthropic

        r = self.runner
        return anthropic.Anthropic(api_key=api_key, base_url=r.base_url, timeout=r.concurrency.timeout_s)

    def entry(self, request: Request) -> dict[str, Any]:
        kwargs = sdk_arguments(self.runner, request)
        extra = kwargs.pop("extra_body", None) or {}
        return {"custom_id": request.key, "params": {**{k: v for k, v in kwargs.items() if v is not None},
                                                      **extra}}

    def submit(self, entries: list[dict[str, Any]], label: str) -> str:
        return self.client.messages.batches.create(requests=entries).id

    def state(self, batch_id: str) -> tuple[bool, str]:
        status = self.client.messages.batches.retrieve(batch_id).processing_status
        return status == "ended", status

    def results(self, batch_id: str) -> Iterator[Result]:
        for item in self.client.messages.batches.results(batch_id):
            result = item.result
            if result.type == "succeeded":
                yield Result(item.custom_id, reply=result.message)
            else:
                detail = getattr(getattr(result, "error", None), "error", None)
                yield Result(item.custom_id, error=f"batch request {result.type}: "
                                                   f"{getattr(detail, 'message', detail)}")


class GeminiBatch(BatchApi):
    """Gemini batch mode: `batches.create(model, src=[inlined requests])`, answers inline in the batch.

    Inline requests are limited to about 20 MB per batch: lower `batch.max_requests` for image-heavy runs."""

    runner_type = GeminiRunner
    name = "gemini batches (inlined requests)"
    ENDED = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")

    def open_client(self, api_key: str | None) -> Any:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(base_url=self.runner.base_url, api_version="v1beta",
                                    timeout=int(self.runner.concurrency.timeout_s * 1000))
        return genai.Client(api_key=api_key, vertexai=False, http_options=options)

    def entry(self, request: Request) -> Any:
        from google.genai import types

        kwargs = sdk_arguments(self.runner, request)
        return types.InlinedRequest(contents=kwargs["contents"], config=kwargs["config"],
                                    metadata={"key": request.key})

    def submit(self, entries: list[Any], label: str) -> str:
        return self.client.batches.create(model=self.runner.model_id, src=entries,
                                          config={"display_name": label}).name

    def state(self, batch_id: str) -> tuple[bool, str]:
        state = str(getattr(self.client.batches.get(name=batch_id).state, "value", ""))
        return state in self.ENDED, state

    def results(self, batch_id: str) -> Iterator[Result]:
        batch = self.client.batches.get(name=batch_id)
        for item in (batch.dest.inlined_responses if batch.dest else None) or []:
            key = (item.metadata or {}).get("key", "")  # "": none (no request's)
            if item.response is not None and item.error is None:
                yield Result(key, reply=item.response)
            else:
                yield Result(key, error=f"batch request failed: {getattr(item.error, 'message', item.error)}")


# ---------------------------------------------------------------- the record of submitted batches

@dataclass
class BatchLog:
    """`batches/<model>.jsonl` in the run folder: one line per submitted and per collected batch."""

    path: Path
    submitted: dict[str, dict[str, Any]] = field(default_factory=dict)
    collected: set[str] = field(default_factory=set)

    @classmethod
    def open(cls, path: Path) -> BatchLog:
        log_ = cls(path)
        if path.exists():
            repair_torn_tail(path)
            for rec in iter_records(path):
                if rec["event"] == "submitted":
                    log_.submitted[rec["batch_id"]] = rec
                elif rec["event"] == "collected":
                    log_.collected.add(rec["batch_id"])
        return log_

    def open_batches(self) -> dict[str, dict[str, Any]]:
        return {b: rec for b, rec in self.submitted.items() if b not in self.collected}

    def record(self, event: str, batch_id: str, **fields_: Any) -> None:
        rec = {"event": event, "batch_id": batch_id, "at": datetime.now(UTC).isoformat(timespec="seconds"),
               **fields_}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append_record(self.path, rec)
        if event == "submitted":
            self.submitted[batch_id] = rec
        else:
            self.collected.add(batch_id)


# ---------------------------------------------------------------- the runner

class BatchRunner(RunnerWrapper, CostReporting):
    """An interactive API runner's calls sent through its provider's batch API: a `Runner` whose other contract
    methods, the fingerprint included, are the interactive runner's (the same settings give the same trial
    keys), as is the cost it reports."""

    def __init__(self, runner: ApiRunner, log_path: Path, *, poll_s: float = 30.0, max_requests: int = 10000,
                 max_rounds: int = 3, wait: bool = True) -> None:
        super().__init__(runner)
        self._runner, self._log_path = runner, log_path
        self.poll_s, self.max_requests, self.max_rounds, self.wait = poll_s, max_requests, max_rounds, wait
        self._api: BatchApi | None = None

    @staticmethod
    def supports(runner: Any) -> bool:
        return isinstance(runner, ApiRunner) and any(isinstance(runner, s.runner_type)
                                                     for s in BatchApi.__subclasses__())

    def cost_summary(self) -> dict[str, Any]:
        return self._runner.cost_summary()

    def generate(self, requests: Sequence[Request]) -> Iterator[tuple[Request, Response]]:
        if not requests:
            return
        todo = {r.key: r for r in requests}
        self._api = api = self._api or BatchApi.for_runner(self._runner)
        if api is None:
            raise RunnerError(f"{self._runner.name}: {type(self._runner).__name__} has no batch API here")
        record = BatchLog.open(self._log_path)
        open_ = {b: rec for b, rec in record.open_batches().items() if set(rec["keys"]) & set(todo)}
        covered = {k for rec in open_.values() for k in rec["keys"]}
        if open_:
            log.info("%s: resuming %d open batches (%d of %d calls)", self._runner.name, len(open_),
                     len(covered & set(todo)), len(todo))
        for batch_id in self._submit(api, [r for k, r in todo.items() if k not in covered], 1, record):
            open_[batch_id] = record.submitted[batch_id]
        answered: set[str] = set()
        while open_:
            for batch_id in list(open_):
                ended, state = api.state(batch_id)
                if not ended:
                    continue
                rec = open_.pop(batch_id)
                failed: dict[str, str] = {}
                for key, req, resp in self._collect(api, batch_id, rec, state, todo, answered):
                    if resp.error is None:
                        answered.add(key)
                        yield req, resp
                    else:
                        failed[key] = resp.error
                if failed and rec["round"] < self.max_rounds:
                    for new_id in self._submit(api, [todo[k] for k in failed], rec["round"] + 1, record):
                        open_[new_id] = record.submitted[new_id]
                    failed = {}
                record.record("collected", batch_id, state=state, failed=len(failed))
                for key, error in failed.items():  # out of rounds: stored as errors, retried by the next run
                    answered.add(key)
                    yield todo[key], Response(text="", error=error, provenance={"batch_id": batch_id})
            if open_ and not self.wait:
                log.warning("%s: %d batches still open (%s); re-run the same command to collect them",
                            self._runner.name, len(open_), ", ".join(open_))
                return
            if open_:
                time.sleep(self.poll_s)

    def _submit(self, api: BatchApi, requests: list[Request], round_: int, record: BatchLog) -> list[str]:
        ids = []
        for i in range(0, len(requests), self.max_requests):
            chunk = requests[i:i + self.max_requests]
            label = f"facet_probe-{self._runner.name}-r{round_}-{int(time.time())}"
            batch_id = api.submit([api.entry(r) for r in chunk], label)
            record.record("submitted", batch_id, provider=self._runner.provider, api=api.name,
                          round=round_, keys=[r.key for r in chunk])
            log.info("%s: submitted batch %s (%d calls, round %d)", self._runner.name, batch_id, len(chunk),
                     round_)
            ids.append(batch_id)
        return ids

    def _collect(self, api: BatchApi, batch_id: str, rec: dict[str, Any], state: str, todo: dict[str, Request],
                 answered: set[str]) -> Iterator[tuple[str, Request, Response]]:
        """This batch's results for requests still to answer, and an error for each one it did not answer."""
        wanted = [k for k in rec["keys"] if k in todo and k not in answered]
        seen = set()
        for result in api.results(batch_id):
            if result.key not in wanted or result.key in seen:
                continue
            seen.add(result.key)
            req = todo[result.key]
            if result.reply is None:  # the provider's words: scrubbed as an interactive call's error is
                yield result.key, req, Response(text="", error=self._runner.scrub(result.error or "no reply"))
                continue
            resp = read_reply(self._runner, req, result.reply)
            resp.provenance.update(batch_id=batch_id, batch_api=api.name)
            yield result.key, req, resp
        for key in wanted:
            if key not in seen:
                yield key, todo[key], Response(text="", error=f"batch {batch_id} ended {state} without this "
                                                               "request's result")


def batch_log_path(run_dir: Path, model: str, shard: str | None) -> Path:
    """Where a model's batch record lives in the run folder (one per shard, as trials files are)."""
    tag = "" if not shard else "." + shard.replace("/", "-of-")
    return run_dir / "batches" / f"{model}{tag}.jsonl"
