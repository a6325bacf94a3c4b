//! Every generator's WGSL parsed and validated with naga (no device needed), and checks of what it computes.

use super::*;
use crate::kernel::ReduceOp;
use crate::kernel::ScatterReduction;
use crate::kernel::{BinaryOp, UnaryOp};

thread_local! {
    /// Whether [`mk`] and [`halved`] store float bindings as native float16.
    static HALF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`Bindings::distinct`], its float bindings native float16 when [`HALF`] is set.
fn mk(tys: &[GTy]) -> Bindings {
    halved(Bindings::distinct(tys))
}

fn halved(mut b: Bindings) -> Bindings {
    if HALF.with(|h| h.get()) {
        b.half = b.bufs.iter().map(|x| x.0 == GTy::F32).collect();
    }
    b
}

fn check(src: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(src)
        .map_err(|e| format!("WGSL parse error: {}\n{src}", e.emit_to_string(src)))?;
    // Only shaders that enable f16 may use it.
    let caps = if src.starts_with("enable f16;") {
        naga::valid::Capabilities::SHADER_FLOAT16
    } else {
        naga::valid::Capabilities::empty()
    };
    let mut v = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps);
    v.validate(&module)
        .map_err(|e| format!("WGSL validation error: {}\n{src}", e.emit_to_string(src)))?;
    Ok(())
}

thread_local! {
    static ERRORS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// With `FG_WGSL_DUMP=DIR` set, every shader [`validate`] sees is also
/// written to `DIR` (one file each), for a second compiler to check:
/// `tests/test_webgpu_browser.py` compiles them with Chromium's.
pub(crate) fn dump(src: &str) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    if let Some(dir) = std::env::var_os("FG_WGSL_DUMP") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("FG_WGSL_DUMP: create the directory");
        let k = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{:?}-{k:05}.wgsl", std::thread::current().id()).replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '.',
            "",
        );
        std::fs::write(dir.join(name), src).expect("FG_WGSL_DUMP: write a shader");
    }
}

fn validate(src: &str) {
    dump(src);
    if let Err(e) = check(src) {
        ERRORS.with(|v| v.borrow_mut().push(e));
    }
}

/// Fail the test with every invalid shader [`validate`] collected.
fn assert_all_valid() {
    let errs = ERRORS.with(|v| v.borrow().clone());
    assert!(
        errs.is_empty(),
        "{} invalid shaders:\n{}",
        errs.len(),
        errs.join("\n\n")
    );
}

const TYS: [GTy; 3] = [GTy::F32, GTy::I32, GTy::U32];

fn unary_ops() -> Vec<UnaryOp> {
    UnaryOp::examples()
}

fn binary_ops() -> Vec<BinaryOp> {
    use BinaryOp::*;
    vec![
        Add, Sub, Mul, Div, FloorDiv, Remainder, Pow, Maximum, Minimum, Atan2, Eq, Ne, Lt, Le, Gt,
        Ge, LogicalAnd, LogicalOr, LogicalXor, BitAnd, BitOr, BitXor,
    ]
}

