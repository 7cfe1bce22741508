//! Function libraries (FUNCTION LOAD's unit). There is no scripting engine yet, so libraries come
//! only from RDB files: each is kept verbatim (engine, name, code) so that FUNCTION LIST can show
//! it and the next save writes it back unchanged.

/// One library as an RDB FUNCTION2 record carries it: the code, whose `#!<engine> name=<name>`
/// shebang names the engine and the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    pub name: Vec<u8>,
    pub engine: Vec<u8>,
    pub code: Vec<u8>,
}

/// Every loaded library, ordered by name as Redis's dict-of-libraries iteration is not: FUNCTION
/// LIST order is unspecified, so clients sort.
#[derive(Debug, Default, Clone)]
pub struct Libraries {
    pub libs: Vec<Library>,
}
