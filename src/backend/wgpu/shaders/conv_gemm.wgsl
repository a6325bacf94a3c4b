fn digits(k: u32, r1: u32, r2: u32) -> vec3<u32> {
    let q = k / max(r1, 1u);
    return vec3<u32>(k - q * r1, q % max(r2, 1u), q / max(r2, 1u));
}
fn advance(v: vec3<u32>, s: vec3<u32>, r1: u32, r2: u32) -> vec3<u32> {
    var a = v.x + s.x;
    var b = v.y + s.y;
    var c = v.z + s.z;
    if (a >= r1) { a = a - r1; b = b + 1u; }
    if (b >= r2) { b = b - r2; c = c + 1u; }
    return vec3<u32>(a, b, c);
}
