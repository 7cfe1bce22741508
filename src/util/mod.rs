//! Small shared helpers with no knowledge of commands: number parsing and formatting as Redis does.

pub mod num;
