//! Tests of the passes on graphs captured from small functions: each pass
//! must change the graph as described and leave every result unchanged.

use super::*;
use crate::graph::exec::Plan;
use crate::graph::{trace, Graph, OpCall};
use crate::ops::elementwise::{self as ew, BinaryOp, UnaryOp};
use crate::ops::{reduce, shape};
use crate::tensor::{Scalar, Tensor};

/// A float32 CPU tensor of shape `s`.
pub(crate) fn t(v: &[f32], s: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), s).unwrap()
}

/// Capture `f` on `args` (bound as arguments) and return the graph.
pub(crate) fn capture(args: &[Tensor], f: impl FnOnce(&[Tensor]) -> Vec<Tensor>) -> Graph {
    trace::begin().unwrap();
    let twins: Vec<Tensor> = args
        .iter()
        .enumerate()
        .map(|(i, a)| trace::arg(a, i, &[], None).unwrap())
        .collect();
    let outs = f(&twins);
    trace::end(&outs).unwrap()
}

fn run(g: &Graph, args: &[Tensor]) -> Vec<Vec<f64>> {
    let p = Plan::new(g, &[]).unwrap();
    p.run(args)
        .unwrap()
        .iter()
        .map(|t| t.to_f64_vec())
        .collect()
}

fn count(g: &Graph, pred: impl Fn(&OpCall) -> bool) -> usize {
    g.nodes.iter().filter(|n| pred(&n.call)).count()
}

fn only(opts: impl FnOnce(&mut PassOptions)) -> PassOptions {
    let mut o = PassOptions::none();
    o.verify = true;
    opts(&mut o);
    o
}

#[test]
fn cse_merges_repeated_nodes() {
    let x = t(&[0.5, -1.0, 2.0], &[3]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let e1 = ew::unary(UnaryOp::Exp, &a[0]).unwrap();
        let e2 = ew::unary(UnaryOp::Exp, &a[0]).unwrap();
        vec![ew::binary(BinaryOp::Add, &e1, &e2).unwrap()]
    });
    assert_eq!(
        count(&g, |c| matches!(c, OpCall::Unary { op: UnaryOp::Exp })),
        2
    );
    let (h, rep) = optimize(&g, &only(|o| o.cse = true)).unwrap();
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Unary { op: UnaryOp::Exp })),
        1,
        "{rep:?}"
    );
    assert_eq!(run(&g, std::slice::from_ref(&x)), run(&h, &[x]));
}

#[test]
fn cse_keeps_reads_around_a_write() {
    // exp(x) before and after x += 1 must not merge.
    let x = t(&[0.5, 1.0], &[2]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let c = ew::clone(&a[0]).unwrap();
        let e1 = ew::unary(UnaryOp::Exp, &c).unwrap();
        ew::binary_scalar_(BinaryOp::Add, &c, Scalar::Float(1.0)).unwrap();
        let e2 = ew::unary(UnaryOp::Exp, &c).unwrap();
        vec![e1, e2]
    });
    let (h, _) = optimize(&g, &only(|o| o.cse = true)).unwrap();
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Unary { op: UnaryOp::Exp })),
        2
    );
    let r = run(&h, &[x]);
    assert!((r[0][0] - 0.5f64.exp()).abs() < 1e-6 && (r[1][0] - 1.5f64.exp()).abs() < 1e-6);
}

#[test]
fn dce_drops_unused_work_but_keeps_visible_writes() {
    let x = t(&[1.0, 2.0], &[2]);
    let state = t(&[0.0, 0.0], &[2]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let _unused = ew::unary(UnaryOp::Exp, &a[0]).unwrap();
        // A write into a tensor read by reference is visible: kept.
        ew::binary_(BinaryOp::Add, &state, &a[0]).unwrap();
        vec![ew::unary(UnaryOp::Neg, &a[0]).unwrap()]
    });
    let (h, _) = optimize(&g, &only(|o| o.dce = true)).unwrap();
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Unary { op: UnaryOp::Exp })),
        0
    );
    assert_eq!(count(&h, |c| matches!(c, OpCall::BinaryInplace { .. })), 1);
    assert_eq!(run(&h, std::slice::from_ref(&x)), vec![vec![-1.0, -2.0]]);
    assert_eq!(state.to_f64_vec(), vec![1.0, 2.0]);
}

