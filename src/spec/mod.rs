//! The command-spec layer: what a command is, apart from what it does. Flags and ACL categories
//! as COMMAND INFO and ACL CAT name them, key ranges, `CommandSpec` (one row of the table,
//! generic over the handler type so that this layer knows nothing of the executor), `Args`,
//! `CmdError` with Redis's error texts, the generated COMMAND DOCS facts (`docs`) and key
//! extraction from key specs (`getkeys`). Imports only `resp` and `util`.

pub mod docs;
mod docs_data;
pub mod error;
pub mod getkeys;

use bytes::Bytes;

pub use error::{CmdError, CmdResult};

/// Command flags, as COMMAND INFO names them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const SENTINEL: u32 = 1 << 14;
    pub const ONLY_SENTINEL: u32 = 1 << 15;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 16;
    pub const PROTECTED: u32 = 1 << 17;
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;
    pub const NO_MULTI: u32 = 1 << 19;
    pub const MOVABLEKEYS: u32 = 1 << 20;
    pub const ALLOW_BUSY: u32 = 1 << 21;
    pub const ASKING: u32 = 1 << 22;

    /// Names in the order Redis 7.0 lists them in COMMAND INFO. MAY_REPLICATE, SENTINEL,
    /// ONLY_SENTINEL and PROTECTED are deliberately absent: Redis never shows them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// ACL categories (the explicit ones; @read @write @fast @slow @admin @dangerous @pubsub
/// @blocking are derived from flags as Redis does).
pub mod acl {
    pub const KEYSPACE: u64 = 1 << 0;
    pub const READ: u64 = 1 << 1;
    pub const WRITE: u64 = 1 << 2;
    pub const SET: u64 = 1 << 3;
    pub const SORTEDSET: u64 = 1 << 4;
    pub const LIST: u64 = 1 << 5;
    pub const HASH: u64 = 1 << 6;
    pub const STRING: u64 = 1 << 7;
    pub const BITMAP: u64 = 1 << 8;
    pub const HYPERLOGLOG: u64 = 1 << 9;
    pub const GEO: u64 = 1 << 10;
    pub const STREAM: u64 = 1 << 11;
    pub const PUBSUB: u64 = 1 << 12;
    pub const ADMIN: u64 = 1 << 13;
    pub const FAST: u64 = 1 << 14;
    pub const SLOW: u64 = 1 << 15;
    pub const BLOCKING: u64 = 1 << 16;
    pub const DANGEROUS: u64 = 1 << 17;
    pub const CONNECTION: u64 = 1 << 18;
    pub const TRANSACTION: u64 = 1 << 19;
    pub const SCRIPTING: u64 = 1 << 20;

    /// Names in Redis's category order (ACL CAT).
    pub const NAMES: &[(u64, &str)] = &[
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
    ];
}

/// Key positions: first, last (negative counts from the end), step. (0, 0, 0) = no keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRange {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

pub const NO_KEYS: KeyRange = KeyRange { first: 0, last: 0, step: 0 };

pub const fn keys(first: i32, last: i32, step: i32) -> KeyRange {
    KeyRange { first, last, step }
}

/// One command (or subcommand) of the table.
pub struct CommandSpec<H: 'static> {
    /// Lower-case name; subcommands carry their own name only (`get` under `config`).
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    pub keys: KeyRange,
    /// Explicit ACL categories (the derived ones are added by `acl_categories`).
    pub acl: u64,
    pub handler: H,
    /// Subcommands of a container command (CONFIG, CLIENT, OBJECT, ...); empty otherwise.
    pub subcommands: &'static [CommandSpec<H>],
}

impl<H> std::fmt::Debug for CommandSpec<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSpec").field("name", &self.name).field("arity", &self.arity).finish()
    }
}

/// Table row constructor: `spec("get", 2, READONLY | FAST, keys(1, 1, 1), acl::STRING, get)`.
pub const fn spec<H>(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeyRange,
    acl: u64,
    handler: H,
) -> CommandSpec<H> {
    CommandSpec { name, arity, flags, keys, acl, handler, subcommands: &[] }
}

impl<H> CommandSpec<H> {
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn is_container(&self) -> bool {
        !self.subcommands.is_empty()
    }

