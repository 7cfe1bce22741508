//! Incremental request parser: multibulk (`*N\r\n$len\r\n...`) and inline commands, with Redis's
//! limits and protocol error texts. Bytes in, argument vectors out; the parser keeps its place in a
//! partial command so a large value arriving in many reads is scanned once.
//!
//! Arguments are `Bytes` slices of one frozen chunk of the read buffer per batch (one refcount
//! each, no copy). The keyspace must copy what it keeps; see ARCHITECTURE.md section 1.
//!
//! Except a big argument (`BIG_ARG` bytes or more, Redis's PROTO_MBULK_BIG_ARG): it gets an
//! allocation of its own and of its exact size, which the connection reads the bulk into, so no
//! argument of that size ever shares its buffer with anything else. A command that stores such an
//! argument whole (SET of a 64 MiB value) keeps that allocation instead of copying it on the
//! executor, as Redis keeps the query buffer a big argument was read into.

use bytes::{Bytes, BytesMut};

/// Longest inline command, and longest `*N` / `$N` header line, Redis accepts (PROTO_INLINE_MAX_SIZE).
pub const INLINE_MAX: usize = 64 * 1024;

/// A bulk argument this long or longer gets an allocation of its own (see the module header).
pub const BIG_ARG: usize = 32 * 1024;

/// The start of a range that stands for `Parser::bigs[end]` rather than for buffer bytes.
const BIG_MARK: usize = usize::MAX;

/// Argument ranges kept between commands (16 bytes each); a bigger table is freed once its
/// command is cut out.
const RANGES_KEPT: usize = 1024;

/// A malformed request: the connection gets `-ERR Protocol error: <text>` and is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(text: impl Into<String>) -> Self {
        ProtocolError(text.into())
    }

    /// The error line Redis sends before closing, without the leading `-`.
    pub fn reply_text(&self) -> String {
        format!("ERR Protocol error: {}", self.0)
    }
}

/// How a call to `Parser::parse_into` ended.
#[derive(Debug, Default)]
pub struct ParseStatus {
    pub error: Option<ProtocolError>,
    /// See `ParseOutcome::stopped_early`.
    pub stopped_early: bool,
}

/// What one call to `Parser::parse` found.
#[derive(Debug, Default)]
pub struct ParseOutcome {
    pub commands: Vec<Vec<Bytes>>,
    pub error: Option<ProtocolError>,
    /// Parsing stopped after one command because the client is unauthenticated: run it (it may be
    /// AUTH, which lifts the limits) and call `parse` again before reading more.
    pub stopped_early: bool,
}

/// Where the parser stopped inside a multibulk command.
#[derive(Debug, Default)]
struct Partial {
    /// Arguments still expected; 0 when not inside a multibulk command.
    remaining: i64,
    /// Length of the bulk whose `$len` line has been read, or -1.
    bulk_len: i64,
    /// Index in `Parser::ranges` where this command's argument ranges begin.
    start: usize,
    /// Offset where scanning resumes.
    pos: usize,
}

/// Per-connection parser state and limits.
#[derive(Debug)]
pub struct Parser {
    partial: Partial,
    /// Argument ranges (relative to the buffer start) of the commands found in this call and of
    /// the partial command; reused across calls so the hot path does not allocate for them.
    ranges: Vec<(usize, usize)>,
    /// Commands found in this call, reused across calls.
    found: Vec<Step>,
    /// proto-max-bulk-len.
    pub max_bulk_len: i64,
    /// Whether the client must authenticate first (Redis then caps the sizes it will buffer).
    pub unauthenticated: bool,
    /// The big bulk being read (its exact size reserved), until its CRLF has been seen.
    big: Option<BytesMut>,
    /// Big arguments of the commands found and of the partial one, by `BIG_MARK` range.
    bigs: Vec<Bytes>,
    /// Size of the last big argument completed, until `take_big_done`.
    big_done: usize,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new(512 * 1024 * 1024)
    }
}

#[derive(Debug)]
enum Step {
    /// One complete command: its arguments are `ranges[from..to]` (multibulk, plain inline) or
    /// owned (inline with quotes).
    Ranges(usize, usize),
    Owned(Vec<Bytes>),
    /// Nothing to run (an empty line or `*0`), bytes consumed.
    Skip,
    /// Need more bytes.
    Incomplete,
}

impl Parser {
    pub fn new(max_bulk_len: i64) -> Self {
        Parser {
            partial: Partial { bulk_len: -1, ..Default::default() },
            ranges: Vec::new(),
            found: Vec::new(),
            max_bulk_len,
            unauthenticated: false,
            big: None,
            bigs: Vec::new(),
            big_done: 0,
        }
    }

