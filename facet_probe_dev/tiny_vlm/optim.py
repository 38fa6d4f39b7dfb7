"""The tiny VLM's optimiser: AdamW, or Muon on the layers' weight matrices with AdamW on the rest.

Muon (`torch.optim.Muon`) orthogonalises each matrix's update; it only takes 2-D matrices, so the
embeddings (tied to the output head), the patch and position embeddings, norms and biases stay on AdamW.
With ``adjust_lr_fn="match_rms_adamw"`` its updates have AdamW's size, so a stage's rate means the same
on both. With several training processes each one orthogonalises its own share of the matrices and sends
the updated matrices to the others (the gradients are already averaged, so every process would compute
the same update).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.distributed as dist
from torch import nn

#: the optimisers `build_optimizer` builds, and how the model card names them
OPTIMIZERS = {"adamw": "AdamW",
              "muon": "Muon on the layers' weight matrices and AdamW on embeddings, norms and biases"}
ADAM_BETAS = (0.9, 0.98)


def is_decayed(name: str, param: nn.Parameter) -> bool:
    """Weight decay on the matrices and conv kernels, not on embeddings, norms or biases."""
    return param.ndim >= 2 and "embed" not in name


def is_layer_matrix(name: str, param: nn.Parameter) -> bool:
    """A 2-D weight of a transformer layer or of the projector (not an embedding or the output head)."""
    return param.ndim == 2 and "embed" not in name and "lm_head" not in name


class OptimizerSet:
    """Several optimisers over disjoint parameters, stepped as one (the interface the trainer uses)."""

    def __init__(self, optimizers: Iterable[torch.optim.Optimizer],
                 owned: Sequence[Sequence[nn.Parameter]] = ()) -> None:
        self.optimizers = list(optimizers)
        #: with several processes: the parameters each process (by rank) updates and then broadcasts
        self.owned = [list(params) for params in owned]

    @property
    def param_groups(self) -> list[dict]:
        return [group for opt in self.optimizers for group in opt.param_groups]

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()
        if self.owned:
            broadcast_from_owners(self.owned)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Every parameter's gradient, including the matrices another process updates (which no
        optimiser here holds: left alone, their next gradients would add to this step's)."""
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)
        for params in self.owned:
            for p in params:
                p.grad = None

    def reset_state(self) -> None:
        """Forget the moments (a fresh optimiser, same parameters and settings)."""
        for opt in self.optimizers:
            opt.state.clear()

    def state_dict(self) -> list[dict]:
        return [opt.state_dict() for opt in self.optimizers]

    def load_state_dict(self, states: list[dict]) -> None:
        for opt, state in zip(self.optimizers, states, strict=True):
            opt.load_state_dict(state)


def broadcast_from_owners(owned: Sequence[Sequence[nn.Parameter]]) -> None:
    """Process r updated the parameters `owned[r]`; every process gets them (one message per owner)."""
    with torch.no_grad():
        for owner, params in enumerate(owned):
            if not params:
                continue
            flat = torch.cat([p.reshape(-1) for p in params])
            dist.broadcast(flat, owner)
            for p, chunk in zip(params, flat.split([p.numel() for p in params]), strict=True):
                p.copy_(chunk.view_as(p))


def build_optimizer(model: nn.Module, kind: str, weight_decay: float, rank: int = 0,
                    world: int = 1) -> OptimizerSet:
    """`kind` "adamw": AdamW everywhere (weight decay on the matrices, not on embeddings, norms, biases);
    "muon": Muon on the layer matrices (`is_layer_matrix`), AdamW on the rest; process `rank` of `world`
    runs Muon on every `world`-th matrix only (`OptimizerSet.owned`)."""
    if kind not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {kind!r}: choose one of {', '.join(OPTIMIZERS)}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    others = [p for n, p in named if not is_decayed(n, p)]
    if kind == "adamw":
        matrices = [p for n, p in named if is_decayed(n, p)]
        return OptimizerSet([torch.optim.AdamW([{"params": matrices, "weight_decay": weight_decay},
                                                {"params": others, "weight_decay": 0.0}], betas=ADAM_BETAS)])
    muon = [p for n, p in named if is_layer_matrix(n, p)]
    adam_decay = [p for n, p in named if is_decayed(n, p) and not is_layer_matrix(n, p)]
    owned = [muon[r::world] for r in range(world)]
    adamw = torch.optim.AdamW([{"params": adam_decay, "weight_decay": weight_decay},
                               {"params": others, "weight_decay": 0.0}], betas=ADAM_BETAS)
    mine = torch.optim.Muon(owned[rank], weight_decay=weight_decay, adjust_lr_fn="match_rms_adamw")
    return OptimizerSet([mine, adamw], owned if world > 1 else ())


__all__ = ["OPTIMIZERS", "OptimizerSet", "build_optimizer", "is_decayed", "is_layer_matrix"]
