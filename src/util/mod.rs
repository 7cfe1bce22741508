//! Small shared helpers with no knowledge of commands: number parsing and formatting as Redis
//! does, clocks, jemalloc's size classes, Redis's partial quicksort, LEB128 varints, listpack
//! entry sizes, the wake-up flag connections wait on, and bytes read as C strings.

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

/// Bytes (a client's argument, a file's field) as Redis's C code reads them (`%s`, strcmp,
/// `arg[1] == '\0'`): up to the first NUL.
pub fn c_str(bytes: &[u8]) -> &[u8] {
    c_str_prefix(bytes, usize::MAX)
}

/// `%.*s` of a client argument as C prints it: up to the first NUL, at most `max` bytes.
pub fn c_str_prefix(bytes: &[u8], max: usize) -> &[u8] {
    let end = memchr::memchr(0, bytes).unwrap_or(bytes.len()).min(max);
    &bytes[..end]
}

/// An I/O error as Redis logs one: strerror(3)'s text, without Rust's "(os error N)".
pub fn os_error_text(e: &std::io::Error) -> String {
    e.raw_os_error().map(|n| nix::errno::Errno::from_raw(n).desc().to_string()).unwrap_or_else(|| e.to_string())
}
