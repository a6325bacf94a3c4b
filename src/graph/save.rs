//! Saved graphs: one versioned file holding a captured graph and the
//! tensors it reads, runnable without the code that built it.
//!
//! The file has the layout of a safetensors file, so any safetensors reader
//! can list and load its tensors:
//!
//! ```text
//! u64 (little-endian)  N, the header's length in bytes
//! N bytes              JSON header: {"__metadata__": {...}, "<name>": {dtype, shape, data_offsets}, ...}
//! the rest             tensor bytes (row-major, little-endian), in header order, no gaps
//! ```
//!
//! `__metadata__` holds `format` (`"ferrograd.graph"`), `version` (see
//! [`VERSION`]), `graph` (the graph as JSON: values, inputs, nodes with their
//! [`OpCall`]s and source lines, outputs, `.grad` effects, symbols),
//! `generators` (the states of the private random generators the graph
//! draws from) and `scalars` (the dynamic optimizer arguments' values when
//! saved). Tensors read by reference (parameters, buffers, optimizer state)
//! and constants are stored by value; on loading they become tensors owned by
//! the loaded graph, so a saved training step updates its own copy.
//!
//! Loading trusts nothing: the header's size, every tensor's dtype, shape and
//! byte range are checked against the file before any tensor is made; the
//! graph must pass the IR verifier, fused kernels are checked instruction by
//! instruction, and graphs that cannot be represented (ops whose gradient
//! runs as an opaque backward rule) are refused when saving. Shapes and
//! dtypes are re-checked by shape inference when the loaded graph is first
//! planned. No part of the format executes code.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::call::{Gen, NodeRef, OpCall, Sub};
use super::control::SubGraph;
use super::fused::{FInstr, FusedKernel};
use super::{sym, Graph, Input, InputKind, Node, Producer, SetGrad, ValueInfo};
use crate::error::{Error, Result};
use crate::ops::random::{GenState, Generator};
use crate::tensor::{DType, Device, Scalar, Tensor};

/// The `format` a saved graph's metadata names.
pub const FORMAT: &str = "ferrograd.graph";
/// The file version this build writes and reads.
pub const VERSION: u32 = 1;
/// The largest header accepted (the graph's JSON lives in it).
const MAX_HEADER: usize = 512 << 20;
/// The largest argument position accepted (positions may skip arguments the
/// graph does not read).
const MAX_ARGS: usize = 1 << 16;

fn bad(msg: impl Into<String>) -> Error {
    Error::value("load_graph", msg)
}

// ---------------------------------------------------------------- the tables

/// Tensors and generators met while a graph is (de)serialised: sub-graphs
/// and random ops reach them through this thread-local table.
#[derive(Default)]
struct Table {
    /// Saving: tensors in the order they were met (named `t0`, `t1`, ...).
    tensors_out: Vec<Tensor>,
    /// Saving: generators by identity (index = position).
    gens_out: Vec<Arc<Generator>>,
    /// Loading: tensors by name.
    tensors_in: HashMap<String, Tensor>,
    /// Loading: the generators of the file.
    gens_in: Vec<Arc<Generator>>,
}

