//! The byte shuffle of compressed 2.0 buffers (`spec/FORMAT.md` §12.4):
//! `n` elements of `w` bytes are stored as `w` planes of `n` bytes, byte `j`
//! of element `i` at `j * n + i`. [`shuffle`] (the writer) and
//! [`unshuffle_into`] (the reader) are byte transposes; on x86-64 both
//! transpose 16 elements of 2, 4 or 8 bytes at a time with SSE2 (part of
//! every x86-64 CPU: no runtime detection), elsewhere and for other widths
//! they run blocks of elements through fixed-size loops.
//! Bytes past the last whole element (a length that is not a multiple of the
//! width, which no valid buffer has) are copied unchanged.

/// Elements per block of the portable paths: a block's planes and its
/// elements stay in L1.
const BLOCK: usize = 64;

/// Byte-shuffles `src`, elements of `width` bytes: byte `j` of element `i`
/// goes to `j * (len / width) + i` (all first bytes, then all second bytes...).
pub(crate) fn shuffle(src: &[u8], width: usize) -> Vec<u8> {
    // A copy (its trailing partial element stays), then every whole element
    // overwritten: measured faster than a zeroed allocation, whose recycled
    // memory the allocator zeroes.
    let mut out = src.to_vec();
    match width {
        0 | 1 => {}
        2 => shuffle_fixed::<2>(src, &mut out, true),
        4 => shuffle_fixed::<4>(src, &mut out, true),
        8 => shuffle_fixed::<8>(src, &mut out, true),
        _ => shuffle_strided(src, &mut out, width),
    }
    out
}

/// [`shuffle`] into `dst` (a copy of `src`) for a width known at compile
/// time: the SIMD kernel where there is one (and `use_simd`), then blocks
/// of [`BLOCK`] elements, each plane's run written in one loop.
fn shuffle_fixed<const W: usize>(src: &[u8], dst: &mut [u8], use_simd: bool) {
    let m = src.len() / W;
    let (planes, _) = dst.split_at_mut(m * W);
    let mut planes: Vec<&mut [u8]> = planes.chunks_exact_mut(m.max(1)).collect();
    let done = if use_simd {
        simd::shuffle::<W>(src, &mut planes)
    } else {
        0
    };
    for (k, block) in src[done * W..m * W].chunks(BLOCK * W).enumerate() {
        let base = done + k * BLOCK;
        let n = block.len() / W;
        for (j, plane) in planes.iter_mut().enumerate() {
            let run = &mut plane[base..base + n];
            for (o, element) in run.iter_mut().zip(block.chunks_exact(W)) {
                *o = element[j];
            }
        }
    }
}

/// [`shuffle`] into `dst` (a copy of `src`) for any width: one strided
/// pass per plane.
fn shuffle_strided(src: &[u8], dst: &mut [u8], width: usize) {
    let m = src.len() / width.max(1);
    for (j, plane) in dst.chunks_exact_mut(m.max(1)).take(width).enumerate() {
        let from = src.get(j..).unwrap_or_default();
        for (o, &b) in plane.iter_mut().zip(from.iter().step_by(width)) {
            *o = b;
        }
    }
}

/// Un-shuffles `src` (planes of `width`-byte elements) into `dst`, of the
/// same length: plane `j` goes to every `width`-th byte from `j`.
///
/// # Panics
///
/// If `src` and `dst` differ in length (callers size both from the buffer's
/// decoded length).
pub(crate) fn unshuffle_into(src: &[u8], dst: &mut [u8], width: usize) {
    assert_eq!(src.len(), dst.len(), "un-shuffle lengths");
    let whole = src.len() - src.len() % width.max(1);
    dst[whole..].copy_from_slice(&src[whole..]);
    let (src, dst) = (&src[..whole], &mut dst[..whole]);
    match width {
        0 | 1 => dst.copy_from_slice(src),
        2 => unshuffle_fixed::<2>(src, dst, true),
        4 => unshuffle_fixed::<4>(src, dst, true),
        8 => unshuffle_fixed::<8>(src, dst, true),
        _ => unshuffle_strided(src, dst, width),
    }
}

