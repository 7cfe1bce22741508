//! RDB persistence: the file format Redis writes (versions 1 to 12), its checksum and string
//! compression. `format` holds the constants both directions share; the reader and the writer
//! live beside it and convert between RDB bytes and `types::Value`s.

pub mod format;
pub mod load;
pub mod lzf;
pub mod pack;
pub mod packed;
pub mod save;
