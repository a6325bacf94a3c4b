// Runtime of a ferrograd WebGPU bundle (manifest format "ferrograd-webgpu-bundle",
// version 1) in a web page: a dependency-free ES module written next to
// manifest.json by Graph.export_webgpu. See docs/webgpu-bundle.md.
//
//   import { load } from "./model.js";
//   const model = await load(new URL("./", import.meta.url));
//   const outputs = await model.run({ input0: new Float32Array(...) });

const VERSION = 1;
const ARRAYS = {
  float32: [Float32Array],
  float16: [Float32Array],
  bfloat16: [Float32Array],
  int32: [Int32Array],
  int64: [Int32Array, BigInt64Array],
  bool: [Uint8Array],
};

/** An error of this module; `code` names the case (see docs/webgpu-bundle.md). */
export class BundleError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "BundleError";
    this.code = code;
  }
}

const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

function f32ToF16(v) {
  const f = new Float32Array([v]);
  const x = new Uint32Array(f.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  const e = (x >>> 23) & 0xff;
  let m = x & 0x7fffff;
  if (e === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  let ee = e - 127 + 15;
  if (ee >= 0x1f) return sign | 0x7c00;
  if (ee <= 0) {
    if (ee < -10) return sign;
    m |= 0x800000;
    const shift = 14 - ee;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h += 1;
    return sign | h;
  }
  let h = (ee << 10) | (m >>> 13);
  const rem = m & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h += 1;
  return sign | h;
}

function f16ToF32(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

// float32 -> the nearest bfloat16 (ties to even), as a float32: a bfloat16 input stored in f32 words
// holds bfloat16 values, as a float16 input stored in f32 words holds float16 values.
function roundBf16(v) {
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer);
  if (Number.isNaN(f[0])) return NaN;
  u[0] = (u[0] + 0x7fff + ((u[0] >>> 16) & 1)) & 0xffff0000;
  return f[0];
}

async function fetchOk(url, kind) {
  let r;
  try {
    r = await fetch(url);
  } catch (e) {
    throw new BundleError("fetch", `could not fetch ${url}: ${e}`);
  }
  if (!r.ok) throw new BundleError("fetch", `could not fetch ${url}: HTTP ${r.status}`);
  return kind === "json" ? r.json() : kind === "text" ? r.text() : r.arrayBuffer();
}

/**
 * Load the bundle at `baseUrl` (the folder holding manifest.json): request an
 * adapter and a device with the features and limits the bundle needs, compile
 * its shaders, create its pipelines and upload its weights, once.
 * Options: `gpu` (instead of navigator.gpu), `adapter`, `powerPreference`.
 */
export async function load(baseUrl, options = {}) {
  const base = new URL(String(baseUrl).endsWith("/") ? baseUrl : `${baseUrl}/`, globalThis.location?.href);
  const gpu = options.gpu ?? globalThis.navigator?.gpu;
  if (!gpu) {
    throw new BundleError(
      "no-webgpu",
      "WebGPU is not available: navigator.gpu is missing (a browser without WebGPU, or a page not served from https or localhost)",
    );
  }
  const m = await fetchOk(new URL("manifest.json", base), "json");
  if (m.format !== "ferrograd-webgpu-bundle" || m.version !== VERSION) {
    throw new BundleError(
      "bad-manifest",
      `${base} holds a bundle of format ${m.format} version ${m.version}; this model.js reads ferrograd-webgpu-bundle version ${VERSION}`,
    );
  }
  const adapter = options.adapter ?? (await gpu.requestAdapter({ powerPreference: options.powerPreference ?? "high-performance" }));
  if (!adapter) throw new BundleError("no-adapter", "WebGPU is present but no adapter is available (navigator.gpu.requestAdapter() returned null)");
  const missing = (m.features ?? []).filter((f) => !adapter.features.has(f));
  if (missing.length) {
    throw new BundleError(
      "missing-feature",
      `the bundle needs the WebGPU features ${missing.join(", ")}, which this adapter lacks` +
        (missing.includes("shader-f16")
          ? "; the fallback: export the graph again in a process started with FG_GPU_NO_F16=1 (float16 is then stored in f32 words and needs no feature)"
          : ""),
    );
  }
  const requiredLimits = {};
  for (const [key, value] of Object.entries(m.limits ?? {})) {
    const name = camel(key);
    const have = adapter.limits[name];
    if (have === undefined || value > have) {
      throw new BundleError("missing-limit", `the bundle needs ${name} = ${value}; this adapter allows ${have}`);
    }
    requiredLimits[name] = value;
  }
  const device = await adapter.requestDevice({ requiredFeatures: m.features ?? [], requiredLimits });
  return new Model(m, device, await build(device, m, base), base);
}

/** Fetch one bundle's data and shaders; create its pipelines, buffers and bind groups on `device`. */
async function build(device, m, base) {
  device.pushErrorScope("validation");
  const [data, sources] = await Promise.all([
    fetchOk(new URL(m.data, base), "bytes"),
    Promise.all(m.shaders.map((s) => fetchOk(new URL(s, base), "text"))),
  ]);
  const modules = [];
  for (const [k, code] of sources.entries()) {
    const module = device.createShaderModule({ code, label: m.shaders[k] });
    const info = await module.getCompilationInfo();
    const errs = info.messages.filter((x) => x.type === "error");
    if (errs.length) {
      throw new BundleError(
        "shader",
        `${m.shaders[k]} does not compile: ${errs.map((x) => `${x.lineNum}:${x.linePos} ${x.message}`).join("; ")}`,
      );
    }
    modules.push(module);
  }
  const pipelines = await Promise.all(
    modules.map((module) => device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: m.entry_point } })),
  );
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  const buffers = m.buffers.map((b) => {
    const buf = device.createBuffer({ size: b.size, usage });
    if (b.data && b.data[1]) device.queue.writeBuffer(buf, 0, data, b.data[0], Math.ceil(b.data[1] / 4) * 4);
    return buf;
  });
  const steps = m.dispatches.map((d) => ({
    pipeline: pipelines[d.shader],
    group: device.createBindGroup({
      layout: pipelines[d.shader].getBindGroupLayout(0),
      entries: d.bindings.map(([binding, i, offset, size]) => ({ binding, resource: { buffer: buffers[i], offset, size } })),
    }),
    workgroups: d.workgroups,
  }));
  const staging = m.outputs.map((o) =>
    device.createBuffer({ size: m.buffers[o.buffer].size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
  );
  const err = await device.popErrorScope();
  if (err) throw new BundleError("device", `creating the bundle's pipelines and buffers failed: ${err.message}`);
  return { manifest: m, buffers, steps, staging };
}

const describe = (p) => ({
  name: p.name,
  shape: [...p.shape],
  dtype: p.dtype,
  ...(p.symbolic_shape ? { symbolicShape: [...p.symbolic_shape] } : {}),
});
const product = (shape) => shape.reduce((a, b) => a * b, 1);

/**
 * A loaded bundle; `run` may be called many times (runs are queued). A bundle
 * exported for several sizes of its symbolic dimensions (`variants` in the
 * manifest) runs each at the sizes of its inputs; each variant is fetched
 * and built on the first run that needs it.
 */
export class Model {
  constructor(manifest, device, parts, base) {
    this.manifest = manifest;
    this.device = device;
    this.inputs = manifest.inputs.map(describe);
    this.outputs = manifest.outputs.map(describe);
    /** The exported sizes: `[{sizes: {symbol: n}, inputs: [shape], outputs: [shape]}]` (one entry without symbols). */
    this.variants = (manifest.variants ?? [{ sizes: {}, path: "", inputs: manifest.inputs.map((p) => p.shape), outputs: manifest.outputs.map((p) => p.shape) }]).map(
      (v) => ({ sizes: { ...v.sizes }, inputs: v.inputs.map((s) => [...s]), outputs: v.outputs.map((s) => [...s]) }),
    );
    this._base = base;
    this._parts = new Map([["", Promise.resolve(parts)]]);
    this._queue = Promise.resolve();
  }

  /** Check the names and lengths (or declared shapes) of `inputs`; the index of the variant they fit. */
  _variant(inputs) {
    if (inputs === null || typeof inputs !== "object") throw new BundleError("input", "run() takes an object {inputName: TypedArray}");
    const names = this.manifest.inputs.map((p) => p.name);
    for (const k of Object.keys(inputs)) {
      if (!names.includes(k)) throw new BundleError("input-name", `unknown input '${k}'; the bundle's inputs are ${names.join(", ")}`);
    }
    const given = this.manifest.inputs.map((p) => {
      const v = inputs[p.name];
      if (v === undefined) throw new BundleError("input-name", `input '${p.name}' is missing; the bundle's inputs are ${names.join(", ")}`);
      if (!ArrayBuffer.isView(v) && v && ArrayBuffer.isView(v.data)) return { shape: v.shape, length: v.data.length };
      return { shape: null, length: v.length };
    });
    const fits = (shapes) =>
      given.every((g, k) =>
        g.shape ? g.shape.length === shapes[k].length && g.shape.every((d, i) => d === shapes[k][i]) : g.length === product(shapes[k]),
      );
    const at = this.variants.findIndex((v) => fits(v.inputs));
    if (at >= 0) return at;
    // No variant fits: name the first input that fits none.
    const k = given.findIndex((g, j) => !this.variants.some((v) => (g.shape ? fits(v.inputs) : g.length === product(v.inputs[j]))));
    const j = k >= 0 ? k : 0;
    const p = this.manifest.inputs[j];
    const allowed = this.variants.map((v) => `[${v.inputs[j]}]`).join(" or ");
    const what = given[j].shape ? `[${given[j].shape}]` : `${given[j].length} elements`;
    const sym = p.symbolic_shape && this.variants.length > 1 ? ` (the bundle was exported for shapes ${allowed} of [${p.symbolic_shape}])` : "";
    if (this.variants.length > 1) {
      throw new BundleError("input-shape", `input '${p.name}' must have shape ${allowed}${sym}, got ${what}`);
    }
    const n = product(p.shape);
    throw new BundleError(
      "input-shape",
      given[j].shape ? `input '${p.name}' must have shape [${p.shape}], got ${what}` : `input '${p.name}' must have shape [${p.shape}] (${n} elements), got ${what}`,
    );
  }

  /** The built variant `k` (fetched and created on first use). */
  _built(k) {
    const path = this.manifest.variants?.[k]?.path ?? "";
    if (!this._parts.has(path)) {
      const base = new URL(path, this._base);
      this._parts.set(
        path,
        fetchOk(new URL("manifest.json", base), "json").then((m) => build(this.device, m, base)),
      );
    }
    return this._parts.get(path);
  }

  /** Check `inputs` against the manifest `m`; the bytes to upload, in input order. */
  _encode(m, inputs) {
    return m.inputs.map((p) => {
      let v = inputs[p.name];
      if (!ArrayBuffer.isView(v) && v && ArrayBuffer.isView(v.data)) v = v.data;
      const n = product(p.shape);
      const ok = ARRAYS[p.dtype] ?? [];
      if (!ok.some((T) => v instanceof T)) {
        throw new BundleError(
          "input-dtype",
          `input '${p.name}' has dtype ${p.dtype}: pass a ${ok.map((T) => T.name).join(" or ")}, got ${v.constructor.name}`,
        );
      }
      // Indices the run gathers with: the range check the graph makes on the host, made here.
      for (const c of m.checks ?? []) {
        if (c.input !== p.name) continue;
        for (let i = 0; i < n; i++) {
          const x = Number(v[i]);
          if (!(x >= c.min && x <= c.max)) {
            throw new BundleError(
              "input-range",
              `input '${p.name}' holds ${v[i]} at element ${i}: ${c.op} along dim ${c.dim} needs indices in [${c.min}, ${c.max}]`,
            );
          }
        }
      }
      let out;
      if (p.storage === "f16") out = Uint16Array.from(v, f32ToF16);
      else if (p.storage === "f32" && p.dtype === "float16") out = Float32Array.from(v, (x) => f16ToF32(f32ToF16(x)));
      else if (p.storage === "f32" && p.dtype === "bfloat16") out = Float32Array.from(v, roundBf16);
      else if (p.storage === "f32") out = v instanceof Float32Array ? v : Float32Array.from(v);
      else if (p.storage === "i32") {
        if (v instanceof BigInt64Array) {
          out = new Int32Array(n);
          for (let i = 0; i < n; i++) {
            if (v[i] < -(2n ** 31n) || v[i] >= 2n ** 31n) throw new BundleError("input-range", `input '${p.name}' holds values outside int32`);
            out[i] = Number(v[i]);
          }
        } else out = v;
      } else out = Uint32Array.from(v, (x) => (x ? 1 : 0));
      const bytes = new Uint8Array(Math.ceil(out.byteLength / 4) * 4);
      bytes.set(new Uint8Array(out.buffer, out.byteOffset, out.byteLength));
      return bytes;
    });
  }

  /** Run the bundle: `{name: TypedArray}` in, `{name: Float32Array}` out (Int32Array for integers, Uint8Array for bool). */
  run(inputs) {
    const job = this._queue.then(() => this._run(inputs));
    this._queue = job.catch(() => {});
    return job;
  }

  async _run(inputs) {
    const { manifest: m, buffers, steps, staging } = await this._built(this._variant(inputs));
    const bytes = this._encode(m, inputs);
    const { device } = this;
    m.inputs.forEach((p, k) => device.queue.writeBuffer(buffers[p.buffer], 0, bytes[k]));
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (const s of steps) {
      pass.setPipeline(s.pipeline);
      pass.setBindGroup(0, s.group);
      pass.dispatchWorkgroups(...s.workgroups);
    }
    pass.end();
    m.outputs.forEach((p, k) => enc.copyBufferToBuffer(buffers[p.buffer], 0, staging[k], 0, staging[k].size));
    device.queue.submit([enc.finish()]);
    const result = {};
    for (const [k, p] of m.outputs.entries()) {
      const st = staging[k];
      await st.mapAsync(GPUMapMode.READ);
      const raw = st.getMappedRange();
      const src = p.storage === "f16" ? new Uint16Array(raw) : p.storage === "f32" ? new Float32Array(raw) : p.storage === "i32" ? new Int32Array(raw) : new Uint32Array(raw);
      const n = product(p.shape);
      const Out = p.dtype === "bool" ? Uint8Array : p.storage === "i32" || p.storage === "u32" ? Int32Array : Float32Array;
      const out = new Out(n);
      const idx = new Array(p.shape.length).fill(0);
      for (let i = 0; i < n; i++) {
        let at = p.offset;
        for (let d = 0; d < idx.length; d++) at += idx[d] * p.strides[d];
        const x = src[at];
        out[i] = p.storage === "f16" ? f16ToF32(x) : p.dtype === "bool" ? (x ? 1 : 0) : x;
        for (let d = idx.length - 1; d >= 0; d--) {
          if (++idx[d] < p.shape[d]) break;
          idx[d] = 0;
        }
      }
      st.unmap();
      result[p.name] = out;
    }
    return result;
  }

  /** Free the device and its buffers. */
  destroy() {
    this.device.destroy();
  }
}