    /// The size of the big argument completed since the last call, if one was.
    pub fn take_big_done(&mut self) -> Option<usize> {
        Some(std::mem::take(&mut self.big_done)).filter(|&len| len > 0)
    }

    /// The big bulk being read, while bytes of it are missing: the caller reads into its spare
    /// capacity, which is exactly what is missing, so a read never takes bytes past it.
    pub fn big_bulk_room(&mut self) -> Option<&mut BytesMut> {
        self.big.as_mut().filter(|b| b.len() < b.capacity())
    }

    /// Bytes read and size of the big bulk being read, until its CRLF has been seen: the query
    /// buffer Redis would hold for it.
    pub fn big_bulk(&self) -> Option<(usize, usize)> {
        self.big.as_ref().map(|b| (b.len(), b.capacity()))
    }

    /// Whether a command has been started but not finished (the buffer holds its first bytes).
    pub fn in_command(&self) -> bool {
        self.partial.remaining > 0
    }

    /// Length of the bulk argument being read, if its header is known: lets the caller reserve it.
    fn pending_bulk(&self) -> Option<usize> {
        (self.partial.bulk_len >= 0).then_some(self.partial.bulk_len as usize)
    }

    /// Where the bulk argument being read ends in the buffer (its CRLF included), if its header
    /// is known and it is read into the buffer (not a big one): the caller reserves what is still
    /// missing, once.
    pub fn pending_bulk_end(&self) -> Option<usize> {
        self.pending_bulk().filter(|&len| len < BIG_ARG).map(|len| self.partial.pos + len + 2)
    }

    /// Parses every complete command in `buf`, removing their bytes from it. A trailing partial
    /// command stays in `buf` (and in the parser's state) for the next call.
    pub fn parse(&mut self, buf: &mut BytesMut) -> ParseOutcome {
        let mut commands = Vec::new();
        let status = self.parse_into(buf, |argv| commands.push(argv));
        ParseOutcome { commands, error: status.error, stopped_early: status.stopped_early }
    }

    /// `parse`, handing each command's arguments to `emit` as it is cut out of the buffer.
    pub fn parse_into(&mut self, buf: &mut BytesMut, mut emit: impl FnMut(Vec<Bytes>)) -> ParseStatus {
        let mut status = ParseStatus::default();
        let mut found = std::mem::take(&mut self.found);
        found.clear();
        if self.partial.remaining == 0 {
            self.ranges.clear();
            self.bigs.clear();
        }
        let mut consumed = 0usize;
        while consumed < buf.len() {
            if self.partial.remaining == 0 {
                self.partial.pos = consumed;
            }
            match self.step(buf, consumed) {
                Ok((Step::Incomplete, _)) => break,
                Ok((step, end)) => {
                    consumed = end;
                    if !matches!(step, Step::Skip) {
                        found.push(step);
                        // Redis runs each command before parsing the next one; an unauthenticated
                        // client's AUTH must take effect before the limits apply to what follows.
                        if self.unauthenticated && consumed < buf.len() {
                            status.stopped_early = true;
                            break;
                        }
                    }
                }
                Err(e) => {
                    status.error = Some(e);
                    break;
                }
            }
        }
        if consumed > 0 {
            let chunk: Bytes = buf.split_to(consumed).freeze();
            for step in found.drain(..) {
                match step {
                    Step::Ranges(from, to) => emit(
                        self.ranges[from..to]
                            .iter()
                            .map(|&(s, e)| match s {
                                BIG_MARK => std::mem::take(&mut self.bigs[e]),
                                // An inline argument can be big too: copied, so it holds no
                                // more than itself.
                                _ if e - s >= BIG_ARG => Bytes::copy_from_slice(&chunk[s..e]),
                                _ => chunk.slice(s..e),
                            })
                            .collect(),
                    ),
                    Step::Owned(args) => emit(args),
                    Step::Skip | Step::Incomplete => {}
                }
            }
            // Keep only the partial command's ranges, rebased on the shortened buffer.
            if self.partial.remaining > 0 {
                self.ranges.drain(..self.partial.start);
                self.partial.start = 0;
                for r in self.ranges.iter_mut().filter(|r| r.0 != BIG_MARK) {
                    r.0 -= consumed;
                    r.1 -= consumed;
                }
            } else {
                self.ranges.clear();
                self.bigs.clear();
                // A command with many arguments leaves a big table behind; Redis frees a
                // client's argv array after each command, so an idle client holds none.
                if self.ranges.capacity() > RANGES_KEPT {
                    self.ranges = Vec::new();
                }
            }
            self.partial.pos -= consumed.min(self.partial.pos);
        }
        self.found = found;
        status
    }

