//! Reads the command stream of an AOF file: `*<argc>` then `$<len>` + bytes per argument, with
//! `#` annotation lines (timestamps) between commands skipped. It tells a file cut short (the
//! last command incomplete: what a crash leaves) from one that is not an AOF at all, and reports
//! the offset just after the last complete command so a truncated tail can be cut off.
//! Lengths come from the file, so nothing is allocated ahead of the bytes actually present.

use std::io::{BufRead, Read};

/// Why reading stopped before a clean end of file.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The file ends inside a command.
    Truncated,
    /// Something that is not a command where one should start.
    Format,
    /// The file could not be read.
    Io(String),
}

/// Longest line Redis reads for a count or length (AOF_ANNOTATION_LINE_MAX_LEN).
const MAX_LINE: usize = 1024;

pub struct CommandReader<R> {
    src: R,
    offset: u64,
    /// Offset after the last complete command.
    pub valid_up_to: u64,
}

impl<R: BufRead> CommandReader<R> {
    /// `offset` is where `src` starts in the file (after an RDB preamble, say).
    pub fn new(src: R, offset: u64) -> Self {
        CommandReader { src, offset, valid_up_to: offset }
    }

    /// The next command, `Ok(None)` at a clean end of file.
    pub fn next_command(&mut self) -> Result<Option<Vec<Vec<u8>>>, ReadError> {
        let argc = loop {
            let Some(line) = self.line()? else {
                return Ok(None);
            };
            match line.first() {
                Some(b'#') => {
                    self.valid_up_to = self.offset;
                    continue;
                }
                Some(b'*') => {}
                _ => return Err(ReadError::Format),
            }
            if line.len() == 1 {
                return Err(ReadError::Truncated);
            }
            match crate::util::num::atoi(&line[1..]) {
                n if n < 1 => return Err(ReadError::Format),
                n => break n as usize,
            }
        };
        let mut argv = Vec::with_capacity(argc.min(1024));
        for _ in 0..argc {
            let line = self.line()?.ok_or(ReadError::Truncated)?;
            if line.first() != Some(&b'$') {
                return Err(ReadError::Format);
            }
            let len = crate::util::num::atoi(&line[1..]);
            if len < 0 {
                return Err(ReadError::Format);
            }
            let len = len as u64;
            let mut arg = Vec::with_capacity(len.min(1 << 20) as usize);
            let got = (&mut self.src).take(len).read_to_end(&mut arg).map_err(|e| ReadError::Io(e.to_string()))?;
            let mut crlf = [0u8; 2];
            if (got as u64) < len || self.src.read_exact(&mut crlf).is_err() {
                return Err(ReadError::Truncated);
            }
            self.offset += len + 2;
            // A big argument may be stored as it is (a SET's value keeps its allocation): it
            // holds no more than itself.
            if arg.capacity() > arg.len() + 4096 {
                arg.shrink_to_fit();
            }
            argv.push(arg);
        }
        self.valid_up_to = self.offset;
        Ok(Some(argv))
    }

    /// One line without its terminator; `Ok(None)` at end of file before any byte; a line cut
    /// by the end of file is a truncation.
    fn line(&mut self) -> Result<Option<Vec<u8>>, ReadError> {
        let mut line = Vec::new();
        let n = (&mut self.src)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .map_err(|e| ReadError::Io(e.to_string()))?;
        if n == 0 {
            return Ok(None);
        }
        self.offset += n as u64;
        if line.last() != Some(&b'\n') {
            return if n >= MAX_LINE { Err(ReadError::Format) } else { Err(ReadError::Truncated) };
        }
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(Some(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> (Vec<Vec<Vec<u8>>>, Result<(), ReadError>, u64) {
        let mut rd = CommandReader::new(bytes, 0);
        let mut cmds = Vec::new();
        loop {
            match rd.next_command() {
                Ok(Some(c)) => cmds.push(c),
                Ok(None) => return (cmds, Ok(()), rd.valid_up_to),
                Err(e) => return (cmds, Err(e), rd.valid_up_to),
            }
        }
    }

    #[test]
    fn reads_commands_and_annotations() {
        let (cmds, end, at) = all(b"#TS:1\r\n*2\r\n$3\r\nDEL\r\n$1\r\na\r\n*1\r\n$5\r\nMULTI\r\n");
        assert_eq!(cmds, vec![vec![b"DEL".to_vec(), b"a".to_vec()], vec![b"MULTI".to_vec()]]);
        assert_eq!(end, Ok(()));
        assert_eq!(at, 42);
    }

    #[test]
    fn tells_truncation_from_garbage() {
        let full = b"*2\r\n$3\r\nDEL\r\n$1\r\na\r\n*2\r\n$3\r\nDEL\r\n$1\r\nb\r\n";
        for cut in 21..full.len() {
            let (cmds, end, at) = all(&full[..cut]);
            assert_eq!(cmds.len(), 1, "cut at {cut}");
            assert_eq!(end, Err(ReadError::Truncated), "cut at {cut}");
            assert_eq!(at, 20);
        }
        assert_eq!(all(b"SET a b\r\n").1, Err(ReadError::Format));
        assert_eq!(all(b"*1\r\nx3\r\n").1, Err(ReadError::Format));
        assert_eq!(all(b"*0\r\n").1, Err(ReadError::Format));
        // A huge declared length allocates nothing up front; it is just a truncation.
        assert_eq!(all(b"*1\r\n$999999999999\r\nabc").1, Err(ReadError::Truncated));
    }

    /// The cargo-fuzz property (fuzz/fuzz_targets/aof_file.rs) on seeded mutations of a real
    /// stream: no panic, and the prefix up to the last complete command reads back the same
    /// commands and ends cleanly.
    #[test]
    fn mutated_streams_keep_the_prefix_property() {
        let mut seed = b"#TS:1\r\n".to_vec();
        for i in 0..20 {
            seed.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n$2\r\nk{}\r\n$5\r\nvalue\r\n", i % 10).as_bytes());
        }
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            let mut data = seed.clone();
            for _ in 0..(next() % 4 + 1) {
                let at = (next() as usize) % data.len();
                match next() % 3 {
                    0 => data[at] = next() as u8,
                    1 => data.truncate(at),
                    _ => {
                        let alphabet = b"*$\r\n0123456789#";
                        data.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]);
                    }
                }
                if data.is_empty() {
                    break;
                }
            }
            let (cmds, _, valid) = all(&data);
            assert!(valid as usize <= data.len());
            let (again, end, _) = all(&data[..valid as usize]);
            assert_eq!(again, cmds);
            assert_eq!(end, Ok(()));
        }
    }
}
