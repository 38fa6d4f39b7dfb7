"""A reference policy that follows the calibration protocol (facet_probe/scoring/stability.py): it answers like
`always_first` and, when the system text asks for it, states a fixed order stability, so `table-calibration`
runs offline (the tiny VLM states none)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from facet_probe.runners.base import Request, Response
from facet_probe.runners.policies import AlwaysFirstPolicy
from facet_probe.scoring.stability import STABILITY_INSTRUCTION


class StatingFirstPolicy(AlwaysFirstPolicy):
    """Answers what is displayed first, then 'Stability: <stated>%' when the protocol asks for it."""

    policy = "always_first_stating"

    def __init__(self, name: str | None = None, stated: float = 0.9, **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if not 0.0 <= stated <= 1.0:
            from facet_probe.core.errors import ConfigError

            raise ConfigError(f"model.stated={stated}: a probability in [0, 1]")
        self.stated = stated

    def parameters(self) -> dict[str, Any]:
        return {**super().parameters(), "stated": self.stated}

    def answer(self, request: Request) -> Response:
        response = super().answer(request)
        if STABILITY_INSTRUCTION in request.prompt.system:
            return replace(response, text=f"{response.text}\nStability: {round(100 * self.stated)}%")
        return response
