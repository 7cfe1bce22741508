//! Small shared helpers with no knowledge of commands: number parsing and formatting as Redis
//! does, clocks, jemalloc's size classes, Redis's partial quicksort, LEB128 varints, listpack
//! entry sizes, and the wake-up flag connections wait on.

pub mod alloc;
pub mod bgfree;
pub mod clock;
pub mod listpack;
pub mod num;
pub mod pqsort;
pub mod signal;
pub mod slot;
pub mod timer;
pub mod varint;

/// An I/O error as Redis logs one: strerror(3)'s text, without Rust's "(os error N)".
pub fn os_error_text(e: &std::io::Error) -> String {
    e.raw_os_error().map(|n| nix::errno::Errno::from_raw(n).desc().to_string()).unwrap_or_else(|| e.to_string())
}
