"""The K-ordering grammar, compatible with the FACET-PROBE v0.0.1 release.

Same item id, n, K and seed give the same orderings in every process and every release.
Convention: display slot j shows source component ``permutation[j]``.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Sequence

Permutation = tuple[int, ...]

#: Up to this many components every ordering is enumerated (and cycled when n! < K); above it K distinct
#: orderings are drawn, so K may not pass n!.
ENUMERATE_UP_TO = 7


def distinct_orderings(n: int, cap: int) -> int:
    """n!, or cap + 1 as soon as it passes cap (no huge factorials for long component lists)."""
    count = 1
    for i in range(2, n + 1):
        count *= i
        if count > cap:
            return cap + 1
    return count


def max_k(n: int) -> int | None:
    """The largest K the grammar can draw for n components: n! for n > ENUMERATE_UP_TO, None (any K: the n!
    orderings repeat, as FACET-PROBE v0.0.1 does) up to it."""
    return None if n <= ENUMERATE_UP_TO else distinct_orderings(n, 2**63)


def derive_seed(seed: int, item_id: str, n: int, k: int) -> int:
    """First 4 bytes (big-endian) of SHA-256 over ``seed \\x1f item_id \\x1f n \\x1f k``."""
    key = f"{seed}\x1f{item_id}\x1f{n}\x1f{k}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big")


def sample_permutations(n: int, k: int = 6, seed: int = 42, item_id: str = "",
                        include_canonical: bool = True) -> list[Permutation]:
    """K orderings of n components: identity first (if asked), then distinct RNG-drawn orderings.

    n <= 7: enumerate all n! orderings lexicographically; when n! < K the list is cycled (orderings
    repeat) and the RNG is not used. n >= 8: rejection-sample fresh shuffles until K are distinct (K <= n!).
    """
    if n < 1:
        raise ValueError(f"need at least one component to order, got n={n}")
    if k < 1:
        raise ValueError(f"need K >= 1 orderings, got k={k}")
    if (most := max_k(n)) is not None and k > most:
        raise ValueError(f"K={k} distinct orderings of {n} components asked; there are {most} (n!)")
    rng = random.Random(derive_seed(seed, item_id, n, k))
    identity = tuple(range(n))
    if n <= ENUMERATE_UP_TO:
        all_perms = list(itertools.permutations(range(n)))
        if len(all_perms) < k:
            return [all_perms[i % len(all_perms)] for i in range(k)]
        if include_canonical:
            rest = all_perms[1:]
            rng.shuffle(rest)
            return [identity, *rest[: k - 1]]
        rng.shuffle(all_perms)
        return all_perms[:k]
    chosen: list[Permutation] = [identity] if include_canonical else []
    seen = set(chosen)
    while len(chosen) < k:
        perm = list(range(n))
        rng.shuffle(perm)
        candidate = tuple(perm)
        if candidate not in seen:
            seen.add(candidate)
            chosen.append(candidate)
    return chosen


def inverse(perm: Sequence[int]) -> Permutation:
    """inverse(perm)[source_index] = display slot of that source component."""
    inv = [0] * len(perm)
    for slot, src in enumerate(perm):
        inv[src] = slot
    return tuple(inv)


def apply(perm: Sequence[int], items: Sequence):
    """The items in display order: slot j holds ``items[perm[j]]``."""
    return [items[i] for i in perm]


def is_permutation(perm: Sequence[int]) -> bool:
    return sorted(perm) == list(range(len(perm)))
