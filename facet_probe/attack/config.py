"""The attack app's typed config and the attack settings (`conf/attack_app.yaml`, `conf/attack/*.yaml`).

Top-level keys are typed (a misspelt override fails at composition, as in the audit app). The `attack`
node is validated by `AttackSettings.from_config`: unknown keys, a non-positive step count or an alpha
larger than eps are `ConfigError`s. Its `objective` node is a plug-in (`_target_` + the objective's own
typed settings, `attack.objectives`), or null for no attack; its `loop` node is the loop's rules (`attack.loop`,
chosen with ``attack/loop=reference``). Budgets accept fractions of 255 as written in the paper
(``attack.eps=16/255``) or floats (``attack.eps=0.0627``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, cast

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from facet_probe.attack.loop import LoopRules
from facet_probe.config.overrides import override_value
from facet_probe.core.errors import ConfigError

TARGETED = (None, "next", "random")

_FRACTION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*/\s*([0-9]*\.?[0-9]+)\s*$")


def parse_budget(value: Any, what: str = "value") -> float:
    """A pixel budget in [0,1] units from a float, an int or a fraction string such as ``"16/255"``."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} must be a number or a fraction like 16/255, got {value!r}")
    if isinstance(value, int | float):
        out = float(value)
    elif isinstance(value, str):
        m = _FRACTION.match(value)
        try:
            out = float(m.group(1)) / float(m.group(2)) if m else float(value)
        except (ValueError, ZeroDivisionError) as exc:
            raise ConfigError(f"{what} must be a number or a fraction like 16/255, got {value!r}") from exc
    else:
        raise ConfigError(f"{what} must be a number or a fraction like 16/255, got {value!r}")
    if not math.isfinite(out) or out < 0:
        raise ConfigError(f"{what} must be a finite non-negative number, got {value!r}")
    return out


def budget_label(value: float) -> str:
    """``16`` for 16/255, else the float (``0.05``): how budgets appear in run folder names."""
    k = value * 255
    if abs(k - round(k)) < 1e-6:
        return str(int(round(k)))
    return f"{value:g}"


