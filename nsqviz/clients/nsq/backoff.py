"""Backoff strategies: how long a consumer holds RDY 0 after ``n`` consecutive failures.

A strategy is any callable ``(failures: int) -> seconds``. The default is exponential
with *full jitter* (a uniform draw between 0 and the exponential value), which spreads
the consumers of a struggling downstream apart instead of making them retry in step;
:class:`ExponentialBackoff` without jitter is go-nsq's shape, :class:`LinearBackoff`
roughly pynsq's. Each takes an optional ``random.Random`` for reproducible runs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["BackoffStrategy", "ExponentialBackoff", "LinearBackoff"]

BackoffStrategy = Callable[[int], float]


@dataclass
class ExponentialBackoff:
    """``multiplier * 2**(failures-1)`` capped at ``max_duration``; with ``jitter`` a
    uniform draw in ``[0, that]`` (full jitter)."""

    multiplier: float = 1.0
    max_duration: float = 120.0
    jitter: bool = True
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __call__(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        ceiling = min(self.max_duration, self.multiplier * 2 ** min(failures - 1, 62))
        return self.rng.uniform(0, ceiling) if self.jitter else ceiling


@dataclass
class LinearBackoff:
    """``step * failures`` capped at ``max_duration``."""

    step: float = 1.0
    max_duration: float = 120.0

    def __call__(self, failures: int) -> float:
        return min(self.max_duration, self.step * max(0, failures))
