//! The RESP parser property shared by the cargo-fuzz target (fuzz_targets/resp_parser.rs) and the
//! stable-toolchain loop in tests/parser_fuzz.rs: for any bytes, fed whole or in any split,
//! `ferrodis::resp::Parser` never panics, never returns an empty command, and (below the 64 KB
//! inline/header limits, where Redis itself answers differently by read size) returns the same
//! commands and the same protocol error however the bytes were split.

use bytes::BytesMut;
use ferrodis::resp::Parser;

/// Everything a parser produced from a stream: the commands, then the first error if any.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    pub commands: Vec<Vec<Vec<u8>>>,
    pub error: Option<String>,
}

/// Feeds `stream` to a fresh parser in chunks of the given lengths (cycled; 0 means 1).
pub fn parse_in_chunks(stream: &[u8], chunk_lens: &[usize]) -> Parsed {
    let mut parser = Parser::default();
    let mut buf = BytesMut::new();
    let mut out = Parsed { commands: Vec::new(), error: None };
    let mut pos = 0;
    let mut i = 0;
    while pos < stream.len() {
        let len = if chunk_lens.is_empty() { stream.len() } else { chunk_lens[i % chunk_lens.len()].max(1) };
        i += 1;
        let end = (pos + len).min(stream.len());
        buf.extend_from_slice(&stream[pos..end]);
        pos = end;
        let outcome = parser.parse(&mut buf);
        for cmd in outcome.commands {
            assert!(!cmd.is_empty(), "parser returned an empty command");
            out.commands.push(cmd.iter().map(|a| a.to_vec()).collect());
        }
        if let Some(e) = outcome.error {
            out.error = Some(e.0);
            return out;
        }
    }
    out
}

/// Checks the property for one stream and one way of splitting it.
pub fn check(stream: &[u8], chunk_lens: &[usize]) {
    let whole = parse_in_chunks(stream, &[]);
    let split = parse_in_chunks(stream, chunk_lens);
    if stream.len() < ferrodis::resp::parser::INLINE_MAX {
        assert_eq!(whole, split, "splitting {:?} as {:?} changed the result", stream, chunk_lens);
    }
}

/// Decodes a fuzzer input: byte 0 gives how many of the following bytes are chunk lengths (0..=7),
/// the rest is the stream.
pub fn check_input(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else { return };
    let n = (n as usize % 8).min(rest.len());
    let (lens, stream) = rest.split_at(n);
    let lens: Vec<usize> = lens.iter().map(|&b| b as usize).collect();
    check(stream, &lens);
}
