//! [`Throttle`]: how many ranged reads of one store are in flight, adapted
//! to the store's answers (additive increase, multiplicative decrease).
//!
//! An object store answers too many requests with `503 SlowDown` (or drops
//! connections). `object_store` retries each request a few times with a
//! backoff; a request that still fails tells the throttle, which halves the
//! number of requests it lets run at once, and the request is tried again
//! once a slot is free. Each success adds `1 / limit` back, so the limit
//! grows by about one per round of requests up to the configured maximum.
//! A read fails only after [`RemoteOptions::max_retries`] further failures
//! at a limit of one request.
//!
//! [`RemoteOptions::max_retries`]: super::RemoteOptions::max_retries

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The state of one process's throttle. A child forked from a process with
/// requests in flight inherits their count but not the requests: the state
/// belongs to the process that made it and starts again in another.
#[derive(Debug)]
struct State {
    pid: u32,
    limit: f64,
    in_flight: usize,
    /// When the limit was last halved: failures of requests that were in
    /// flight then are one congestion event, not several.
    lowered: Option<Instant>,
}

impl State {
    fn fresh(max: usize) -> Self {
        State {
            pid: std::process::id(),
            limit: max as f64,
            in_flight: 0,
            lowered: None,
        }
    }
}

/// The ranged reads of one store allowed in flight at once: at most the
/// configured maximum, halved on each congestion event, grown back by
/// successes.
#[derive(Debug)]
pub(crate) struct Throttle {
    max: usize,
    state: Mutex<State>,
    notify: Notify,
    /// How many congestion events lowered the limit (reports, tests).
    lowered: AtomicU64,
}

/// A slot of the throttle, released when dropped.
pub(crate) struct Permit {
    throttle: Arc<Throttle>,
    pid: u32,
}

impl Drop for Permit {
    fn drop(&mut self) {
        {
            let mut s = self.throttle.lock();
            if s.pid == self.pid {
                s.in_flight = s.in_flight.saturating_sub(1);
            }
        }
        self.throttle.notify.notify_one();
    }
}

/// How long failures after a halving count as the same congestion event.
const EVENT: Duration = Duration::from_millis(200);

impl Throttle {
    /// A throttle letting at most `max` (at least 1) requests run at once.
    pub(crate) fn new(max: usize) -> Arc<Self> {
        let max = max.max(1);
        Arc::new(Throttle {
            max,
            state: Mutex::new(State::fresh(max)),
            notify: Notify::new(),
            lowered: AtomicU64::new(0),
        })
    }

    /// This process's state (a fresh one in a forked child).
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.pid != std::process::id() {
            *s = State::fresh(self.max);
        }
        s
    }

    /// Waits for a slot.
    pub(crate) async fn acquire(self: &Arc<Self>) -> Permit {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock();
                if (s.in_flight as f64) < s.limit.floor().max(1.0) {
                    s.in_flight += 1;
                    return Permit {
                        throttle: self.clone(),
                        pid: s.pid,
                    };
                }
            }
            notified.await;
        }
    }

    /// A request succeeded: the limit grows by `1 / limit`.
    pub(crate) fn success(&self) {
        let grew = {
            let mut s = self.lock();
            let before = s.limit.floor();
            s.limit = (s.limit + 1.0 / s.limit.max(1.0)).min(self.max as f64);
            s.limit.floor() > before
        };
        if grew {
            self.notify.notify_one();
        }
    }

    /// A request failed for a reason that more patience may cure (throttled,
    /// reset, timed out): the limit is halved, once per congestion event.
    /// Returns the limit before the failure (1 means the request was alone).
    pub(crate) fn congested(&self) -> usize {
        let mut s = self.lock();
        let before = s.limit.floor().max(1.0) as usize;
        let now = Instant::now();
        if s.lowered.is_none_or(|t| now.duration_since(t) > EVENT) {
            s.limit = (s.limit / 2.0).max(1.0);
            s.lowered = Some(now);
            self.lowered.fetch_add(1, Ordering::Relaxed);
        }
        before
    }

    /// The number of requests allowed at once now.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn limit(&self) -> usize {
        self.lock().limit.floor().max(1.0) as usize
    }

    /// How many congestion events have lowered the limit.
    pub(crate) fn times_lowered(&self) -> u64 {
        self.lowered.load(Ordering::Relaxed)
    }
}

/// Whether a failed request may succeed if tried again later: not for an
/// answer that will not change (missing, forbidden, changed since opened,
/// unsupported, a bad request).
pub(crate) fn is_transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !matches!(
        e,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::NotSupported { .. }
            | E::NotImplemented { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::InvalidPath { .. }
            | E::UnknownConfigurationKey { .. }
    )
}

/// The pause before trying a failed request again: 50 ms doubled per
/// failure, at most 2 s, with up to half of it again as jitter (from the
/// clock: requests that failed together do not come back together).
pub(crate) fn backoff(failures: u32) -> Duration {
    let base = 50u64.saturating_mul(1 << failures.min(6)).min(2_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    Duration::from_millis(base + nanos % (base / 2 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_halves_once_per_event_and_grows_back() {
        let t = Throttle::new(16);
        assert_eq!(t.limit(), 16);
        assert_eq!(t.congested(), 16);
        assert_eq!(t.limit(), 8);
        // A second failure of the same event does not halve again.
        assert_eq!(t.congested(), 8);
        assert_eq!(t.limit(), 8);
        assert_eq!(t.times_lowered(), 1);
        for _ in 0..200 {
            t.success();
        }
        assert_eq!(t.limit(), 16, "grown back, capped at the maximum");
        let one = Throttle::new(0);
        assert_eq!(one.limit(), 1);
        one.congested();
        assert_eq!(one.limit(), 1, "never below one");
    }

    #[test]
    fn at_most_limit_permits_are_out() {
        let t = Throttle::new(2);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let a = t.acquire().await;
            let _b = t.acquire().await;
            let third = tokio::time::timeout(Duration::from_millis(20), t.acquire()).await;
            assert!(third.is_err(), "a third permit waits");
            drop(a);
            let third = tokio::time::timeout(Duration::from_millis(200), t.acquire()).await;
            assert!(third.is_ok(), "released slots are handed on");
        });
    }

    #[test]
    fn permanent_errors_are_not_retried() {
        let not_found = object_store::Error::NotFound {
            path: "x".into(),
            source: "gone".into(),
        };
        assert!(!is_transient(&not_found));
        let generic = object_store::Error::Generic {
            store: "S3",
            source: "503 SlowDown".into(),
        };
        assert!(is_transient(&generic));
        assert!(backoff(0) >= Duration::from_millis(50));
        assert!(backoff(30) <= Duration::from_millis(3_000));
    }
}
