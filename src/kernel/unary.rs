//! The unary elementwise ops, each defined once.
//!
//! One entry per op in [`unary_ops!`] carries everything the engine knows
//! about it: its name and parameters, the dtype rule (result class and
//! accepted inputs), its cost class, the CPU kernels (float, integer,
//! predicate), the WGSL expressions per device type, the Python method, the
//! gradient (the VJP written in ops, so higher orders come free, and the fused
//! one-pass kernels on CPU and WebGPU), and the ONNX mapping. Every layer that
//! needs one of these facts expands the table with a selector and gets code
//! generated for all ops at once: the `UnaryOp` enum and its metadata here,
//! the registry entries and VJPs in `ops`, the kernels in each backend, the
//! Python methods in `py`; `_core._unary_ops()` hands the metadata to Python,
//! where the ONNX exporter and the stub generator read it.
//!
//! The entries' code is expanded where the selector is used, so the closures
//! name that layer's items (`Real`, the VJP helpers `mul`/`adds`/...) without
//! this module depending on them. `$C` is the float compute type and `$T`
//! the integer type of the CPU kernels.
//!
//! Entry fields, in this order (`_` where the op has none):
//! - `name`: the registry / Python name.
//! - `py`: `[method, method_, "doc"]` (a plain Tensor method and its in-place
//!   form, generated), `[method, "doc"]` (no in-place form), or `_` (the
//!   method takes arguments and is written by hand in `py/methods.rs`).
//! - `out`: `Same` (the input dtype), `Float` (ints compute in float32) or
//!   `Bool`; `dtypes`: the accepted inputs (`ALL`, `NUMERIC`, `INT_BOOL`).
//! - `cost`: `Light` or `Heavy` (transcendental): the parallel grain.
//! - `cpu`: the float kernel, a closure over `$C`; `int`: the integer kernel
//!   (only for `Same` ops), a closure over `$T`; `pred`: a predicate on the
//!   value as `f64` (ops with a bool result, and `bitwise_not` on bool);
//!   `keep_bool`: `true` where the op maps a bool tensor to itself.
//! - `wgsl`, `wgsl_i32`, `wgsl_u32`: the WGSL expression of the result from
//!   `x` on float32, int32 and bool (u32) data; parameters read as `pf(k)` /
//!   `pi(k)`, in the order of [`UnaryOp::params`].
//! - `backward`: the autograd node's name; `vjp`: `g · op'(x)` from `x`,
//!   `y = op(x)` and `g`, written in ops; `vjp_steps`: `One` where the rule is
//!   one rounding step (half types then compose in their own dtype), `Many`
//!   where half types compose in float32 and round once.
//! - `grad`: the fused one-pass CPU gradient, a closure `(x, y, g)` over `$C`;
//!   `wgsl_grad`: the same in WGSL (helpers in `unary_grad.wgsl`);
//!   `grad_captured`: `true` where the fused kernel rounds differently from
//!   the composed VJP, so captured graphs record it as one node.
//! - `onnx`: the ONNX expression, e.g. `"Mul(x, Sigmoid(x))"`: calls of ONNX
//!   ops on `x`, numbers and parameters (by field name, `p?` for an optional
//!   one left out when `None`), attributes after `;` as `name=param`.
//! - `example`: `_` for ops without parameters, else a list of instances the
//!   kernel tests use.

/// Result dtype class of a unary op.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum UnaryOut {
    /// Same dtype as the input.
    Same,
    /// Floating result: ints and bool compute in float32.
    Float,
    /// Boolean predicate.
    Bool,
}

impl UnaryOut {
    pub fn name(self) -> &'static str {
        match self {
            UnaryOut::Same => "same",
            UnaryOut::Float => "float",
            UnaryOut::Bool => "bool",
        }
    }
}

/// What the Python side reads about one unary op (`_core._unary_ops()`).
#[derive(Copy, Clone, Debug)]
pub struct UnaryInfo {
    /// The variant's name in saved graphs.
    pub variant: &'static str,
    pub name: &'static str,
    /// The variant's parameter names (a tuple variant's one value is `value`
    /// in saved graphs).
    pub params: &'static [&'static str],
    pub tuple: bool,
    pub out: UnaryOut,
    pub dtypes: &'static str,
    /// The generated Tensor method and its in-place form, with the docstring.
    pub method: Option<&'static str>,
    pub method_inplace: Option<&'static str>,
    pub doc: Option<&'static str>,
    pub backward: Option<&'static str>,
    pub onnx: Option<&'static str>,
}

/// A parameter's value as the `f64` the kernels read (`None` reads as 0).
pub trait Param {
    fn value(&self) -> f64;
}
impl Param for f64 {
    fn value(&self) -> f64 {
        *self
    }
}
impl Param for Option<f64> {
    fn value(&self) -> f64 {
        self.unwrap_or(0.0)
    }
}

/// Clamp's WGSL: `x` bounded below by parameter 0 and above by parameter 1
/// where given (`p` is `pf` or `pi`); NaN stays NaN.
pub fn clamp_wgsl(lo: bool, hi: bool, p: &str) -> String {
    let mut s = String::from("x");
    if lo {
        s = format!("select({s}, {p}(0u), {s} < {p}(0u))");
    }
    if hi {
        s = format!("select({s}, {p}(1u), {s} > {p}(1u))");
    }
    s
}