#[test]
fn fold_evaluates_constant_subexpressions() {
    let x = t(&[1.0, 2.0, 3.0], &[3]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let c = crate::ops::creation::arange(
            Scalar::Int(0),
            Scalar::Int(3),
            Scalar::Int(1),
            Some(crate::tensor::DType::F32),
            crate::tensor::Device::Cpu,
        )
        .unwrap();
        let c2 = ew::binary_scalar(BinaryOp::Mul, &c, Scalar::Float(2.0), false).unwrap();
        vec![ew::binary(BinaryOp::Add, &a[0], &c2).unwrap()]
    });
    assert_eq!(g.nodes.len(), 3);
    let (h, _) = optimize(
        &g,
        &only(|o| {
            o.fold = true;
            o.dce = true;
        }),
    )
    .unwrap();
    assert_eq!(h.nodes.len(), 1, "{}", h.dump());
    assert_eq!(run(&h, &[x]), vec![vec![1.0, 4.0, 7.0]]);
}

#[test]
fn simplify_removes_identities_and_chains() {
    let x = t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let g = capture(std::slice::from_ref(&x), |a| {
        // A value the graph computes (identities on an input itself must keep a copy).
        let y = ew::unary(UnaryOp::Neg, &a[0]).unwrap();
        let y = ew::binary_scalar(BinaryOp::Mul, &y, Scalar::Float(1.0), false).unwrap();
        let y = ew::binary_scalar(BinaryOp::Add, &y, Scalar::Float(0.0), false).unwrap();
        let y = shape::transpose(&shape::transpose(&y, 0, 1).unwrap(), 0, 1).unwrap();
        let r = shape::reshape(&shape::reshape(&y, &[4]).unwrap(), &[1, 4]).unwrap();
        vec![ew::unary(UnaryOp::Exp, &r).unwrap()]
    });
    let (h, rep) = optimize(
        &g,
        &only(|o| {
            o.simplify = true;
            o.dce = true;
        }),
    )
    .unwrap();
    assert_eq!(
        count(&h, |c| matches!(
            c,
            OpCall::BinaryScalar { .. } | OpCall::Transpose { .. }
        )),
        0,
        "{rep:?}\n{}",
        h.dump()
    );
    assert_eq!(count(&h, |c| matches!(c, OpCall::Reshape { .. })), 1);
    assert_eq!(run(&g, std::slice::from_ref(&x)), run(&h, &[x]));
}

#[test]
fn simplify_keeps_identities_of_values_written_later() {
    // `before = out * 1.0; out.add_(1)`: `before` keeps the value `out` had.
    let x = t(&[1.0, -2.0, 3.0, -4.0], &[2, 2]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let out = ew::binary_scalar(BinaryOp::Mul, &a[0], Scalar::Float(3.0), false).unwrap();
        let before = ew::binary_scalar(BinaryOp::Mul, &out, Scalar::Float(1.0), false).unwrap();
        let plus = ew::binary_scalar(BinaryOp::Add, &out, Scalar::Float(0.0), false).unwrap();
        ew::binary_scalar_(BinaryOp::Add, &out, Scalar::Float(1.0)).unwrap();
        ew::unary_(UnaryOp::Relu, &out).unwrap();
        vec![out, before, plus]
    });
    let (h, rep) = optimize(&g, &only(|o| o.simplify = true)).unwrap();
    assert!(
        rep[0].detail.starts_with("0 identities"),
        "{}",
        rep[0].detail
    );
    let got = run(&h, std::slice::from_ref(&x));
    assert_eq!(got, run(&g, std::slice::from_ref(&x)));
    assert_eq!(got[1], vec![3.0, -6.0, 9.0, -12.0]);
}