@dataclass(frozen=True)
class AttackSettings:
    """One attack's parameters (the `attack` config node), validated: the PGD budget and the objective."""

    name: str = "answer"  # the attack's name in run folders and tables
    objective: Any = None  # an attack.objectives.Objective (its own typed settings); None: no attack
    eps: float = 16 / 255  # L-inf radius in [0,1] pixel units
    alpha: float = 1 / 255  # sign-gradient step
    steps: int = 200
    update_every: int = 10  # pseudo-target refresh (greedy generation on the current image) period
    early_stop: bool = True  # stop a sample early (when and on what: `loop.early_stop_check`)
    targeted: str | None = None  # None: push away from the gold letter; next | random: toward a wrong letter
    quantize: bool = True  # evaluate (refresh and final generation) on the 8-bit image that is saved
    loop: LoopRules = field(default_factory=LoopRules)  # the loop's rules: the project's or the reference's

    @classmethod
    def from_config(cls, node: DictConfig | dict) -> AttackSettings:
        from facet_probe.attack.objectives.base import objective_from_config

        raw = cast(dict[str, Any], OmegaConf.to_container(node, resolve=True)) if isinstance(node, DictConfig) else dict(node)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"unknown attack setting(s) {unknown}; valid: {sorted(known)} (an objective's own "
                              "settings go under attack.objective)")
        if "objective" not in raw:
            raise ConfigError("attack.objective is missing: null (no attack) or a config with a _target_ "
                              "(see conf/attack/answer.yaml)")
        name = str(raw.get("name", cls.name))
        objective = objective_from_config(raw["objective"])
        eps = parse_budget(raw.get("eps", cls.eps), "attack.eps")
        alpha = parse_budget(raw.get("alpha", cls.alpha), "attack.alpha")
        steps = whole(raw.get("steps", cls.steps), "attack.steps")
        update_every = whole(raw.get("update_every", cls.update_every), "attack.update_every")
        if steps < 0:
            raise ConfigError(f"attack.steps must be >= 0, got {steps}")
        if update_every < 1:
            raise ConfigError(f"attack.update_every must be >= 1, got {update_every}")
        if eps > 1 or alpha > 1:
            raise ConfigError(f"attack.eps and attack.alpha are in [0,1] pixel units (e.g. 16/255); got "
                              f"eps={eps:g}, alpha={alpha:g}")
        if objective is not None and alpha > eps and eps > 0:
            raise ConfigError(f"attack.alpha ({alpha:g}) is larger than attack.eps ({eps:g})")
        targeted = raw.get("targeted", cls.targeted)
        if targeted not in TARGETED:
            raise ConfigError(f"attack.targeted must be null, next or random; got {targeted!r}")
        return cls(name=name, objective=objective, eps=eps, alpha=alpha, steps=steps, update_every=update_every,
                   early_stop=bool(raw.get("early_stop", cls.early_stop)), targeted=targeted,
                   quantize=bool(raw.get("quantize", cls.quantize)), loop=LoopRules.from_config(raw.get("loop")))

    @property
    def needs_rationale(self) -> bool:
        """Whether the objective needs chain-of-thought prompts (the run is skipped without them)."""
        return self.objective is not None and self.objective.needs_rationale

    def as_dict(self) -> dict[str, Any]:
        """The settings as JSON-able values: the objective as its whole settings object (`_target_` included), the
        loop's rules only when they are not the project's (so that runs made before the switch still resume)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("objective", "loop")}
        loop = {} if self.loop == LoopRules() else {"loop": self.loop.settings()}
        return out | loop | {"objective": None if self.objective is None else self.objective.settings()}


def settings_hash(settings: dict[str, Any]) -> str:
    """A short digest of everything that changes a sample's result (checked when a run resumes)."""
    canon = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


def whole(value: Any, key: str) -> int:
    """`value` as an int, or a ConfigError naming `key` (the run name is resolved before any setting is typed);
    an int is kept as it is (no float on the way: 2**64 + 1 stays itself)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not number.is_integer():
        raise ConfigError(f"{key} must be a whole number; got {value!r}")
    return int(number)


def adapter_label(adapter: Any) -> str:
    """``+<adapter folder or hub name>-<digest of the path or id>``, or '' without an adapter: an adapter run
    gets a folder of its own beside the base model's (its weights digest is still checked on resume)."""
    if adapter in (None, ""):
        return ""
    text = str(adapter).rstrip("/")
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text.rsplit("/", 1)[-1]) or "adapter"
    return f"+{name}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def budget_name(eps_255: str, alpha_255: str, steps: Any, update_every: Any, seed: Any = 0, loop: str = "") -> str:
    """``eps16-a1-s200-u10[-seedN][-loop_<name>]`` (budgets as `budget_label` writes them, `loop` the loop's
    `LoopRules.folder_label`): the budget folder's name, and the `budget` the tables give a folder's runs."""
    name = f"eps{eps_255}-a{alpha_255}-s{int(steps)}-u{int(update_every)}"
    return name + (f"-seed{int(seed)}" if int(seed or 0) != 0 else "") + (loop or "")


def objective_changes(objective: Any) -> list[str]:
    """``kappa=1.0`` for each setting of the objective set away from its class's default (the override's
    spelling), none for the defaults or no attack: what tells runs of one attack apart."""

    changed = objective.changed_settings() if objective is not None else {}
    return [f"{k}={override_value(v)}" for k, v in changed.items()]


def objective_suffix(objective: Any) -> str:
    """'' or ``_attack.objective.kappa=1.0``: the objective's changed settings as the audit names a folder by
    the overrides that change its calls (`config.schema.settings_suffix`: sorted, long ones hashed)."""
    from facet_probe.config.schema import settings_suffix  # noqa: PLC0415

    return settings_suffix([f"attack.objective.{change}" for change in objective_changes(objective)])


