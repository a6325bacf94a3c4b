fn keep_off(row: u32) -> u32 {
    let nk = md[3];
    var rem = row;
    var o = bitcast<i32>(md[5]);
    var d = nk;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[7u + d];
        o = o + i32(rem % s) * bitcast<i32>(md[7u + nk + d]);
        rem = rem / s;
    }
    return u32(o);
}
fn red_off(j: u32) -> i32 {
    let nk = md[3];
    let nr = md[4];
    let base = 7u + 2u * nk;
    var rem = j;
    var o = 0i;
    var d = nr;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[base + d];
        o = o + i32(rem % s) * bitcast<i32>(md[base + nr + d]);
        rem = rem / s;
    }
    return o;
}