#[test]
fn fuse_makes_one_kernel_with_the_same_results() {
    let n = 3000;
    let xs: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
    let x = t(&xs, &[n / 3, 3]);
    let y = t(&ys, &[n / 3, 3]);
    let b = t(&[0.5, -0.25, 1.0], &[3]);
    let g = capture(&[x.clone(), y.clone(), b.clone()], |a| {
        let p = ew::binary(BinaryOp::Mul, &a[0], &a[1]).unwrap();
        let q = ew::binary(BinaryOp::Add, &p, &a[2]).unwrap();
        let r = ew::unary(UnaryOp::Tanh, &q).unwrap();
        let m = ew::binary_scalar(BinaryOp::Gt, &r, Scalar::Float(0.0), false).unwrap();
        let w = ew::where_(&m, &r, &p).unwrap();
        vec![reduce::sum(&w, Some(&[1]), false, None).unwrap(), r]
    });
    let (h, rep) = optimize(&g, &only(|o| o.fuse = true)).unwrap();
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Fused { .. })),
        1,
        "{rep:?}\n{}",
        h.dump()
    );
    assert_eq!(h.nodes.len(), 2, "{}", h.dump());
    // Same per-element functions as the unfused kernels: identical results.
    assert_eq!(
        run(&g, &[x.clone(), y.clone(), b.clone()]),
        run(&h, &[x, y, b])
    );
}

#[test]
fn fuse_takes_a_long_chain_whole_but_never_across_a_path_that_leaves_it() {
    // 4000 elementwise nodes fuse into one kernel; `d` reads the chain both
    // directly and through a reduction of it, so joining it would make the
    // kernel depend on itself.
    let x = t(&[0.5, -1.0, 2.0, 0.25], &[4]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let mut c = a[0].clone();
        for _ in 0..2000 {
            c = ew::binary_scalar(BinaryOp::Mul, &c, Scalar::Float(1.0001), false).unwrap();
            c = ew::binary_scalar(BinaryOp::Add, &c, Scalar::Float(0.5), false).unwrap();
        }
        let s = reduce::sum(&c, None, false, None).unwrap();
        let d = ew::binary(BinaryOp::Mul, &c, &s).unwrap();
        vec![d]
    });
    assert_eq!(g.nodes.len(), 4002);
    let (h, rep) = optimize(&g, &only(|o| o.fuse = true)).unwrap();
    assert_eq!(h.nodes.len(), 3, "{rep:?}\n{}", h.dump());
    assert_eq!(count(&h, |c| matches!(c, OpCall::Fused { .. })), 1);
    assert_eq!(run(&g, std::slice::from_ref(&x)), run(&h, &[x]));
}

#[test]
fn simplify_drops_copies_of_dying_values_only() {
    let x = t(&[0.5, -1.0, 2.0, 4.0], &[2, 2]);
    let g = capture(std::slice::from_ref(&x), |a| {
        // A copy of a fresh value nothing else reads: removed.
        let e = ew::unary(UnaryOp::Exp, &a[0]).unwrap();
        let c1 = ew::clone(&e).unwrap();
        // A copy of a view of a fresh value: removed.
        let s = reduce::sum(&a[0], Some(&[0]), true, None).unwrap();
        let r = shape::reshape(&s, &[2]).unwrap();
        let c2 = ew::clone(&r).unwrap();
        // A copy of a value read again later: kept.
        let m = ew::unary(UnaryOp::Tanh, &a[0]).unwrap();
        let c3 = ew::clone(&m).unwrap();
        let m2 = ew::binary(BinaryOp::Add, &m, &c3).unwrap();
        // A copy of the argument itself: kept.
        let c4 = ew::clone(&a[0]).unwrap();
        vec![c1, c2, m2, c4]
    });
    assert_eq!(count(&g, |c| matches!(c, OpCall::Clone)), 4);
    let (h, rep) = optimize(&g, &only(|o| o.simplify = true)).unwrap();
    assert_eq!(count(&h, |c| matches!(c, OpCall::Clone)), 2, "{}", h.dump());
    assert!(rep[0].detail.contains("2 copies"), "{}", rep[0].detail);
    assert_eq!(
        run(&g, std::slice::from_ref(&x)),
        run(&h, std::slice::from_ref(&x))
    );
}

