//! The global allocator of this test binary: it forwards every call to the
//! system allocator and records, per thread, the bytes allocated and the
//! largest single allocation. Per thread, because the other tests of the
//! binary run on other threads at the same time and must not count: a test
//! measures what its own thread allocates while it reads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Tracking;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the slots may be gone while the thread shuts down.
    let _ = ALLOCATED.try_with(|a| a.set(a.get().wrapping_add(size)));
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// bookkeeping touches only const-initialised thread-local `Cell<usize>`s,
// which neither allocate nor have a destructor.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// The bytes this thread has allocated so far (a running total that wraps;
/// subtract two readings to get what was allocated between them).
pub fn allocated() -> usize {
    ALLOCATED.with(Cell::get)
}

/// Forgets this thread's largest allocation, to measure from here.
pub fn reset_largest() {
    LARGEST.with(|l| l.set(0));
}

/// The largest single allocation this thread made since [`reset_largest`].
pub fn largest() -> usize {
    LARGEST.with(Cell::get)
}
