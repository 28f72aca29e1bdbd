"""The least-squares helpers the cost-model fits share: non-negative least squares and a
derivative-free finishing pass.

numpy is imported inside each function: the base install reads cost models without it.
"""

from __future__ import annotations

from typing import Any


def nnls(x: object, y: object) -> tuple[float, float, float]:
    """Least squares with coefficients clamped at zero, for three columns."""
    a, b, c = nnls_n(x, y)
    return a, b, c


def nnls_n(x: object, y: object) -> tuple[float, ...]:
    """Least squares with coefficients clamped at zero (a small active-set loop).

    Columns are scaled to unit norm first: the attention column is ~1e12 times the constant
    one, and unscaled least squares would lose the small coefficients.
    """
    import numpy as np

    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    scale = np.linalg.norm(xa, axis=0)
    scale[scale == 0] = 1.0
    xs = xa / scale
    active = list(range(xa.shape[1]))
    coef = np.zeros(xa.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(xs[:, active], ya, rcond=None)
        if (sol >= 0).all():
            coef[:] = 0
            coef[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    out = coef / scale
    return tuple(float(v) for v in out)


def coordinate_search(fun: Any, x0: Any) -> Any:
    """A derivative-free pass over ``x0``: each coordinate stepped up and down by a halving
    step while the soft-L1 loss (f_scale 0.1) of ``fun``'s residuals drops; at most 120
    evaluations. Finishes a fit a gradient step left on a plateau of a piecewise function."""
    import numpy as np

    def loss(v: Any) -> float:
        # The soft-L1 loss least_squares minimised (f_scale 0.1), so this pass only improves it.
        z = (np.asarray(v) / 0.1) ** 2
        return float(np.sum(2 * (np.sqrt(1 + z) - 1)))

    x = np.array(x0, dtype=float)
    best = loss(fun(x))
    step = 1.0
    evals = 0
    while step > 0.06 and evals < 120:
        improved = False
        for j in range(len(x)):
            for d in (step, -step):
                y = x.copy()
                y[j] += d
                v = loss(fun(y))
                evals += 1
                if v < best:
                    x, best, improved = y, v, True
        if not improved:
            step /= 2
    return x
