//! Allocation sizes: jemalloc's size classes as Redis's zmalloc_size reports them, and what
//! this process's allocator really hands out for a request.

/// jemalloc's size class for a request of `n` bytes (16-byte quantum, then four classes per
/// doubling), which is what Redis's zmalloc_size reports.
pub fn size_class(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 128 {
        return (n + 15) & !15;
    }
    let lg = usize::BITS - 1 - (n - 1).leading_zeros();
    let delta = 1usize << (lg - 2);
    // delta is a power of two: a mask, not a division (this runs on every allocation).
    (n + delta - 1) & !(delta - 1)
}

/// The bytes an allocation of `n` really occupies here: a buffer may grow to this capacity for
/// free. (Above 32 KiB the jemalloc built here rounds to pages, finer than Redis's classes.)
pub fn usable_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    // SAFETY: nallocx only computes a size; it allocates nothing and accepts any n > 0.
    let real = unsafe { tikv_jemalloc_sys::nallocx(n, 0) };
    if real == 0 {
        n
    } else {
        real
    }
}

/// Allocation size of an sds string of `len` bytes (header by length class, NUL terminator).
pub fn sds_alloc(len: usize) -> usize {
    let hdr = if len < 32 {
        1
    } else if len < 256 {
        3
    } else if len < 65536 {
        5
    } else if len as u64 <= u32::MAX as u64 {
        9
    } else {
        17
    };
    size_class(hdr + len + 1)
}

#[cfg(test)]
mod tests {
    use super::{size_class, usable_size};

    #[test]
    fn classes_match_jemalloc_up_to_32k() {
        for n in 1..=32_768usize {
            assert_eq!(size_class(n), usable_size(n), "n = {n}");
        }
        assert_eq!(size_class(4097), 5120);
        assert_eq!(size_class(32_769), 40_960);
    }

    #[test]
    fn usable_size_covers_the_request() {
        for n in [1, 15, 17, 4096, 32_769, 100_000, 1 << 20] {
            assert!(usable_size(n) >= n);
        }
    }
}
