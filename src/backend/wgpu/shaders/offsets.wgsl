fn off(k: u32, i: u32) -> u32 {
    let nd = md[1];
    let base = 10u + nd + k * (nd + 1u);
    var rem = i;
    var o = bitcast<i32>(md[base]);
    var d = nd;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[10u + d];
        let c = rem % s;
        rem = rem / s;
        o = o + i32(c) * bitcast<i32>(md[base + 1u + d]);
    }
    return u32(o);
}
