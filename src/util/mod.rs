//! Small shared helpers with no knowledge of commands: number parsing and formatting as Redis
//! does, and the wake-up flag connections wait on.

pub mod num;
pub mod signal;