/// Generate and validate every kernel family; the number of shaders.
fn validate_all() -> usize {
    let mut n = 0;
    for half in [true, false] {
        validate(&round_narrow(half));
        n += 1;
    }
    for from in TYS {
        for to in TYS {
            validate(&cast(&mk(&[from, to]), from, to));
            n += 1;
        }
        validate(&fill(&mk(&[from]), from));
        validate(&where_(&mk(&[GTy::U32, from, from, from]), GTy::U32));
        validate(&tri(&mk(&[from, from]), from));
        n += 3;
        if from != GTy::U32 {
            for prod in [false, true] {
                validate(&cumulative(&mk(&[from, from]), from, prod));
                n += 1;
            }
        }
    }
    // In-place: input and output share one read-write binding.
    let shared = halved(Bindings {
        bufs: vec![(GTy::F32, true)],
        operand: vec![0, 0],
        half: vec![],
    });
    validate(&unary(&shared, UnaryOp::Exp, GTy::F32, GTy::F32).unwrap());
    for op in unary_ops() {
        for ty in TYS {
            let out = if matches!(
                op,
                UnaryOp::LogicalNot | UnaryOp::IsNan | UnaryOp::IsInf | UnaryOp::IsFinite
            ) {
                GTy::U32
            } else {
                ty
            };
            if let Some(s) = unary(&mk(&[ty, out]), op, ty, out) {
                validate(&s);
                n += 1;
            }
        }
    }
    for op in binary_ops() {
        for ty in TYS {
            let out = if op.is_predicate() { GTy::U32 } else { ty };
            if let Some(s) = binary(&mk(&[ty, ty, out]), op, ty, out) {
                validate(&s);
                n += 1;
            }
        }
    }
    let reds = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::All,
        ReduceOp::Any,
        ReduceOp::Var {
            correction: 1.0,
            std: true,
        },
        ReduceOp::LogSumExp,
    ];
    for op in reds {
        for x in TYS {
            for acc in TYS {
                if let Some(s) = reduce(&mk(&[x, acc]), op, x, acc, acc) {
                    validate(&s);
                    n += 1;
                }
            }
        }
    }
    validate(&matmul_tiled(&mk(&[GTy::F32; 3])));
    validate(&softmax(&mk(&[GTy::F32, GTy::F32])));
    validate(&softmax_grad(&mk(&[GTy::F32; 3])));
    let mut grads = 0;
    for op in unary_ops() {
        if let Some(s) = unary_grad(&mk(&[GTy::F32; 4]), op) {
            validate(&s);
            grads += 1;
        }
    }
    // Every op whose definition gives a WGSL gradient gets a shader, and the table has some.
    let declared = unary_ops()
        .into_iter()
        .filter(|op| op.wgsl_grad().is_some())
        .count();
    assert!(declared >= 10, "the unary table lost its fused gradients");
    assert_eq!(grads, declared, "unary ops with a fused gradient");
    for (w, b, rms) in [
        (true, true, false),
        (false, false, false),
        (true, false, true),
        (false, true, false),
    ] {
        let n = 4 + w as usize + b as usize;
        let mut tys = vec![GTy::F32; n];
        tys[n - 1] = GTy::F32;
        let mut bd = mk(&tys);
        for x in bd.bufs.iter_mut().rev().take(3) {
            x.1 = true;
        }
        validate(&layer_norm(&bd, w, b, rms));
        let mut gb = mk(&vec![GTy::F32; 5 + w as usize]);
        gb.bufs.last_mut().unwrap().1 = true;
        validate(&layer_norm_grad_input(&gb, w, rms));
        let mut pb = mk(&vec![GTy::F32; 4 + w as usize + b as usize]);
        for x in pb.bufs.iter_mut().skip(4) {
            x.1 = true;
        }
        validate(&layer_norm_grad_params(&pb, w, b, rms));
    }
    for f in 0..32u32 {
        let b = |k: u32| f & (1 << k) != 0;
        let n = if b(0) { 3 } else { 2 };
        let mut bd = mk(&vec![GTy::F32; n]);
        bd.bufs[0].1 = true;
        validate(&sgd(&bd, b(0), b(1), b(2), b(3), b(4)));
        let n = if b(0) { 5 } else { 4 };
        let mut bd = mk(&vec![GTy::F32; n]);
        for (j, x) in bd.bufs.iter_mut().enumerate() {
            x.1 = j != 1;
        }
        validate(&adam(&bd, b(0), b(1), b(2), b(3), b(4)));
        let n = 3 + b(0) as usize + b(1) as usize;
        let mut bd = mk(&vec![GTy::F32; n]);
        for (j, x) in bd.bufs.iter_mut().enumerate() {
            x.1 = j != 1;
        }
        validate(&rmsprop(&bd, b(0), b(1), b(2), b(3), b(4)));
    }
    for ty in TYS {
        for max in [true, false] {
            validate(&arg_reduce(&mk(&[ty, GTy::I32]), ty, max, false));
            let three = halved(Bindings {
                bufs: vec![(ty, false), (ty, true), (GTy::I32, true)],
                operand: vec![0, 1, 2],
                half: vec![],
            });
            validate(&arg_reduce(&three, ty, max, true));
        }
    }
    validate(&matmul(&mk(&[GTy::F32; 3]), GTy::F32));
    validate(&matmul(&mk(&[GTy::I32; 3]), GTy::I32));
    for w in [false, true] {
        let mut tys = vec![GTy::F32, GTy::I32];
        if w {
            tys.push(GTy::F32);
        }
        let mut f = tys.clone();
        f.extend([GTy::F32; 3]);
        let mut fb = mk(&f);
        let nb = fb.bufs.len();
        for j in nb - 3..nb {
            fb.bufs[j].1 = true;
        }
        validate(&cross_entropy(&fb, w));
        validate(&cross_entropy_grad(&mk(&f), w));
        let mut c = vec![GTy::F32; 2];
        if w {
            c.push(GTy::F32);
        }
        c.push(GTy::F32);
        validate(&conv2d(&mk(&c), w));
        let mut mp = mk(&[GTy::F32, GTy::F32, GTy::I32]);
        mp.bufs[1].1 = true;
        validate(&max_pool2d(&mp, true));
    }
    validate(&max_pool2d(&mk(&[GTy::F32; 2]), false));
    validate(&avg_pool2d(&mk(&[GTy::F32; 2])));
    validate(&conv2d_input_grad(&mk(&[GTy::F32; 3])));
    validate(&conv2d_weight_grad(&mk(&[GTy::F32; 3])));
    for kind in [ConvGemm::InputGrad, ConvGemm::WeightGrad] {
        validate(&conv_gemm(&mk(&[GTy::F32; 3]), kind));
    }
    validate(&conv_gemm(
        &mk(&[GTy::F32; 4]),
        ConvGemm::Forward { bias: true },
    ));
    validate(&conv_gemm(
        &mk(&[GTy::F32; 3]),
        ConvGemm::Forward { bias: false },
    ));
    for ty in TYS {
        // The sort kernels write two operands.
        let written = |bufs: Vec<(GTy, bool)>| {
            halved(Bindings {
                operand: (0..bufs.len()).collect(),
                bufs,
                half: vec![],
            })
        };
        validate(&sort_init(&written(vec![
            (ty, false),
            (ty, true),
            (GTy::I32, true),
        ])));
        validate(&sort_step(&written(vec![(ty, true), (GTy::I32, true)]), ty));
        n += 2;
    }
    validate(&sort_indices(&mk(&[GTy::I32, GTy::I32])));
    n += 1;
    for ty in TYS {
        validate(&gather(&mk(&[ty, GTy::I32, ty]), ty));
        validate(&scatter(&mk(&[GTy::I32, ty, ty]), ty));
        for r in [
            ScatterReduction::Sum,
            ScatterReduction::Prod,
            ScatterReduction::Amax,
            ScatterReduction::Amin,
        ] {
            validate(&scatter_reduce(&mk(&[GTy::I32, ty, ty]), ty, r));
        }
        validate(&index_put(&mk(&[ty, GTy::I32, ty]), ty));
    }
    n
}

