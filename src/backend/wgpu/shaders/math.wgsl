fn bits_f(u: u32) -> f32 { return bitcast<f32>(u); }
fn nan_f() -> f32 { return bits_f(0x7fc00000u); }
fn inf_f() -> f32 { return bits_f(0x7f800000u); }
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn pf(j: u32) -> f32 { return bitcast<f32>(md[2u + j]); }
fn pi(j: u32) -> i32 { return bitcast<i32>(md[2u + j]); }
fn log_f(x: f32) -> f32 {
    if (is_nan(x) || x < 0.0) { return nan_f(); }
    if (x == 0.0) { return -inf_f(); }
    if (is_inf(x)) { return x; }
    return log(x);
}
fn expm1_f(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        return x * (1.0 + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0 * (1.0 + x / 5.0 * (1.0 + x / 6.0 * (1.0 + x / 7.0 * (1.0 + x / 8.0)))))));
    }
    if (x > 88.7) { return inf_f(); }
    return exp(x) - 1.0;
}
fn exp_f(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (x > 88.72) { return inf_f(); }
    if (x < -103.9) { return 0.0; }
    return exp(x);
}
fn log1p_f(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        let s = x / (2.0 + x);
        let s2 = s * s;
        return 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (0.2 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 / 11.0)))));
    }
    return log_f(1.0 + x);
}
fn tanh_f(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let a = abs(x);
    var r: f32;
    if (a < 0.5) {
        let t = expm1_f(2.0 * a);
        r = t / (t + 2.0);
    } else if (a > 20.0) {
        r = 1.0;
    } else {
        r = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    }
    return select(r, -r, x < 0.0);
}
fn sigmoid_f(x: f32) -> f32 { return 1.0 / (1.0 + exp_f(-x)); }
fn erf_f(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let a = abs(x);
    var r: f32;
    if (a < 0.5) {
        let z = a * a;
        r = 1.1283791670955126 * a * (1.0 - z * (1.0 / 3.0 - z * (0.1 - z * (1.0 / 42.0 - z * (1.0 / 216.0 - z / 1320.0)))));
    } else if (a > 4.0) {
        r = 1.0;
    } else {
        // Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).
        let t = 1.0 / (1.0 + 0.3275911 * a);
        let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
        r = 1.0 - p * exp(-a * a);
    }
    return select(r, -r, x < 0.0);
}
fn sqrt_f(x: f32) -> f32 {
    if (x < 0.0) { return nan_f(); }
    return sqrt(x);
}
fn pow_f(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    if (is_nan(a) || is_nan(b)) { return nan_f(); }
    if (b == 1.0) { return a; }
    if (b == 2.0) { return a * a; }
    if (a == 0.0) {
        if (b < 0.0) { return inf_f(); }
        return 0.0;
    }
    let bi = trunc(b);
    if (a < 0.0) {
        if (bi != b) { return nan_f(); }
        let m = exp2(b * log2(-a));
        let odd = abs(bi - 2.0 * trunc(bi / 2.0)) == 1.0;
        return select(m, -m, odd);
    }
    return exp2(b * log2(a));
}
fn sign_bit(x: f32) -> bool { return (bitcast<u32>(x) & 0x80000000u) != 0u; }
fn atan2_f(y: f32, x: f32) -> f32 {
    let pi = 3.141592653589793;
    if (is_nan(y) || is_nan(x)) { return nan_f(); }
    if (y == 0.0) {
        if (x < 0.0 || (x == 0.0 && sign_bit(x))) { return select(pi, -pi, sign_bit(y)); }
        return y;
    }
    if (is_inf(x)) {
        if (is_inf(y)) {
            let a = select(0.25 * pi, 0.75 * pi, x < 0.0);
            return select(a, -a, y < 0.0);
        }
        if (x > 0.0) { return select(0.0, -0.0, y < 0.0); }
        return select(pi, -pi, y < 0.0);
    }
    if (x == 0.0 || is_inf(y)) { return select(0.5 * pi, -0.5 * pi, y < 0.0); }
    return atan2(y, x);
}
fn max_f(a: f32, b: f32) -> f32 {
    if (is_nan(a)) { return a; }
    if (is_nan(b)) { return b; }
    return max(a, b);
}
fn min_f(a: f32, b: f32) -> f32 {
    if (is_nan(a)) { return a; }
    if (is_nan(b)) { return b; }
    return min(a, b);
}
