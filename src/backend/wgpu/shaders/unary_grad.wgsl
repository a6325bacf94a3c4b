fn cx(x: f32, m: f32) -> f32 { return select(clamp(x, -m, m), x, is_nan(x)); }
// 1 - tanh²(x) = 4e / (1 + e)² with e = exp(-2|x|); σ'(x) = e / (1 + e)² with e = exp(-|x|).
fn tanh_grad(x: f32) -> f32 {
    let e = exp_f(-2.0 * abs(x));
    return 4.0 * e / ((1.0 + e) * (1.0 + e));
}
fn sigmoid_grad(x: f32) -> f32 {
    let e = exp_f(-abs(x));
    return e / ((1.0 + e) * (1.0 + e));
}
// σ(x)·(1 + x·σ(-x)), σ(x) and σ(-x) from one e = exp(-|x|) (1 - σ(x) cancels for large x).
fn silu_grad(x: f32) -> f32 {
    let e = exp_f(-abs(x));
    let r = 1.0 / (1.0 + e);
    let pos = x >= 0.0;
    return select(e * r, r, pos) * (x * select(r, e * r, pos) + 1.0);
}
fn gelu_tanh_grad(x: f32) -> f32 {
    let z = 1.5957691216057308 * x * (1.0 + 0.044715 * x * x);
    let dz = 1.5957691216057308 * (1.0 + 0.134145 * x * x);
    let e = exp_f(-abs(z));
    let q = 1.0 / (1.0 + e);
    return select(e * q, q, z >= 0.0) + x * dz * (e * q * q);
}
