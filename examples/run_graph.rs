//! Run a saved graph with no Python: the Rust-only entry point.
//!
//! ```text
//! cargo run --release --no-default-features --example run_graph -- \
//!     model.fgraph [--scalars 0.01,1] [--out DIR] [--time N] input0.npy input1.npy ...
//! ```
//!
//! Reads a graph written by `Graph.save` (Python) or `graph::save::save`,
//! binds the `.npy` files to its arguments in position order, runs it once
//! and writes each output to `DIR/output<k>.npy` (default: the current
//! directory), printing their shapes. NPY files: version 1 or 2 headers,
//! little-endian, C order; dtypes bool, int32, int64, float16, float32,
//! float64.
//!
//! `--time N` then runs the loaded plan N more times on the same inputs and
//! prints each run's wall time (`time_ms <t>` lines, deferred elementwise
//! results computed inside the timing): the steady-state latency of a
//! deployment that loads the graph once.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ferrograd::graph::exec::Plan;
use ferrograd::graph::{save, InputKind};
use ferrograd::{DType, Device, Tensor};

fn npy_descr(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => return None,
    })
}

/// The value of `'key': <value>` in an NPY header dict (up to the next `,` or `}` at depth 0).
fn header_field<'a>(h: &'a str, key: &str) -> Option<&'a str> {
    let i = h.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = h[i..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0;
    for (j, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(rest[..j].trim()),
            _ => {}
        }
    }
    None
}

fn read_npy(path: &Path) -> Result<Tensor, String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let err = |m: &str| format!("{}: {m}", path.display());
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(err("not an NPY file"));
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        _ => return Err(err("unsupported NPY version")),
    };
    let h = b
        .get(start..start + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| err("truncated header"))?;
    let descr = header_field(h, "descr").ok_or_else(|| err("no descr"))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let dtype = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
    ]
    .into_iter()
    .find(|&d| npy_descr(d) == Some(descr) || (d == DType::Bool && descr == "<b1"))
    .ok_or_else(|| err(&format!("unsupported dtype {descr}")))?;
    if header_field(h, "fortran_order") != Some("False") {
        return Err(err("only C-order arrays are supported"));
    }
    let shape_txt = header_field(h, "shape").ok_or_else(|| err("no shape"))?;
    let shape: Vec<usize> = shape_txt
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| err("bad shape")))
        .collect::<Result<_, _>>()?;
    let data = &b[start + hlen..];
    let t = Tensor::empty(&shape, dtype, Device::Cpu).map_err(|e| err(&e.to_string()))?;
    let n = t.numel() * dtype.itemsize();
    if data.len() != n {
        return Err(err(&format!("{} data bytes for {n} expected", data.len())));
    }
    if dtype == DType::Bool && data.iter().any(|&x| x > 1) {
        return Err(err("bool data other than 0/1"));
    }
    // SAFETY: fresh contiguous storage of exactly n bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), t.byte_ptr(), n) };
    Ok(t)
}

