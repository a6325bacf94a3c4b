    var ao = bitcast<i32>(md[6]);
    var bo = bitcast<i32>(md[7]);
    var oo = bitcast<i32>(md[8]);
    var d = nb;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[15u + d];
        let c = i32(bi % s);
        bi = bi / s;
        ao = ao + c * bitcast<i32>(md[15u + nb + d]);
        bo = bo + c * bitcast<i32>(md[15u + 2u * nb + d]);
        oo = oo + c * bitcast<i32>(md[15u + 3u * nb + d]);
    }
