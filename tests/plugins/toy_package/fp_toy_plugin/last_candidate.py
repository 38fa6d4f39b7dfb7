"""last_candidate: a model plug-in (a reference policy) that answers the last displayed candidate."""

from __future__ import annotations

from facet_probe.runners.base import Request
from facet_probe.runners.policies import ReferencePolicy


class LastCandidatePolicy(ReferencePolicy):
    """Answers the last option letter shown, or the last free-form candidate (the answer of the last hint)."""

    policy = "last_candidate"

    def choose(self, request: Request) -> tuple[str, str]:
        options = list(request.prompt.labels) or list(request.metadata.get("candidates") or [])
        return options[-1], "random"