thread_local! {
    static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

fn with_table<R>(f: impl FnOnce(&mut Table) -> R) -> Option<R> {
    TABLE.with(|t| t.borrow_mut().as_mut().map(f))
}

/// Run `f` with `table` installed, returning the table afterwards.
fn with_installed<R>(table: Table, f: impl FnOnce() -> R) -> (R, Table) {
    let prev = TABLE.with(|t| t.borrow_mut().replace(table));
    let r = f();
    let table = TABLE
        .with(|t| std::mem::replace(&mut *t.borrow_mut(), prev))
        .unwrap_or_default();
    (r, table)
}

// ------------------------------------------------------------- JSON mirrors

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphRepr {
    values: Vec<ValueRepr>,
    inputs: Vec<InputRepr>,
    nodes: Vec<NodeRepr>,
    outputs: Vec<usize>,
    set_grads: Vec<(usize, Option<usize>)>,
    symbols: Vec<(String, usize)>,
    has_backward: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValueRepr {
    shape: Vec<usize>,
    dtype: DType,
    requires_grad: bool,
    producer: Producer,
}

#[derive(Serialize, Deserialize)]
enum InputKindRepr {
    Arg(usize),
    Ref(String),
    Const(String),
    Grad(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputRepr {
    kind: InputKindRepr,
    value: usize,
    name: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRepr {
    call: OpCall,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    aux: usize,
    loc: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubRepr {
    graph: GraphRepr,
    n_args: usize,
    n_caps: usize,
}

fn stash_tensor(t: &Tensor) -> std::result::Result<String, String> {
    with_table(|tb| {
        tb.tensors_out.push(t.clone());
        format!("t{}", tb.tensors_out.len() - 1)
    })
    .ok_or_else(|| "graph tensors can only be serialised by graph::save".to_string())
}

fn fetch_tensor(name: &str) -> std::result::Result<Tensor, String> {
    with_table(|tb| tb.tensors_in.get(name).cloned())
        .flatten()
        .ok_or_else(|| format!("the graph reads tensor {name:?}, which the file does not hold"))
}

impl GraphRepr {
    fn of(g: &Graph) -> std::result::Result<GraphRepr, String> {
        let mut inputs = Vec::with_capacity(g.inputs.len());
        for inp in &g.inputs {
            let kind = match &inp.kind {
                InputKind::Arg(k) => InputKindRepr::Arg(*k),
                InputKind::Ref(t) => InputKindRepr::Ref(stash_tensor(t)?),
                InputKind::Const(t) => InputKindRepr::Const(stash_tensor(t)?),
                InputKind::Grad(v) => InputKindRepr::Grad(*v),
            };
            inputs.push(InputRepr {
                kind,
                value: inp.value,
                name: inp.name.clone(),
            });
        }
        Ok(GraphRepr {
            values: g
                .values
                .iter()
                .map(|v| ValueRepr {
                    shape: v.shape.clone(),
                    dtype: v.dtype,
                    requires_grad: v.requires_grad,
                    producer: v.producer.clone(),
                })
                .collect(),
            inputs,
            nodes: g
                .nodes
                .iter()
                .map(|n| NodeRepr {
                    call: n.call.clone(),
                    inputs: n.inputs.clone(),
                    outputs: n.outputs.clone(),
                    aux: n.aux,
                    loc: n.loc.as_deref().map(str::to_string),
                })
                .collect(),
            outputs: g.outputs.clone(),
            set_grads: g.set_grads.iter().map(|s| (s.target, s.value)).collect(),
            symbols: g
                .symbols
                .iter()
                .map(|s| (s.name.clone(), s.sentinel))
                .collect(),
            has_backward: g.has_backward,
        })
    }

    /// The graph, checked: tensors found with the recorded types, symbols
    /// known, fused kernels well formed, and the IR verifier's invariants.
    fn into_graph(self) -> std::result::Result<Graph, String> {
        if self.symbols.len() > sym::SENTINELS.len() {
            return Err(format!(
                "the graph has {} symbolic dims; at most {} are supported",
                self.symbols.len(),
                sym::SENTINELS.len()
            ));
        }
        let mut symbols = vec![];
        for (i, (name, sentinel)) in self.symbols.into_iter().enumerate() {
            if sentinel != sym::SENTINELS[i] {
                return Err(format!(
                    "symbol {i} ({name:?}) has sentinel {sentinel}, expected {}",
                    sym::SENTINELS[i]
                ));
            }
            symbols.push(sym::Symbol { name, sentinel });
        }
        let values: Vec<ValueInfo> = self
            .values
            .into_iter()
            .map(|v| ValueInfo {
                shape: v.shape,
                dtype: v.dtype,
                requires_grad: v.requires_grad,
                producer: v.producer,
            })
            .collect();
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for (k, inp) in self.inputs.into_iter().enumerate() {
            let info = values.get(inp.value).ok_or_else(|| {
                format!("input {k} names value %{}, which does not exist", inp.value)
            })?;
            let kind = match inp.kind {
                InputKindRepr::Arg(a) => InputKind::Arg(a),
                InputKindRepr::Grad(v) => InputKind::Grad(v),
                InputKindRepr::Ref(n) => InputKind::Ref(typed(fetch_tensor(&n)?, info, k)?),
                InputKindRepr::Const(n) => InputKind::Const(typed(fetch_tensor(&n)?, info, k)?),
            };
            inputs.push(Input {
                kind,
                value: inp.value,
                name: inp.name,
            });
        }
        // Argument positions: 0..n, each bound once.
        let mut args: Vec<usize> = inputs
            .iter()
            .filter_map(|i| match i.kind {
                InputKind::Arg(a) => Some(a),
                _ => None,
            })
            .collect();
        args.sort_unstable();
        if args.windows(2).any(|w| w[0] == w[1]) || args.last().is_some_and(|&a| a >= MAX_ARGS) {
            return Err(format!(
                "argument positions {args:?} repeat or exceed {MAX_ARGS}"
            ));
        }
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.into_iter().enumerate() {
            if let OpCall::Fused { kernel } = &n.call {
                check_kernel(kernel, n.inputs.len(), n.outputs.len())
                    .map_err(|e| format!("node {i} (fused): {e}"))?;
            }
            if n.aux > n.outputs.len() {
                return Err(format!(
                    "node {i} has {} aux of {} outputs",
                    n.aux,
                    n.outputs.len()
                ));
            }
            nodes.push(Node {
                call: n.call,
                inputs: n.inputs,
                outputs: n.outputs,
                aux: n.aux,
                loc: n.loc.map(Arc::from),
            });
        }
        let g = Graph {
            values,
            inputs,
            nodes,
            outputs: self.outputs,
            set_grads: self
                .set_grads
                .into_iter()
                .map(|(target, value)| SetGrad { target, value })
                .collect(),
            symbols,
            has_backward: self.has_backward,
            device: Device::Cpu,
            no_inplace: false,
            no_parallel: false,
            grad_absent: vec![],
        };
        super::passes::verify(&g).map_err(|e| e.to_string())?;
        Ok(g)
    }
}

/// `t` if it has the type the graph recorded for input `k`.
fn typed(t: Tensor, info: &ValueInfo, k: usize) -> std::result::Result<Tensor, String> {
    if t.shape() != info.shape.as_slice() || t.dtype() != info.dtype {
        return Err(format!(
            "input {k}: the file's tensor is {}{:?}, the graph reads {}{:?}",
            t.dtype().name(),
            t.shape(),
            info.dtype.name(),
            info.shape
        ));
    }
    Ok(t)
}

/// A fused kernel is well formed: registers read only earlier registers,
/// loads name kernel inputs, outputs name registers, dtypes are supported.
fn check_kernel(k: &FusedKernel, n_in: usize, n_out: usize) -> std::result::Result<(), String> {
    if !matches!(k.compute, DType::F32 | DType::F64) {
        return Err(format!("computes in {}", k.compute.name()));
    }
    if k.n_inputs != n_in || k.n_outputs() != n_out {
        return Err(format!(
            "kernel of {} inputs and {} outputs on a node of {n_in} and {n_out}",
            k.n_inputs,
            k.n_outputs()
        ));
    }
    for r in &k.reductions {
        let ascending = r.dims.windows(2).all(|w| w[0] < w[1]);
        if r.reg >= k.instrs.len() || !ascending || r.dims.iter().any(|&d| d >= k.shape.len()) {
            return Err(format!(
                "reduction of r{} over dims {:?} of a kernel of shape {:?}",
                r.reg, r.dims, k.shape
            ));
        }
    }
    crate::tensor::nbytes_for("fused", &k.shape, k.compute).map_err(|e| e.to_string())?;
    for (i, ins) in k.instrs.iter().enumerate() {
        let ok = match *ins {
            FInstr::Load(x) => x < k.n_inputs,
            FInstr::Const(_) => true,
            FInstr::Unary(_, a) => a < i,
            FInstr::Binary(_, a, b) => a < i && b < i,
            FInstr::Where(c, a, b) => c < i && a < i && b < i,
        };
        if !ok {
            return Err(format!(
                "instruction {i} ({ins:?}) reads outside the program"
            ));
        }
    }
    for &(r, d) in &k.outputs {
        if r >= k.instrs.len() || !(d == k.compute || d == DType::Bool) {
            return Err(format!("output register r{r} of dtype {}", d.name()));
        }
    }
    Ok(())
}

// ------------------------------------------- serde for the graph's handles

impl Serialize for Sub {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let sub = self.graph();
        SubRepr {
            graph: GraphRepr::of(&sub.graph).map_err(S::Error::custom)?,
            n_args: sub.n_args,
            n_caps: sub.n_caps,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sub {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Sub, D::Error> {
        let r = SubRepr::deserialize(d)?;
        let g = r.graph.into_graph().map_err(D::Error::custom)?;
        let n_arg_inputs = g
            .inputs
            .iter()
            .filter(|i| matches!(i.kind, InputKind::Arg(_)))
            .count();
        if r.n_args.checked_add(r.n_caps) != Some(n_arg_inputs) || !g.set_grads.is_empty() {
            return Err(D::Error::custom(format!(
                "a control-flow body of {} arguments and {} captures has {n_arg_inputs} argument inputs",
                r.n_args, r.n_caps
            )));
        }
        Ok(Sub(Arc::new(SubGraph::new(g, r.n_args, r.n_caps))))
    }
}

/// The default generator is `null`; a private one is its index in the file's list.
impl Serialize for Gen {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match &self.0 {
            None => s.serialize_none(),
            Some(g) => {
                let i = with_table(|tb| {
                    if let Some(i) = tb.gens_out.iter().position(|x| Arc::ptr_eq(x, g)) {
                        i
                    } else {
                        tb.gens_out.push(g.clone());
                        tb.gens_out.len() - 1
                    }
                })
                .ok_or_else(|| {
                    S::Error::custom("generators can only be serialised by graph::save")
                })?;
                s.serialize_some(&i)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Gen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Gen, D::Error> {
        match Option::<usize>::deserialize(d)? {
            None => Ok(Gen(None)),
            Some(i) => with_table(|tb| tb.gens_in.get(i).cloned())
                .flatten()
                .map(|g| Gen(Some(g)))
                .ok_or_else(|| D::Error::custom(format!("no generator {i} in the file"))),
        }
    }
}

impl Serialize for NodeRef {
    fn serialize<S: Serializer>(&self, _: S) -> std::result::Result<S::Ok, S::Error> {
        Err(S::Error::custom(format!(
            "the graph runs the backward rule of `{}` as an opaque step, which cannot be saved (capture the function without this gradient, or save the forward graph)",
            self.0.name()
        )))
    }
}

impl<'de> Deserialize<'de> for NodeRef {
    fn deserialize<D: Deserializer<'de>>(_: D) -> std::result::Result<NodeRef, D::Error> {
        Err(D::Error::custom(
            "opaque backward steps (vjp nodes) cannot be loaded",
        ))
    }
}

/// Floats as JSON numbers; infinities and NaN (JSON has none) as strings.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum F64Repr {
    Num(f64),
    Text(String),
}

impl F64Repr {
    fn of(x: f64) -> F64Repr {
        if x.is_finite() {
            F64Repr::Num(x)
        } else if x.is_nan() {
            F64Repr::Text("nan".into())
        } else if x > 0.0 {
            F64Repr::Text("inf".into())
        } else {
            F64Repr::Text("-inf".into())
        }
    }
    fn get(self) -> std::result::Result<f64, String> {
        match self {
            F64Repr::Num(x) => Ok(x),
            F64Repr::Text(s) => match s.as_str() {
                "nan" => Ok(f64::NAN),
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                _ => Err(format!("{s:?} is not a number")),
            },
        }
    }
}

#[derive(Serialize, Deserialize)]
enum ScalarRepr {
    Bool(bool),
    Int(i64),
    Float(F64Repr),
}

impl Serialize for Scalar {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match *self {
            Scalar::Bool(b) => ScalarRepr::Bool(b),
            Scalar::Int(i) => ScalarRepr::Int(i),
            Scalar::Float(x) => ScalarRepr::Float(F64Repr::of(x)),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Scalar, D::Error> {
        Ok(match ScalarRepr::deserialize(d)? {
            ScalarRepr::Bool(b) => Scalar::Bool(b),
            ScalarRepr::Int(i) => Scalar::Int(i),
            ScalarRepr::Float(x) => Scalar::Float(x.get().map_err(D::Error::custom)?),
        })
    }
}

pub use crate::ops::registry::{static_name, static_names};

// ------------------------------------------------------------ tensor bytes

fn st_dtype(d: DType) -> &'static str {
    match d {
        DType::Bool => "BOOL",
        DType::U8 => "U8",
        DType::I8 => "I8",
        DType::I16 => "I16",
        DType::I32 => "I32",
        DType::I64 => "I64",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::F32 => "F32",
        DType::F64 => "F64",
    }
}

fn st_dtype_parse(s: &str) -> Option<DType> {
    Some(match s {
        "BOOL" => DType::Bool,
        "U8" => DType::U8,
        "I8" => DType::I8,
        "I16" => DType::I16,
        "I32" => DType::I32,
        "I64" => DType::I64,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "F32" => DType::F32,
        "F64" => DType::F64,
        _ => return None,
    })
}

/// A tensor's elements in row-major order, as bytes.
fn tensor_bytes(t: &Tensor) -> Result<Vec<u8>> {
    t.check_has_data("save_graph")?;
    // GPU tensors are read back through the one materialise path.
    let host;
    let t = if t.device() == Device::Cpu {
        t
    } else {
        host = crate::backend::transfer(t, Device::Cpu)?;
        &host
    };
    let isz = t.dtype().itemsize();
    let mut out = Vec::with_capacity(t.numel() * isz);
    let base = t.byte_ptr();
    crate::backend::cpu::strided::for_each_offset(t.shape(), t.strides(), |off| {
        // SAFETY: offsets come from the tensor's layout, inside its storage
        // (byte_ptr already includes the layout's offset).
        let p = unsafe { base.offset(off * isz as isize) };
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, isz) });
    });
    Ok(out)
}

/// A new CPU tensor of `shape` and `dtype` holding `bytes` (checked lengths).
fn tensor_from_bytes(name: &str, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Tensor> {
    if dtype == DType::Bool && bytes.iter().any(|&b| b > 1) {
        return Err(bad(format!(
            "tensor {name:?}: bool data holds bytes other than 0 and 1"
        )));
    }
    let t = Tensor::empty(shape, dtype, Device::Cpu)?;
    debug_assert_eq!(bytes.len(), t.numel() * dtype.itemsize());
    // SAFETY: fresh contiguous storage of exactly bytes.len() bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), t.byte_ptr(), bytes.len()) };
    Ok(t)
}

// --------------------------------------------------------------- save/load

/// A graph read from a file.
pub struct Loaded {
    pub graph: Graph,
    /// The dynamic scalar arguments' values when the graph was saved.
    pub scalars: Vec<f64>,
    /// Extra string metadata written by [`to_bytes`]'s caller.
    pub metadata: BTreeMap<String, String>,
    /// The device the graph ran on when saved. The loaded graph's tensors
    /// are on the CPU and its calls still name this device: [`Loaded::on`]
    /// makes it a graph of one device.
    pub device: Device,
}

impl Loaded {
    /// The loaded graph made to run on `device` (its tensors copied there,
    /// its factories and copies retargeted from the device it was saved on).
    pub fn on(mut self, device: Device) -> Result<Loaded> {
        self.graph.relocate(self.device, device)?;
        self.device = device;
        Ok(self)
    }
}

/// Metadata keys the format itself uses.
const RESERVED: [&str; 6] = [
    "format",
    "version",
    "graph",
    "generators",
    "scalars",
    "device",
];

/// The file image of `g` (see the module docs). `scalars` are the current
/// values of its dynamic scalar slots; `extra` is stored as metadata.
pub fn to_bytes(g: &Graph, scalars: &[f64], extra: &BTreeMap<String, String>) -> Result<Vec<u8>> {
    for k in extra.keys() {
        if RESERVED.contains(&k.as_str()) {
            return Err(Error::value(
                "save_graph",
                format!("metadata key {k:?} is reserved"),
            ));
        }
    }
    let (json, table) = with_installed(Table::default(), || {
        GraphRepr::of(g).and_then(|r| serde_json::to_string(&r).map_err(|e| e.to_string()))
    });
    let json = json.map_err(|e| Error::value("save_graph", e))?;
    let gens: Vec<[u64; 2]> = table
        .gens_out
        .iter()
        .map(|g| {
            let s = g.get_state();
            [s.seed, s.offset]
        })
        .collect();
    let scal: Vec<F64Repr> = scalars.iter().map(|&x| F64Repr::of(x)).collect();
    let mut meta: BTreeMap<String, String> = extra.clone();
    if g.device != Device::Cpu {
        meta.insert("device".into(), g.device.name());
    }
    meta.insert("format".into(), FORMAT.into());
    meta.insert("version".into(), VERSION.to_string());
    meta.insert("graph".into(), json);
    meta.insert(
        "generators".into(),
        serde_json::to_string(&gens).expect("plain json"),
    );
    meta.insert(
        "scalars".into(),
        serde_json::to_string(&scal).expect("plain json"),
    );
    let mut header = serde_json::Map::new();
    header.insert(
        "__metadata__".into(),
        serde_json::to_value(&meta).expect("plain json"),
    );
    let mut data: Vec<u8> = vec![];
    for (i, t) in table.tensors_out.iter().enumerate() {
        let b = tensor_bytes(t)?;
        let start = data.len();
        data.extend_from_slice(&b);
        header.insert(
            format!("t{i}"),
            serde_json::json!({
                "dtype": st_dtype(t.dtype()),
                "shape": t.shape(),
                "data_offsets": [start, data.len()],
            }),
        );
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).expect("plain json");
    // Pad the header with spaces to a multiple of 8 bytes (as safetensors writers do).
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + data.len());
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    // Every graph that saves must load: catch what the format cannot carry
    // (a float attribute that does not survive, say) now, not when loading.
    let back = from_bytes(&out).map_err(|e| {
        Error::value(
            "save_graph",
            format!("the graph does not survive saving: {e}"),
        )
    })?;
    if !same_calls(g, &back.graph) {
        return Err(Error::value(
            "save_graph",
            "the graph does not survive saving: an op attribute changed when read back",
        ));
    }
    Ok(out)
}

/// Whether two graphs have equal node calls (sub-graphs and generators,
/// compared by identity in `OpCall`, are compared by their listings).
fn same_calls(a: &Graph, b: &Graph) -> bool {
    a.nodes.len() == b.nodes.len()
        && a.nodes
            .iter()
            .zip(&b.nodes)
            .all(|(x, y)| match (&x.call, &y.call) {
                (
                    OpCall::Cond {
                        then_g: a1,
                        else_g: a2,
                    },
                    OpCall::Cond {
                        then_g: b1,
                        else_g: b2,
                    },
                ) => {
                    same_calls(&a1.graph().graph, &b1.graph().graph)
                        && same_calls(&a2.graph().graph, &b2.graph().graph)
                }
                (OpCall::While { cond: a1, body: a2 }, OpCall::While { cond: b1, body: b2 }) => {
                    same_calls(&a1.graph().graph, &b1.graph().graph)
                        && same_calls(&a2.graph().graph, &b2.graph().graph)
                }
                (p, q) => format!("{p:?}") == format!("{q:?}"),
            })
}

fn meta_str<'a>(
    meta: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Result<&'a str> {
    meta.get(key)
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad(format!("the file's metadata has no {key:?} string")))
}

/// Read a graph from a file image (see the module docs), checking everything.
pub fn from_bytes(buf: &[u8]) -> Result<Loaded> {
    if buf.len() < 8 {
        return Err(bad(format!(
            "the file is {} bytes long: too short for a saved graph",
            buf.len()
        )));
    }
    let n = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    if n > MAX_HEADER as u64 || n > (buf.len() - 8) as u64 {
        return Err(bad(format!(
            "the header claims {n} bytes but the file holds {} after the length (truncated or not a saved graph)",
            buf.len() - 8
        )));
    }
    let n = n as usize;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&buf[8..8 + n])
        .map_err(|e| bad(format!("the header is not a JSON object: {e}")))?;
    let data = &buf[8 + n..];
    let meta = header
        .get("__metadata__")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad("the file has no __metadata__ (not a saved graph)"))?;
    let format = meta_str(meta, "format")?;
    if format != FORMAT {
        return Err(bad(format!(
            "the file's format is {format:?}, not {FORMAT:?}"
        )));
    }
    let version = meta_str(meta, "version")?;
    if version.parse::<u32>().ok() != Some(VERSION) {
        return Err(bad(format!(
            "the file is version {version:?}; this build of ferrograd reads version {VERSION}"
        )));
    }
    // Tensors: dtype, shape and byte range checked against the data section,
    // which they must tile exactly (no gaps, no overlaps).
    let mut entries: Vec<(usize, usize, String, DType, Vec<usize>)> = vec![];
    for (name, e) in &header {
        if name == "__metadata__" {
            continue;
        }
        let e = e
            .as_object()
            .ok_or_else(|| bad(format!("tensor {name:?}: entry is not an object")))?;
        if e.len() != 3 {
            return Err(bad(format!(
                "tensor {name:?}: expected dtype, shape and data_offsets"
            )));
        }
        let dtype = e
            .get("dtype")
            .and_then(|d| d.as_str())
            .and_then(st_dtype_parse)
            .ok_or_else(|| bad(format!("tensor {name:?}: unknown or missing dtype")))?;
        let shape: Vec<usize> = e
            .get("shape")
            .and_then(|s| s.as_array())
            .and_then(|a| {
                a.iter()
                    .map(|d| d.as_u64().and_then(|x| usize::try_from(x).ok()))
                    .collect()
            })
            .ok_or_else(|| bad(format!("tensor {name:?}: shape is not a list of sizes")))?;
        let offs: Vec<usize> = e
            .get("data_offsets")
            .and_then(|s| s.as_array())
            .and_then(|a| {
                a.iter()
                    .map(|d| d.as_u64().and_then(|x| usize::try_from(x).ok()))
                    .collect()
            })
            .filter(|v: &Vec<usize>| v.len() == 2)
            .ok_or_else(|| bad(format!("tensor {name:?}: data_offsets is not two offsets")))?;
        let nbytes = crate::tensor::nbytes_for("load_graph", &shape, dtype)
            .map_err(|_| bad(format!("tensor {name:?}: shape {shape:?} is too large")))?;
        if offs[0] > offs[1] || offs[1] > data.len() || offs[1] - offs[0] != nbytes {
            return Err(bad(format!(
                "tensor {name:?}: bytes {}..{} of a {}-byte data section do not hold {} {shape:?} ({nbytes} bytes)",
                offs[0],
                offs[1],
                data.len(),
                dtype.name()
            )));
        }
        entries.push((offs[0], offs[1], name.clone(), dtype, shape));
    }
    entries.sort();
    let mut pos = 0;
    for (s, e, name, ..) in &entries {
        if *s != pos {
            return Err(bad(format!(
                "tensor {name:?} starts at byte {s} of the data section, expected {pos} (gap or overlap)"
            )));
        }
        pos = *e;
    }
    if pos != data.len() {
        return Err(bad(format!(
            "the data section holds {} bytes, the tensors {pos}",
            data.len()
        )));
    }
    let mut tensors = HashMap::with_capacity(entries.len());
    for (s, e, name, dtype, shape) in entries {
        let t = tensor_from_bytes(&name, dtype, &shape, &data[s..e])?;
        tensors.insert(name, t);
    }
    let gens: Vec<[u64; 2]> = serde_json::from_str(meta_str(meta, "generators")?)
        .map_err(|e| bad(format!("generators: {e}")))?;
    let scalars: Vec<F64Repr> = serde_json::from_str(meta_str(meta, "scalars")?)
        .map_err(|e| bad(format!("scalars: {e}")))?;
    let scalars = scalars
        .into_iter()
        .map(F64Repr::get)
        .collect::<std::result::Result<Vec<f64>, String>>()
        .map_err(bad)?;
    let table = Table {
        tensors_in: tensors,
        gens_in: gens
            .iter()
            .map(|&[seed, offset]| {
                let g = Generator::new(Device::Cpu);
                g.set_state(GenState { seed, offset });
                Arc::new(g)
            })
            .collect(),
        ..Table::default()
    };
    let graph_json = meta_str(meta, "graph")?;
    let (g, _) = with_installed(table, || {
        serde_json::from_str::<GraphRepr>(graph_json)
            .map_err(|e| format!("the graph: {e}"))
            .and_then(GraphRepr::into_graph)
    });
    let graph = g.map_err(bad)?;
    type_check(&graph)?;
    let metadata = meta
        .iter()
        .filter(|(k, _)| !RESERVED.contains(&k.as_str()))
        .map(|(k, v)| {
            v.as_str()
                .map(|s| (k.clone(), s.to_string()))
                .ok_or_else(|| bad(format!("metadata {k:?} is not a string")))
        })
        .collect::<Result<BTreeMap<_, _>>>()?;
    let device = match meta.get("device") {
        None => Device::Cpu,
        Some(v) => match v.as_str() {
            Some("cpu") => Device::Cpu,
            Some("gpu") => Device::Gpu(0),
            Some(d) => match d.strip_prefix("gpu:").and_then(|i| i.parse::<u32>().ok()) {
                Some(i) => Device::Gpu(i),
                None => return Err(bad(format!("the file names an unknown device {d:?}"))),
            },
            None => return Err(bad("metadata \"device\" is not a string")),
        },
    };
    Ok(Loaded {
        graph,
        scalars,
        metadata,
        device,
    })
}

thread_local! {
    /// Set while a loaded graph is type-checked: a panic then is reported as
    /// a malformed file, without the default hook's message.
    static QUIET_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Install (once) a panic hook that stays silent on threads checking a graph.
fn quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(|q| q.get()) {
                prev(info);
            }
        }));
    });
}

