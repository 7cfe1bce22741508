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
