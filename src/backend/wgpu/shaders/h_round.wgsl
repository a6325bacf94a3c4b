fn h_round(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    let a = u & 0x7fffffffu;
    let s = u & 0x80000000u;
    if (a >= 0x7f800000u) { return x; }
    if (a >= 0x477ff000u) { return bitcast<f32>(s | 0x7f800000u); }
    if (a < 0x38800000u) {
        let q = round(bitcast<f32>(a) * 16777216.0) * 5.9604644775390625e-8;
        return bitcast<f32>(s | bitcast<u32>(q));
    }
    return bitcast<f32>(s | ((a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u));
}
