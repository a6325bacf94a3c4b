//! Symbolic dimensions.
//!
//! While a graph is captured, a symbolic dimension (a placeholder's `None`,
//! or a batch dimension under `dynamic=True`) is represented by a large
//! prime, its *sentinel*. Every op's ordinary shape rule then works on it
//! unchanged, and any size derived from it (`2*s`, `s - 1`, `s*t`, a
//! reshape to `(s, -1)` spelled out by user code) shows up in the recorded
//! shapes and op arguments as an integer that decomposes uniquely back into
//! an expression of the symbols. Running the graph binds each symbol to the
//! size of the argument dimension it stands for, rewrites every recorded
//! integer through its expression, and checks the result by re-running the
//! shape rules (on shape-only tensors) before any kernel runs — so a graph
//! that is not shape-generic is refused with an error, never run wrongly.

/// A symbolic dimension.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Symbol {
    /// Display name (`s0`, or the placeholder's name and axis).
    pub name: String,
    /// The prime standing for it while capturing.
    pub sentinel: usize,
}

/// Sentinels: primes a little above 2^23 (far from powers of two and ten,
/// larger than any dimension a real argument is expected to hold), one per
/// symbol, about 2^14 apart so that `s_i + k` and `s_j + l` never meet for
/// offsets within `MAX_OFF`.
pub const SENTINELS: [usize; 8] = [
    8_396_807, 8_413_187, 8_429_573, 8_445_961, 8_462_339, 8_478_727, 8_495_117, 8_511_491,
];

/// Largest coefficient and offset recognised in a symbolic expression.
const MAX_COEF: i64 = 1 << 16;
const MAX_OFF: i64 = 1 << 10;

/// `coef * Π symbols + offset`: one monomial of at most two symbols.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub coef: i64,
    pub syms: Vec<usize>,
    pub offset: i64,
}

/// The expression a recorded integer stands for, if it involves a symbol.
pub fn decompose(v: i64, symbols: &[Symbol]) -> Option<Expr> {
    if symbols.is_empty() || v.unsigned_abs() < (SENTINELS[0] as u64) / 2 {
        return None;
    }
    let mut monos: Vec<(Vec<usize>, i64)> = (0..symbols.len())
        .map(|i| (vec![i], symbols[i].sentinel as i64))
        .collect();
    for i in 0..symbols.len() {
        for j in i..symbols.len() {
            monos.push((
                vec![i, j],
                symbols[i].sentinel as i64 * symbols[j].sentinel as i64,
            ));
        }
    }
    // Of the readings within bounds, the one with the smallest offset, then
    // the smallest coefficient (`s*t` rather than a huge multiple of `s`).
    let mut best: Option<(i64, i64, Expr)> = None;
    for (syms, m) in monos {
        let coef = (v + m / 2).div_euclid(m);
        let offset = v - coef * m;
        if coef != 0 && coef.abs() <= MAX_COEF && offset.abs() <= MAX_OFF {
            let rank = (offset.abs(), coef.abs());
            if best.as_ref().is_none_or(|(o, c, _)| rank < (*o, *c)) {
                best = Some((rank.0, rank.1, Expr { coef, syms, offset }));
            }
        }
    }
    best.map(|(_, _, e)| e)
}

/// The value of `v` once symbol `i` has size `env[i]` (unchanged when `v`
/// involves no symbol).
pub fn rebind(v: i64, symbols: &[Symbol], env: &[usize]) -> i64 {
    match decompose(v, symbols) {
        None => v,
        Some(e) => e.coef * e.syms.iter().map(|&s| env[s] as i64).product::<i64>() + e.offset,
    }
}

/// A dimension for listings: `8`, `s0`, `2*s0+1`, `s0*s1`.
pub fn dim_str(d: usize, symbols: &[Symbol]) -> String {
    match decompose(d as i64, symbols) {
        None => d.to_string(),
        Some(e) => {
            let mut s = String::new();
            if e.coef != 1 {
                s.push_str(&format!("{}*", e.coef));
            }
            s.push_str(
                &e.syms
                    .iter()
                    .map(|&i| symbols[i].name.clone())
                    .collect::<Vec<_>>()
                    .join("*"),
            );
            match e.offset {
                0 => {}
                o if o > 0 => s.push_str(&format!("+{o}")),
                o => s.push_str(&format!("{o}")),
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syms(n: usize) -> Vec<Symbol> {
        (0..n)
            .map(|i| Symbol {
                name: format!("s{i}"),
                sentinel: SENTINELS[i],
            })
            .collect()
    }

    #[test]
    fn plain_numbers_are_not_symbolic() {
        let s = syms(2);
        for v in [0i64, 1, -1, 3, 784, 1 << 20, 1_000_000, 4_000_000] {
            assert_eq!(decompose(v, &s), None, "{v}");
            assert_eq!(rebind(v, &s, &[5, 7]), v);
        }
    }

    #[test]
    fn affine_and_products_round_trip() {
        let s = syms(2);
        let (p, q) = (SENTINELS[0] as i64, SENTINELS[1] as i64);
        let cases = [
            (p, 5),
            (3 * p, 15),
            (p - 1, 4),
            (2 * p + 7, 17),
            (q * 64, 7 * 64),
            (p * q, 35),
            (4 * p * q, 140),
            (-p, -5),
            (q - 30, -23),
            (p + 30, 35),
            (128 * p, 640),
            (127 * q + 3, 892),
        ];
        for (v, want) in cases {
            assert_eq!(rebind(v, &s, &[5, 7]), want, "{v}");
        }
        assert_eq!(dim_str((2 * p + 1) as usize, &s), "2*s0+1");
        assert_eq!(dim_str((p * q) as usize, &s), "s0*s1");
    }
}
