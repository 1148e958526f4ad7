//! What the benchmark examples share: their arguments, a deterministic
//! generator, medians. Included with `mod bench_util;` (not an example).

#![allow(dead_code)]

/// The value after `name` on the command line, or `default`.
pub fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small xorshift generator: the data is the same on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A token id: frequent ones small (a Zipf-like law by inverse transform).
    pub fn token(&mut self) -> i32 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let id = (50_257f64.powf(u) - 1.0) as i32;
        id.min(50_256)
    }
}

/// The median of `v` (the upper one for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
