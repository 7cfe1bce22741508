//! Function libraries (FUNCTION LOAD's unit) as code: each is kept verbatim (engine, name, code),
//! as RDB files and FUNCTION DUMP carry it. What running the code registers is the Lua engine's
//! (`scripting::functions`).

use crate::util::c_str;

/// One library as an RDB FUNCTION2 record carries it: the code, whose `#!<engine> name=<name>`
/// shebang names the engine and the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    pub name: Vec<u8>,
    pub engine: Vec<u8>,
    pub code: Vec<u8>,
}

impl Library {
    /// A library from its code, checked in Redis's order (functionExtractLibMetaData, then the
    /// name, then the engine) for FUNCTION LOAD and RDB loading alike: the first line is
    /// `#!<engine> name=<name>`, split as Redis's sdssplitargs splits it. The error is the reply
    /// line, `ERR ...`, quoting the code's bytes as they are.
    pub fn parse(code: Vec<u8>) -> Result<Library, Vec<u8>> {
        if !code.starts_with(b"#!") {
            return Err(b"ERR Missing library metadata".to_vec());
        }
        // Redis finds the first line's end with strchr: none before the end or a NUL is invalid.
        let Some(line_end) = memchr::memchr2(b'\n', 0, &code).filter(|&i| code[i] == b'\n') else {
            return Err(b"ERR Invalid library metadata".to_vec());
        };
        let parts = crate::resp::parser::split_args(&code[..line_end]).unwrap_or_default();
        let Some((first, options)) = parts.split_first() else {
            return Err(b"ERR Invalid library metadata".to_vec());
        };
        let engine = first[2..].to_ascii_uppercase();
        let mut name = None;
        for part in options {
            match part.get(..5) {
                Some(key) if key.eq_ignore_ascii_case(b"name=") => {
                    if name.is_some() {
                        return Err(b"ERR Invalid metadata value, name argument was given multiple times".to_vec());
                    }
                    name = Some(part[5..].to_vec())
                }
                _ => return Err([&b"ERR Invalid metadata value given: "[..], c_str(part)].concat()),
            }
        }
        let name = name.ok_or(b"ERR Library name was not given".to_vec())?;
        if name.is_empty() || !name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_') {
            return Err(b"ERR Library names can only contain letters, numbers, or underscores(_) and must be at \
                least one character long"
                .to_vec());
        }
        if engine != b"LUA" {
            return Err([&b"ERR Engine '"[..], c_str(&first[2..]), b"' not found"].concat());
        }
        Ok(Library { name, engine, code })
    }
}

/// Every loaded library, ordered by name as Redis's dict-of-libraries iteration is not: FUNCTION
/// LIST order is unspecified, so clients sort.
#[derive(Debug, Default, Clone)]
pub struct Libraries {
    pub libs: Vec<Library>,
}
