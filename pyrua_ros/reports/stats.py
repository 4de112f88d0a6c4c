"""Interval estimates and tests for success rates: what ``summarize`` and ``compare`` report besides the counts.

- :func:`wilson_interval`: the Wilson score interval of one binomial proportion (no continuity correction); it
  stays inside [0, 1] and is sensible at 0/n and n/n, where the textbook Wald interval collapses to a point.
- :func:`paired_difference_interval`: Newcombe's square-and-add interval for the difference of two *paired*
  proportions (Statistics in Medicine 17:2635-2650, 1998, method 10): the two marginal Wilson intervals combined
  with the estimated correlation of the pairs (corrected towards zero for small positive association).
- :func:`mcnemar_exact_p`: the exact (conditional) McNemar test, a two-sided binomial test of the discordant
  pairs against 1/2.

Pure Python (``math`` only), so reports need neither numpy nor scipy.
"""

from __future__ import annotations

import dataclasses
import math

Z_95 = 1.959963984540054   # the standard normal quantile of 0.975


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided confidence interval ``[low, high]`` at ``level``."""

    estimate: float
    low: float
    high: float
    level: float = 0.95

    def to_json(self, digits: int = 6) -> dict[str, float]:
        """``{estimate, low, high, level}`` rounded to ``digits`` decimals."""
        return {"estimate": round(self.estimate, digits), "low": round(self.low, digits),
                "high": round(self.high, digits), "level": self.level}


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0; got {value!r}")


def wilson_interval(successes: int, n: int, z: float = Z_95) -> Interval | None:
    """The Wilson score interval of ``successes`` out of ``n`` trials; None when ``n`` is 0 (no estimate)."""
    _check_count("successes", successes)
    _check_count("n", n)
    if successes > n:
        raise ValueError(f"successes ({successes}) exceed trials ({n})")
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    # the exact ends are 0 and 1 when every or no trial succeeds; rounding must not move them
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(p, low, high)


def paired_difference_interval(both: int, first_only: int, second_only: int, neither: int,
                               z: float = Z_95) -> Interval | None:
    """Interval of ``p1 - p2`` for paired outcomes (Newcombe 1998, method 10); None for no pairs.

    The counts are the 2x2 table of pairs: ``both`` succeeded, only the first, only the second, ``neither``.
    ``p1 = (both + first_only) / n`` and ``p2 = (both + second_only) / n``.
    """
    for name, value in (("both", both), ("first_only", first_only), ("second_only", second_only),
                        ("neither", neither)):
        _check_count(name, value)
    n = both + first_only + second_only + neither
    if n == 0:
        return None
    s1, s2 = both + first_only, both + second_only
    p1, p2 = s1 / n, s2 / n
    w1, w2 = wilson_interval(s1, n, z), wilson_interval(s2, n, z)
    margins = s1 * (n - s1) * s2 * (n - s2)
    phi = 0.0
    if margins > 0:
        cross = both * neither - first_only * second_only
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    d1_low, d1_high = p1 - w1.low, w1.high - p1
    d2_low, d2_high = p2 - w2.low, w2.high - p2
    below = math.sqrt(max(0.0, d1_low ** 2 - 2 * phi * d1_low * d2_high + d2_high ** 2))
    above = math.sqrt(max(0.0, d1_high ** 2 - 2 * phi * d1_high * d2_low + d2_low ** 2))
    difference = p1 - p2
    return Interval(difference, max(-1.0, difference - below), min(1.0, difference + above))


def mcnemar_exact_p(first_only: int, second_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts (1.0 when there are none)."""
    _check_count("first_only", first_only)
    _check_count("second_only", second_only)
    n = first_only + second_only
    if n == 0:
        return 1.0
    k = min(first_only, second_only)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2.0 * tail)