/// Re-derive every node's output types by shape inference (symbols at their
/// capture-time sentinel sizes), as a plan does before running: a node whose
/// inputs, attributes or recorded types do not fit its op makes the file
/// malformed — found here, not when the graph first runs.
fn type_check(g: &Graph) -> Result<()> {
    let env: Vec<usize> = g.symbols.iter().map(|s| s.sentinel).collect();
    quiet_hook();
    QUIET_PANICS.with(|q| q.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::exec::Plan::new(g, &env).map(|_| ())
    }));
    QUIET_PANICS.with(|q| q.set(false));
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(bad(format!("the graph does not type-check: {e}"))),
        Err(_) => Err(bad(
            "the graph does not type-check: a node's inputs do not fit its op",
        )),
    }
}

/// Write `g` to `path` (atomically: a temporary file renamed into place).
pub fn save(
    g: &Graph,
    scalars: &[f64],
    extra: &BTreeMap<String, String>,
    path: &std::path::Path,
) -> Result<()> {
    let bytes = to_bytes(g, scalars, extra)?;
    let io = |e: std::io::Error| Error::runtime("save_graph", format!("{}: {e}", path.display()));
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    std::fs::write(&tmp, &bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// Read a saved graph from `path`.
pub fn load(path: &std::path::Path) -> Result<Loaded> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::runtime("load_graph", format!("{}: {e}", path.display())))?;
    from_bytes(&bytes)
}