#[test]
fn simplify_squeezes_keepdim_reductions() {
    // A bias gradient's shape: sum over the batch with keepdim, reshaped to
    // the bias; and a mean over the last dim the same way. A keepdim sum read
    // by another node too stays as it is.
    let x = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let s = reduce::sum(&a[0], Some(&[0]), true, None).unwrap();
        let m = reduce::mean(&a[0], Some(&[-1]), true, None).unwrap();
        let kept = reduce::sum(&a[0], Some(&[1]), true, None).unwrap();
        vec![
            shape::reshape(&s, &[3]).unwrap(),
            shape::reshape(&m, &[2]).unwrap(),
            shape::reshape(&kept, &[2]).unwrap(),
            ew::binary(BinaryOp::Mul, &kept, &a[0]).unwrap(),
        ]
    });
    let reshapes = |g: &Graph| count(g, |c| matches!(c, OpCall::Reshape { .. }));
    assert_eq!(reshapes(&g), 3);
    let (h, rep) = optimize(&g, &only(|o| o.simplify = true)).unwrap();
    assert_eq!(reshapes(&h), 1, "{rep:?}");
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Sum { keepdim: false, .. })),
        1
    );
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Mean { keepdim: false, .. })),
        1
    );
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Sum { keepdim: true, .. })),
        1
    );
    assert!(rep
        .iter()
        .any(|r| r.detail.contains("2 keepdim reductions")));
    assert_eq!(run(&g, std::slice::from_ref(&x)), run(&h, &[x]));
}

#[test]
fn fuse_ends_a_large_group_with_its_reductions() {
    // A gradient-like multiply feeding a matmul-like reader and two sums:
    // both sums join the multiply's kernel as reductions at its end.
    let (r, c) = (256, 64);
    let xs: Vec<f32> = (0..r * c)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    let ys: Vec<f32> = (0..r * c)
        .map(|i| ((i * 53 % 89) as f32 - 44.0) / 30.0)
        .collect();
    let (x, y) = (t(&xs, &[r, c]), t(&ys, &[r, c]));
    let g = capture(&[x.clone(), y.clone()], |a| {
        let p = ew::binary(BinaryOp::Mul, &a[0], &a[1]).unwrap();
        let q = ew::unary(UnaryOp::Relu, &p).unwrap();
        let s0 = reduce::sum(&q, Some(&[0]), false, None).unwrap();
        let m1 = reduce::mean(&p, Some(&[1]), true, None).unwrap();
        vec![q, s0, m1]
    });
    let (h, rep) = optimize(&g, &only(|o| o.fuse = true)).unwrap();
    assert_eq!(h.nodes.len(), 1, "{rep:?}\n{}", h.dump());
    let OpCall::Fused { kernel } = &h.nodes[0].call else {
        panic!("not fused: {}", h.dump())
    };
    assert_eq!(kernel.reductions.len(), 2);
    assert_eq!(kernel.output_types()[2].0, vec![r, 1]);
    let (want, got) = (run(&g, &[x.clone(), y.clone()]), run(&h, &[x, y]));
    assert_eq!(want[0], got[0]);
    for (w, g) in want[1..].iter().zip(&got[1..]) {
        for (a, b) in w.iter().zip(g) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{a} vs {b}");
        }
    }
}

#[test]
fn verifier_checks_types_and_shapes_by_inference() {
    let x = t(&[0.5, -1.0, 2.0, 4.0], &[2, 2]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let e = ew::unary(UnaryOp::Exp, &a[0]).unwrap();
        vec![reduce::sum(&e, Some(&[0]), false, None).unwrap()]
    });
    verify(&g).unwrap();
    // A rewrite that records a wrong shape or dtype for a value is caught.
    let out = g.outputs[0];
    let mut bad_shape = g.clone();
    bad_shape.values[out].shape = vec![4];
    let e = verify(&bad_shape).unwrap_err().to_string();
    assert!(
        e.contains("does not type-check") && e.contains("sum"),
        "{e}"
    );
    let mut bad_dtype = g.clone();
    bad_dtype.values[out].dtype = crate::tensor::DType::F64;
    let e = verify(&bad_dtype).unwrap_err().to_string();
    assert!(e.contains("does not type-check"), "{e}");
    // And so is a structural fault: a node reading a value defined after it.
    let mut cyclic = g.clone();
    let later = cyclic.nodes[1].outputs[0];
    cyclic.nodes[0].inputs[0] = later;
    let e = verify(&cyclic).unwrap_err().to_string();
    assert!(e.contains("before it is defined"), "{e}");
}