    /// The subcommand named `name` (case-insensitive).
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static CommandSpec<H>> {
        self.subcommands.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// Whether `argc` (command name included) satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = self.arity as i64;
        (a > 0 && argc == a) || (a < 0 && argc >= -a)
    }

    /// All ACL categories, explicit and derived from flags (Redis's setImplicitACLCategories).
    pub fn acl_categories(&self) -> u64 {
        let mut c = self.acl;
        if self.has_flag(flags::WRITE) {
            c |= acl::WRITE;
        }
        if self.has_flag(flags::READONLY) && c & acl::SCRIPTING == 0 {
            c |= acl::READ;
        }
        if self.has_flag(flags::ADMIN) {
            c |= acl::ADMIN | acl::DANGEROUS;
        }
        if self.has_flag(flags::PUBSUB) {
            c |= acl::PUBSUB;
        }
        if self.has_flag(flags::FAST) {
            c |= acl::FAST;
        }
        if self.has_flag(flags::BLOCKING) {
            c |= acl::BLOCKING;
        }
        if c & acl::FAST == 0 {
            c |= acl::SLOW;
        }
        c
    }

    /// Positions of the key arguments in `argv` by the key range (movable-key commands refine this).
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
        self.key_positions_iter(argc).collect()
    }

    /// `key_positions` without a list (cluster routing of every command asks for them).
    pub fn key_positions_iter(&self, argc: usize) -> impl Iterator<Item = usize> {
        let k = self.keys;
        let (first, step) = if k.first <= 0 || k.step <= 0 || argc == 0 { (1, 1) } else { (k.first, k.step) };
        let last = if k.first <= 0 || k.step <= 0 || argc == 0 {
            0
        } else if k.last < 0 {
            argc as i32 + k.last
        } else {
            k.last
        };
        (first..=last).step_by(step as usize).map(|i| i as usize).take_while(move |&i| i < argc)
    }
}

/// The arguments of one command, name included at index 0.
#[derive(Debug, Clone, Default)]
pub struct Args {
    pub argv: Vec<Bytes>,
}

/// Whether a client argument is the keyword `word` as Redis's strcasecmp sees it: the
/// argument read as a C string, so up to its first NUL.
pub fn c_str_eq(arg: &[u8], word: &str) -> bool {
    let word = word.as_bytes();
    arg.len() >= word.len()
        && arg[..word.len()].eq_ignore_ascii_case(word)
        && arg.get(word.len()).is_none_or(|&b| b == 0)
}

impl Args {
    pub fn new(argv: Vec<Bytes>) -> Self {
        Args { argv }
    }

    pub fn len(&self) -> usize {
        self.argv.len()
    }

    pub fn is_empty(&self) -> bool {
        self.argv.is_empty()
    }

    pub fn get(&self, i: usize) -> &[u8] {
        &self.argv[i]
    }

    /// Argument `i` as a key (same as `get`, named for readability).
    pub fn key(&self, i: usize) -> &[u8] {
        &self.argv[i]
    }

    /// Arguments from `i` on.
    pub fn from(&self, i: usize) -> impl Iterator<Item = &[u8]> {
        self.argv[i.min(self.argv.len())..].iter().map(|b| &b[..])
    }

    /// Argument `i` compared case-insensitively with an ASCII word, as Redis's strcasecmp
    /// compares them: the argument ends at its first NUL (`ZADD z NX\0junk 1 m` is an NX).
    pub fn is(&self, i: usize, word: &str) -> bool {
        self.argv.get(i).is_some_and(|a| c_str_eq(a, word))
    }

    pub fn i64(&self, i: usize) -> Result<i64, CmdError> {
        crate::util::num::parse_i64(&self.argv[i]).ok_or(CmdError::NotInteger)
    }

    pub fn f64(&self, i: usize) -> Result<f64, CmdError> {
        crate::util::num::parse_f64(&self.argv[i]).ok_or(CmdError::NotFloat)
    }

    /// Argument `i` as lossy UTF-8 (for error messages and names).
    pub fn str(&self, i: usize) -> String {
        String::from_utf8_lossy(&self.argv[i]).into_owned()
    }
}