def attack_run_name(model: str, dataset: str, attack: str, cot: bool, eps: Any, alpha: Any, steps: Any,
                    update_every: Any, seed: Any, adapter: Any = None, objective: Any = None, loop: Any = None) -> str:
    """``<model>[+<adapter>]/<dataset>/eps16-a1-s200-u10[-seedN][-loop_<name>]/<attack>-<cot|direct>[_attack.objective.<k>=<v>]``:
    deterministic, so re-running the same command resumes in place; the attacks x modes of one budget and loop
    (`attack.loop`, named unless it is the project's) share a parent (the paper table); `objective` (the
    `attack.objective` node) adds its settings set away from the class's defaults, so a sweep over them gets a
    folder per value."""
    from facet_probe.attack.objectives.base import objective_from_config  # noqa: PLC0415  (it imports torch)
    from facet_probe.config.schema import check_seeds  # noqa: PLC0415  (imported where used, as `register` does)

    steps, update_every, seed = (whole(v, k) for v, k in ((steps, "attack.steps"),
                                                          (update_every, "attack.update_every"), (seed, "seed")))
    check_seeds(OmegaConf.create({"seed": seed}), {"seed": AttackAppConfig.seed})  # before Hydra makes the folder
    rules = LoopRules.from_config(OmegaConf.to_container(loop, resolve=True) if isinstance(loop, DictConfig) else loop)
    group = budget_name(budget_label(parse_budget(eps, "attack.eps")), budget_label(parse_budget(alpha, "attack.alpha")),
                        steps, update_every, seed, rules.folder_label)
    node = OmegaConf.to_container(objective, resolve=True) if isinstance(objective, DictConfig) else objective
    suffix = objective_suffix(objective_from_config(node))
    return f"{model}{adapter_label(adapter)}/{dataset}/{group}/{attack}-{'cot' if cot else 'direct'}{suffix}"


@dataclass
class AttackPromptConfig:
    cot: bool = True  # chain-of-thought prompts (rationale, then "The answer is (X).")
    preset: str = "project"  # project | reference (attack.preset.PromptPreset): whose prompt wording and layout


@dataclass
class AttackAppConfig:
    """Top-level keys of `python -m facet_probe.attack`."""

    model: Any = MISSING
    attack: Any = MISSING
    dataset: Any = MISSING
    prompt: AttackPromptConfig = field(default_factory=AttackPromptConfig)
    limit: int | None = None  # first N items of the dataset's sample
    selection: str = "project"  # project | reference (attack.preset.Selection): the reference drops ScienceQA's
    # "State capitals"
    seed: int = 0  # random starts (per sample, independent of batching)
    batch_size: int = 4  # samples attacked together (one batched forward per step); 1 = one at a time
    max_new_tokens: int | None = None  # greedy generations (clean, refresh, final); None = the model's setting
    data_root: str | None = None  # default parent folder of local dataset copies (<data_root>/<name>)
    out_root: str = "outputs"
    run_name: str = ("${fp_attack_run_name:${model.name},${dataset.name},${attack.name},${prompt.cot},"
                     "${attack.eps},${attack.alpha},${attack.steps},${attack.update_every},${seed},"
                     "${oc.select:model.adapter,null},${oc.select:attack.objective,null},${oc.select:attack.loop,null}}")
    save_images: bool = True  # <sample>_clean.png / <sample>_adv.png in images/
    progress: bool = True  # the progress bar (false: none, e.g. in CI logs)


def register() -> None:
    """Register the schema and the run-name resolver (idempotent); also the shared resolvers."""
    from facet_probe.config.schema import register as register_shared

    register_shared()
    if not OmegaConf.has_resolver("fp_attack_run_name"):
        OmegaConf.register_new_resolver("fp_attack_run_name", attack_run_name)
    ConfigStore.instance().store(name="attack_schema", node=AttackAppConfig)