#[test]
fn fused_output_written_in_place_never_reaches_an_input_a_deferred_op_reads() {
    // `a*b` is read only by `t*o`, so the interpreter runs the two together,
    // after `o = exp(c)`, which the plan writes in place over `a` (fresh and
    // dead after the kernel). That write must wait until `a*b` has read `a`.
    let xs: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).sin()).collect();
    let x = t(&xs, &[4, 5]);
    let w: Vec<Tensor> = (0..3)
        .map(|k| {
            let v: Vec<f32> = (0..30).map(|i| ((i + 7 * k) as f32 * 0.23).cos()).collect();
            t(&v, &[5, 6])
        })
        .collect();
    let args = [x, w[0].clone(), w[1].clone(), w[2].clone()];
    let g = capture(&args, |a| {
        let mm = |w: &Tensor| crate::ops::linalg::matmul(&a[0], w).unwrap();
        let (p, q, c) = (mm(&a[1]), mm(&a[2]), mm(&a[3]));
        let t = ew::binary(BinaryOp::Mul, &p, &q).unwrap();
        let o = ew::unary(UnaryOp::Exp, &c).unwrap();
        let r = ew::binary(BinaryOp::Mul, &t, &o).unwrap();
        vec![o, r]
    });
    let (h, rep) = optimize(
        &g,
        &only(|o| {
            o.fuse = true;
            o.inplace = true;
        }),
    )
    .unwrap();
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::Fused { .. })),
        1,
        "{rep:?}\n{}",
        h.dump()
    );
    // Both outputs reuse a dying input's buffer.
    assert_eq!(Plan::new(&h, &[]).unwrap().memory_plan().in_place, 2);
    assert_eq!(run(&g, &args), run(&h, &args));
}

#[test]
fn simplify_makes_one_element_constants_scalars_when_promotion_allows() {
    let x = t(&[1.0, -2.0, 3.5], &[3]);
    let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
    let g = capture(&[x.clone(), i.clone()], |a| {
        // 0-d tensors made while tracing: constants of the graph.
        let konst = |t: Tensor| trace::constant(&t).unwrap();
        let c = konst(Tensor::from_vec(vec![2.5f32], &[]).unwrap());
        let f = konst(Tensor::from_vec(vec![0.5f64], &[]).unwrap());
        let k = konst(Tensor::from_vec(vec![4i32], &[]).unwrap());
        vec![
            ew::binary(BinaryOp::Mul, &a[0], &c).unwrap(), // float * float 0-d: scalar
            ew::binary(BinaryOp::Add, &a[1], &k).unwrap(), // int + int 0-d: scalar
            ew::binary(BinaryOp::Mul, &a[1], &f).unwrap(), // int * float 0-d: promotes, kept
        ]
    });
    let binaries = |g: &Graph| count(g, |c| matches!(c, OpCall::Binary { .. }));
    let scalars = |g: &Graph| count(g, |c| matches!(c, OpCall::BinaryScalar { .. }));
    assert_eq!((binaries(&g), scalars(&g)), (3, 0), "{}", g.dump());
    let (h, rep) = optimize(&g, &only(|o| o.simplify = true)).unwrap();
    assert_eq!((binaries(&h), scalars(&h)), (1, 2), "{rep:?}\n{}", h.dump());
    let args = [x, i];
    assert_eq!(run(&g, &args), run(&h, &args));
}

/// `x * 2` transposed, copied (what `.contiguous()` of a strided value is
/// captured as) and viewed flat: the copy must survive simplify (the view
/// needs row-major memory).
fn transpose_contiguous_view(a: &[Tensor]) -> Vec<Tensor> {
    let y = ew::binary_scalar(BinaryOp::Mul, &a[0], Scalar::Float(2.0), false).unwrap();
    let yt = shape::transpose(&y, 0, 1).unwrap();
    let c = ew::clone(&yt).unwrap();
    vec![shape::view(&c, &[3, 8]).unwrap()]
}

