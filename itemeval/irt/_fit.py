"""1PL and 2PL item response models fitted by joint maximum a posteriori (numpy + scipy).

The data are two matrices of the same shape, conditions x items: `correct` (right answers) and
`trials` (graded answers; several epochs of an item count as a binomial, 0 where a condition has
no answer to an item). The 2PL model, in slope-intercept form:

    P(right | condition c, item i) = sigmoid(a_i * theta_c + d_i),   difficulty b_i = -d_i / a_i

with normal priors theta ~ N(0, 1), a ~ N(1, 1) (so a discrimination can come out negative),
d ~ N(0, 3^2). The 1PL model fixes a_i = 1. Every parameter is fitted at once by L-BFGS on the
log posterior, whose gradient is three matrix products over the residuals n*p - k. Standard
errors come from the curvature of the log posterior per item (a 2x2 block) and per condition,
the other parameters held at their estimates.

`fit_irt(correct, trials, model)` returns an `IrtFit`; `held_out_loglik` compares models on
cells left out of the fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODELS = ("1pl", "2pl")
MAX_STEP = 1.0  # the largest change of one parameter in one Newton step
THETA_SD = 1.0
A_MEAN, A_SD = 1.0, 1.0
D_SD = 3.0


@dataclass(frozen=True)
class IrtFit:
    """Fitted parameters and their standard errors (arrays over conditions or items)."""

    model: str  # "1pl" | "2pl"
    theta: np.ndarray  # ability per condition
    theta_se: np.ndarray
    a: np.ndarray  # discrimination per item (all 1 under 1PL)
    a_se: np.ndarray  # (0 under 1PL)
    d: np.ndarray  # intercept per item
    b: np.ndarray  # difficulty per item: -d / a
    b_se: np.ndarray
    loglik: float  # log-likelihood of the fitted data (binomial, without the constant)
    iterations: int
    converged: bool

    def probability(self, rows: np.ndarray | None = None) -> np.ndarray:
        """P(right) per condition x item (or for the conditions `rows`)."""
        theta = self.theta if rows is None else self.theta[rows]
        return _softplus_sigmoid(np.outer(theta, self.a) + self.d)[1]


def _softplus_sigmoid(logit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log(1 + e^x) and 1 / (1 + e^-x) from one exponential, stable at both ends, in place
    where it can be (scipy's `expit` and numpy's `logaddexp` are 5-10x slower here)."""
    e = np.abs(logit)
    np.negative(e, out=e)
    np.exp(e, out=e)
    softplus = np.log1p(e)
    softplus += np.maximum(logit, 0.0)
    sigmoid = e + 1.0
    np.reciprocal(sigmoid, out=sigmoid)  # 1 / (1 + e)
    negative = logit < 0
    np.multiply(e, sigmoid, out=sigmoid, where=negative)  # e / (1 + e) where x < 0
    return softplus, sigmoid


def _loglik(logit: np.ndarray, correct: np.ndarray, trials: np.ndarray) -> float:
    softplus, _ = _softplus_sigmoid(logit)
    return float(np.sum(correct * logit, dtype=np.float64)) - float(
        np.sum(trials * softplus, dtype=np.float64)
    )


