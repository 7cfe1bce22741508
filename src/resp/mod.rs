//! RESP wire format: the request parser, the `Reply` vocabulary handlers answer with, and the writer
//! that turns a `Reply` into RESP2 or RESP3 bytes. Imports nothing else of ours.

pub mod parser;
pub mod reply;
pub mod writer;

pub use parser::{ParseOutcome, Parser, ProtocolError};
pub use reply::Reply;