    /// Parses one command starting at `start` (or resumes the partial one). Returns the step and the
    /// offset just past what it consumed.
    fn step(&mut self, buf: &[u8], start: usize) -> Result<(Step, usize), ProtocolError> {
        if self.partial.remaining == 0 {
            if buf[start] == b'*' {
                return self.multibulk_header(buf, start);
            }
            return self.inline(buf, start);
        }
        self.multibulk_args(buf)
    }

    fn multibulk_header(&mut self, buf: &[u8], start: usize) -> Result<(Step, usize), ProtocolError> {
        let Some((count, cr)) = header_line(buf, start) else {
            if buf.len() - start > INLINE_MAX {
                return Err(ProtocolError::new("too big mbulk count string"));
            }
            return Ok((Step::Incomplete, start));
        };
        if cr + 1 >= buf.len() {
            return Ok((Step::Incomplete, start));
        }
        let Some(count) = count.filter(|&n| n <= i32::MAX as i64) else {
            return Err(ProtocolError::new("invalid multibulk length"));
        };
        if count > 10 && self.unauthenticated {
            return Err(ProtocolError::new("unauthenticated multibulk length"));
        }
        let end = cr + 2;
        if count <= 0 {
            return Ok((Step::Skip, end));
        }
        self.partial.remaining = count;
        self.partial.bulk_len = -1;
        self.partial.start = self.ranges.len();
        self.partial.pos = end;
        if end >= buf.len() {
            return Ok((Step::Incomplete, end));
        }
        self.multibulk_args(buf)
    }

    fn multibulk_args(&mut self, buf: &[u8]) -> Result<(Step, usize), ProtocolError> {
        let mut pos = self.partial.pos;
        while self.partial.remaining > 0 {
            if self.partial.bulk_len < 0 {
                if pos >= buf.len() {
                    break;
                }
                let Some((len, cr)) = header_line(buf, pos) else {
                    if buf.len() - pos > INLINE_MAX {
                        return Err(ProtocolError::new("too big bulk count string"));
                    }
                    break;
                };
                if cr + 1 >= buf.len() {
                    break;
                }
                if buf[pos] != b'$' {
                    return Err(ProtocolError(format!("expected '$', got '{}'", buf[pos] as char)));
                }
                let Some(len) = len.filter(|&n| n >= 0 && n <= self.max_bulk_len) else {
                    return Err(ProtocolError::new("invalid bulk length"));
                };
                if len > 16384 && self.unauthenticated {
                    return Err(ProtocolError::new("unauthenticated bulk length"));
                }
                self.partial.bulk_len = len;
                pos = cr + 2;
            }
            let len = self.partial.bulk_len as usize;
            if len >= BIG_ARG {
                // Into the argument's own allocation: what the buffer holds of it now (the
                // connection reads the rest straight into it). The bytes copied stay in the
                // buffer, skipped, until the command is cut out.
                let big = self.big.get_or_insert_with(|| BytesMut::with_capacity(len));
                let here = (len - big.len()).min(buf.len() - pos);
                big.extend_from_slice(&buf[pos..pos + here]);
                pos += here;
                if big.len() < len || buf.len() < pos + 2 {
                    break;
                }
                let arg = self.big.take().map(BytesMut::freeze).unwrap_or_default();
                self.ranges.push((BIG_MARK, self.bigs.len()));
                self.bigs.push(arg);
                self.big_done = len;
                pos += 2;
                self.partial.bulk_len = -1;
                self.partial.remaining -= 1;
                continue;
            }
            // Redis does not check the two bytes after the data; it skips them.
            if buf.len() < pos + len + 2 {
                break;
            }
            self.ranges.push((pos, pos + len));
            pos += len + 2;
            self.partial.bulk_len = -1;
            self.partial.remaining -= 1;
        }
        self.partial.pos = pos;
        if self.partial.remaining > 0 {
            return Ok((Step::Incomplete, pos));
        }
        Ok((Step::Ranges(self.partial.start, self.ranges.len()), pos))
    }

