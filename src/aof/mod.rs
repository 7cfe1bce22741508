//! The append-only file's formats, as Redis 7.0 writes them: the manifest that lists a multi-part
//! AOF's files (one base, then incremental files, and history files waiting for deletion), file
//! names, and the command stream (RESP multibulk, one command after another, `#` annotation lines
//! allowed). Pure formats: no files are opened here and nothing runs; `executor::aof` owns the
//! process side (loading, writing, fsync, rewrite).

pub mod reader;
pub mod rewrite;

use crate::resp::parser::split_args;

/// What a manifest line says a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Base,
    Incr,
    History,
}

impl FileKind {
    fn letter(self) -> char {
        match self {
            FileKind::Base => 'b',
            FileKind::Incr => 'i',
            FileKind::History => 'h',
        }
    }
}

/// One file of a multi-part AOF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofFile {
    pub name: String,
    pub seq: i64,
    pub kind: FileKind,
}

/// The manifest: which files make up the AOF, in load order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofFile>,
    pub incrs: Vec<AofFile>,
    pub history: Vec<AofFile>,
    /// The highest sequence numbers handed out so far (the next file gets one more).
    pub base_seq: i64,
    pub incr_seq: i64,
}

/// Longest manifest line Redis accepts (AOF_MANIFEST_MAX_LINE).
const MAX_LINE: usize = 1024;

impl Manifest {
    /// Parses a manifest file's bytes with Redis's checks; the error is the text Redis logs.
    pub fn parse(text: &[u8]) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        let mut max_incr_seq = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let (line, tail) = match rest.iter().position(|&c| c == b'\n') {
                Some(i) if i < MAX_LINE => (&rest[..i], &rest[i + 1..]),
                _ => return Err("The AOF manifest file contains too long line".into()),
            };
            rest = tail;
            if line.first() == Some(&b'#') {
                continue;
            }
            let line = trim(line);
            if line.is_empty() {
                return Err("Invalid AOF manifest file format".into());
            }
            let args = split_args(line).ok_or("Invalid AOF manifest file format")?;
            if args.len() < 6 || args.len() % 2 != 0 {
                return Err("Invalid AOF manifest file format".into());
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for pair in args.chunks(2) {
                match &pair[0][..] {
                    b"file" => name = Some(String::from_utf8_lossy(&pair[1]).into_owned()),
                    b"seq" => seq = crate::util::num::parse_i64(&pair[1]).filter(|&s| s != 0),
                    b"type" => kind = pair[1].first().copied(),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err("Invalid AOF manifest file format".into());
            };
            if name.contains('/') {
                return Err("File can't be a path, just a filename".into());
            }
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    m.base_seq = seq;
                    m.base = Some(AofFile { name, seq, kind: FileKind::Base });
                }
                b'h' => m.history.push(AofFile { name, seq, kind: FileKind::History }),
                b'i' => {
                    if seq <= max_incr_seq {
                        return Err("Found a non-monotonic sequence number".into());
                    }
                    max_incr_seq = seq;
                    m.incr_seq = seq;
                    m.incrs.push(AofFile { name, seq, kind: FileKind::Incr });
                }
                _ => return Err("Unknown AOF file type".into()),
            }
        }
        if m.base.is_none() && m.incrs.is_empty() && m.history.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    /// The manifest's text: base, history, then incremental files.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for f in self.base.iter().chain(&self.history).chain(&self.incrs) {
            out.push_str(&format!("file {} seq {} type {}\n", quote(&f.name), f.seq, f.kind.letter()));
        }
        out
    }

    /// Starts a new base file, turning the current one into history; returns its name. History
    /// grows at its head, as Redis's list does (newest first in the manifest).
    pub fn new_base(&mut self, prefix: &str, rdb: bool) -> String {
        if let Some(mut old) = self.base.take() {
            old.kind = FileKind::History;
            self.history.insert(0, old);
        }
        self.base_seq += 1;
        let name = format!("{prefix}.{}.base.{}", self.base_seq, if rdb { "rdb" } else { "aof" });
        self.base = Some(AofFile { name: name.clone(), seq: self.base_seq, kind: FileKind::Base });
        name
    }

    /// Appends a new incremental file; returns its name.
    pub fn new_incr(&mut self, prefix: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{prefix}.{}.incr.aof", self.incr_seq);
        self.incrs.push(AofFile { name: name.clone(), seq: self.incr_seq, kind: FileKind::Incr });
        name
    }

    /// After a rewrite: the incremental files are covered by the new base, all but the newest
    /// when `keep_newest` (the AOF is on and appending to it). With the AOF off every one goes
    /// to history, as in Redis (markRewrittenIncrAofAsHistory skips the last only while its fd
    /// is open).
    pub fn rewritten_incrs_to_history(&mut self, keep_newest: bool) {
        let keep = if keep_newest { self.incrs.pop() } else { None };
        // Newest first, each put at the head: the oldest ends first (Redis's order).
        for mut f in self.incrs.drain(..).rev() {
            f.kind = FileKind::History;
            self.history.insert(0, f);
        }
        self.incrs.extend(keep);
    }

    /// The files to load, in order.
    pub fn load_order(&self) -> impl Iterator<Item = &AofFile> {
        self.base.iter().chain(&self.incrs)
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    while s.first().is_some_and(ws) {
        s = &s[1..];
    }
    while s.last().is_some_and(ws) {
        s = &s[..s.len() - 1];
    }
    s
}