def _weights_residuals(
    theta: np.ndarray, a: np.ndarray, d: np.ndarray, k: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per cell: the binomial information n p (1 - p) and the residual n p - k."""
    logit = np.outer(theta.astype(np.float32), a.astype(np.float32))
    logit += d.astype(np.float32)
    _, p = _softplus_sigmoid(logit)
    residual = n * p
    residual -= k
    p *= 1.0 - p
    p *= n
    return p, residual


def fit_irt(
    correct: np.ndarray,
    trials: np.ndarray,
    model: str = "2pl",
    *,
    max_iterations: int = 300,
    tolerance: float = 1e-4,
    start: IrtFit | None = None,
) -> IrtFit:
    """Fit `model` ("1pl" or "2pl") to the counts (conditions x items) by joint MAP, from the
    observed rates or from `start` (a 2PL fit starts well from the 1PL one)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, not {model!r}")
    # The matrices in single precision: half the memory traffic, and the sums that matter
    # (log-likelihood, gradients) are accumulated in double.
    k = np.asarray(correct, dtype=np.float32)
    n = np.asarray(trials, dtype=np.float32)
    if k.shape != n.shape or k.ndim != 2:
        raise ValueError("correct and trials must be matrices of the same shape")
    conditions, items = k.shape
    two = model == "2pl"
    # Start from the observed rates: ability from each condition's accuracy, the intercept
    # from each item's.
    with np.errstate(invalid="ignore", divide="ignore"):
        row_rate = np.clip(k.sum(1) / np.maximum(n.sum(1), 1), 0.02, 0.98)
        col_rate = np.clip(k.sum(0) / np.maximum(n.sum(0), 1), 0.02, 0.98)
    theta0 = np.log(row_rate / (1 - row_rate))
    theta0 = (theta0 - theta0.mean()) / (theta0.std() or 1.0) if conditions > 1 else theta0 * 0
    d0 = np.log(col_rate / (1 - col_rate))
    a0 = np.ones(items)
    if start is not None:
        theta0, a0, d0 = start.theta, start.a, start.d

    theta, a, d = theta0.astype(np.float64), np.array(a0, dtype=np.float64), d0.astype(np.float64)
    iterations, converged = 0, False
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (read after the loop)
        # Items: one Newton step on (a, d) per item, abilities held (a logistic regression
        # per item, all items at once).
        w, residual = _weights_residuals(theta, a, d, k, n)
        g_d = residual.sum(0, dtype=np.float64) + d / D_SD**2
        h_dd = w.sum(0, dtype=np.float64) + 1.0 / D_SD**2
        if two:
            t32 = theta.astype(np.float32)
            g_a = (t32 @ residual).astype(np.float64) + (a - A_MEAN) / A_SD**2
            h_aa = ((t32 * t32) @ w).astype(np.float64) + 1.0 / A_SD**2
            h_ad = (t32 @ w).astype(np.float64)
            det = h_aa * h_dd - h_ad * h_ad
            step_a = np.clip((h_dd * g_a - h_ad * g_d) / det, -MAX_STEP, MAX_STEP)
            step_d = np.clip((h_aa * g_d - h_ad * g_a) / det, -MAX_STEP, MAX_STEP)
            a = a - step_a
        else:
            step_a = np.zeros(1)
            step_d = np.clip(g_d / h_dd, -MAX_STEP, MAX_STEP)
        d = d - step_d
        # Conditions: one Newton step on each ability, items held.
        w, residual = _weights_residuals(theta, a, d, k, n)
        a32 = a.astype(np.float32)
        g_t = (residual @ a32).astype(np.float64) + theta / THETA_SD**2
        h_t = (w @ (a32 * a32)).astype(np.float64) + 1.0 / THETA_SD**2
        step_t = np.clip(g_t / h_t, -MAX_STEP, MAX_STEP)
        theta = theta - step_t
        change = max(
            float(np.abs(step_t).max(initial=0.0)),
            float(np.abs(step_a).max(initial=0.0)),
            float(np.abs(step_d).max(initial=0.0)),
        )
        if change < tolerance:  # one full sweep moved nothing by more than `tolerance`
            converged = True
            break
    a = np.array(a, dtype=np.float64)
    logit = np.outer(theta, a) + d
    loglik = _loglik(logit, k, n)
    _, p = _softplus_sigmoid(logit)
    w = n * p * (1 - p)  # binomial information per cell
    theta_se = 1.0 / np.sqrt(w @ (a * a) + 1.0 / THETA_SD**2)
    i_dd = w.sum(0) + 1.0 / D_SD**2
    if two:
        i_aa = (theta * theta) @ w + 1.0 / A_SD**2
        i_ad = theta @ w
        det = i_aa * i_dd - i_ad * i_ad
        var_a, var_d, cov = i_dd / det, i_aa / det, -i_ad / det
        with np.errstate(divide="ignore", invalid="ignore"):
            b = -d / a
            var_b = var_d / a**2 + d**2 * var_a / a**4 - 2 * d * cov / a**3
        a_se = np.sqrt(var_a)
        b_se = np.sqrt(np.maximum(var_b, 0.0))
    else:
        b = -d
        a_se = np.zeros(items)
        b_se = 1.0 / np.sqrt(i_dd)
    return IrtFit(
        model=model,
        theta=np.array(theta),
        theta_se=theta_se,
        a=a,
        a_se=a_se,
        d=np.array(d),
        b=b,
        b_se=b_se,
        loglik=loglik,
        iterations=iterations,
        converged=converged,
    )


@dataclass(frozen=True)
class HeldOut:
    """Mean log-likelihood per held-out answer: higher is better."""

    cells: int  # condition x item cells left out
    answers: int  # graded answers in them
    per_answer: dict[str, float]  # model -> mean log-likelihood per answer ("base": accuracy)


def held_out_loglik(
    correct: np.ndarray,
    trials: np.ndarray,
    *,
    share: float = 0.2,
    seed: int = 0,
    models: tuple[str, ...] = MODELS,
) -> HeldOut:
    """Leave `share` of the answered cells out, fit each model on the rest, and score the
    left-out answers. "base" is the condition's accuracy alone (no item effect)."""
    k = np.asarray(correct, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    rng = np.random.default_rng(seed)
    held = (n > 0) & (rng.random(n.shape) < share)
    k_fit, n_fit = np.where(held, 0.0, k), np.where(held, 0.0, n)
    k_out, n_out = np.where(held, k, 0.0), np.where(held, n, 0.0)
    answers = float(n_out.sum())
    out: dict[str, float] = {}
    rate = np.clip(k_fit.sum(1) / np.maximum(n_fit.sum(1), 1), 1e-3, 1 - 1e-3)
    base_logit = np.repeat(np.log(rate / (1 - rate))[:, None], k.shape[1], axis=1)
    out["base"] = _loglik(base_logit, k_out, n_out) / max(answers, 1.0)
    fit: IrtFit | None = None
    for model in models:
        fit = fit_irt(k_fit, n_fit, model, start=fit)
        logit = np.outer(fit.theta, fit.a) + fit.d
        out[model] = _loglik(logit, k_out, n_out) / max(answers, 1.0)
    return HeldOut(cells=int(held.sum()), answers=int(answers), per_answer=out)