#[test]
fn every_generated_shader_validates() {
    let n = validate_all();
    assert!(n > 150, "{n} shaders");
    // Again with every float binding stored as native float16.
    HALF.with(|h| h.set(true));
    let m = validate_all();
    HALF.with(|h| h.set(false));
    assert_eq!(m, n);
    // Casts between float16 and every other storage, both ways.
    for ty in TYS {
        for (hf, ht) in [(true, false), (false, true)] {
            let (from, to) = if hf { (GTy::F32, ty) } else { (ty, GTy::F32) };
            let b = Bindings::distinct_half(&[from, to], &[hf, ht]);
            let src = cast(&b, from, to);
            assert!(src.starts_with("enable f16;"), "{src}");
            validate(&src);
        }
    }
    assert_all_valid();
}

/// Every optimizer rule's multi-tensor kernel, for several chunk sizes,
/// with distinct buffers, buffers shared between parameters (one
/// binding for several operands) and native float16 bindings mixed in.
#[test]
fn multi_tensor_optimizer_shaders_validate() {
    let mut rules = Vec::new();
    for f in 0..32u32 {
        let b = |k: u32| f & (1 << k) != 0;
        rules.push(OptimRule::Sgd {
            with_buf: b(0),
            nesterov: b(1),
            maximize: b(2),
            wd: b(3),
        });
        rules.push(OptimRule::Adam {
            amsgrad: b(0),
            maximize: b(1),
            wd: b(2),
            decoupled: b(3),
            low: b(4),
        });
        rules.push(OptimRule::Rmsprop {
            with_buf: b(0),
            centered: b(1),
            maximize: b(2),
            wd: b(3),
            low: b(4),
        });
    }
    rules.dedup();
    let mut n = 0;
    for rule in rules {
        let per = rule.operands();
        for k in [1usize, 2, 3, 7] {
            // Distinct buffers; every operand written but the gradients.
            let mut bd = Bindings::distinct(&vec![GTy::F32; k * per]);
            for (j, x) in bd.bufs.iter_mut().enumerate() {
                x.1 = j % per != 1;
            }
            let src = optim_multi(&bd, rule, k);
            for t in 0..k {
                assert!(src.contains(&format!("case {t}u: {{")), "{src}");
            }
            assert!(!src.contains(&format!("case {k}u:")));
            validate(&src);
            // The same with odd parameters' bindings stored as float16.
            let mut hb = bd.clone();
            hb.half = (0..k * per).map(|j| (j / per) % 2 == 1).collect();
            let hs = optim_multi(&hb, rule, k);
            assert_eq!(hs.starts_with("enable f16;"), k > 1, "{hs}");
            validate(&hs);
            // Parameters in one buffer, gradients in another, state distinct.
            let mut sb = Bindings {
                bufs: vec![(GTy::F32, true), (GTy::F32, false)],
                operand: Vec::new(),
                half: Vec::new(),
            };
            for _ in 0..k {
                sb.operand.extend([0, 1]);
                for _ in 2..per {
                    sb.operand.push(sb.bufs.len());
                    sb.bufs.push((GTy::F32, true));
                }
            }
            validate(&optim_multi(&sb, rule, k));
            n += 3;
        }
    }
    assert!(n >= 3 * 4 * 40, "{n} shaders");
    assert_all_valid();
}

