"""``ferrograd.func`` (``torch.func``) transforms and ``fg.vmap``, against float64 NumPy
results derived by hand, with the result structures ``torch.func`` gives."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import ferrograd as fg
import numpy as np
import pytest
from ferrograd import func, nn

F = nn.functional

ROOT = Path(__file__).resolve().parent.parent
REF = np.load(ROOT / "tests" / "fixtures" / "parity" / "func_transforms.npz")
_spec = importlib.util.spec_from_file_location(
    "make_func_references", ROOT / "scripts" / "make_func_references.py"
)
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def t64(a):
    return fg.tensor(np.asarray(a, dtype=np.float64), dtype=fg.float64)


RNG = np.random.default_rng(38)
XA = RNG.standard_normal(4)
YA = RNG.standard_normal(4)
MA = RNG.standard_normal((3, 4))


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(a.numpy(), b, rtol=tol, atol=tol)


def test_grad_argnums_aux_and_pytrees():
    x, y = t64(XA), t64(YA)
    f = lambda x, y: (x * x * y).sum()  # noqa: E731
    close(func.grad(f)(x, y), 2 * XA * YA)
    gx, gy = func.grad(f, argnums=(0, 1))(x, y)
    close(gx, 2 * XA * YA)
    close(gy, XA**2)
    g, (v, aux) = func.grad_and_value(lambda x: ((x**3).sum(), x * 2), has_aux=True)(x)
    close(g, 3 * XA**2)
    close(v, np.sum(XA**3))
    close(aux, 2 * XA)
    assert not g.requires_grad and not v.requires_grad
    g, aux = func.grad(lambda x: ((x**3).sum(), {"m": x.mean()}), has_aux=True)(x)
    close(g, 3 * XA**2)
    close(aux["m"], XA.mean())
    # a dict (and list) argument gives gradients of the same structure
    params = {"w": t64(XA), "b": [t64(2.0)]}
    gp = func.grad(lambda p, y: ((p["w"] * y).sum() + p["b"][0]) ** 2, argnums=0)(params, y)
    s = np.dot(XA, YA) + 2.0
    assert set(gp) == {"w", "b"} and isinstance(gp["b"], list)
    close(gp["w"], 2 * s * YA)
    close(gp["b"][0], 2 * s)
    # ferrograd's (value, grad) order keeps working
    v, g = func.value_and_grad(f)(x, y)
    close(v, np.sum(XA**2 * YA))
    close(g, 2 * XA * YA)


def test_grad_nests_for_higher_order():
    x = t64(0.7)
    d3 = func.grad(func.grad(func.grad(lambda x: x.sin() * x**4)))(x)
    a = 0.7
    expect = -np.cos(a) * a**4 - 12 * np.sin(a) * a**3 + 36 * np.cos(a) * a**2 + 24 * np.sin(a) * a
    close(d3, expect)
    # the gradient of an outer autograd graph flows through grad()
    w = t64(XA).requires_grad_(True)
    g = func.grad(lambda x: (x * x * w).sum())(t64(YA))
    assert not g.requires_grad  # w is a captured constant to the transform
    xr = t64(YA).requires_grad_(True)
    g = func.grad(lambda x: (x**3).sum())(xr)
    (gg,) = fg.autograd.grad(g.sum(), xr)
    close(gg, 6 * YA)


def test_grad_errors():
    x = t64(XA)
    with pytest.raises(RuntimeError, match="scalar Tensor"):
        func.grad(lambda x: x * 2)(x)
    with pytest.raises(RuntimeError, match="argnums"):
        func.grad(lambda x: x.sum(), argnums=3)(x)
    with pytest.raises(TypeError, match="floating point"):
        func.grad(lambda x: x.sum())(fg.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="has_aux"):
        func.grad(lambda x: x.sum(), has_aux=True)(x)


def test_vjp_jvp_linearize():
    x, y = t64(XA), t64(YA)
    m = t64(MA)
    out, vjp_fn = func.vjp(lambda x, y: {"a": m @ x, "b": x * y}, x, y)
    close(out["a"], MA @ XA)
    ca, cb = t64([1.0, -2.0, 0.5]), t64(YA)
    for _ in range(2):  # vjp_fn may be called again
        gx, gy = vjp_fn({"a": ca, "b": cb})
        close(gx, MA.T @ ca.numpy() + YA * YA)
        close(gy, XA * YA)
    with pytest.raises(RuntimeError, match="shape"):
        vjp_fn({"a": ca, "b": t64([1.0])})
    out, vjp_fn, aux = func.vjp(lambda x: (x.exp(), x.sum()), x, has_aux=True)
    (g,) = vjp_fn(y)
    close(g, np.exp(XA) * YA)
    close(aux, XA.sum())
    out, tan = func.jvp(lambda x, y: (m @ (x * y), (x * y).sum()), (x, y), (y, x))
    close(out[0], MA @ (XA * YA))
    close(tan[0], MA @ (YA * YA + XA * XA))
    close(tan[1], np.sum(YA * YA + XA * XA))
    out, tan, aux = func.jvp(lambda x: (x.sin(), "aux"), (x,), (y,), has_aux=True)
    close(tan, np.cos(XA) * YA)
    assert aux == "aux"
    with pytest.raises(RuntimeError, match="tuples"):
        func.jvp(lambda x: x, x, y)
    out, jvp_fn = func.linearize(lambda x: x.sin() * 3, x)
    close(out, 3 * np.sin(XA))
    close(jvp_fn(y), 3 * np.cos(XA) * YA)


def test_jacrev_jacfwd_hessian_structures():
    x, y = t64(XA), t64(YA)
    f = lambda x, y: {"p": x * y, "s": (x.exp() * y).sum()}  # noqa: E731
    for jac in (func.jacrev, func.jacfwd):
        j = jac(f, argnums=(0, 1))(x, y)
        assert set(j) == {"p", "s"} and len(j["p"]) == 2
        close(j["p"][0], np.diag(YA))
        close(j["p"][1], np.diag(XA))
        close(j["s"][0], np.exp(XA) * YA)
        close(j["s"][1], np.exp(XA))
        j, aux = jac(lambda x: (x.sin(), x.cos()), has_aux=True)(x)
        close(j, np.diag(np.cos(XA)))
        close(aux, np.cos(XA))
    jw = func.jacrev(lambda p: t64(MA) @ p["w"])({"w": x})
    close(jw["w"], MA)
    # hessian of x^T A x is A + A^T; of sum(x^2 y) over (x, y) as a tuple of tuples
    a = RNG.standard_normal((4, 4))
    close(func.hessian(lambda x: x @ (t64(a) @ x))(x), a + a.T)
    h = func.hessian(lambda x, y: (x * x * y).sum(), argnums=(0, 1))(x, y)
    close(h[0][0], np.diag(2 * YA))
    close(h[0][1], np.diag(2 * XA))
    close(h[1][0], np.diag(2 * XA))
    close(h[1][1], np.zeros((4, 4)))
    # ferrograd's jacobian keeps its form
    close(func.jacobian(lambda t: t * t, x), np.diag(2 * XA))


def test_vmap_dims_structures_and_nesting():
    b = RNG.standard_normal((5, 3))
    c = RNG.standard_normal((3, 5))
    assert fg.vmap is func.vmap
    out = fg.vmap(lambda u, v, k: u * v + k, in_dims=(0, 1, None))(t64(b), t64(c), 2.0)
    close(out, b * c.T + 2.0)
    # out_dims moves the mapped dimension; outputs are pytrees
    out = fg.vmap(lambda u: {"d": u * 2, "s": (u.sum(), u[:2])}, out_dims={"d": 1, "s": (0, -1)})(t64(b))
    close(out["d"], (b * 2).T)
    close(out["s"][0], b.sum(1))
    close(out["s"][1], b[:, :2].T)
    # in_dims as a pytree for a dict argument, None for an unmapped leaf
    p = {"w": t64(b), "c": t64(c[:, 0])}
    out = fg.vmap(lambda p: p["w"] @ p["c"], in_dims=({"w": 0, "c": None},))(p)
    close(out, b @ c[:, 0])
    # nested: outer product table
    out = fg.vmap(fg.vmap(lambda u, v: u * v, in_dims=(None, 0)), in_dims=(0, None))(t64(b[:, 0]), t64(c[0]))
    close(out, np.outer(b[:, 0], c[0]))
    # negative in_dims, out_dims=None for an output that does not depend on the batch
    out, k = fg.vmap(lambda u: (u.exp(), fg.ones(2)), in_dims=-1, out_dims=(0, None))(t64(c))
    close(out, np.exp(c.T))
    assert tuple(k.shape) == (2,)
    with pytest.raises(ValueError, match="differs across"):
        fg.vmap(lambda u: u, out_dims=None)(t64(b))


def test_vmap_errors_and_randomness():
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        fg.vmap(lambda a, b: a + b)(fg.ones(2), fg.ones(3))
    with pytest.raises(ValueError, match="non-Tensor"):
        fg.vmap(lambda a, k: a * k)(fg.ones(2), 3.0)
    with pytest.raises(ValueError, match="at least one input"):
        fg.vmap(lambda a: a, in_dims=None)(fg.ones(2))
    with pytest.raises(ValueError, match="dimensionality 1"):
        fg.vmap(lambda a: a, in_dims=1)(fg.ones(2))
    with pytest.raises(ValueError, match="in_dims"):
        fg.vmap(lambda a, b: a, in_dims=(0,))(fg.ones(2), fg.ones(2))
    with pytest.raises(ValueError, match="only return Tensors"):
        fg.vmap(lambda a: 1.0)(fg.ones(2))
    with pytest.raises(RuntimeError, match="randomness"):
        fg.vmap(lambda a: a, randomness="bad")
    with pytest.raises(RuntimeError, match="random operation"):
        fg.vmap(lambda a: a + fg.rand(3))(fg.zeros((2, 3)))
    fg.manual_seed(0)
    same = fg.vmap(lambda a: a + fg.rand(3), randomness="same")(fg.zeros((4, 3))).numpy()
    assert np.all(same == same[0])
    fg.manual_seed(0)
    diff = fg.vmap(lambda a: a + fg.rand(3), randomness="different")(fg.zeros((4, 3))).numpy()
    assert not np.all(diff == diff[0])
    np.testing.assert_array_equal(diff[0], same[0])


def test_per_sample_gradients_with_functional_call():
    fg.manual_seed(1)
    model = nn.Linear(3, 2).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = t64(RNG.standard_normal((6, 3)))
    y = t64(RNG.standard_normal((6, 2)))

    def loss_fn(params, xi, yi):
        pred = func.functional_call(model, params, (xi.unsqueeze(0),))
        return F.mse_loss(pred, yi.unsqueeze(0))

    g = fg.vmap(func.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    w, bias = params["weight"].numpy(), params["bias"].numpy()
    r = x.numpy() @ w.T + bias - y.numpy()  # (6, 2): d mean(r^2)/dr = r (2 outputs)
    close(g["weight"], np.einsum("bi,bj->bij", r, x.numpy()))
    close(g["bias"], r)
    # their mean is the batch gradient of the batch-mean loss
    model.zero_grad()
    F.mse_loss(model(x), y).backward()
    close(g["weight"].mean(0), model.weight.grad.numpy())


def test_ensembling_with_stacked_params():
    fg.manual_seed(2)
    models = [nn.Linear(3, 2).double() for _ in range(4)]
    params, buffers = func.stack_module_state(models)
    assert tuple(params["weight"].shape) == (4, 2, 3) and params["weight"].requires_grad
    x = t64(RNG.standard_normal((5, 3)))

    def fmodel(p, b, x):
        return func.functional_call(models[0], (p, b), (x,))

    out = fg.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    for k, m in enumerate(models):
        close(out[k], x.numpy() @ m.weight.detach().numpy().T + m.bias.detach().numpy())
    # gradients flow back into the stacked parameters
    out.sum().backward()
    close(params["bias"].grad, np.full((4, 2), 5.0))


def test_batched_jacobians():
    xb = RNG.standard_normal((3, 4))
    m = t64(MA)
    j = fg.vmap(func.jacrev(lambda x: (m @ x).tanh()))(t64(xb))
    expect = np.stack([(1 - np.tanh(MA @ xi) ** 2)[:, None] * MA for xi in xb])
    close(j, expect)
    h = fg.vmap(func.hessian(lambda x: (x**3).sum()))(t64(xb))
    close(h, np.stack([np.diag(6 * xi) for xi in xb]))


def test_references_record_their_torch_version():
    assert str(REF["torch_version"]).startswith("2.")


def test_against_pytorch_values_and_structures():
    data = {k.split("/", 1)[1]: REF[k] for k in REF.files if k.startswith("inputs/")}
    tensors = {k: fg.tensor(v) if v.dtype.kind == "i" else t64(v) for k, v in data.items()}
    results = gen.cases(fg, func, F, fg.vmap, tensors)
    assert results
    for name, result in results.items():
        assert gen.structure(result) == str(REF[f"{name}/structure"]), name
        flat = gen.leaves(result)
        assert len(flat) == sum(
            1 for f in REF.files if f.startswith(f"{name}/") and f[len(name) + 1 :].isdigit()
        )
        for k, leaf in enumerate(flat):
            np.testing.assert_allclose(leaf.numpy(), REF[f"{name}/{k}"], rtol=1e-10, atol=1e-12, err_msg=name)


def test_under_no_grad_and_compiled():
    xb = RNG.standard_normal((3, 4))
    with fg.no_grad():  # a transform ignores an outer no_grad, as in PyTorch
        g = func.grad(lambda x: (x**3).sum())(t64(xb[0]))
    close(g, 3 * xb[0] ** 2)
    f = lambda x: fg.vmap(func.grad(lambda r: (r.sin() * r).sum()))(x)  # noqa: E731
    compiled = fg.compile(f)
    for k in (1.0, -0.5):
        close(compiled(t64(xb * k)), np.cos(xb * k) * xb * k + np.sin(xb * k))
