//! Small shared helpers with no knowledge of commands: number parsing and formatting as Redis
//! does, jemalloc's size classes, Redis's partial quicksort, and the wake-up flag connections
//! wait on.

pub mod alloc;
pub mod clock;
pub mod num;
pub mod pqsort;
pub mod signal;