/// The multi-tensor kernel loads each parameter's operands in one
/// `switch` and stores all but the gradient in another, each case naming
/// that parameter's bindings; SGD's first step is a word of the block
/// there and fixed in the source of the per-parameter kernel.
#[test]
fn multi_tensor_kernel_layout() {
    let rule = OptimRule::Adam {
        amsgrad: true,
        maximize: false,
        wd: true,
        decoupled: false,
        low: true,
    };
    let mut bd = Bindings::distinct(&[GTy::F32; 10]);
    for (j, x) in bd.bufs.iter_mut().enumerate() {
        x.1 = j % 5 != 1;
    }
    let src = optim_multi(&bd, rule, 2);
    assert_eq!(src.matches("switch t {").count(), 2, "{src}");
    assert!(src
        .contains("case 1u: { v0 = b5[o0]; v1 = b6[o1]; v2 = b7[o2]; v3 = b8[o3]; v4 = b9[o4]; }"));
    assert!(src.contains("case 0u: { b0[o0] = n0; b2[o2] = n2; b3[o3] = n3; b4[o4] = n4; }"));
    assert!(!src.contains("b6[o1] ="), "a gradient is never stored");
    // The update runs once, outside the switches.
    assert_eq!(src.matches("let denom").count(), 1);
    let one = optim_single(&Bindings::distinct(&[GTy::F32; 5]), rule, false);
    assert!(one.contains("b0[o0] = p + pf(0u) * m / denom;"), "{one}");
    assert!(
        src.contains("let n0 = p + pt(blk, 0u) * m / denom;"),
        "{src}"
    );
    let sgd = OptimRule::Sgd {
        with_buf: true,
        nesterov: false,
        maximize: false,
        wd: false,
    };
    let bd3 = Bindings::distinct(&[GTy::F32; 3]);
    assert!(optim_single(&bd3, sgd, true).contains("let b = g;"));
    assert!(optim_multi(&bd3, sgd, 1).contains("md[blk + 6u] != 0u"));
    // Native float16 bindings convert on load and store.
    let mut hb = Bindings::distinct(&[GTy::F32; 3]);
    hb.half = vec![true, false, true];
    let hs = optim_multi(&hb, sgd, 1);
    assert!(
        hs.contains("v0 = f32(b0[o0]);") && hs.contains("b2[o2] = to_h(n2);"),
        "{hs}"
    );
}