fn write_npy(path: &Path, t: &Tensor) -> Result<(), String> {
    // Outputs of another dtype (bfloat16) are written as float32.
    let t = match npy_descr(t.dtype()) {
        Some(_) => t.clone(),
        None => ferrograd::ops::elementwise::to_dtype(t, DType::F32).map_err(|e| e.to_string())?,
    };
    let t = ferrograd::ops::elementwise::contiguous(&t).map_err(|e| e.to_string())?;
    let shape = match t.shape() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        s => format!(
            "({})",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut h = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        npy_descr(t.dtype()).expect("supported dtype")
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    let n = t.numel() * t.dtype().itemsize();
    // SAFETY: a contiguous tensor of n bytes.
    out.extend_from_slice(unsafe { std::slice::from_raw_parts(t.byte_ptr(), n) });
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

fn main_inner() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut graph_path: Option<PathBuf> = None;
    let mut out_dir = PathBuf::from(".");
    let mut scalars: Option<Vec<f64>> = None;
    let mut inputs: Vec<PathBuf> = vec![];
    let mut timed_runs = 0usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out_dir = args.next().ok_or("--out needs a directory")?.into(),
            "--time" => {
                let v = args.next().ok_or("--time needs a number of runs")?;
                timed_runs = v
                    .parse()
                    .map_err(|_| format!("--time needs a number of runs, got {v:?}"))?;
            }
            "--scalars" => {
                let v = args
                    .next()
                    .ok_or("--scalars needs a comma-separated list")?;
                scalars = Some(
                    v.split(',')
                        .map(|s| {
                            s.trim()
                                .parse::<f64>()
                                .map_err(|_| format!("bad scalar {s:?}"))
                        })
                        .collect::<Result<_, _>>()?,
                );
            }
            "-h" | "--help" => {
                println!(
                    "usage: run_graph GRAPH [--scalars a,b] [--out DIR] [--time N] [INPUT.npy ...]"
                );
                return Ok(());
            }
            _ if graph_path.is_none() => graph_path = Some(a.into()),
            _ => inputs.push(a.into()),
        }
    }
    let graph_path = graph_path
        .ok_or("usage: run_graph GRAPH [--scalars a,b] [--out DIR] [--time N] [INPUT.npy ...]")?;
    // A graph saved from the GPU runs here on the CPU.
    let loaded = save::load(&graph_path)
        .and_then(|l| l.on(Device::Cpu))
        .map_err(|e| e.to_string())?;
    let g = loaded.graph;
    let positions: Vec<usize> = g
        .inputs
        .iter()
        .filter_map(|i| match i.kind {
            InputKind::Arg(k) => Some(k),
            _ => None,
        })
        .collect();
    let n_args = positions.iter().max().map_or(0, |m| m + 1);
    if inputs.len() != n_args {
        return Err(format!(
            "the graph takes {n_args} arguments, {} .npy files were given",
            inputs.len()
        ));
    }
    let args: Vec<Tensor> = inputs
        .iter()
        .map(|p| read_npy(p))
        .collect::<Result<_, _>>()?;
    let slots = save::scalar_slots(&g);
    let scalars = match scalars {
        Some(s) if s.len() == slots.len() => s,
        Some(s) => {
            return Err(format!(
                "the graph reads {} scalars ({}), {} given",
                slots.len(),
                slots.join(", "),
                s.len()
            ))
        }
        None if slots.is_empty() => vec![],
        None => {
            return Err(format!(
            "the graph reads scalars at every run ({}); pass --scalars (values when saved: {:?})",
            slots.join(", "),
            loaded.scalars
        ))
        }
    };
    let env = ferrograd::graph::exec::bind_symbols(&g, &args).map_err(|e| e.to_string())?;
    let plan = Plan::new(&g, &env).map_err(|e| e.to_string())?;
    let outs = plan.run_with(&args, &scalars).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    for (k, o) in outs.iter().enumerate() {
        let p = out_dir.join(format!("output{k}.npy"));
        write_npy(&p, o)?;
        println!(
            "output {k}: {} {:?} -> {}",
            o.dtype().name(),
            o.shape(),
            p.display()
        );
    }
    for _ in 0..timed_runs {
        let t0 = std::time::Instant::now();
        let outs = plan.run_with(&args, &scalars).map_err(|e| e.to_string())?;
        ferrograd::ops::defer::flush();
        let dt = t0.elapsed();
        drop(outs);
        println!("time_ms {:.6}", dt.as_secs_f64() * 1e3);
    }
    Ok(())
}

fn main() -> ExitCode {
    match std::panic::catch_unwind(main_inner) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("run_graph: {e}");
            ExitCode::from(2)
        }
        Err(_) => {
            eprintln!("run_graph: internal error (please report)");
            ExitCode::from(3)
        }
    }
}