#[test]
fn simplify_keeps_the_copy_a_view_needs() {
    let x = Tensor::from_vec((0..24).map(|i| i as f32).collect(), &[2, 3, 4]).unwrap();
    let g = capture(std::slice::from_ref(&x), transpose_contiguous_view);
    let (h, rep) = optimize(&g, &only(|o| o.simplify = true)).unwrap();
    assert_eq!(count(&h, |c| matches!(c, OpCall::Clone)), 1, "{rep:?}");
    assert_eq!(run(&g, std::slice::from_ref(&x)), run(&h, &[x]));
}

#[test]
fn simplify_keeps_a_strided_operand_of_an_identity() {
    // `x.t() + 0` is a contiguous copy: replacing it by `x.t()` would break the view.
    let x = t(&(0..12).map(|i| i as f32).collect::<Vec<_>>(), &[3, 4]);
    let g = capture(std::slice::from_ref(&x), |a| {
        let xt = shape::transpose(&a[0], 0, 1).unwrap();
        let z = ew::binary_scalar(BinaryOp::Add, &xt, Scalar::Float(0.0), false).unwrap();
        vec![shape::view(&z, &[12]).unwrap()]
    });
    let (h, rep) = optimize(&g, &only(|o| o.simplify = true)).unwrap();
    assert_eq!(
        count(&h, |c| matches!(c, OpCall::BinaryScalar { .. })),
        1,
        "{rep:?}"
    );
    assert_eq!(
        run(&g, std::slice::from_ref(&x)),
        run(&h, std::slice::from_ref(&x))
    );
    // From a contiguous operand the identity still goes.
    let g = capture(std::slice::from_ref(&x), |a| {
        let z = ew::binary_scalar(BinaryOp::Add, &a[0], Scalar::Float(0.0), false).unwrap();
        vec![shape::view(&z, &[12]).unwrap()]
    });
    let (h, _) = optimize(&g, &only(|o| o.simplify = true)).unwrap();
    assert_eq!(count(&h, |c| matches!(c, OpCall::BinaryScalar { .. })), 0);
}

#[test]
fn verifier_names_the_pass_that_breaks_a_layout() {
    let x = Tensor::from_vec((0..24).map(|i| i as f32).collect(), &[2, 3, 4]).unwrap();
    let g = capture(std::slice::from_ref(&x), transpose_contiguous_view);
    let want = verify::result_layouts(&g);
    // What the old simplify did: the copy replaced by the transposed view.
    let mut bad = g.clone();
    let i = bad
        .nodes
        .iter()
        .position(|n| matches!(n.call, OpCall::Clone))
        .expect("a copy");
    let (src, out) = (bad.nodes[i].inputs[0], bad.nodes[i].outputs[0]);
    substitute(&mut bad, &HashMap::from([(out, src)]));
    let mut dead = vec![false; bad.nodes.len()];
    dead[i] = true;
    remove_nodes(&mut bad, &dead);
    let err = verify::after_pass(&bad, "the simplify pass", &want)
        .unwrap_err()
        .to_string();
    assert!(err.contains("after the simplify pass"), "{err}");
    assert!(err.contains("view"), "{err}");
    // A result whose layout changed is caught even when nothing reads it.
    let g = capture(std::slice::from_ref(&x), |a| {
        let y = ew::binary_scalar(BinaryOp::Mul, &a[0], Scalar::Float(2.0), false).unwrap();
        let yt = shape::transpose(&y, 0, 1).unwrap();
        vec![ew::clone(&yt).unwrap()]
    });
    let want = verify::result_layouts(&g);
    let mut bad = g.clone();
    let i = bad
        .nodes
        .iter()
        .position(|n| matches!(n.call, OpCall::Clone))
        .expect("a copy");
    let (src, out) = (bad.nodes[i].inputs[0], bad.nodes[i].outputs[0]);
    substitute(&mut bad, &HashMap::from([(out, src)]));
    let mut dead = vec![false; bad.nodes.len()];
    dead[i] = true;
    remove_nodes(&mut bad, &dead);
    let err = verify::after_pass(&bad, "the cse pass", &want)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("after the cse pass: output 0 has layout"),
        "{err}"
    );
}