#[test]
fn half_accesses_convert() {
    let h = [true, false, true];
    assert_eq!(
        half_io("    b2[off(2u, i)] = b0[off(0u, i)] + b1[k];", &h),
        "    b2[off(2u, i)] = to_h(f32(b0[off(0u, i)]) + b1[k]);"
    );
    // Index expressions, comparisons and other names stay as they are.
    assert_eq!(
        half_io(
            "if (b0[b1[j]] == 0.0) { xb0[j] = sb2[j]; b2[d] = b2[d] + v; }",
            &h
        ),
        "if (f32(b0[b1[j]]) == 0.0) { xb0[j] = sb2[j]; b2[d] = to_h(f32(b2[d]) + v); }"
    );
    assert_eq!(half_io("b0[i] = 1.0;", &[false]), "b0[i] = 1.0;");
}

/// `h_round`'s bit arithmetic in Rust, against `half::f16::from_f32` over
/// every float16 boundary region (what the WGSL computes on the device).
#[test]
fn to_h_matches_half() {
    fn h_round(x: f32) -> f32 {
        let u = x.to_bits();
        let a = u & 0x7fff_ffff;
        let s = u & 0x8000_0000;
        if a >= 0x7f80_0000 {
            return x;
        }
        if a >= 0x477f_f000 {
            return f32::from_bits(s | 0x7f80_0000);
        }
        if a < 0x3880_0000 {
            // WGSL's `round` is ties to even.
            let q = (f32::from_bits(a) * 16_777_216.0).round_ties_even() * 5.960_464_5e-8;
            return f32::from_bits(s | q.to_bits());
        }
        f32::from_bits(s | ((a + 0xfff + ((a >> 13) & 1)) & 0xffff_e000))
    }
    let mut checked = 0;
    // Every rounding point (ties and exact values, normal and
    // subnormal) lies on a multiple of 0x1000 in the f32 bits: each,
    // and its neighbours.
    for u in (0..0x8000_0000u32)
        .step_by(0x1000)
        .flat_map(|b| [0u32, 1, 2, 0xffd, 0xffe, 0xfff, 0x800].map(|d| b + d))
    {
        for x in [f32::from_bits(u), -f32::from_bits(u)] {
            let want = half::f16::from_f32(x);
            let r = h_round(x);
            if x.is_nan() {
                assert!(r.is_nan(), "{x:?}");
            } else {
                // A float16 value exactly (the conversion has nothing to round), the CPU's.
                assert_eq!(
                    half::f16::from_f32(r).to_f32().to_bits(),
                    r.to_bits(),
                    "{x:e}"
                );
                assert_eq!(
                    r.to_bits(),
                    want.to_f32().to_bits(),
                    "{x:e} ({:#010x})",
                    x.to_bits()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 1_000_000);
}