    fn inline(&mut self, buf: &[u8], start: usize) -> Result<(Step, usize), ProtocolError> {
        // Redis looks for the newline with strchr, which stops at a NUL: a line with a NUL
        // before its newline never completes (until it is too big).
        let newline = memchr::memchr2(b'\n', 0, &buf[start..]).map(|i| start + i).filter(|&i| buf[i] == b'\n');
        let Some(nl) = newline else {
            if buf.len() - start > INLINE_MAX {
                return Err(ProtocolError::new("too big inline request"));
            }
            return Ok((Step::Incomplete, start));
        };
        let mut line = &buf[start..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        if memchr::memchr2(b'"', b'\'', line).is_none() {
            // No quotes: arguments are plain slices of the buffer (no copy).
            let first = self.ranges.len();
            let mut i = 0;
            while i < line.len() {
                while i < line.len() && is_space(line[i]) {
                    i += 1;
                }
                if i == line.len() {
                    break;
                }
                let arg_start = i;
                while i < line.len() && !matches!(line[i], b' ' | b'\n' | b'\r' | b'\t') {
                    i += 1;
                }
                self.ranges.push((start + arg_start, start + i));
            }
            if self.ranges.len() == first {
                return Ok((Step::Skip, nl + 1));
            }
            return Ok((Step::Ranges(first, self.ranges.len()), nl + 1));
        }
        let args = split_args(line).ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
        if args.is_empty() {
            return Ok((Step::Skip, nl + 1));
        }
        let owned = args.into_iter().map(|mut arg| {
            // A big argument holds no more than itself (see BIG_ARG).
            if arg.len() >= BIG_ARG {
                arg.shrink_to_fit();
            }
            Bytes::from(arg)
        });
        Ok((Step::Owned(owned.collect()), nl + 1))
    }
}

/// Parses the number of a `*N` or `$N` header as Redis's `string2ll`.
fn parse_len(digits: &[u8]) -> Option<i64> {
    crate::util::num::parse_i64(digits)
}

/// Finds the end of the header line whose type byte (`*` or `$`) is at `start`: the number it
/// holds (None when not a valid one) and the offset of its `\r`, or None when no `\r` has
/// arrived yet. Headers are a few digits, so they are scanned and converted in one pass; anything
/// else (signs, leading zeros, long numbers, garbage) takes the general path.
#[inline]
fn header_line(buf: &[u8], start: usize) -> Option<(Option<i64>, usize)> {
    const FAST_DIGITS: usize = 18;
    // The type byte itself may be the `\r`, as Redis's strchr from it finds (the caller then
    // reports the wrong type byte).
    if buf[start] == b'\r' {
        return Some((None, start));
    }
    let digits_from = start + 1;
    let mut i = digits_from;
    let mut value: u64 = 0;
    while i < buf.len() && i - digits_from <= FAST_DIGITS {
        let c = buf[i];
        if c.is_ascii_digit() && i - digits_from < FAST_DIGITS {
            value = value * 10 + (c - b'0') as u64;
            i += 1;
            continue;
        }
        if c == b'\r' {
            let n = i - digits_from;
            let canonical = n > 0 && (buf[digits_from] != b'0' || n == 1);
            return Some((canonical.then_some(value as i64), i));
        }
        break;
    }
    let cr = digits_from + memchr::memchr(b'\r', &buf[digits_from..])?;
    Some((parse_len(&buf[digits_from..cr]), cr))
}

/// Splits an inline command line as Redis's `sdssplitargs`: spaces separate arguments; `"..."`
/// takes C escapes (`\n`, `\xHH`, ...); `'...'` takes only `\'`; a closing quote must be followed
/// by a space or the end. Returns None on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Redis reads the line as a C string: a NUL ends it (and an argument ending at a NUL would
    // otherwise be followed by empty ones forever).
    let line = memchr::memchr(0, line).map_or(line, |nul| &line[..nul]);
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' && is_hex(line[i + 2]) && is_hex(line[i + 3]) {
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }

                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }

                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        args.push(cur);
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c)
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>) {
        let mut p = Parser::default();
        let mut buf = BytesMut::new();
        let mut cmds = Vec::new();
        for c in chunks {
            buf.extend_from_slice(c);
            let out = p.parse(&mut buf);
            cmds.extend(out.commands.into_iter().map(|c| c.into_iter().map(|b| b.to_vec()).collect()));
            if out.error.is_some() {
                return (cmds, out.error);
            }
        }
        (cmds, None)
    }

    #[test]
    fn multibulk_in_pieces() {
        let whole = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*1\r\n$4\r\nPING\r\n";
        for split in 0..whole.len() {
            let (cmds, err) = parse_all(&[&whole[..split], &whole[split..]]);
            assert!(err.is_none());
            assert_eq!(cmds, vec![vec![b"GET".to_vec(), b"key".to_vec()], vec![b"PING".to_vec()]], "split {split}");
        }
    }

    #[test]
    fn inline_and_quotes() {
        let (cmds, _) = parse_all(&[b"PING\r\nset \"a b\" 'c\\'d' \"\\x41\\n\"\n\r\n"]);
        assert_eq!(cmds[0], vec![b"PING".to_vec()]);
        assert_eq!(cmds[1], vec![b"set".to_vec(), b"a b".to_vec(), b"c'd".to_vec(), b"A\n".to_vec()]);
        assert_eq!(cmds.len(), 2);
        let (_, err) = parse_all(&[b"set \"abc\n"]);
        assert_eq!(err.unwrap().0, "unbalanced quotes in request");
        let (_, err) = parse_all(&[b"set \"abc\"x\n"]);
        assert_eq!(err.unwrap().0, "unbalanced quotes in request");
    }

    #[test]
    fn errors_and_limits() {
        assert_eq!(parse_all(&[b"*abc\r\n"]).1.unwrap().0, "invalid multibulk length");
        assert_eq!(parse_all(&[b"*1\r\n$2147483648\r\n"]).1.unwrap().0, "invalid bulk length");
        assert_eq!(parse_all(&[b"*1\r\n$-1\r\n"]).1.unwrap().0, "invalid bulk length");
        assert_eq!(parse_all(&[b"*1\r\nx3\r\n"]).1.unwrap().0, "expected '$', got 'x'");
        assert_eq!(parse_all(&[&vec![b'a'; 70000]]).1.unwrap().0, "too big inline request");
        // A huge argument count is accepted and waited for, without allocating for it.
        let (cmds, err) = parse_all(&[b"*10000000\r\n$1\r\na\r\n"]);
        assert!(cmds.is_empty() && err.is_none());
        // Commands before an error are still returned.
        let (cmds, err) = parse_all(&[b"PING\r\n*x\r\n"]);
        assert_eq!(cmds.len(), 1);
        assert!(err.is_some());
    }

    #[test]
    fn header_fast_path_agrees_with_string2ll() {
        let mut cases: Vec<String> =
            ["", "0", "00", "01", "-1", "-0", "+5", "1a", "9", "10", "123456"].iter().map(|s| s.to_string()).collect();
        for digits in 15..=21 {
            cases.push("9".repeat(digits));
            cases.push(format!("1{}", "0".repeat(digits - 1)));
        }
        cases.push(i64::MAX.to_string());
        cases.push((i64::MAX as u64 + 1).to_string());
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let len = rng.usize(0..22);
            cases.push((0..len).map(|_| *rng.choice(b"0123456789-x").unwrap_or(&b'0') as char).collect());
        }
        for case in cases {
            let line = format!("${case}\r\n");
            assert_eq!(header_line(line.as_bytes(), 0), Some((parse_len(case.as_bytes()), 1 + case.len())), "{case:?}");
            let bare = format!("\r{case}\r\n");
            assert_eq!(header_line(bare.as_bytes(), 0), Some((None, 0)), "{case:?}");
            // Without its `\r` yet, the line is incomplete.
            assert_eq!(header_line(&line.as_bytes()[..1 + case.len()], 0), None, "{case:?}");
        }
    }

    /// Redis finds an inline line's newline with strchr, so a NUL before it leaves the line
    /// waiting; its argument splitting reads a C string, so a NUL ends it.
    #[test]
    fn nul_holds_an_inline_line_and_ends_a_split() {
        let (cmds, err) = parse_all(&[b"ping\r\nset a\0b c\r\nget x\n"]);
        assert!(err.is_none());
        assert_eq!(cmds, vec![vec![b"ping".to_vec()]]);
        assert_eq!(split_args(b"set a\0b c"), Some(vec![b"set".to_vec(), b"a".to_vec()]));
        // An argument ending at the NUL is the last (this once looped, adding empty ones).
        assert_eq!(split_args(b"\"x\" \0 y"), Some(vec![b"x".to_vec()]));
        // The NUL cuts a quoted argument short, leaving its quote unbalanced.
        assert_eq!(split_args(b"get \"x\0y\" z"), None);
    }

    /// Feeds `whole` in pieces of the given sizes the way the connection does: into the big bulk's
    /// own room while there is one, else into the buffer.
    fn parse_as_connection(whole: &[u8], pieces: &[usize]) -> Vec<Vec<Bytes>> {
        let mut p = Parser::default();
        let mut buf = BytesMut::new();
        let mut cmds = Vec::new();
        let mut at = 0;
        let mut piece = pieces.iter().cycle();
        while at < whole.len() {
            let mut n = (*piece.next().unwrap_or(&1)).min(whole.len() - at);
            match p.big_bulk_room() {
                Some(big) => {
                    n = n.min(big.capacity() - big.len());
                    big.extend_from_slice(&whole[at..at + n]);
                }
                None => buf.extend_from_slice(&whole[at..at + n]),
            }
            at += n;
            let out = p.parse(&mut buf);
            assert!(out.error.is_none());
            cmds.extend(out.commands);
        }
        assert!(buf.is_empty() && p.big_bulk().is_none());
        cmds
    }

    #[test]
    fn big_arguments_get_their_own_exact_allocation() {
        let big1: Vec<u8> = (0..BIG_ARG + 7).map(|i| (i % 251) as u8).collect();
        let big2 = vec![b'x'; BIG_ARG];
        let small = vec![b's'; BIG_ARG - 1];
        let mut whole = Vec::new();
        let argvs: Vec<Vec<&[u8]>> = vec![
            vec![b"SET", b"k", &big1],
            vec![b"MSET", b"a", &big2, b"b", &small, b"c", &big1],
            vec![b"PING"],
            vec![b"SET", b"k2", &big2, b"EX", b"10"],
        ];
        for argv in &argvs {
            whole.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
            for a in argv {
                whole.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                whole.extend_from_slice(a);
                whole.extend_from_slice(b"\r\n");
            }
        }
        for pieces in [&[usize::MAX][..], &[1], &[7, 3, 4096], &[16384], &[BIG_ARG + 1], &[5, 40000, 2]] {
            let cmds = parse_as_connection(&whole, pieces);
            let got: Vec<Vec<&[u8]>> = cmds.iter().map(|c| c.iter().map(|a| &a[..]).collect()).collect();
            assert_eq!(got, argvs, "pieces {pieces:?}");
            for arg in cmds.into_iter().flatten().filter(|a| a.len() >= BIG_ARG) {
                // Nothing else shares it, and it is exactly its size.
                let len = arg.len();
                let vec = Vec::from(arg);
                assert_eq!((vec.len(), vec.capacity()), (len, len), "pieces {pieces:?}");
            }
        }
        // A big inline argument is copied out of the buffer too.
        let mut line = b"SET k ".to_vec();
        line.extend_from_slice(&vec![b'v'; BIG_ARG + 10]);
        line.extend_from_slice(b" \"q u o t e d\"\r\n");
        let cmds = parse_as_connection(&line, &[usize::MAX]);
        assert_eq!(cmds[0][2].len(), BIG_ARG + 10);
        assert_eq!(&cmds[0][3][..], b"q u o t e d");
        let arg = cmds.into_iter().next().unwrap().swap_remove(2);
        assert_eq!(Vec::from(arg).capacity(), BIG_ARG + 10);
    }

    #[test]
    fn a_big_bulk_reports_what_has_arrived() {
        let mut p = Parser::default();
        let mut buf = BytesMut::from(&b"*1\r\n$100000\r\n"[..]);
        buf.extend_from_slice(&[b'a'; 1000]);
        assert!(p.parse(&mut buf).commands.is_empty());
        assert_eq!(p.big_bulk(), Some((1000, 100000)));
        let room = p.big_bulk_room().expect("room for the rest");
        room.extend_from_slice(&[b'a'; 99000]);
        assert!(p.parse(&mut buf).commands.is_empty());
        // Whole, but its CRLF has not arrived: still Redis's query buffer.
        assert_eq!(p.big_bulk(), Some((100000, 100000)));
        assert!(p.big_bulk_room().is_none());
        buf.extend_from_slice(b"\r\n");
        let out = p.parse(&mut buf);
        assert_eq!(out.commands.len(), 1);
        assert_eq!(p.take_big_done(), Some(100000));
        assert_eq!(p.take_big_done(), None);
        assert!(p.big_bulk().is_none() && buf.is_empty());
    }

    #[test]
    fn empty_lines_and_zero_multibulk_are_skipped() {
        let (cmds, err) = parse_all(&[b"\r\n\n*0\r\n*-1\r\nPING\r\n"]);
        assert!(err.is_none());
        assert_eq!(cmds, vec![vec![b"PING".to_vec()]]);
    }
}