/// `g` as the JSON the file format stores (see the module docs) and the
/// tensors it names `t0`, `t1`, ... in order (for exporters).
pub fn to_json(g: &Graph) -> Result<(String, Vec<Tensor>)> {
    let (json, table) = with_installed(Table::default(), || {
        GraphRepr::of(g).and_then(|r| serde_json::to_string(&r).map_err(|e| e.to_string()))
    });
    let json = json.map_err(|e| Error::value("graph_json", e))?;
    Ok((json, table.tensors_out))
}

/// What each dynamic scalar slot of `g` supplies (`"lr"`, `"step of parameter 2"`,
/// ...), by slot number: a graph with slots needs their values at every run.
pub fn scalar_slots(g: &Graph) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for n in &g.nodes {
        let dynamic = match &n.call {
            OpCall::SgdStep { dynamic, .. }
            | OpCall::AdamStep { dynamic, .. }
            | OpCall::RmspropStep { dynamic, .. } => dynamic,
            _ => continue,
        };
        for d in dynamic {
            if out.len() <= d.slot {
                out.resize(d.slot + 1, String::new());
            }
            out[d.slot] = match d.field {
                super::call::DynField::Step(i) => format!("step count of parameter {i}"),
                super::call::DynField::First(i) => format!("first-step flag of parameter {i}"),
                ref f => format!("{f:?}").to_lowercase(),
            };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::exec::Plan;
    use crate::graph::{passes, trace};
    use crate::ops::elementwise::{self as ew, BinaryOp, UnaryOp};
    use crate::ops::{linalg, reduce};

    fn t(v: &[f32], s: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), s).unwrap()
    }

    /// `relu(x @ w) masked where it is > 1 with -inf, summed over dim 1`,
    /// with `w` read by reference, fused when `fuse`.
    fn sample(w: &Tensor, fuse: bool) -> Graph {
        let x = t(&[1.0, -2.0, 0.5, 3.0, 0.0, 1.5], &[2, 3]);
        trace::begin().unwrap();
        let xa = trace::arg(&x, 0, &[], Some("x".into())).unwrap();
        let wr = trace::reference(w, Some("w".into())).unwrap();
        let y = linalg::matmul(&xa, &wr).unwrap();
        let r = ew::unary(UnaryOp::Relu, &y).unwrap();
        let r = ew::binary_scalar(BinaryOp::Mul, &r, Scalar::Float(0.5), false).unwrap();
        let m = ew::binary_scalar(BinaryOp::Gt, &r, Scalar::Float(1.0), false).unwrap();
        let f = ew::masked_fill(&r, &m, Scalar::Float(f64::NEG_INFINITY)).unwrap();
        let s = reduce::sum(&f, Some(&[1]), false, None).unwrap();
        let g = trace::end(&[s, r]).unwrap();
        if fuse {
            passes::optimize(&g, &passes::PassOptions::default())
                .unwrap()
                .0
        } else {
            g
        }
    }

    fn w() -> Tensor {
        t(
            &[
                0.5, -1.0, 2.0, 1.0, 0.25, -0.5, 1.5, 2.0, -3.0, 0.0, 1.0, 0.75,
            ],
            &[3, 4],
        )
    }

    fn outs(g: &Graph, x: &Tensor) -> Vec<Vec<f64>> {
        let p = Plan::new(g, &[]).unwrap();
        p.run(std::slice::from_ref(x))
            .unwrap()
            .iter()
            .map(|t| t.to_f64_vec())
            .collect()
    }

    #[test]
    fn round_trip_runs_the_same() {
        let x = t(&[0.3, 1.0, -1.0, 2.0, 2.0, 0.1], &[2, 3]);
        for fuse in [false, true] {
            let g = sample(&w(), fuse);
            let bytes = to_bytes(&g, &[], &BTreeMap::new()).unwrap();
            let back = from_bytes(&bytes).unwrap();
            assert_eq!(back.graph.nodes.len(), g.nodes.len());
            let (a, b) = (outs(&g, &x), outs(&back.graph, &x));
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "fuse={fuse}");
            assert!(
                a[0].iter().any(|v| v.is_infinite()),
                "the -inf fill is exercised"
            );
            // The weight is the loaded graph's own tensor, with the same values.
            match &back.graph.inputs[1].kind {
                InputKind::Ref(r) => assert_eq!(r.to_f64_vec(), w().to_f64_vec()),
                _ => panic!("input 1 should be a reference"),
            }
        }
    }

    #[test]
    fn every_truncation_and_bad_version_is_refused() {
        let g = sample(&w(), true);
        let bytes = to_bytes(&g, &[1.5], &BTreeMap::new()).unwrap();
        assert_eq!(from_bytes(&bytes).unwrap().scalars, vec![1.5]);
        for n in 0..bytes.len() {
            assert!(from_bytes(&bytes[..n]).is_err(), "truncated to {n} bytes");
        }
        let text = String::from_utf8_lossy(&bytes).to_string();
        let v2 = text.replacen("\"version\":\"1\"", "\"version\":\"2\"", 1);
        assert_ne!(v2, text);
        let e = from_bytes(v2.as_bytes()).err().unwrap().to_string();
        assert!(e.contains("version \"2\""), "{e}");
    }

    #[test]
    fn tampered_graphs_are_refused() {
        let g = sample(&w(), true);
        let bytes = to_bytes(&g, &[], &BTreeMap::new()).unwrap();
        // Rewrite every number in the header, one at a time, to large or
        // out-of-range values: each file must load as an error or as a
        // graph that still passes the verifier and plans or errors cleanly.
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
        let mut checked = 0;
        for (i, c) in header.char_indices() {
            if !c.is_ascii_digit() || header[..i].ends_with(|p: char| p.is_ascii_digit()) {
                continue;
            }
            for repl in ["9", "99999999999"] {
                let mut h = header[..i].to_string();
                h.push_str(repl);
                h.push_str(&header[i + 1..]);
                let mut f = (h.len() as u64).to_le_bytes().to_vec();
                f.extend_from_slice(h.as_bytes());
                f.extend_from_slice(&bytes[8 + n..]);
                let r = std::panic::catch_unwind(|| {
                    if let Ok(l) = from_bytes(&f) {
                        let x = t(&[0.0; 6], &[2, 3]);
                        if let Ok(p) = Plan::new(&l.graph, &[]) {
                            let _ = p.run(std::slice::from_ref(&x));
                        }
                    }
                });
                assert!(r.is_ok(), "a panic after rewriting byte {i} to {repl}");
                checked += 1;
            }
        }
        assert!(checked > 50, "{checked}");
    }

    #[test]
    fn bad_kernels_are_refused() {
        let k = FusedKernel {
            instrs: vec![FInstr::Load(0), FInstr::Unary(UnaryOp::Exp, 1)],
            outputs: vec![(1, DType::F32)],
            shape: vec![3],
            compute: DType::F32,
            n_inputs: 1,
            ops: vec!["exp"],
            reductions: vec![],
        };
        assert!(check_kernel(&k, 1, 1)
            .unwrap_err()
            .contains("instruction 1"));
        let mut k2 = k.clone();
        k2.instrs[1] = FInstr::Unary(UnaryOp::Exp, 0);
        assert!(check_kernel(&k2, 1, 1).is_ok());
        // A reduction is one more output, over dims of the kernel's shape.
        let mut k3 = k2.clone();
        k3.reductions.push(crate::graph::fused::FReduce {
            reg: 1,
            dims: vec![0],
            keepdim: false,
            mean: false,
        });
        assert!(check_kernel(&k3, 1, 1).is_err());
        assert!(check_kernel(&k3, 1, 2).is_ok());
        k3.reductions[0].dims = vec![1];
        assert!(check_kernel(&k3, 1, 2).unwrap_err().contains("reduction"));
        assert!(check_kernel(&k2, 2, 1).is_err());
        k2.instrs[0] = FInstr::Load(1);
        assert!(check_kernel(&k2, 1, 1).is_err());
    }

    #[test]
    fn op_names_map_back_to_the_registry() {
        assert_eq!(static_name::intern("add"), "add");
        assert_eq!(static_name::intern("setitem"), "setitem");
        assert_eq!(static_name::intern("no such op"), "op");
    }
}
