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

/// This thread's CPU time (user and system) in seconds: unlike the wall
/// clock, it does not count the time other processes on a shared machine
/// hold the core. (The wall clock where the OS has no such clock.)
pub fn cpu_seconds() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid, writable timespec for the call to fill.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        assert_eq!(rc, 0, "clock_gettime");
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
    }
}

/// A stopwatch over [`cpu_seconds`].
pub struct Clock(f64);

impl Clock {
    pub fn now() -> Clock {
        Clock(cpu_seconds())
    }

    /// Seconds of this thread's CPU time since [`Clock::now`].
    pub fn elapsed(&self) -> f64 {
        cpu_seconds() - self.0
    }
}
