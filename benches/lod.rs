//! LoD benchmarks, each against a peer in the same run.
//!
//! - `lod_from_lengths`: `Lod::try_from_lengths` for 10^6 sequences (offsets +
//!   full `CheckLoD` validation) against a plain prefix-sum loop over `Vec<u64>`.
//! - `branch`: a full-depth `<i,j,k>` branch slice of a 3-level LoD with 10^3
//!   and with 10^6 leaves (it should cost the same: O(levels)), on the bare LoD
//!   and on a tensor. A counting allocator prints the bytes each slice allocates.
//!
//! Run: `cargo bench --bench lod` (about half a minute).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lodt::{Lod, LodTensor};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The system allocator, counting the bytes it hands out.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter has no effect on the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's obligations for `alloc` are passed on as they are.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through `alloc` above) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; the caller guarantees `new_size` is valid.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated while running `f` once.
fn allocated_by<R>(f: impl FnOnce() -> R) -> usize {
    let before = ALLOCATED.load(Ordering::Relaxed);
    black_box(f());
    ALLOCATED.load(Ordering::Relaxed) - before
}

/// Deterministic lengths 0..=7 (a xorshift generator).
fn lengths(n: usize) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 8
        })
        .collect()
}

/// The peer: offsets by a plain prefix sum, no checks.
fn prefix_sum(lengths: &[u64]) -> Vec<u64> {
    let mut offsets = Vec::with_capacity(lengths.len() + 1);
    offsets.push(0);
    let mut total = 0;
    for &len in lengths {
        total += len;
        offsets.push(total);
    }
    offsets
}

fn lod_from_lengths(c: &mut Criterion) {
    let lens = lengths(1_000_000);
    let mut g = c.benchmark_group("lod_from_lengths");
    g.sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("prefix_sum_loop/1e6", |b| {
        b.iter(|| prefix_sum(black_box(&lens)))
    });
    g.bench_function("Lod::try_from_lengths/1e6", |b| {
        b.iter(|| Lod::try_from_lengths(std::slice::from_ref(black_box(&lens))).unwrap())
    });
    g.finish();
}

/// A 3-level LoD: `top` articles of 10 paragraphs of 100 sentences, each
/// sentence 2 rows; `top * 1000` leaves.
fn three_levels(top: usize) -> Lod {
    Lod::try_from_lengths(&[vec![10; top], vec![100; top * 10], vec![2; top * 1000]]).unwrap()
}

fn branch(c: &mut Criterion) {
    let mut g = c.benchmark_group("branch");
    g.sample_size(50)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for top in [1usize, 1000] {
        let leaves = top * 1000;
        let lod = three_levels(top);
        let rows = lod.num_rows().unwrap() as usize;
        let tensor = LodTensor::from_vec(vec![0f32; rows * 4], vec![rows, 4], lod.clone()).unwrap();
        let path = [top / 2, 5, 50];
        let lod_bytes = allocated_by(|| lod.branch(&path).unwrap());
        let tensor_bytes = allocated_by(|| tensor.branch(&path).unwrap());
        let top_bytes = allocated_by(|| tensor.branch(&path[..1]).unwrap());
        println!(
            "branch allocations with {leaves} leaves: LodView <i,j,k> {lod_bytes} B, \
             LodTensor <i,j,k> {tensor_bytes} B, LodTensor <i> {top_bytes} B"
        );
        g.bench_with_input(
            BenchmarkId::new("LodView/<i,j,k>", leaves),
            &path,
            |b, p| b.iter(|| lod.branch(black_box(p)).unwrap().1),
        );
        g.bench_with_input(
            BenchmarkId::new("LodTensor/<i,j,k>", leaves),
            &path,
            |b, p| b.iter(|| tensor.branch(black_box(p)).unwrap().rows()),
        );
        g.bench_with_input(
            BenchmarkId::new("LodTensor/<i>", leaves),
            &path[..1],
            |b, p| b.iter(|| tensor.branch(black_box(p)).unwrap().rows()),
        );
    }
    g.finish();
}

criterion_group!(benches, lod_from_lengths, branch);
criterion_main!(benches);
