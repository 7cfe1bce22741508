//! `CmdError`: every error a command can answer, rendered with Redis's exact text. Error text
//! lives here (and in the protocol parser) only.

use crate::resp::Reply;
use crate::util::c_str;

#[derive(Debug, Clone, PartialEq)]
pub enum CmdError {
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`
    WrongType,
    /// `ERR syntax error`
    Syntax,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR increment or decrement would overflow`
    Overflow,
    /// `ERR no such key`
    NoSuchKey,
    /// `ERR DB index is out of range`
    DbIndexOutOfRange,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire(String),
    /// `ERR wrong number of arguments for '<cmd>' command`
    WrongArity(String),
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand { sub: String, cmd: String },
    /// `ERR string exceeds maximum allowed size (proto-max-bulk-len)`
    StringTooLong,
    /// `NOAUTH Authentication required.`
    NoAuth,
    /// `ERR timeout is not an integer or out of range`, etc.: any other `ERR <text>`.
    Err(String),
    /// A full error line with its own prefix (`WRONGPASS ...`, `NOPERM ...`, `BUSYKEY ...`).
    Raw(String),
    /// A full error line that echoes client bytes verbatim (unknown command names, options, user
    /// names... may be any bytes).
    Line(Vec<u8>),
}

pub type CmdResult = Result<Reply, CmdError>;

impl CmdError {
    /// `ERR <text>`.
    pub fn err(text: impl Into<String>) -> CmdError {
        CmdError::Err(text.into())
    }

    /// A full error line made of its parts, client bytes among them as they came: Redis's `%s`
    /// of an argument, which ends at a NUL.
    pub fn echo(parts: &[&[u8]]) -> CmdError {
        CmdError::Line(parts.iter().flat_map(|p| c_str(p)).copied().collect())
    }

    /// The error line without the leading `-`, as text (client bytes that are not UTF-8 shown
    /// lossily): for messages that quote it. The reply is `into_line`.
    pub fn text(&self) -> String {
        match self {
            CmdError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            CmdError::Syntax => "ERR syntax error".into(),
            CmdError::NotInteger => "ERR value is not an integer or out of range".into(),
            CmdError::NotFloat => "ERR value is not a valid float".into(),
            CmdError::Overflow => "ERR increment or decrement would overflow".into(),
            CmdError::NoSuchKey => "ERR no such key".into(),
            CmdError::DbIndexOutOfRange => "ERR DB index is out of range".into(),
            CmdError::InvalidExpire(cmd) => format!("ERR invalid expire time in '{cmd}' command"),
            CmdError::WrongArity(cmd) => format!("ERR wrong number of arguments for '{cmd}' command"),
            CmdError::UnknownSubcommand { sub, cmd } => {
                format!("ERR unknown subcommand '{}'. Try {} HELP.", truncate(sub, 128), cmd)
            }
            CmdError::StringTooLong => "ERR string exceeds maximum allowed size (proto-max-bulk-len)".into(),
            CmdError::NoAuth => "NOAUTH Authentication required.".into(),
            CmdError::Err(text) => format!("ERR {text}"),
            CmdError::Raw(line) => line.clone(),
            CmdError::Line(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    /// The error line without the leading `-`, exactly as the client gets it.
    pub fn into_line(self) -> Vec<u8> {
        match self {
            CmdError::Line(bytes) => bytes,
            other => other.text().into_bytes(),
        }
    }

    pub fn into_reply(self) -> Reply {
        Reply::Error(self.into_line())
    }
}

/// The first `max` bytes of `s` (Redis's `%.128s`), never splitting a UTF-8 sequence.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The error code Redis counts in errorstats: the first word of the line (`ERR`, `WRONGTYPE`, ...).
pub fn error_code(line: &str) -> &str {
    line.split(' ').next().unwrap_or("ERR")
}
