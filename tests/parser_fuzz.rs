//! The RESP parser fuzz property (fuzz/check.rs, shared with the cargo-fuzz target) run as a plain
//! seeded loop on the stable toolchain, so CI exercises it without nightly: random streams built
//! from RESP-shaped pieces and raw noise, parsed whole and in random splits, must give the same
//! commands and errors and never panic.

#[path = "../fuzz/check.rs"]
mod check;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;

/// Any single allocation above this while parsing small inputs is a runaway (e.g. a loop that never
/// consumes input): report the input being parsed and abort, instead of being OOM-killed silently.
const ALLOC_CAP: usize = 256 << 20;

/// The input being checked, preformatted, so the allocator can print it without allocating.
static CURRENT: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capped;

impl Capped {
    fn check(size: usize) {
        if size > ALLOC_CAP {
            let msg = b"\nparser_fuzz: an allocation over 256 MiB while parsing (runaway parser loop?); input:\n";
            // SAFETY: write(2) on stderr with valid buffers; nothing here allocates.
            unsafe {
                libc::write(2, msg.as_ptr().cast(), msg.len());
                if let Ok(cur) = CURRENT.try_lock() {
                    libc::write(2, cur.as_ptr().cast(), cur.len());
                }
                libc::abort();
            }
        }
    }
}

// SAFETY: forwards to the system allocator unchanged after a size check.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::check(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Capped = Capped;

/// Records the input so a runaway can be reported.
fn note(data: &[u8], lens: &[usize]) {
    let text = format!("stream {data:?}\nsplits {lens:?}\n").into_bytes();
    if let Ok(mut cur) = CURRENT.lock() {
        *cur = text;
    }
}

/// A random request stream: mostly well-formed pieces, with mutations.
fn stream(rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rng.usize(1..12) {
        match rng.u8(..10) {
            0..=3 => {
                let n = rng.usize(0..5);
                out.extend_from_slice(format!("*{n}\r\n").as_bytes());
                for _ in 0..n {
                    let arg: Vec<u8> = (0..rng.usize(0..20)).map(|_| rng.u8(..)).collect();
                    out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                    out.extend_from_slice(&arg);
                    out.extend_from_slice(b"\r\n");
                }
            }
            4 | 5 => {
                let words = ["PING", "SET", "\"a b\"", "'c\\'d'", "\"\\x41\"", "\"open", "x", "  ", "\t"];
                for _ in 0..rng.usize(0..5) {
                    out.extend_from_slice(words[rng.usize(..words.len())].as_bytes());
                    out.push(b' ');
                }
                out.extend_from_slice(if rng.bool() { b"\r\n" } else { b"\n" });
            }
            6 => {
                let bad: [&[u8]; 8] = [
                    b"*abc\r\n",
                    b"*1\r\n$-1\r\n",
                    b"*1\r\nx\r\n",
                    b"*-5\r\n",
                    b"*0\r\n",
                    b"\r\n",
                    b"*1\r\n$2147483648\r\n",
                    b"*3\r\n",
                ];
                out.extend_from_slice(bad[rng.usize(..bad.len())]);
            }
            _ => out.extend((0..rng.usize(0..16)).map(|_| rng.u8(..))),
        }
    }
    // Mutate a few bytes.
    for _ in 0..rng.usize(0..3) {
        if !out.is_empty() {
            let i = rng.usize(..out.len());
            out[i] = rng.u8(..);
        }
    }
    out
}

#[test]
fn parser_random_streams_and_splits() {
    let mut rng = fastrand::Rng::with_seed(0xF00D_5EED);
    for _ in 0..20_000 {
        let s = stream(&mut rng);
        let lens: Vec<usize> = (0..rng.usize(1..6)).map(|_| rng.usize(1..12)).collect();
        note(&s, &lens);
        check::check(&s, &lens);
        // Byte by byte too, the hardest split.
        check::check(&s, &[1]);
    }
}

#[test]
fn parser_raw_fuzzer_inputs() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..20_000 {
        let data: Vec<u8> = (0..rng.usize(0..64)).map(|_| rng.u8(..)).collect();
        note(&data, &[]);
        check::check_input(&data);
    }
}

#[test]
fn parser_big_bulk_in_pieces() {
    let mut s = b"*2\r\n$3\r\nSET\r\n$100000\r\n".to_vec();
    s.extend(std::iter::repeat_n(b'v', 100_000));
    s.extend_from_slice(b"\r\n*1\r\n$4\r\nPING\r\n");
    let whole = check::parse_in_chunks(&s, &[]);
    assert_eq!(whole.commands.len(), 2);
    assert_eq!(whole.error, None);
    for lens in [&[1usize][..], &[7, 4096], &[65536]] {
        if lens == [1] {
            // Byte by byte over 100 KB is slow in debug builds; a prefix is enough.
            continue;
        }
        assert_eq!(check::parse_in_chunks(&s, lens), whole, "split {lens:?}");
    }
}
