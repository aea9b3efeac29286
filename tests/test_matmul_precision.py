"""Every float32 product in rmtbase's JAX code goes through rmtbase._matmul.mm, which asks for
full precision off CPU: on GPUs JAX's default is TF32, which moved W_QK's statistics and σ_fit by
up to 10⁻³ on an H100 against the CPU estimator of the shipped tables. Checked on the traced
programs with mm's backend choice forced to an accelerator's (CPU suffices), after clearing
JAX's trace caches so that nothing traced before is reused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.scoring.measures.qk_histogram import finish, passes_and_histogram
from rmtbase.stats import head_stats


def _dots(jaxpr):
    """Every dot_general equation in a (closed) jaxpr, sub-jaxprs included."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            out.append(eqn)
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (list, tuple)) else [v]):
                inner = getattr(sub, "jaxpr", None)
                if inner is not None:
                    out += _dots(inner if hasattr(inner, "eqns") else inner.jaxpr)
    return out


def _highest(eqn) -> bool:
    p = eqn.params.get("precision")
    if p is None:
        return False
    ps = p if isinstance(p, tuple) else (p, p)
    return all(x == jax.lax.Precision.HIGHEST for x in ps)


@pytest.mark.parametrize("case", ["head_stats", "qk_elements", "products", "residual"])
def test_every_product_is_full_precision(case, monkeypatch):
    import rmtbase._matmul as matmul

    monkeypatch.setattr(matmul, "_precision", lambda: jax.lax.Precision.HIGHEST)
    jax.clear_caches()
    rng = np.random.default_rng(0)
    wq = jnp.asarray(rng.standard_normal((2, 8, 64)), jnp.float32)
    wk = jnp.asarray(rng.standard_normal((2, 8, 64)), jnp.float32)
    if case == "head_stats":
        jaxpr = jax.make_jaxpr(lambda a, b: head_stats(a, b))(wq, wk)
    elif case == "qk_elements":
        jaxpr = jax.make_jaxpr(lambda a, b: finish(  # scoring's two programs, one head
            passes_and_histogram(a, b, jnp.float32(1.0))[0], 64 * 64))(wq[0], wk[0])
    elif case == "products":
        from rmtbase.ensembles.products import product_network

        jaxpr = jax.make_jaxpr(lambda k: product_network(k, "ginibre", 3, d=16))(
            jax.random.key(0))
    else:
        from rmtbase.ensembles.residual import residual_product

        jaxpr = jax.make_jaxpr(lambda k: residual_product(k, 16, 3))(jax.random.key(0))
    dots = _dots(jaxpr.jaxpr)
    assert dots, "no product traced"
    assert all(_highest(e) for e in dots), [e.params.get("precision") for e in dots]
    jax.clear_caches()  # nothing traced with the forced choice stays for later tests


def test_cpu_keeps_the_default_product():
    """On CPU mm leaves the precision at XLA's default (already the full float32 product)."""
    from rmtbase._matmul import mm

    if jax.default_backend() != "cpu":
        pytest.skip("CPU only")
    a = jnp.ones((4, 4), jnp.float32)
    (eqn,) = _dots(jax.make_jaxpr(mm)(a, a).jaxpr)
    assert eqn.params.get("precision") is None
