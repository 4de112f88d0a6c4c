"""Interval estimates and the exact McNemar test, checked against published values.

Expected numbers come from the literature, not from this code: Wilson intervals are Newcombe's worked examples
(Statistics in Medicine 17:857-872, 1998, method 3); the paired difference is the Cavo et al. (2012) table as the
R package ``contingencytables`` (companion of Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency
Tables", 2017, chapter 8) computes Newcombe's square-and-add interval in its own tests (-0.0621, 95% CI -0.1186 to
-0.0046); the book's exact conditional McNemar p for that table is 0.052, and the Bentur et al. (2009) table's is
18/256.
"""

import math

import pytest

from pyrua_ros.reports.stats import Z_95, mcnemar_exact_p, paired_difference_interval, wilson_interval

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_matches_newcombes_examples(k, n, low, high):
    ci = wilson_interval(k, n)
    assert ci.estimate == k / n
    assert (round(ci.low, 4), round(ci.high, 4)) == (low, high)


def test_wilson_interval_edges():
    assert wilson_interval(0, 0) is None                      # no trials: no estimate, not 0%
    full = wilson_interval(10, 10)
    assert full.high == 1.0 and full.low == pytest.approx(1 - wilson_interval(0, 10).high)   # symmetric
    assert Z_95 == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError, match="exceed"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="integer >= 0"):
        wilson_interval(-1, 2)


def test_paired_difference_matches_the_published_cavo_example():
    # 59 both, 6 only before, 16 only after, 80 neither: difference before - after
    ci = paired_difference_interval(59, 6, 16, 80)
    assert round(ci.estimate, 4) == -0.0621
    assert (round(ci.low, 4), round(ci.high, 4)) == (-0.1186, -0.0046)


def test_paired_difference_properties():
    assert paired_difference_interval(0, 0, 0, 0) is None
    same = paired_difference_interval(5, 0, 0, 5)              # identical systems
    assert same.estimate == 0.0 and same.low < 0 < same.high
    flipped = paired_difference_interval(59, 16, 6, 80)        # swapping the systems mirrors the interval
    original = paired_difference_interval(59, 6, 16, 80)
    assert flipped.estimate == pytest.approx(-original.estimate)
    assert (flipped.low, flipped.high) == pytest.approx((-original.high, -original.low))
    extreme = paired_difference_interval(0, 10, 0, 0)          # first always, second never
    assert extreme.estimate == 1.0 and extreme.high == 1.0 and 0 < extreme.low < 1


def test_mcnemar_exact_p_values():
    assert mcnemar_exact_p(6, 16) == pytest.approx(2 * sum(math.comb(22, i) for i in range(7)) / 2**22)
    assert round(mcnemar_exact_p(6, 16), 3) == 0.052
    assert mcnemar_exact_p(1, 7) == 18 / 256 == mcnemar_exact_p(7, 1)
    assert mcnemar_exact_p(1, 9) == 22 / 1024
    assert mcnemar_exact_p(0, 0) == 1.0 and mcnemar_exact_p(3, 3) == 1.0   # capped at 1
    assert mcnemar_exact_p(0, 400) < 1e-100                                # big counts stay exact