/// [`unshuffle_into`] of whole elements for a width known at compile time:
/// the SIMD kernel where there is one (and `use_simd`), then blocks of
/// [`BLOCK`] elements.
fn unshuffle_fixed<const W: usize>(src: &[u8], dst: &mut [u8], use_simd: bool) {
    let m = dst.len() / W;
    let planes: [&[u8]; W] = std::array::from_fn(|j| &src[j * m..(j + 1) * m]);
    let done = if use_simd {
        simd::unshuffle::<W>(&planes, dst)
    } else {
        0
    };
    for (k, out) in dst[done * W..].chunks_mut(BLOCK * W).enumerate() {
        let base = done + k * BLOCK;
        let n = out.len() / W;
        let block: [&[u8]; W] = std::array::from_fn(|j| &planes[j][base..base + n]);
        for (i, element) in out.chunks_exact_mut(W).enumerate() {
            for (byte, plane) in element.iter_mut().zip(&block) {
                *byte = plane[i];
            }
        }
    }
}

/// [`unshuffle_into`] of whole elements for any width: one strided pass
/// per plane.
fn unshuffle_strided(src: &[u8], dst: &mut [u8], width: usize) {
    let m = dst.len() / width;
    for (j, plane) in src.chunks_exact(m.max(1)).take(width).enumerate() {
        for (byte, &b) in dst[j..].iter_mut().step_by(width).zip(plane) {
            *byte = b;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    //! SSE2 (baseline on x86-64): 16 elements per step. The un-shuffle is
    //! a butterfly of byte, 16-bit and 32-bit interleaves; the shuffle
    //! splits even from odd bytes, once per bit of the width.
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_loadu_si128, _mm_packus_epi16, _mm_set1_epi16,
        _mm_setzero_si128, _mm_srli_epi16, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpackhi_epi16,
        _mm_unpackhi_epi32, _mm_unpacklo_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
    };

    fn load(bytes: &[u8; 16]) -> __m128i {
        // SAFETY: `bytes` is 16 readable bytes; `loadu` needs no alignment.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }

    fn store(bytes: &mut [u8; 16], v: __m128i) {
        // SAFETY: `bytes` is 16 writable bytes; `storeu` needs no alignment.
        unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), v) }
    }

    /// Splits the first `16 * (n / 16)` elements of `src` into `planes` (the
    /// `W` planes of `n` bytes; for `W` of 2, 4 or 8, 0 elements otherwise):
    /// how many it did.
    pub(super) fn shuffle<const W: usize>(src: &[u8], planes: &mut [&mut [u8]]) -> usize {
        // SAFETY: SSE2 is part of the x86-64 baseline: every CPU that runs
        // this build has it.
        unsafe { shuffle_sse2::<W>(src, planes) }
    }

    #[target_feature(enable = "sse2")]
    fn shuffle_sse2<const W: usize>(src: &[u8], planes: &mut [&mut [u8]]) -> usize {
        if !matches!(W, 2 | 4 | 8) || planes.len() != W {
            return 0;
        }
        let steps = planes[0].len() / 16;
        let mask = _mm_set1_epi16(0x00FF);
        // The even and the odd bytes of 32 (x's, then y's).
        let split = |x: __m128i, y: __m128i| {
            let even = _mm_packus_epi16(_mm_and_si128(x, mask), _mm_and_si128(y, mask));
            let odd = _mm_packus_epi16(_mm_srli_epi16::<8>(x), _mm_srli_epi16::<8>(y));
            (even, odd)
        };
        let bits = W.trailing_zeros();
        for (s, chunk) in src.chunks_exact(16 * W).take(steps).enumerate() {
            let mut r = [_mm_setzero_si128(); 8];
            for (reg, bytes) in r.iter_mut().zip(chunk.chunks_exact(16)) {
                // `chunks_exact(16)`: always 16 bytes, the expect cannot fail.
                *reg = load(bytes.try_into().expect("16 bytes"));
            }
            // Groups of `g` registers in element order; each split makes a
            // group of their even bytes and one of their odd bytes.
            let mut g = W;
            while g > 1 {
                let mut next = r;
                for base in (0..W).step_by(g) {
                    for p in 0..g / 2 {
                        let (even, odd) = split(r[base + 2 * p], r[base + 2 * p + 1]);
                        next[base + p] = even;
                        next[base + g / 2 + p] = odd;
                    }
                }
                r = next;
                g /= 2;
            }
            // Register `f` holds byte `j` of the elements, `j` being `f`'s
            // bits reversed (the first split chose on `j`'s lowest bit).
            let at = s * 16;
            for (f, &reg) in r.iter().take(W).enumerate() {
                let j = f.reverse_bits() >> (usize::BITS - bits);
                // A 16-byte range (`at + 16` is within the plane: `steps` whole steps).
                store(
                    (&mut planes[j][at..at + 16]).try_into().expect("16 bytes"),
                    reg,
                );
            }
        }
        steps * 16
    }

    /// Interleaves the first `16 * (len / 16)` elements of `planes` into
    /// `dst` (for `W` of 2, 4 or 8; 0 elements otherwise): how many it did.
    pub(super) fn unshuffle<const W: usize>(planes: &[&[u8]; W], dst: &mut [u8]) -> usize {
        // SAFETY: SSE2 is part of the x86-64 baseline: every CPU that runs
        // this build has it.
        unsafe { unshuffle_sse2(planes, dst) }
    }

    #[target_feature(enable = "sse2")]
    fn unshuffle_sse2<const W: usize>(planes: &[&[u8]; W], dst: &mut [u8]) -> usize {
        let m = planes.first().map_or(0, |p| p.len());
        let steps = m / 16;
        if !matches!(W, 2 | 4 | 8) {
            return 0;
        }
        for (s, out) in dst.chunks_exact_mut(16 * W).take(steps).enumerate() {
            let at = s * 16;
            // Each load takes a 16-byte range of a plane (within it: `steps` whole steps).
            let p: [__m128i; 8] = std::array::from_fn(|j| match planes.get(j) {
                Some(plane) => load(plane[at..at + 16].try_into().expect("16 bytes")),
                None => _mm_setzero_si128(),
            });
            let mut v = [p[0]; 8];
            match W {
                2 => {
                    v[0] = _mm_unpacklo_epi8(p[0], p[1]);
                    v[1] = _mm_unpackhi_epi8(p[0], p[1]);
                }
                4 => {
                    let ab = [_mm_unpacklo_epi8(p[0], p[1]), _mm_unpackhi_epi8(p[0], p[1])];
                    let cd = [_mm_unpacklo_epi8(p[2], p[3]), _mm_unpackhi_epi8(p[2], p[3])];
                    v[0] = _mm_unpacklo_epi16(ab[0], cd[0]);
                    v[1] = _mm_unpackhi_epi16(ab[0], cd[0]);
                    v[2] = _mm_unpacklo_epi16(ab[1], cd[1]);
                    v[3] = _mm_unpackhi_epi16(ab[1], cd[1]);
                }
                _ => {
                    // Bytes 0-1, 2-3, 4-5, 6-7 of each element paired...
                    let b: [[__m128i; 2]; 4] = std::array::from_fn(|q| {
                        let (x, y) = (p[2 * q], p[2 * q + 1]);
                        [_mm_unpacklo_epi8(x, y), _mm_unpackhi_epi8(x, y)]
                    });
                    // ...then 0-3 and 4-7...
                    let h: [[__m128i; 4]; 2] = std::array::from_fn(|q| {
                        let (x, y) = (b[2 * q], b[2 * q + 1]);
                        [
                            _mm_unpacklo_epi16(x[0], y[0]),
                            _mm_unpackhi_epi16(x[0], y[0]),
                            _mm_unpacklo_epi16(x[1], y[1]),
                            _mm_unpackhi_epi16(x[1], y[1]),
                        ]
                    });
                    // ...then whole elements, two per register.
                    for (r, (&x, &y)) in h[0].iter().zip(&h[1]).enumerate() {
                        v[2 * r] = _mm_unpacklo_epi32(x, y);
                        v[2 * r + 1] = _mm_unpackhi_epi32(x, y);
                    }
                }
            }
            for (chunk, &r) in out.chunks_exact_mut(16).zip(&v) {
                // `chunks_exact_mut(16)`: always 16 bytes.
                store(chunk.try_into().expect("16 bytes"), r);
            }
        }
        steps * 16
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    /// No SIMD kernel here: the portable path does every element.
    pub(super) fn unshuffle<const W: usize>(_: &[&[u8]; W], _: &mut [u8]) -> usize {
        0
    }

    /// No SIMD kernel here: the portable path does every element.
    pub(super) fn shuffle<const W: usize>(_: &[u8], _: &mut [&mut [u8]]) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition of §12.4, byte by byte.
    fn reference_shuffle(src: &[u8], w: usize) -> Vec<u8> {
        let n = src.len() / w;
        let mut out = src.to_vec();
        for i in 0..n {
            for j in 0..w {
                out[j * n + i] = src[i * w + j];
            }
        }
        out
    }

    /// Deterministic bytes, different for every length and seed.
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    /// Lengths around every block size of both paths (16 SIMD elements,
    /// 64 portable ones), and some larger ones.
    fn lengths(w: usize) -> Vec<usize> {
        let mut out: Vec<usize> = (0..=40).collect();
        for n in [
            15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4099,
        ] {
            for extra in [0, 1, w.saturating_sub(1)] {
                out.push(n * w + extra);
            }
        }
        out
    }

    #[test]
    fn shuffle_and_unshuffle_match_the_definition_for_every_width_and_length() {
        for w in 1..=16 {
            for len in lengths(w) {
                let src = bytes(len, (w * 100_003 + len) as u64);
                let want = reference_shuffle(&src, w);
                let shuffled = shuffle(&src, w);
                assert_eq!(shuffled, want, "shuffle, width {w}, length {len}");
                let mut back = vec![0xAA; len];
                unshuffle_into(&shuffled, &mut back, w);
                assert_eq!(back, src, "un-shuffle, width {w}, length {len}");
            }
        }
    }

    #[test]
    fn the_portable_paths_match_the_definition_where_simd_runs_too() {
        // On x86-64 the SIMD kernels do most elements; the portable loops
        // (every element on other targets) are checked here on their own.
        fn check<const W: usize>() {
            for n in lengths(W).into_iter().filter(|n| n % W == 0) {
                let src = bytes(n, (W * 7 + n) as u64);
                let want = reference_shuffle(&src, W);
                let mut shuffled = vec![0; n];
                shuffle_fixed::<W>(&src, &mut shuffled, false);
                assert_eq!(shuffled, want, "shuffle, width {W}, length {n}");
                let mut back = vec![0; n];
                unshuffle_fixed::<W>(&shuffled, &mut back, false);
                assert_eq!(back, src, "un-shuffle, width {W}, length {n}");
            }
        }
        check::<2>();
        check::<4>();
        check::<8>();
    }

    #[test]
    fn unshuffle_of_any_bytes_inverts_shuffle() {
        // The other direction: un-shuffling arbitrary planes, then
        // shuffling, gives the planes back.
        for w in [2, 3, 4, 8, 16] {
            for len in lengths(w) {
                let planes = bytes(len, len as u64 + 7);
                let mut elements = vec![0; len];
                unshuffle_into(&planes, &mut elements, w);
                assert_eq!(shuffle(&elements, w), planes, "width {w}, length {len}");
            }
        }
    }

    #[test]
    fn known_values() {
        // Three u32 little-endian: 1, 0x0302, 0x04030201.
        let src = [1, 0, 0, 0, 2, 3, 0, 0, 1, 2, 3, 4];
        let planes = [1, 2, 1, 0, 3, 2, 0, 0, 3, 0, 0, 4];
        assert_eq!(shuffle(&src, 4), planes);
        let mut back = [0; 12];
        unshuffle_into(&planes, &mut back, 4);
        assert_eq!(back, src);
        // A trailing partial element is kept in place.
        assert_eq!(shuffle(&[1, 2, 3, 4, 5], 2), [1, 3, 2, 4, 5]);
    }
}
