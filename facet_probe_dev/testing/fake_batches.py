"""The batch routes of the fake provider (`fake_providers.FakeProviderServer`), after each provider's
documented batch schema, so the real SDKs' batch calls can be tested on loopback.

* OpenAI Batch: ``POST /v1/files`` (multipart, purpose=batch), ``POST /v1/batches``, ``GET /v1/batches/{id}``,
  ``GET /v1/files/{id}/content`` (output and error files: one JSON line per request, by ``custom_id``).
* Anthropic Message Batches: ``POST /v1/messages/batches`` ({requests: [{custom_id, params}]}),
  ``GET /v1/messages/batches/{id}`` (``processing_status``, ``results_url``), ``GET .../{id}/results`` (JSONL).
* Gemini batch mode: ``POST /v1beta/models/{model}:batchGenerateContent`` (inlined requests with metadata),
  ``GET /v1beta/batches/{id}`` (an operation whose metadata carries the state and the inlined responses).

A batch ends on a status check: the n-th batch submitted (counted from 0) ends at its
``batch_polls * (n + 1) + 1``-th check, so batches finish one after another. Then every request in it is
answered like an interactive call and recorded in ``calls`` (path ``batch:<id>``); ``batch_fail(call)``
True makes that request fail inside the batch (a 500 in its result), as a provider reports a failed line.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from facet_probe_dev.testing.fake_providers import FakeProviderServer


@dataclass
class FakeBatch:
    id: str
    provider: str  # the inner API: openai_responses | anthropic | gemini
    model: str
    entries: list[tuple[str, dict[str, Any]]]  # (custom id, request body)
    seq: int
    label: str = ""
    checks: int = 0
    results: dict[str, dict[str, Any]] | None = None  # custom id -> {"ok": bool, "body": ...}
    created: float = field(default_factory=time.time)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


class FakeBatches:
    """The batch state of one fake server: uploaded files and batches, behind the routes above."""

    def __init__(self, fake: FakeProviderServer) -> None:
        self.fake = fake
        self.files: dict[str, bytes] = {}
        self.jobs: dict[str, FakeBatch] = {}

    # -- views for tests -----------------------------------------------------------------------------
    def submitted_keys(self) -> list[str]:
        """Every custom id submitted, over all batches (a repeat means a call was paid twice)."""
        return [k for job in self.jobs.values() for k, _ in job.entries]

    # -- routing -------------------------------------------------------------------------------------
    def handle(self, handler: Any, method: str, raw: bytes) -> bool:
        """Answer a batch route (True), or leave the request to the interactive routes (False)."""
        path = handler.path.split("?")[0]
        for verb, pattern, action in ROUTES:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                with self.fake._lock:
                    status, payload = action(self, handler, raw, *match.groups())
                handler._send(status, payload if isinstance(payload, bytes) else json.dumps(payload).encode())
                return True
        return False

    def _new(self, provider: str, model: str, entries: list[tuple[str, dict]], prefix: str,
             label: str = "") -> FakeBatch:
        seq = sum(1 for j in self.jobs.values() if j.provider == provider)
        job = FakeBatch(f"{prefix}{len(self.jobs):04d}", provider, model, entries, seq, label)
        self.jobs[job.id] = job
        return job

    def _check(self, job: FakeBatch) -> bool:
        """One status check; True once the batch has ended (it is answered on the check that ends it)."""
        job.checks += 1
        if job.results is None and job.checks > self.fake.batch_polls * (job.seq + 1):
            job.results = {key: self._answer(job, key, body) for key, body in job.entries}
        return job.results is not None

    def _answer(self, job: FakeBatch, key: str, body: dict[str, Any]) -> dict[str, Any]:
        from facet_probe_dev.testing.fake_providers import (
            RecordedCall,
            _wants_thinking,
            error_body,
            parse_parts,
            success_body,
        )

        system, roles, parts, mimes = parse_parts(job.provider, body)
        call = RecordedCall(provider=job.provider, path=f"batch:{job.id}", model=body.get("model", job.model),
                            body=body, api_key=None, system=system, parts=parts, roles=roles, mime_types=mimes,
                            arrived_at=time.monotonic())
        self.fake.calls.append(call)
        if self.fake.batch_fail is not None and self.fake.batch_fail(call):
            call.status, call.fault = 500, "server_error"
            return {"ok": False, "body": error_body(job.provider, 500, "injected batch request failure")}
        call.reply = self.fake.reply(call)
        call.status = 200
        thinking = self.fake.thinking_text if _wants_thinking(call) else None
        return {"ok": True, "body": success_body(call, call.reply, thinking)}

    # -- OpenAI --------------------------------------------------------------------------------------
    def openai_upload(self, handler: Any, raw: bytes) -> tuple[int, dict]:
        head = f"Content-Type: {handler.headers['content-type']}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        data = b""
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "file":
                data = part.get_payload(decode=True)
        file_id = f"file-{len(self.files):04d}"
        self.files[file_id] = data
        return 200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                     "filename": "batch.jsonl", "purpose": "batch", "status": "processed"}

    def openai_create(self, handler: Any, raw: bytes) -> tuple[int, dict]:
        body = json.loads(raw)
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].decode().splitlines() if line]
        entries = [(rec["custom_id"], rec["body"]) for rec in lines]
        job = self._new("openai_responses", lines[0]["body"].get("model", ""), entries, "batch_",
                        (body.get("metadata") or {}).get("facet_probe", ""))
        job.input_file_id = body["input_file_id"]  # type: ignore[attr-defined]
        return 200, self.openai_batch(job)

    def openai_batch(self, job: FakeBatch) -> dict[str, Any]:
        done = job.results is not None
        ok = sum(r["ok"] for r in (job.results or {}).values())
        return {"id": job.id, "object": "batch", "endpoint": "/v1/responses", "errors": None,
                "input_file_id": getattr(job, "input_file_id", ""), "completion_window": "24h",
                "status": "completed" if done else "in_progress", "created_at": int(job.created),
                "output_file_id": f"file-out-{job.id}" if done and ok else None,
                "error_file_id": f"file-err-{job.id}" if done and ok < len(job.entries) else None,
                "request_counts": {"total": len(job.entries), "completed": ok,
                                   "failed": len(job.entries) - ok if done else 0},
                "metadata": {"facet_probe": job.label}}

    def openai_get(self, handler: Any, raw: bytes, batch_id: str) -> tuple[int, dict]:
        job = self.jobs.get(batch_id)
        if job is None:
            return 404, {"error": {"message": f"no batch {batch_id}", "type": "invalid_request_error"}}
        self._check(job)
        return 200, self.openai_batch(job)

    def openai_content(self, handler: Any, raw: bytes, file_id: str) -> tuple[int, bytes | dict]:
        kind, _, batch_id = file_id.removeprefix("file-").partition("-")
        job = self.jobs.get(batch_id)
        if kind not in ("out", "err") or job is None or job.results is None:
            return (200, self.files[file_id]) if file_id in self.files else (404, {"error": {"message": "no file"}})
        lines = []
        for i, (key, res) in enumerate(job.results.items()):
            if res["ok"] != (kind == "out"):
                continue
            status = 200 if res["ok"] else 500
            lines.append(json.dumps({"id": f"batch_req_{i}", "custom_id": key, "error": None,
                                     "response": {"status_code": status, "request_id": f"req_{i}",
                                                  "body": res["body"]}}))
        return 200, ("\n".join(lines) + "\n").encode()

    # -- Anthropic -----------------------------------------------------------------------------------
    def anthropic_create(self, handler: Any, raw: bytes) -> tuple[int, dict]:
        body = json.loads(raw)
        entries = [(r["custom_id"], r["params"]) for r in body["requests"]]
        job = self._new("anthropic", entries[0][1].get("model", ""), entries, "msgbatch_")
        return 200, self.anthropic_batch(job)

    def anthropic_batch(self, job: FakeBatch) -> dict[str, Any]:
        done = job.results is not None
        ok = sum(r["ok"] for r in (job.results or {}).values())
        url = f"http://127.0.0.1:{self.fake.port}/v1/messages/batches/{job.id}/results"
        return {"id": job.id, "type": "message_batch", "processing_status": "ended" if done else "in_progress",
                "request_counts": {"processing": 0 if done else len(job.entries), "succeeded": ok,
                                   "errored": len(job.entries) - ok if done else 0, "canceled": 0, "expired": 0},
                "ended_at": _iso(time.time()) if done else None, "created_at": _iso(job.created),
                "expires_at": _iso(job.created + timedelta(days=1).total_seconds()),
                "cancel_initiated_at": None, "archived_at": None, "results_url": url if done else None}

    def anthropic_get(self, handler: Any, raw: bytes, batch_id: str) -> tuple[int, dict]:
        job = self.jobs.get(batch_id)
        if job is None:
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}
        self._check(job)
        return 200, self.anthropic_batch(job)

    def anthropic_results(self, handler: Any, raw: bytes, batch_id: str) -> tuple[int, bytes | dict]:
        job = self.jobs.get(batch_id)
        if job is None or job.results is None:
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}
        lines = [json.dumps({"custom_id": key, "result": {"type": "succeeded", "message": res["body"]}
                             if res["ok"] else {"type": "errored", "error": res["body"]}})
                 for key, res in job.results.items()]
        return 200, ("\n".join(lines) + "\n").encode()

    # -- Gemini --------------------------------------------------------------------------------------
    def gemini_create(self, handler: Any, raw: bytes, model: str) -> tuple[int, dict]:
        batch = json.loads(raw)["batch"]
        requests = batch["inputConfig"]["requests"]["requests"]
        entries = [((r.get("metadata") or {}).get("key", str(i)), r["request"]) for i, r in enumerate(requests)]
        job = self._new("gemini", model, entries, "", batch.get("displayName", ""))
        job.metadata = [r.get("metadata") for r in requests]  # type: ignore[attr-defined]
        return 200, self.gemini_operation(job)

    def gemini_operation(self, job: FakeBatch) -> dict[str, Any]:
        done = job.results is not None
        meta: dict[str, Any] = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
                                "model": f"models/{job.model}", "displayName": job.label, "createTime": _iso(job.created),
                                "state": "BATCH_STATE_SUCCEEDED" if done else "BATCH_STATE_RUNNING"}
        if done:
            responses = []
            for (key, _), extra in zip(job.entries, job.metadata, strict=True):  # type: ignore[attr-defined]
                res = job.results[key]
                responses.append({"metadata": extra, **({"response": res["body"]} if res["ok"]
                                                         else {"error": res["body"]["error"]})})
            meta["output"] = {"inlinedResponses": {"inlinedResponses": responses}}
            meta["endTime"] = _iso(time.time())
        return {"name": f"batches/{job.id}", "metadata": meta, "done": done}

    def gemini_get(self, handler: Any, raw: bytes, batch_id: str) -> tuple[int, dict]:
        job = self.jobs.get(batch_id)
        if job is None:
            return 404, {"error": {"code": 404, "message": batch_id, "status": "NOT_FOUND"}}
        self._check(job)
        return 200, self.gemini_operation(job)


ROUTES = [
    ("POST", r"/v1/files", lambda b, h, raw: b.openai_upload(h, raw)),
    ("POST", r"/v1/batches", lambda b, h, raw: b.openai_create(h, raw)),
    ("GET", r"/v1/batches/([^/]+)", lambda b, h, raw, i: b.openai_get(h, raw, i)),
    ("GET", r"/v1/files/([^/]+)/content", lambda b, h, raw, i: b.openai_content(h, raw, i)),
    ("POST", r"/v1/messages/batches", lambda b, h, raw: b.anthropic_create(h, raw)),
    ("GET", r"/v1/messages/batches/([^/]+)", lambda b, h, raw, i: b.anthropic_get(h, raw, i)),
    ("GET", r"/v1/messages/batches/([^/]+)/results", lambda b, h, raw, i: b.anthropic_results(h, raw, i)),
    ("POST", r"/v1(?:beta)?/models/([^/:]+):batchGenerateContent", lambda b, h, raw, m: b.gemini_create(h, raw, m)),
    ("GET", r"/v1(?:beta)?/batches/([^/]+)", lambda b, h, raw, i: b.gemini_get(h, raw, i)),
]
