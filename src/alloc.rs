//! The server's global allocator: jemalloc, counting the bytes the program holds, as Redis's
//! zmalloc counts used_memory. jemalloc's own `stats.allocated` counts what sits in each thread's
//! cache as allocated and is only current after an epoch refresh, so it moves by tens of KiB
//! with no change in what the program holds, and a free made on another thread (the lazyfree
//! thread, a connection dropping a buffer) shows late; maxmemory needs the exact figure.
//!
//! Each thread adds to its own counter slot (a plain load and store on its own cache line, no
//! lock-prefixed instruction); `used()` sums the slots. Counts are jemalloc's
//! usable sizes (`nallocx`), what Redis counts with zmalloc_size.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};

use tikv_jemallocator::Jemalloc;

const SLOTS: usize = 512;

#[repr(align(64))]
struct Slot {
    bytes: AtomicI64,
    taken: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE_SLOT: Slot = Slot { bytes: AtomicI64::new(0), taken: AtomicBool::new(false) };
static TABLE: [Slot; SLOTS] = [FREE_SLOT; SLOTS];
/// One past the highest slot ever taken (what `used` sums).
static HIGH: AtomicUsize = AtomicUsize::new(1);
/// Set once the counting allocator served an allocation (it is the global allocator).
static ACTIVE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The thread's slot (0 until its first allocation). No destructor: registering one could
    /// allocate from inside the allocator. A slot stays with its thread's count after the thread
    /// exits (memory it allocated may still be held); threads come and go rarely here, and once
    /// the table is full the shared slot 0 counts for the rest.
    static MINE: Cell<usize> = const { Cell::new(0) };
}

fn claim() -> usize {
    for (i, slot) in TABLE.iter().enumerate().skip(1) {
        if !slot.taken.load(Ordering::Relaxed)
            && slot.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            HIGH.fetch_max(i + 1, Ordering::Relaxed);
            return i;
        }
    }
    0
}

#[inline]
fn add(delta: i64) {
    let counted = MINE.try_with(|m| {
        let mut i = m.get();
        if i == 0 {
            i = claim();
            m.set(i);
        }
        let slot = &TABLE[i].bytes;
        if i == 0 {
            slot.fetch_add(delta, Ordering::Relaxed);
        } else {
            // Only this thread writes its slot.
            slot.store(slot.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
        }
    });
    if counted.is_err() {
        TABLE[0].bytes.fetch_add(delta, Ordering::Relaxed);
    }
}

/// Requests up to this size get their class from `util::alloc::size_class` (checked against
/// nallocx by its tests); above it the jemalloc built here rounds to pages, so it is asked.
/// Every allocation and free is counted, and nallocx was about 5% of the server's instructions
/// (callgrind, ZADD at -P 16).
const SIZE_CLASS_FAST_MAX: usize = 32 * 1024;

/// jemalloc's usable size for `layout` (the size class it is served from).
#[inline]
fn usable(layout: Layout) -> i64 {
    if layout.align() <= 16 && layout.size() <= SIZE_CLASS_FAST_MAX {
        return crate::util::alloc::size_class(layout.size().max(1)) as i64;
    }
    let flags = if layout.align() <= 16 { 0 } else { layout.align().trailing_zeros() as i32 };
    // SAFETY: nallocx only computes a size class; any size and MALLOCX_LG_ALIGN flag is valid
    // (0 is returned for sizes it cannot serve).
    let n = unsafe { tikv_jemalloc_sys::nallocx(layout.size().max(1), flags) };
    if n == 0 {
        layout.size() as i64
    } else {
        n as i64
    }
}

/// What an allocation of `size` bytes really takes (jemalloc's size class), as `used` counts it.
pub fn usable_size(size: usize) -> u64 {
    if size == 0 {
        return 0;
    }
    usable(Layout::from_size_align(size, 1).unwrap_or(Layout::new::<u8>())) as u64
}

/// Bytes allocated through the counting allocator and not yet freed; None when it is not the
/// global allocator (library tests).
pub fn used() -> Option<u64> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    let high = HIGH.load(Ordering::Relaxed).min(SLOTS);
    let sum: i64 = TABLE[..high].iter().map(|s| s.bytes.load(Ordering::Relaxed)).sum();
    Some(sum.max(0) as u64)
}

/// Counts a fresh allocation (none when it failed) and passes it on.
#[inline]
fn allocated(p: *mut u8, layout: Layout) -> *mut u8 {
    if !p.is_null() {
        add(usable(layout));
        if !ACTIVE.load(Ordering::Relaxed) {
            ACTIVE.store(true, Ordering::Relaxed);
        }
    }
    p
}

/// jemalloc, counted.
pub struct Counting;