/// A file name as the manifest writes it: quoted and escaped (as sdscatrepr) when it holds
/// anything unusual.
fn quote(name: &str) -> String {
    if !name.is_empty() && name.bytes().all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\'' && c != b'\\') {
        return name.to_string();
    }
    let mut out = String::new();
    crate::config::quote_repr(&mut out, name.as_bytes());
    out
}

/// Appends one command in the AOF's (and replication's) wire form.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    // One reservation for the whole command (a header is at most 1 + 20 + 2 bytes), so the
    // pushes below never grow the buffer: this runs for every write while the AOF is on.
    out.reserve(23 + argv.iter().map(|a| a.as_ref().len() + 25).sum::<usize>());
    push_header(out, b'*', argv.len());
    for a in argv {
        let a = a.as_ref();
        push_header(out, b'$', a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// `*<n>\r\n` or `$<n>\r\n`.
fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    if n < 10 {
        out.extend_from_slice(&[kind, b'0' + n as u8, b'\r', b'\n']);
    } else {
        out.push(kind);
        crate::util::num::push_i64(out, n as i64);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_encode_as_multibulk_with_any_length() {
        let mut out = b"x".to_vec();
        encode_command(&mut out, &[&b"SET"[..], b"", b"0123456789"]);
        assert_eq!(out, b"x*3\r\n$3\r\nSET\r\n$0\r\n\r\n$10\r\n0123456789\r\n".to_vec());
        let argv: Vec<Vec<u8>> = (0..12).map(|i| vec![b'a'; i]).collect();
        let mut out = Vec::new();
        encode_command(&mut out, &argv);
        let mut expected = b"*12\r\n".to_vec();
        for a in &argv {
            expected.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            expected.extend_from_slice(a);
            expected.extend_from_slice(b"\r\n");
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn manifest_round_trips_and_rotates() {
        let text = b"file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
        let mut m = Manifest::parse(text).unwrap();
        assert_eq!(m.to_text().as_bytes(), text);
        m.new_incr("appendonly.aof");
        m.new_base("appendonly.aof", true);
        let off = m.clone();
        m.rewritten_incrs_to_history(true);
        assert_eq!(
            m.to_text(),
            "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.1.base.rdb seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type i\n"
        );
        // With the AOF off (BGREWRITEAOF with appendonly no) no incremental file stays.
        let mut off = off;
        off.rewritten_incrs_to_history(false);
        assert_eq!(
            off.to_text(),
            "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type h\nfile appendonly.aof.1.base.rdb seq 1 type h\n"
        );
    }

    #[test]
    fn manifest_errors_are_redis_texts() {
        let bad = |t: &[u8]| Manifest::parse(t).unwrap_err();
        assert_eq!(bad(b"file a seq 1 type b"), "The AOF manifest file contains too long line");
        assert_eq!(bad(b"\n"), "Invalid AOF manifest file format");
        assert_eq!(bad(b"file a seq 1\n"), "Invalid AOF manifest file format");
        assert_eq!(bad(b"file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(bad(b"file a seq 1 type b\nfile c seq 2 type b\n"), "Found duplicate base file information");
        assert_eq!(bad(b"file a seq 2 type i\nfile c seq 1 type i\n"), "Found a non-monotonic sequence number");
        assert_eq!(bad(b"file ../a seq 2 type i\n"), "File can't be a path, just a filename");
        assert!(Manifest::parse(b"# comment\nfile a seq 1 type i\n").is_ok());
        // A name with a space is written quoted and reads back the same.
        let quoted = Manifest::parse(b"file \"a b\" seq 1 type b\n").unwrap();
        assert_eq!(quoted.to_text(), "file \"a b\" seq 1 type b\n");
        assert_eq!(Manifest::parse(quoted.to_text().as_bytes()).unwrap(), quoted);
        assert_eq!(bad(b""), "Found an empty AOF manifest");
    }
}