/// The unary op table; see the module docs for the fields. Expand with a
/// selector: `unary_ops!([kind])` (here), `unary_ops!([cpu_float op run] C, T)`, ...
macro_rules! unary_ops {
    ([$($sel:tt)*]) => { $crate::kernel::unary::unary_ops! { [$($sel)*] (), () } };
    ([$($sel:tt)*] $C:ty, $T:ty) => { $crate::kernel::unary::unary_gen! { [$($sel)*]
    Neg => {
        name: "neg", py: [neg, neg_, "Elementwise negation."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| -x },
        int: { |v: $T| v.wrapping_neg() },
        pred: _, keep_bool: false,
        wgsl: "-x", wgsl_i32: "-x", wgsl_u32: _,
        backward: "NegBackward", vjp: { |_x, _y, g| unary(UnaryOp::Neg, g) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Neg(x)", example: _,
    }
    Abs => {
        name: "abs", py: [abs, abs_, "Elementwise absolute value."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| Real::abs(x) },
        int: { |v: $T| v.wrapping_abs() },
        pred: _, keep_bool: true,
        wgsl: "abs(x)", wgsl_i32: "abs(x)", wgsl_u32: "x",
        backward: "AbsBackward", vjp: { |x, _y, g| mul(g, &unary(UnaryOp::Sign, x)?) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Abs(x)", example: _,
    }
    Sign => {
        name: "sign", py: [sign, sign_, "Elementwise sign (-1, 0 or 1)."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| if x > <$C>::ZERO {
            <$C>::ONE
        } else if x < <$C>::ZERO {
            -<$C>::ONE
        } else {
            x * <$C>::ZERO
        } },
        int: { |v: $T| v.signum() },
        pred: _, keep_bool: true,
        wgsl: "select(sign(x), x, is_nan(x))", wgsl_i32: "sign(x)", wgsl_u32: _,
        backward: "SignBackward", vjp: { |x, _y, _g| zeros_like(x) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Sign(x)", example: _,
    }
    Square => {
        name: "square", py: [square, square_, "Elementwise square."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| x * x },
        int: { |v: $T| v.wrapping_mul(v) },
        pred: _, keep_bool: true,
        wgsl: "x * x", wgsl_i32: "x * x", wgsl_u32: _,
        backward: "SquareBackward", vjp: { |x, _y, g| mul(g, &muls(x, 2.0)?) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Mul(x, x)", example: _,
    }
    Reciprocal => {
        name: "reciprocal", py: [reciprocal, reciprocal_, "Elementwise 1/x."],
        out: Float, dtypes: ALL, cost: Light,
        cpu: { |x: $C| <$C>::ONE / x },
        int: _, pred: _, keep_bool: false,
        wgsl: "1.0 / x", wgsl_i32: _, wgsl_u32: _,
        backward: "ReciprocalBackward",
        vjp: { |_x, y, g| unary(UnaryOp::Neg, &mul(g, &mul(y, y)?)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Reciprocal(x)", example: _,
    }
    Floor => {
        name: "floor", py: [floor, floor_, "Round down."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| Real::floor(x) },
        int: { |v: $T| v },
        pred: _, keep_bool: true,
        wgsl: "floor(x)", wgsl_i32: "x", wgsl_u32: "x",
        backward: "FloorBackward", vjp: { |x, _y, _g| zeros_like(x) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Floor(x)", example: _,
    }
    Ceil => {
        name: "ceil", py: [ceil, ceil_, "Round up."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| Real::ceil(x) },
        int: { |v: $T| v },
        pred: _, keep_bool: true,
        wgsl: "ceil(x)", wgsl_i32: "x", wgsl_u32: "x",
        backward: "CeilBackward", vjp: { |x, _y, _g| zeros_like(x) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Ceil(x)", example: _,
    }
    Round => {
        name: "round", py: [round, round_, "Round half to even."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| x.round_even() },
        int: { |v: $T| v },
        pred: _, keep_bool: true,
        wgsl: "round(x)", wgsl_i32: "x", wgsl_u32: "x",
        backward: "RoundBackward", vjp: { |x, _y, _g| zeros_like(x) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Round(x)", example: _,
    }
    Trunc => {
        name: "trunc", py: [trunc, trunc_, "Round toward zero."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| Real::trunc(x) },
        int: { |v: $T| v },
        pred: _, keep_bool: true,
        wgsl: "trunc(x)", wgsl_i32: "x", wgsl_u32: "x",
        backward: "TruncBackward", vjp: { |x, _y, _g| zeros_like(x) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: _, example: _,
    }
    Exp => {
        name: "exp", py: [exp, exp_, "Elementwise e**x."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::exp(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "exp_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "ExpBackward", vjp: { |_x, y, g| mul(g, y) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Exp(x)", example: _,
    }
    Log => {
        name: "log", py: [log, log_, "Natural logarithm."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::ln(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "log_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "LogBackward", vjp: { |x, _y, g| div(g, x) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Log(x)", example: _,
    }
    Log2 => {
        name: "log2", py: [log2, log2_, "Base-2 logarithm."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::log2(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "log_f(x) * 1.4426950408889634", wgsl_i32: _, wgsl_u32: _,
        backward: "Log2Backward",
        vjp: { |x, _y, g| div(g, &muls(x, std::f64::consts::LN_2)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Div(Log(x), 0.6931471805599453)", example: _,
    }
    Log1p => {
        name: "log1p", py: [log1p, log1p_, "log(1 + x), accurate near 0."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::ln_1p(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "log1p_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "Log1pBackward", vjp: { |x, _y, g| div(g, &adds(x, 1.0)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Log(Add(x, 1))", example: _,
    }
    Expm1 => {
        name: "expm1", py: [expm1, expm1_, "exp(x) - 1, accurate near 0."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::exp_m1(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "expm1_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "Expm1Backward",
        // eˣ from x: y + 1 cancels for negative x (rounded y near -1).
        vjp: { |x, _y, g| mul(g, &unary(UnaryOp::Exp, x)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Sub(Exp(x), 1)", example: _,
    }
    Sqrt => {
        name: "sqrt", py: [sqrt, sqrt_, "Square root."],
        out: Float, dtypes: ALL, cost: Light,
        cpu: { |x: $C| Real::sqrt(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "sqrt_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "SqrtBackward", vjp: { |_x, y, g| div(g, &muls(y, 2.0)?) }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Sqrt(x)", example: _,
    }
    Rsqrt => {
        name: "rsqrt", py: [rsqrt, rsqrt_, "1 / sqrt(x)."],
        out: Float, dtypes: ALL, cost: Light,
        cpu: { |x: $C| <$C>::ONE / Real::sqrt(x) },
        int: _, pred: _, keep_bool: false,
        // 1/sqrt(±0) = ±inf, as on the CPU.
        wgsl: "select(1.0 / sqrt_f(x), select(inf_f(), -inf_f(), sign_bit(x)), x == 0.0)",
        wgsl_i32: _, wgsl_u32: _,
        backward: "RsqrtBackward",
        // -y³/2 as -y/(2x): one product of the stored y where y³ has three.
        vjp: { |x, y, g| mul(g, &muls(&div(y, x)?, -0.5)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Reciprocal(Sqrt(x))", example: _,
    }
    Sin => {
        name: "sin", py: [sin, sin_, "Sine."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::sin(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "sin(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "SinBackward", vjp: { |x, _y, g| mul(g, &unary(UnaryOp::Cos, x)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Sin(x)", example: _,
    }
    Cos => {
        name: "cos", py: [cos, cos_, "Cosine."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::cos(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "cos(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "CosBackward",
        vjp: { |x, _y, g| unary(UnaryOp::Neg, &mul(g, &unary(UnaryOp::Sin, x)?)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Cos(x)", example: _,
    }
    Tan => {
        name: "tan", py: [tan, tan_, "Tangent."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::tan(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "sin(x) / cos(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "TanBackward", vjp: { |_x, y, g| mul(g, &adds(&mul(y, y)?, 1.0)?) }, vjp_steps: Many,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Tan(x)", example: _,
    }
    Tanh => {
        name: "tanh", py: [tanh, tanh_, "Hyperbolic tangent."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| Real::tanh(x) },
        int: _, pred: _, keep_bool: false,
        wgsl: "tanh_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "TanhBackward",
        // From x, step for step as the fused kernels (so that a captured
        // graph gives their bits): 1 - y² cancels for large |x|.
        // 1 - tanh²(x) = 4e / (1 + e)² with e = exp(-2|x|).
        vjp: { |x, _y, g| {
            let e = unary(UnaryOp::Exp, &muls(&unary(UnaryOp::Abs, x)?, -2.0)?)?;
            let d = adds(&e, 1.0)?;
            mul(g, &div(&muls(&e, 4.0)?, &mul(&d, &d)?)?)
        } }, vjp_steps: Many,
        // The derivatives come from x, not from the stored output y:
        // 1 - y² and y·(1 - y) cancel where |x| is large (y near ±1), and a
        // float16/bfloat16 y, rounded before the kernel sees it, is then
        // often exactly ±1 (a zero gradient).
        grad: { {
            let (one, two, four) = (<$C>::ONE, <$C>::c(2.0), <$C>::c(4.0));
            move |x: $C, _y: $C, g: $C| {
                let e = Real::exp(-(two * x.abs()));
                let d = one + e;
                g * (four * e / (d * d))
            }
        } },
        wgsl_grad: "g * tanh_grad(x)", grad_captured: false,
        onnx: "Tanh(x)", example: _,
    }
    Sigmoid => {
        name: "sigmoid", py: [sigmoid, sigmoid_, "Logistic sigmoid 1/(1+exp(-x))."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| x.sigmoid() },
        int: _, pred: _, keep_bool: false,
        wgsl: "sigmoid_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "SigmoidBackward",
        // σ(x)·(1 - σ(x)) = e / (1 + e)² with e = exp(-|x|).
        vjp: { |x, _y, g| {
            let e = unary(UnaryOp::Exp, &unary(UnaryOp::Neg, &unary(UnaryOp::Abs, x)?)?)?;
            let d = adds(&e, 1.0)?;
            mul(g, &div(&e, &mul(&d, &d)?)?)
        } }, vjp_steps: Many,
        grad: { {
            let one = <$C>::ONE;
            move |x: $C, _y: $C, g: $C| {
                let e = Real::exp(-x.abs());
                let d = one + e;
                g * (e / (d * d))
            }
        } },
        wgsl_grad: "g * sigmoid_grad(x)", grad_captured: false,
        onnx: "Sigmoid(x)", example: _,
    }
    Relu => {
        name: "relu", py: [relu, relu_, "max(x, 0)."],
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { |x: $C| if x > <$C>::ZERO {
            x
        } else if x.is_nan() {
            x
        } else {
            <$C>::ZERO
        } },
        int: { |v: $T| v.max(0) },
        pred: _, keep_bool: true,
        wgsl: "select(x, 0.0, x < 0.0)", wgsl_i32: "max(x, 0i)", wgsl_u32: _,
        backward: "ReluBackward",
        vjp: { |x, _y, g| mask_grad(&cmps(BinaryOp::Gt, x, 0.0)?, g) }, vjp_steps: One,
        grad: { |x: $C, _y: $C, g: $C| if x > <$C>::ZERO { g } else { <$C>::ZERO } },
        wgsl_grad: "select(0.0, g, x > 0.0)", grad_captured: false,
        onnx: "Relu(x)", example: _,
    }
    LeakyRelu(slope: f64) => {
        name: "leaky_relu", py: _,
        out: Float, dtypes: ALL, cost: Light,
        cpu: { {
            let s = <$C>::c(slope);
            move |x: $C| if x > <$C>::ZERO { x } else { x * s }
        } },
        int: _, pred: _, keep_bool: false,
        wgsl: "select(x, x * pf(0u), x < 0.0)", wgsl_i32: _, wgsl_u32: _,
        backward: "LeakyReluBackward",
        vjp: { |x, _y, g| {
            let m = cmps(BinaryOp::Gt, x, 0.0)?;
            where_(&m, g, &muls(g, slope)?)
        } }, vjp_steps: One,
        grad: { {
            let s = <$C>::c(slope);
            move |x: $C, _y: $C, g: $C| if x > <$C>::ZERO { g } else { g * s }
        } },
        wgsl_grad: "select(g * pf(0u), g, x > 0.0)", grad_captured: false,
        onnx: "LeakyRelu(x; alpha=slope)", example: [UnaryOp::LeakyRelu(0.1)],
    }
    Elu(alpha: f64) => {
        name: "elu", py: _,
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { {
            let a = <$C>::c(alpha);
            move |x: $C| if x > <$C>::ZERO { x } else { a * Real::exp_m1(x) }
        } },
        int: _, pred: _, keep_bool: false,
        wgsl: "select(x, pf(0u) * expm1_f(x), x <= 0.0)", wgsl_i32: _, wgsl_u32: _,
        backward: "EluBackward",
        // y + α = α·eˣ for x <= 0, from x (y + α cancels as x → -∞).
        vjp: { |x, _y, g| {
            let m = cmps(BinaryOp::Gt, x, 0.0)?;
            where_(&m, g, &mul(g, &muls(&unary(UnaryOp::Exp, x)?, alpha)?)?)
        } }, vjp_steps: Many,
        grad: { {
            let a = <$C>::c(alpha);
            move |x: $C, _y: $C, g: $C| if x > <$C>::ZERO { g } else { g * (a * Real::exp(x)) }
        } },
        wgsl_grad: "select(g * (pf(0u) * exp_f(x)), g, x > 0.0)", grad_captured: false,
        onnx: "Elu(x; alpha=alpha)", example: [UnaryOp::Elu(1.0)],
    }
    Gelu => {
        name: "gelu", py: _,
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| x.gelu() },
        int: _, pred: _, keep_bool: false,
        wgsl: "0.5 * x * (1.0 + erf_f(x * 0.7071067811865476))", wgsl_i32: _, wgsl_u32: _,
        backward: "GeluBackward",
        // Φ(x) + x φ(x)
        vjp: { |x, _y, g| {
            let cdf = muls(
                &adds(&unary(UnaryOp::Erf, &muls(x, std::f64::consts::FRAC_1_SQRT_2)?)?, 1.0)?,
                0.5,
            )?;
            let pdf = muls(
                &unary(UnaryOp::Exp, &muls(&mul(x, x)?, -0.5)?)?,
                1.0 / (2.0 * std::f64::consts::PI).sqrt(),
            )?;
            mul(g, &add(&cdf, &mul(x, &pdf)?)?)
        } }, vjp_steps: Many,
        grad: { |x: $C, _y: $C, g: $C| g * x.gelu_grad() },
        // d/dx x·Φ(x) = Φ(x) + x·φ(x), x clamped in φ as on the CPU.
        wgsl_grad: "g * (0.5 * (1.0 + erf_f(x * 0.7071067811865476)) + cx(x, 40.0) * exp_f(-0.5 * cx(x, 40.0) * cx(x, 40.0)) * 0.3989422804014327)",
        grad_captured: true,
        onnx: "Mul(Mul(x, 0.5), Add(Erf(Mul(x, 0.7071067811865475)), 1))", example: _,
    }
    GeluTanh => {
        name: "gelu_tanh", py: _,
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| x.gelu_tanh() },
        int: _, pred: _, keep_bool: false,
        wgsl: "0.5 * x * (1.0 + tanh_f(0.7978845608028654 * (x + 0.044715 * x * x * x)))",
        wgsl_i32: _, wgsl_u32: _,
        backward: "GeluBackward",
        vjp: { |x, _y, g| {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let x2 = mul(x, x)?;
            let inner = muls(&mul(x, &adds(&muls(&x2, 0.044715)?, 1.0)?)?, k)?;
            let t = unary(UnaryOp::Tanh, &inner)?;
            let left = muls(&adds(&t, 1.0)?, 0.5)?;
            let dinner = muls(&adds(&muls(&x2, 3.0 * 0.044715)?, 1.0)?, k)?;
            let right = mul(&muls(x, 0.5)?, &mul(&rsubs(&mul(&t, &t)?, 1.0)?, &dinner)?)?;
            mul(g, &add(&left, &right)?)
        } }, vjp_steps: Many,
        grad: { |x: $C, _y: $C, g: $C| g * x.gelu_tanh_grad() },
        // 0.5·(1 + tanh(u)) = sigmoid(2u): sigmoid(z) + x·z'·sigmoid'(z).
        wgsl_grad: "g * gelu_tanh_grad(cx(x, 1000.0))", grad_captured: true,
        onnx: "Mul(Mul(x, 0.5), Add(Tanh(Mul(Add(x, Mul(Mul(Mul(x, x), x), 0.044715)), 0.7978845608028654)), 1))",
        example: _,
    }
    Silu => {
        name: "silu", py: [silu, silu_, "x * sigmoid(x)."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| x * x.sigmoid() },
        int: _, pred: _, keep_bool: false,
        wgsl: "x * sigmoid_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "SiluBackward",
        // σ(x)·(1 + x·σ(-x)), σ(x) and σ(-x) = 1 - σ(x) from one
        // e = exp(-|x|) as in the fused kernels (1 - σ(x) cancels).
        vjp: { |x, _y, g| {
            let e = unary(UnaryOp::Exp, &unary(UnaryOp::Neg, &unary(UnaryOp::Abs, x)?)?)?;
            let r = unary(UnaryOp::Reciprocal, &adds(&e, 1.0)?)?;
            let er = mul(&e, &r)?;
            let pos = cmps(BinaryOp::Ge, x, 0.0)?;
            let (s, sn) = (where_(&pos, &r, &er)?, where_(&pos, &er, &r)?);
            mul(g, &mul(&s, &adds(&mul(x, &sn)?, 1.0)?)?)
        } }, vjp_steps: Many,
        grad: { {
            let one = <$C>::ONE;
            move |x: $C, _y: $C, g: $C| {
                let e = Real::exp(-x.abs());
                let r = one / (one + e);
                let (s, sn) = if x >= <$C>::ZERO { (r, e * r) } else { (e * r, r) };
                g * (s * (x * sn + one))
            }
        } },
        wgsl_grad: "g * silu_grad(x)", grad_captured: false,
        onnx: "Mul(x, Sigmoid(x))", example: _,
    }
    Softsign => {
        name: "softsign", py: [softsign, softsign_, "x / (1 + |x|)."],
        out: Float, dtypes: ALL, cost: Light,
        cpu: { |x: $C| x / (<$C>::ONE + Real::abs(x)) },
        int: _, pred: _, keep_bool: false,
        wgsl: "x / (1.0 + abs(x))", wgsl_i32: _, wgsl_u32: _,
        backward: "SoftsignBackward",
        // d/dx x/(1 + |x|) = 1/(1 + |x|)².
        vjp: { |x, _y, g| {
            let d = adds(&unary(UnaryOp::Abs, x)?, 1.0)?;
            div(g, &mul(&d, &d)?)
        } }, vjp_steps: Many,
        grad: { |x: $C, _y: $C, g: $C| {
            let d = <$C>::ONE + Real::abs(x);
            g / (d * d)
        } },
        wgsl_grad: "g / ((1.0 + abs(x)) * (1.0 + abs(x)))", grad_captured: false,
        onnx: "Softsign(x)", example: _,
    }
    Softplus { beta: f64, threshold: f64 } => {
        name: "softplus", py: _,
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { {
            let (b, t) = (<$C>::c(beta), <$C>::c(threshold));
            move |x: $C| if x * b > t { x } else { Real::ln_1p(Real::exp(x * b)) / b }
        } },
        int: _, pred: _, keep_bool: false,
        wgsl: "select(log1p_f(exp_f(pf(0u) * x)) / pf(0u), x, pf(0u) * x > pf(1u))",
        wgsl_i32: _, wgsl_u32: _,
        backward: "SoftplusBackward",
        vjp: { |x, _y, g| {
            let bx = muls(x, beta)?;
            let lin = cmps(BinaryOp::Gt, &bx, threshold)?;
            where_(&lin, g, &mul(g, &unary(UnaryOp::Sigmoid, &bx)?)?)
        } }, vjp_steps: Many,
        grad: { {
            let (b, t) = (<$C>::c(beta), <$C>::c(threshold));
            move |x: $C, _y: $C, g: $C| {
                let bx = x * b;
                if bx > t { g } else { g * bx.sigmoid() }
            }
        } },
        wgsl_grad: "select(g * sigmoid_f(x * pf(0u)), g, x * pf(0u) > pf(1u))",
        grad_captured: false,
        onnx: "Where(Greater(Mul(x, beta), threshold), x, Div(Softplus(Mul(x, beta)), beta))",
        example: [UnaryOp::Softplus { beta: 1.0, threshold: 20.0 }],
    }
    Erf => {
        name: "erf", py: [erf, erf_, "Gauss error function."],
        out: Float, dtypes: ALL, cost: Heavy,
        cpu: { |x: $C| x.erf_fn() },
        int: _, pred: _, keep_bool: false,
        wgsl: "erf_f(x)", wgsl_i32: _, wgsl_u32: _,
        backward: "ErfBackward",
        vjp: { |x, _y, g| {
            let e = unary(UnaryOp::Exp, &unary(UnaryOp::Neg, &mul(x, x)?)?)?;
            mul(g, &muls(&e, std::f64::consts::FRAC_2_SQRT_PI)?)
        } }, vjp_steps: Many,
        grad: { {
            let k = <$C>::c(std::f64::consts::FRAC_2_SQRT_PI);
            move |x: $C, _y: $C, g: $C| g * (Real::exp(-(x * x)) * k)
        } },
        wgsl_grad: "g * (exp_f(-(x * x)) * 1.1283791670955126)", grad_captured: false,
        onnx: "Erf(x)", example: _,
    }
    Clamp { min: Option<f64>, max: Option<f64> } => {
        name: "clamp", py: _,
        out: Same, dtypes: NUMERIC, cost: Light,
        cpu: { {
            let (lo, hi) = (min.map(<$C>::c), max.map(<$C>::c));
            move |x: $C| {
                let mut y = x;
                if let Some(l) = lo {
                    y = y.max_nan(l);
                }
                if let Some(h) = hi {
                    y = y.min_nan(h);
                }
                y
            }
        } },
        int: { {
            let (lo, hi) = (min.map(|m| m.ceil() as $T), max.map(|m| m.floor() as $T));
            move |v: $T| {
                let mut y = v;
                if let Some(l) = lo {
                    y = y.max(l);
                }
                if let Some(h) = hi {
                    y = y.min(h);
                }
                y
            }
        } },
        pred: _, keep_bool: true,
        wgsl: { $crate::kernel::unary::clamp_wgsl(min.is_some(), max.is_some(), "pf") },
        wgsl_i32: { $crate::kernel::unary::clamp_wgsl(min.is_some(), max.is_some(), "pi") },
        wgsl_u32: _,
        backward: "ClampBackward",
        vjp: { |x, _y, g| {
            let mut m: Option<Tensor> = None;
            if let Some(lo) = min {
                m = Some(cmps(BinaryOp::Ge, x, lo)?);
            }
            if let Some(hi) = max {
                let mh = cmps(BinaryOp::Le, x, hi)?;
                m = Some(match m {
                    Some(ml) => binary(BinaryOp::LogicalAnd, &ml, &mh)?,
                    None => mh,
                });
            }
            match m {
                Some(m) => mask_grad(&m, g),
                None => Ok(g.clone()),
            }
        } }, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Clip(x, min?, max?)",
        example: [
            UnaryOp::Clamp { min: Some(0.0), max: None },
            UnaryOp::Clamp { min: None, max: Some(1.0) },
            UnaryOp::Clamp { min: Some(0.0), max: Some(1.0) }
        ],
    }
    LogicalNot => {
        name: "logical_not", py: [logical_not, logical_not_, "Elementwise `not`, as bool."],
        out: Bool, dtypes: ALL, cost: Light,
        cpu: _, int: _, pred: { |d: f64| d == 0.0 }, keep_bool: false,
        wgsl: "select(0u, 1u, x == 0.0)", wgsl_i32: "select(0u, 1u, x == 0i)",
        wgsl_u32: "select(0u, 1u, x == 0u)",
        backward: _, vjp: _, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Equal(x, 0)", example: _,
    }
    BitwiseNot => {
        name: "bitwise_not", py: [bitwise_not, bitwise_not_, "Bitwise not (logical not for bool)."],
        out: Same, dtypes: INT_BOOL, cost: Light,
        cpu: _, int: { |v: $T| !v }, pred: { |d: f64| d == 0.0 }, keep_bool: false,
        wgsl: _, wgsl_i32: "~x", wgsl_u32: "1u - x",
        backward: _, vjp: _, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: _, example: _,
    }
    IsNan => {
        name: "isnan", py: [isnan, "True where the value is NaN."],
        out: Bool, dtypes: ALL, cost: Light,
        cpu: _, int: _, pred: { |d: f64| d.is_nan() }, keep_bool: false,
        wgsl: "select(0u, 1u, is_nan(x))", wgsl_i32: "0u", wgsl_u32: "0u",
        backward: _, vjp: _, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "IsNaN(x)", example: _,
    }
    IsInf => {
        name: "isinf", py: [isinf, "True where the value is infinite."],
        out: Bool, dtypes: ALL, cost: Light,
        cpu: _, int: _, pred: { |d: f64| d.is_infinite() }, keep_bool: false,
        wgsl: "select(0u, 1u, is_inf(x))", wgsl_i32: "0u", wgsl_u32: "0u",
        backward: _, vjp: _, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "IsInf(x)", example: _,
    }
    IsFinite => {
        name: "isfinite", py: [isfinite, "True where the value is neither NaN nor infinite."],
        out: Bool, dtypes: ALL, cost: Light,
        cpu: _, int: _, pred: { |d: f64| d.is_finite() }, keep_bool: false,
        wgsl: "select(1u, 0u, is_nan(x) || is_inf(x))", wgsl_i32: "1u", wgsl_u32: "1u",
        backward: _, vjp: _, vjp_steps: One,
        grad: _, wgsl_grad: _, grad_captured: false,
        onnx: "Not(Or(IsNaN(x), IsInf(x)))", example: _,
    }
    } };
}
pub(crate) use unary_ops;

/// The generators behind [`unary_ops!`]: one rule per selector, each reading
/// the entries in the order the table writes their fields.
macro_rules! unary_gen {
    // -- helpers ----------------------------------------------------------------
    (@opt_str _) => { None };
    (@opt_str $s:literal) => { Some($s) };
    (@str _) => { None };
    (@str $s:literal) => { Some(String::from($s)) };
    (@str { $($b:tt)* }) => { Some({ $($b)* }) };
    (@tuple) => { false };
    (@tuple $tb:ident) => { true };
    (@heavy Light) => { false };
    (@heavy Heavy) => { true };
    (@grain Light) => { PAR_MIN };
    (@grain Heavy) => { PAR_MIN_HEAVY };
    (@one_step One) => { true };
    (@one_step Many) => { false };
    (@method _) => { None };
    (@method [$m:ident, $m_:ident, $doc:literal]) => { Some(stringify!($m)) };
    (@method [$m:ident, $doc:literal]) => { Some(stringify!($m)) };
    (@method_ _) => { None };
    (@method_ [$m:ident, $m_:ident, $doc:literal]) => { Some(stringify!($m_)) };
    (@method_ [$m:ident, $doc:literal]) => { None };
    (@doc _) => { None };
    (@doc [$m:ident, $m_:ident, $doc:literal]) => { Some($doc) };
    (@doc [$m:ident, $doc:literal]) => { Some($doc) };
    (@example $V:ident _) => { [UnaryOp::$V] };
    (@example $V:ident [$($e:expr),* $(,)?]) => { [$($e),*] };
    (@cpu $run:ident $cost:ident $name:literal _) => {
        unreachable!(concat!($name, ": predicates are dispatched separately"))
    };
    (@cpu $run:ident $cost:ident $name:literal { $($f:tt)* }) => {{
        let f = { $($f)* };
        $run!($crate::kernel::unary::unary_gen!(@grain $cost), f)
    }};
    (@int $run:ident $name:literal _) => {
        unreachable!(concat!("integer ", $name, " is promoted to float by the op layer"))
    };
    (@int $run:ident $name:literal { $($f:tt)* }) => {{
        let f = { $($f)* };
        $run!(f)
    }};
    (@pred _) => { None };
    (@pred { $($f:tt)* }) => { Some(({ $($f)* }) as fn(f64) -> bool) };
    (@grad $run:ident $cost:ident _) => { false };
    (@grad $run:ident $cost:ident { $($f:tt)* }) => {{
        let f = { $($f)* };
        $run!($crate::kernel::unary::unary_gen!(@grain $cost), f);
        true
    }};
    (@vjp $op:ident $x:ident $y:ident $g:ident _) => {
        Err($crate::error::Error::value(
            "unary_grad",
            format!("{} is not differentiable", $op.name()),
        ))
    };
    (@vjp $op:ident $x:ident $y:ident $g:ident { $($f:tt)* }) => {
        call_vjp({ $($f)* }, $x, $y, $g)
    };
    (@registry $name:literal $dt:ident _) => {
        OpInfo::prim($name, "elementwise", DTypes::$dt)
    };
    (@registry $name:literal $dt:ident $bw:literal) => {
        OpInfo::prim($name, "elementwise", DTypes::$dt).grad()
    };
    (@py _ $V:ident) => {};
    (@py [$m:ident, $m_:ident, $doc:literal] $V:ident) => {
        #[pymethods]
        impl PyTensor {
            #[doc = $doc]
            fn $m(&self, py: Python<'_>) -> PyResult<PyTensor> {
                un(py, &self.t, UnaryOp::$V)
            }
            #[doc = concat!("In-place form of `", stringify!($m), "`.")]
            fn $m_<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTensor>> {
                un_(slf, UnaryOp::$V)
            }
        }
    };
    (@py [$m:ident, $doc:literal] $V:ident) => {
        #[pymethods]
        impl PyTensor {
            #[doc = $doc]
            fn $m(&self, py: Python<'_>) -> PyResult<PyTensor> {
                un(py, &self.t, UnaryOp::$V)
            }
        }
    };

    // -- selectors -----------------------------------------------------------------
    // The enum, its metadata and what Python reads (kernel layer).
    ([kind] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, cost: $cost:ident,
        cpu: $cpu:tt, int: $int:tt, pred: $pred:tt, keep_bool: $kb:ident,
        wgsl: $w:tt, wgsl_i32: $wi:tt, wgsl_u32: $wu:tt,
        backward: $bw:tt, vjp: $vjp:tt, vjp_steps: $steps:ident,
        grad: $grad:tt, wgsl_grad: $wg:tt, grad_captured: $cap:ident,
        onnx: $onnx:tt, example: $ex:tt $(,)?
    } )*) => {
        /// Unary elementwise primitives (see [`unary_ops!`] for each one's definition).
        #[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        pub enum UnaryOp {
            $( $V $( ($tty) )? $( { $($fb: $fty),* } )?, )*
        }

        impl UnaryOp {
            /// The registry / Python name.
            pub fn name(self) -> &'static str {
                match self { $( UnaryOp::$V { .. } => $name, )* }
            }
            /// The result's dtype class.
            pub fn out_kind(self) -> UnaryOut {
                match self { $( UnaryOp::$V { .. } => UnaryOut::$out, )* }
            }
            /// Whether the op is transcendental (a larger parallel grain).
            pub fn heavy(self) -> bool {
                match self { $( UnaryOp::$V { .. } => $crate::kernel::unary::unary_gen!(@heavy $cost), )* }
            }
            /// The autograd node's name; `None` for ops without a gradient.
            pub fn backward_name(self) -> Option<&'static str> {
                match self { $( UnaryOp::$V { .. } => $crate::kernel::unary::unary_gen!(@opt_str $bw), )* }
            }
            /// Whether the VJP is one rounding step (see the table's docs).
            pub fn vjp_one_step(self) -> bool {
                match self { $( UnaryOp::$V { .. } => $crate::kernel::unary::unary_gen!(@one_step $steps), )* }
            }
            /// Whether captured graphs record the fused gradient as one node.
            pub fn grad_captured(self) -> bool {
                match self { $( UnaryOp::$V { .. } => $cap, )* }
            }
            /// Whether a bool tensor maps to itself on the CPU.
            pub fn keeps_bool(self) -> bool {
                match self { $( UnaryOp::$V { .. } => $kb, )* }
            }
            /// The parameters as the kernels read them, in declaration order
            /// (`None` as 0), padded with zeros.
            #[allow(unused_variables)]
            pub fn params(self) -> [f64; 2] {
                use $crate::kernel::unary::Param;
                match self {
                    $( UnaryOp::$V $( ($tb) )? $( { $($fb),* } )? => {
                        let v: &[f64] = &[$( $tb.value(), )? $( $( $fb.value(), )* )?];
                        [v.first().copied().unwrap_or(0.0), v.get(1).copied().unwrap_or(0.0)]
                    } )*
                }
            }
            /// The WGSL expression on float32, int32 and bool data (see the table).
            #[allow(unused_variables)]
            pub fn wgsl(self) -> [Option<String>; 3] {
                match self {
                    $( UnaryOp::$V $( ($tb) )? $( { $($fb),* } )? => [
                        $crate::kernel::unary::unary_gen!(@str $w),
                        $crate::kernel::unary::unary_gen!(@str $wi),
                        $crate::kernel::unary::unary_gen!(@str $wu),
                    ], )*
                }
            }
            /// The WGSL expression of the fused gradient `g · op'(x)`.
            pub fn wgsl_grad(self) -> Option<&'static str> {
                match self { $( UnaryOp::$V { .. } => $crate::kernel::unary::unary_gen!(@opt_str $wg), )* }
            }
            /// One instance of every op (several for ops with parameters).
            pub fn examples() -> Vec<UnaryOp> {
                let mut v = Vec::new();
                $( v.extend_from_slice(&$crate::kernel::unary::unary_gen!(@example $V $ex)); )*
                v
            }
        }

        /// Every unary op's metadata, in table order.
        pub const INFO: &[UnaryInfo] = &[
            $( UnaryInfo {
                variant: stringify!($V),
                name: $name,
                params: &[$( stringify!($tb), )? $( $( stringify!($fb), )* )?],
                tuple: $crate::kernel::unary::unary_gen!(@tuple $($tb)?),
                out: UnaryOut::$out,
                dtypes: stringify!($dt),
                method: $crate::kernel::unary::unary_gen!(@method $py),
                method_inplace: $crate::kernel::unary::unary_gen!(@method_ $py),
                doc: $crate::kernel::unary::unary_gen!(@doc $py),
                backward: $crate::kernel::unary::unary_gen!(@opt_str $bw),
                onnx: $crate::kernel::unary::unary_gen!(@opt_str $onnx),
            }, )*
        ];
    };

    // The accepted input dtypes (ops layer: `DTypes`).
    ([dtypes $op:ident] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, $($rest:tt)*
    } )*) => {
        match $op { $( UnaryOp::$V { .. } => DTypes::$dt, )* }
    };

    // The registry entries (ops layer).
    ([registry] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, cost: $cost:ident,
        cpu: $cpu:tt, int: $int:tt, pred: $pred:tt, keep_bool: $kb:ident,
        wgsl: $w:tt, wgsl_i32: $wi:tt, wgsl_u32: $wu:tt,
        backward: $bw:tt, $($rest:tt)*
    } )*) => {
        &[ $( $crate::kernel::unary::unary_gen!(@registry $name $dt $bw), )* ]
    };

    // The VJP written in ops (ops layer: `call_vjp` and the helpers in scope).
    ([vjp $op:ident $x:ident $y:ident $g:ident] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, cost: $cost:ident,
        cpu: $cpu:tt, int: $int:tt, pred: $pred:tt, keep_bool: $kb:ident,
        wgsl: $w:tt, wgsl_i32: $wi:tt, wgsl_u32: $wu:tt,
        backward: $bw:tt, vjp: $vjp:tt, $($rest:tt)*
    } )*) => {
        #[allow(unused_variables)]
        match $op {
            $( UnaryOp::$V $( ($tb) )? $( { $($fb),* } )? =>
                $crate::kernel::unary::unary_gen!(@vjp $op $x $y $g $vjp), )*
        }
    };

    // The CPU float kernel: `$run!(grain, closure over $C)` (CPU backend).
    ([cpu_float $op:ident $run:ident] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, cost: $cost:ident,
        cpu: $cpu:tt, $($rest:tt)*
    } )*) => {
        #[allow(unused_variables)]
        match $op {
            $( UnaryOp::$V $( ($tb) )? $( { $($fb),* } )? =>
                $crate::kernel::unary::unary_gen!(@cpu $run $cost $name $cpu), )*
        }
    };

    // The CPU integer kernel: `$run!(closure over $T)`.
    ([cpu_int $op:ident $run:ident] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, cost: $cost:ident,
        cpu: $cpu:tt, int: $int:tt, $($rest:tt)*
    } )*) => {
        #[allow(unused_variables)]
        match $op {
            $( UnaryOp::$V $( ($tb) )? $( { $($fb),* } )? =>
                $crate::kernel::unary::unary_gen!(@int $run $name $int), )*
        }
    };

    // The predicate on the value as f64: `Option<fn(f64) -> bool>`.
    ([cpu_pred $op:ident] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, cost: $cost:ident,
        cpu: $cpu:tt, int: $int:tt, pred: $pred:tt, $($rest:tt)*
    } )*) => {
        match $op { $( UnaryOp::$V { .. } => $crate::kernel::unary::unary_gen!(@pred $pred), )* }
    };

    // The fused CPU gradient: `$run!(grain, closure (x, y, g))`, `false` where none.
    ([cpu_grad $op:ident $run:ident] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, out: $out:ident, dtypes: $dt:ident, cost: $cost:ident,
        cpu: $cpu:tt, int: $int:tt, pred: $pred:tt, keep_bool: $kb:ident,
        wgsl: $w:tt, wgsl_i32: $wi:tt, wgsl_u32: $wu:tt,
        backward: $bw:tt, vjp: $vjp:tt, vjp_steps: $steps:ident,
        grad: $grad:tt, $($rest:tt)*
    } )*) => {
        #[allow(unused_variables)]
        match $op {
            $( UnaryOp::$V $( ($tb) )? $( { $($fb),* } )? =>
                $crate::kernel::unary::unary_gen!(@grad $run $cost $grad), )*
        }
    };

    // The Python methods (bindings layer).
    ([py] $( $V:ident $( ( $tb:ident : $tty:ty ) )? $( { $($fb:ident : $fty:ty),* } )? => {
        name: $name:literal, py: $py:tt, $($rest:tt)*
    } )*) => {
        $( $crate::kernel::unary::unary_gen! { @py $py $V } )*
    };
}
pub(crate) use unary_gen;

unary_ops!([kind]);