// SAFETY: every call is forwarded to jemalloc unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated(Jemalloc.alloc(layout), layout)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        allocated(Jemalloc.alloc_zeroed(layout), layout)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-usable(layout));
        Jemalloc.dealloc(ptr, layout);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = Jemalloc.realloc(ptr, layout, new_size);
        if !p.is_null() {
            // SAFETY of from_size_align_unchecked: realloc's contract keeps the alignment valid
            // and new_size within isize::MAX once rounded.
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            add(usable(new_layout) - usable(layout));
        }
        p
    }
}

/// Turns jemalloc's background threads on or off (jemalloc-bg-thread, on by default as in
/// Redis): with them, dirty pages are purged by those threads as they decay, instead of inline
/// in whichever allocation or free crosses a decay tick on the executor. Returns false when
/// jemalloc refuses (built without them).
pub fn set_background_thread(on: bool) -> bool {
    let mut value = on;
    // SAFETY: background_thread takes a bool written from a local of its size.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"background_thread".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut value as *mut bool as *mut std::ffi::c_void,
            std::mem::size_of::<bool>(),
        )
    };
    rc == 0
}

/// Hands what this thread's jemalloc cache holds back to the arenas. A thread that frees much
/// of what another allocated (a flush freeing a keyspace off the executor) would otherwise keep
/// those regions in its own cache, out of the executor's reach: new keys took fresh pages and
/// allocator_frag_ratio rose (unit/memefficiency's defrag tests after a FLUSHDB).
pub fn flush_thread_cache() {
    // SAFETY: thread.tcache.flush reads and writes nothing; null pointers and zero lengths say so.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"thread.tcache.flush".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// Makes jemalloc's oversize arena (allocations over `opt.oversize_threshold`, 8 MiB: big table
/// and slot arrays, big reply buffers) return freed pages at once, as the jemalloc Redis ships
/// sets it up. The jemalloc built here leaves that arena on the 10 s dirty decay of the others,
/// so the old arrays a growing table frees stay resident: after bigkey.py's load (a 2.6M-member
/// set) 32 MiB of them were still in RSS, where Redis had none. The arena is created on its
/// first use, so one oversize allocation comes first.
pub fn purge_oversize_eagerly() -> bool {
    let mut narenas: u32 = 0;
    let mut len = std::mem::size_of::<u32>();
    // SAFETY: opt.narenas is an unsigned written into a local of its size.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"opt.narenas".as_ptr(),
            &mut narenas as *mut u32 as *mut std::ffi::c_void,
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return false;
    }
    // Never touched, so it costs no resident page; big enough to go to the oversize arena.
    drop(std::hint::black_box(Vec::<u8>::with_capacity(9 << 20)));
    // The oversize arena comes right after the automatic ones.
    let name = format!("arena.{narenas}.dirty_decay_ms\0");
    let mut decay_ms: isize = 0;
    // SAFETY: dirty_decay_ms takes an ssize_t read from a local of its size; the name is
    // NUL-terminated.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut decay_ms as *mut isize as *mut std::ffi::c_void,
            std::mem::size_of::<isize>(),
        )
    };
    rc == 0
}

/// Returns every arena's dirty pages to the system now (MEMORY PURGE, as Redis's
/// jemalloc_purge does), instead of waiting for them to decay.
pub fn purge() -> bool {
    // SAFETY: arena.<i>.purge reads and writes nothing; 4096 is MALLCTL_ARENAS_ALL (every arena).
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    rc == 0
}

/// jemalloc's own statistics report (MEMORY MALLOC-STATS), as `malloc_stats_print` writes it.
pub fn stats_report() -> Vec<u8> {
    unsafe extern "C" fn append(out: *mut std::ffi::c_void, text: *const std::ffi::c_char) {
        // SAFETY: `out` is the Vec passed below, alive for the whole call; jemalloc hands
        // NUL-terminated text.
        let (out, text) = unsafe { (&mut *(out as *mut Vec<u8>), std::ffi::CStr::from_ptr(text)) };
        out.extend_from_slice(text.to_bytes());
    }
    let mut out = Vec::new();
    // SAFETY: the callback only appends to `out`, which outlives the call; null options print
    // the default report.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(
            Some(append),
            &mut out as *mut Vec<u8> as *mut std::ffi::c_void,
            std::ptr::null(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_sizes_are_size_classes() {
        assert_eq!(usable(Layout::from_size_align(1, 1).unwrap()), 8);
        assert_eq!(usable(Layout::from_size_align(17, 8).unwrap()), 32);
        assert_eq!(usable(Layout::from_size_align(100, 64).unwrap()), 128);
    }
}
