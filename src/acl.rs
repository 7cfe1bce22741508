//! Users and what they may do (Redis 7.0 ACLs): the user table, the rule language of ACL SETUSER
//! and `user` directives, the description ACL LIST prints, the permission check every command
//! passes, and the ACL LOG. Command ids for the permission bitmaps come from the command table.
//!
//! A user has a root selector and any number of extra selectors; a command is allowed when one
//! selector allows its command bit (or first argument), every key it touches and every channel
//! it publishes or subscribes to.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::OnceLock;

use bytes::Bytes;

use crate::spec::{self, acl as cat, CommandSpec};

/// Key pattern permissions (`%R~`, `%W~`, `~`).
const READ: u8 = 1;
const WRITE: u8 = 2;
const READ_WRITE: u8 = READ | WRITE;

/// Every command and subcommand, numbered for the bitmaps.
struct Catalog {
    entries: Vec<Entry>,
    by_spec: HashMap<usize, usize>,
    /// Commands in table order (top level); subcommands follow through `Entry::subs`.
    top: Vec<usize>,
}

struct Entry {
    full: String,
    /// The command's own name (the subcommand's, for `config|get`).
    name: String,
    categories: u64,
    subs: Vec<usize>,
    /// A Redis 7.0 command: only these are counted when ACL LIST picks categories, so that
    /// commands added after 7.0 (hash field TTLs, CLIENT SETINFO) do not change its choice.
    in_7_0: bool,
}

fn in_redis_7_0(full: &str) -> bool {
    spec::docs::find(full).is_some_and(|d| {
        let mut parts = d.since.split('.').map(|p| p.parse::<u32>().unwrap_or(u32::MAX));
        let version = (parts.next().unwrap_or(u32::MAX), parts.next().unwrap_or(u32::MAX));
        version <= (7, 0)
    })
}

fn spec_key<H>(spec: &'static CommandSpec<H>) -> usize {
    spec as *const CommandSpec<H> as usize
}

static CATALOG: OnceLock<Catalog> = OnceLock::new();

/// The installed catalog; an empty one (not stored, so a later install still takes effect)
/// when users are built before the table is installed.
fn catalog() -> &'static Catalog {
    static EMPTY: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get().unwrap_or_else(|| {
        EMPTY.get_or_init(|| Catalog { entries: Vec::new(), by_spec: HashMap::new(), top: Vec::new() })
    })
}

/// Numbers every command and subcommand of the table for the permission bitmaps (once, when
/// the executor installs the table, before any user is built).
pub fn install_catalog<H>(families: &'static [&'static [CommandSpec<H>]]) {
    CATALOG.get_or_init(|| {
        let mut c = Catalog { entries: Vec::new(), by_spec: HashMap::new(), top: Vec::new() };
        for spec in families.iter().flat_map(|f| f.iter()) {
            let id = c.entries.len();
            c.entries.push(Entry {
                full: spec.name.to_string(),
                name: spec.name.to_string(),
                categories: spec.acl_categories(),
                subs: Vec::new(),
                in_7_0: in_redis_7_0(spec.name),
            });
            c.by_spec.insert(spec_key(spec), id);
            c.top.push(id);
            for sub in spec.subcommands {
                let sid = c.entries.len();
                let full = format!("{}|{}", spec.name, sub.name);
                c.entries.push(Entry {
                    in_7_0: in_redis_7_0(&full),
                    full,
                    name: sub.name.to_string(),
                    categories: sub.acl_categories(),
                    subs: Vec::new(),
                });
                c.by_spec.insert(spec_key(sub), sid);
                c.entries[id].subs.push(sid);
            }
        }
        for &(name, categories, subs) in NOT_YET_IMPLEMENTED {
            if c.top.iter().any(|&id| c.entries[id].full == name) {
                continue;
            }
            let id = c.entries.len();
            c.entries.push(Entry {
                full: name.into(),
                name: name.into(),
                categories: category_bits(categories),
                subs: Vec::new(),
                in_7_0: true,
            });
            c.top.push(id);
            for &(sub, categories) in subs {
                let sid = c.entries.len();
                c.entries.push(Entry {
                    full: format!("{name}|{sub}"),
                    name: sub.into(),
                    categories: category_bits(categories),
                    subs: Vec::new(),
                    in_7_0: true,
                });
                c.entries[id].subs.push(sid);
            }
        }
        c
    });
}

/// Redis 7.0 commands ferrodis does not implement yet, with their categories: rules may name
/// them and ACL CAT lists them as Redis does, and ACL LIST picks categories counting them, so
/// that users and their descriptions mean the same on both servers.
type Categories = &'static [&'static str];
type Subcommands = &'static [(&'static str, Categories)];
static NOT_YET_IMPLEMENTED: &[(&str, Categories, Subcommands)] = &[
    ("lolwut", &["read", "fast"], &[]),
    ("replicaof", &["admin", "slow", "dangerous"], &[]),
    ("slaveof", &["admin", "slow", "dangerous"], &[]),
];

fn category_bits(names: &[&str]) -> u64 {
    names.iter().filter_map(|n| category(n.as_bytes())).fold(0, |acc, b| acc | b)
}

fn command_id<H>(spec: &'static CommandSpec<H>) -> Option<usize> {
    catalog().by_spec.get(&spec_key(spec)).copied()
}

/// The category bit for a name (`string`, `all` is handled by the callers).
pub fn category(name: &[u8]) -> Option<u64> {
    cat::NAMES.iter().find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name)).map(|&(bit, _)| bit)
}

/// ACL CAT <category>: the commands and subcommands in it, by full name.
pub fn category_commands(bit: u64) -> Vec<String> {
    catalog().entries.iter().filter(|e| e.categories & bit != 0).map(|e| e.full.clone()).collect()
}

/// Why a command was refused (ordered as Redis ranks them when selectors disagree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    Key,
    Auth,
    Channel,
}

impl Denied {
    fn log_reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key => "key",
            Denied::Auth => "auth",
            Denied::Channel => "channel",
        }
    }
}

/// A refusal: the reason and the argument position it concerns (0: the command itself).
#[derive(Debug, Clone, Copy)]
pub struct Refusal {
    pub reason: Denied,
    pub pos: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct KeyPattern {
    pattern: Vec<u8>,
    access: u8,
}

/// One set of permissions: command bits, key patterns and channel patterns.
#[derive(Debug, Clone)]
pub struct Selector {
    bits: Vec<u64>,
    /// Set by +@all: commands added later (none, here) would be allowed; ACL LIST starts with
    /// +@all rather than -@all.
    future_commands: bool,
    /// Every bit is set (a fast path; cleared by any removal).
    all_commands: bool,
    first_args: HashMap<usize, Vec<Vec<u8>>>,
    all_keys: bool,
    keys: Vec<KeyPattern>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(all_channels: bool) -> Selector {
        Selector {
            bits: vec![0; catalog().entries.len().div_ceil(64)],
            future_commands: false,
            all_commands: false,
            first_args: HashMap::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels,
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
        }
    }

    /// Allows or denies a command, with its subcommands (Redis's ACLChangeSelectorPerm).
    fn change_perm(&mut self, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.first_args.remove(&id);
        for &sub in &catalog().entries[id].subs {
            self.set_bit(sub, allow);
        }
        if !allow {
            self.all_commands = false;
        }
    }

    fn set_category(&mut self, bit: u64, allow: bool) {
        for (id, e) in catalog().entries.iter().enumerate() {
            if e.categories & bit != 0 {
                self.set_bit(id, allow);
                self.first_args.remove(&id);
            }
        }
        if !allow {
            self.all_commands = false;
        }
    }

    fn set_all(&mut self, allow: bool) {
        self.bits.iter_mut().for_each(|w| *w = if allow { !0 } else { 0 });
        self.first_args.clear();
        self.all_commands = allow;
        self.future_commands = allow;
    }

    /// Applies one rule; Err carries the reason text Redis gives for a bad modifier.
    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" | b"~*" => {
                self.all_keys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => self.set_all(true),
            b"nocommands" | b"-@all" => self.set_all(false),
            _ if op[0] == b'~' || op[0] == b'%' => {
                if self.all_keys {
                    return Err(RuleError::AfterAllKeys);
                }
                let (access, pattern) = if op[0] == b'%' {
                    // %R~pat, %W~pat, %RW~pat; the pattern may be empty (`%R`).
                    let mut access = 0;
                    let mut i = 1;
                    while i < op.len() {
                        match op[i].to_ascii_uppercase() {
                            b'R' if access & READ == 0 => access |= READ,
                            b'W' if access & WRITE == 0 => access |= WRITE,
                            b'~' => {
                                i += 1;
                                break;
                            }
                            _ => return Err(RuleError::Syntax),
                        }
                        i += 1;
                    }
                    if access == 0 {
                        return Err(RuleError::Syntax);
                    }
                    (access, &op[i.min(op.len())..])
                } else {
                    (READ_WRITE, &op[1..])
                };
                if pattern.contains(&b' ') {
                    return Err(RuleError::Syntax);
                }
                if pattern == b"*" && access == READ_WRITE {
                    self.all_keys = true;
                    self.keys.clear();
                } else if let Some(existing) = self.keys.iter_mut().find(|k| k.pattern == pattern) {
                    existing.access |= access;
                } else {
                    self.keys.push(KeyPattern { pattern: pattern.to_vec(), access });
                }
            }
            _ if op[0] == b'&' => {
                if self.all_channels {
                    return Err(RuleError::AfterAllChannels);
                }
                let pattern = &op[1..];
                if pattern.contains(&b' ') {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pattern) {
                    self.channels.push(pattern.to_vec());
                }
            }
            _ if op[0] == b'+' && op.get(1) != Some(&b'@') => self.command_rule(&lower[1..], true)?,
            _ if op[0] == b'-' && op.get(1) != Some(&b'@') => self.command_rule(&lower[1..], false)?,
            _ if op.len() >= 2 && (op[0] == b'+' || op[0] == b'-') => {
                let bit = category(&op[2..]).ok_or(RuleError::Unknown)?;
                self.set_category(bit, op[0] == b'+');
            }
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    /// `+cmd`, `+cmd|sub`, `+cmd|firstarg`, `-cmd`, `-cmd|sub`, in Redis 7.0's order of checks:
    /// `-` names a command or subcommand exactly; `+` splits at the last `|`, so the part before
    /// it must be a command (a subcommand there is refused: no first args of subcommands).
    fn command_rule(&mut self, name: &[u8], allow: bool) -> Result<(), RuleError> {
        let c = catalog();
        // Redis's ACLLookupCommand: `cmd` or `cmd|sub`, nothing deeper.
        let lookup = |n: &[u8]| -> Option<usize> {
            let mut parts = n.split(|&b| b == b'|');
            let top_name = parts.next()?;
            let top = c.top.iter().copied().find(|&id| c.entries[id].full.as_bytes() == top_name)?;
            match (parts.next(), parts.next()) {
                (None, _) => Some(top),
                (Some(sub), None) => c.entries[top].subs.iter().copied().find(|&s| c.entries[s].name.as_bytes() == sub),
                (Some(_), Some(_)) => None,
            }
        };
        let Some(bar) = name.iter().rposition(|&b| b == b'|').filter(|_| allow) else {
            let id = lookup(name).ok_or(RuleError::Unknown)?;
            self.change_perm(id, allow);
            return Ok(());
        };
        let (head, arg) = (&name[..bar], &name[bar + 1..]);
        let id = lookup(head).ok_or(RuleError::Unknown)?;
        if c.entries[id].full.contains('|') {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if arg.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !c.entries[id].subs.is_empty() {
            let sub = lookup(name).ok_or(RuleError::Unknown)?;
            self.change_perm(sub, true);
            return Ok(());
        }
        // A first argument of a command without subcommands (deprecated in 7.0, still taken).
        tracing::warn!(
            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may \
             get disabled in the future (offender: +{})",
            String::from_utf8_lossy(name)
        );
        if !self.bit(id) {
            let list = self.first_args.entry(id).or_default();
            if !list.iter().any(|a| a == arg) {
                list.push(arg.to_vec());
            }
        }
        Ok(())
    }

    fn check_command<H>(&self, id: usize, spec: &CommandSpec<H>, argv: &[Bytes]) -> bool {
        if self.all_commands || spec.has_flag(spec::flags::NO_AUTH) || self.bit(id) {
            return true;
        }
        argv.len() >= 2
            && self.first_args.get(&id).is_some_and(|list| list.iter().any(|a| a.eq_ignore_ascii_case(&argv[1])))
    }

    fn check_key(&self, key: &[u8], key_flags: u16) -> bool {
        if self.all_keys {
            return true;
        }
        use spec::docs::ksflags;
        let mut need = 0;
        if key_flags & ksflags::ACCESS != 0 {
            need |= READ;
        }
        if key_flags & (ksflags::INSERT | ksflags::DELETE | ksflags::UPDATE) != 0 {
            need |= WRITE;
        }
        self.keys.iter().any(|k| k.access & need == need && crate::glob::glob_match(&k.pattern, key, false))
    }

    fn check_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p == channel
                } else {
                    crate::glob::glob_match(p, channel, false)
                }
            })
    }

    /// Checks a whole command; on refusal, the reason and argument position.
    fn check<H>(&self, id: usize, spec: &'static CommandSpec<H>, full: &str, argv: &[Bytes]) -> Result<(), Refusal> {
        if !self.check_command(id, spec, argv) {
            return Err(Refusal { reason: Denied::Command, pos: 0 });
        }
        if !self.all_keys {
            let doc = spec::docs::find(full);
            for (pos, flags) in crate::spec::getkeys::extract_keys(spec, doc, full, argv) {
                if !self.check_key(&argv[pos], flags) {
                    return Err(Refusal { reason: Denied::Key, pos });
                }
            }
        }
        if !self.all_channels {
            for (pos, is_pattern) in channel_args(full, argv) {
                if !self.check_channel(&argv[pos], is_pattern) {
                    return Err(Refusal { reason: Denied::Channel, pos });
                }
            }
        }
        Ok(())
    }

    // Descriptions are bytes: patterns, channels and first arguments are the client's, as given.
    fn describe_keys(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let words: Vec<Vec<u8>> = self
            .keys
            .iter()
            .map(|k| {
                let prefix: &[u8] = match k.access {
                    READ => b"%R~",
                    WRITE => b"%W~",
                    _ => b"~",
                };
                [prefix, &k.pattern].concat()
            })
            .collect();
        words.join(&b' ')
    }

    fn describe_channels(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let words: Vec<Vec<u8>> = self.channels.iter().map(|c| [b"&", c.as_slice()].concat()).collect();
        words.join(&b' ')
    }

    /// The command rules as ACL LIST prints them: +@all or -@all, the categories that fit best,
    /// then single commands (Redis's ACLDescribeSelectorCommandRules).
    fn describe_commands(&self) -> Vec<u8> {
        let c = catalog();
        let additive = !self.future_commands;
        let mut rules = if additive { b"-@all ".to_vec() } else { b"+@all ".to_vec() };
        let mut fake = Selector::new(false);
        fake.set_all(!additive);
        let mut temp = self.clone();
        let mut applied = vec![false; cat::NAMES.len()];
        loop {
            let mut best = None;
            let (mut min_diff, mut max_same) = (u64::MAX, 0u64);
            for (j, &(bit, _)) in cat::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0u64, 0u64);
                for (id, e) in c.entries.iter().enumerate() {
                    if e.categories & bit != 0 && e.in_7_0 {
                        if temp.bit(id) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            let (bit, name) = cat::NAMES[j];
            fake.set_category(bit, additive);
            temp.set_category(bit, !additive);
            rules.extend_from_slice(if additive { b"+@" } else { b"-@" });
            rules.extend_from_slice(name.as_bytes());
            rules.push(b' ');
            applied[j] = true;
        }
        for &id in &c.top {
            let user = self.bit(id);
            if user != fake.bit(id) {
                rules.push(if user { b'+' } else { b'-' });
                rules.extend_from_slice(c.entries[id].full.as_bytes());
                rules.push(b' ');
                fake.change_perm(id, user);
            }
            for &sub in &c.entries[id].subs {
                let user = self.bit(sub);
                if user != fake.bit(sub) {
                    rules.push(if user { b'+' } else { b'-' });
                    rules.extend_from_slice(c.entries[sub].full.as_bytes());
                    rules.push(b' ');
                    fake.set_bit(sub, user);
                }
            }
            if !user {
                for arg in self.first_args.get(&id).into_iter().flatten() {
                    rules.push(b'+');
                    rules.extend_from_slice(c.entries[id].full.as_bytes());
                    rules.push(b'|');
                    rules.extend_from_slice(arg);
                    rules.push(b' ');
                }
            }
        }
        rules.pop();
        rules
    }

    /// Keys, channels and commands, as one selector appears in ACL LIST.
    fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            out.extend_from_slice(&keys);
            out.push(b' ');
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            let channels = self.describe_channels();
            if !channels.is_empty() {
                out.extend_from_slice(&channels);
                out.push(b' ');
            }
        }
        out.extend_from_slice(&self.describe_commands());
        out
    }
}

/// Channel arguments of the commands that publish or subscribe: (position, is a pattern).
fn channel_args(full: &str, argv: &[Bytes]) -> Vec<(usize, bool)> {
    match full {
        "publish" | "spublish" => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// Why a rule was refused (Redis's ACLSetUserStringError texts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RuleError {
    Syntax,
    Unknown,
    AfterAllKeys,
    AfterAllChannels,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::AfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any \
                 effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::AfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have \
                 any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
        }
    }
}

/// A user: on/off, passwords (SHA-256, hex), and selectors (the root one first).
#[derive(Debug, Clone)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    /// `Some(true)`: skip-sanitize-payload; `Some(false)`: sanitize-payload.
    sanitize: Option<bool>,
    pub passwords: Vec<String>,
    root: Selector,
    selectors: Vec<Selector>,
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(data);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

impl User {
    /// A user as ACL SETUSER creates it: off, no passwords, nothing allowed.
    pub fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::new(pubsub_all),
            selectors: Vec::new(),
        }
    }

    /// The default user of a fresh server: on, nopass, everything.
    pub fn default_user() -> User {
        let mut u = User::new(b"default", true);
        u.enabled = true;
        u.nopass = true;
        u.root.set_all(true);
        u.root.all_keys = true;
        u
    }

    /// Whether this user may run anything at all without a check (the fast path).
    /// The skip-sanitize-payload flag: RESTORE under sanitize-dump-payload clients skips deep checks.
    pub fn skips_sanitize_payload(&self) -> bool {
        self.sanitize == Some(true)
    }

    pub fn unrestricted(&self) -> bool {
        self.root.all_commands && self.root.all_keys && self.root.all_channels
    }

    pub fn password_ok(&self, password: &[u8]) -> bool {
        self.enabled && (self.nopass || self.passwords.contains(&sha256_hex(password)))
    }

    /// Applies one rule (a selector in parentheses included).
    pub fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        if op[0] == b'(' && op.last() == Some(&b')') {
            let mut selector = Selector::new(pubsub_all);
            for rule in op[1..op.len() - 1].split(|&b| b == b' ').filter(|r| !r.is_empty()) {
                selector.apply(rule)?;
            }
            self.selectors.push(selector);
            return Ok(());
        }
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => self.sanitize = Some(true),
            b"sanitize-payload" => self.sanitize = Some(false),
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                self.nopass = false;
                self.passwords.clear();
                self.root = Selector::new(pubsub_all);
                self.enabled = false;
                self.sanitize = Some(false);
                self.selectors.clear();
            }
            _ => match op[0] {
                b'>' => {
                    let hash = sha256_hex(&op[1..]);
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                b'#' => {
                    if !valid_hash(&op[1..]) {
                        return Err(RuleError::BadHash);
                    }
                    let hash = String::from_utf8_lossy(&op[1..]).into_owned();
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let hash = if op[0] == b'<' {
                        sha256_hex(&op[1..])
                    } else {
                        if !valid_hash(&op[1..]) {
                            return Err(RuleError::BadHash);
                        }
                        String::from_utf8_lossy(&op[1..]).into_owned()
                    };
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != hash);
                    if self.passwords.len() == before {
                        return Err(RuleError::NoSuchPassword);
                    }
                }
                _ => self.root.apply(op)?,
            },
        }
        Ok(())
    }

    /// Checks a command against every selector: Ok when one allows it, otherwise the most
    /// relevant refusal (Redis ranks channel > auth > key > command, then the later argument).
    pub fn check<H>(&self, spec: &'static CommandSpec<H>, full: &str, argv: &[Bytes]) -> Result<(), Refusal> {
        let Some(id) = command_id(spec) else { return Ok(()) };
        let mut worst: Option<Refusal> = None;
        for s in std::iter::once(&self.root).chain(&self.selectors) {
            match s.check(id, spec, full, argv) {
                Ok(()) => return Ok(()),
                Err(r) => {
                    if worst.is_none_or(|w| r.reason > w.reason || (r.reason == w.reason && r.pos > w.pos)) {
                        worst = Some(r);
                    }
                }
            }
        }
        Err(worst.unwrap_or(Refusal { reason: Denied::Command, pos: 0 }))
    }

    /// Whether a selector that allows this command may read every key (Redis's
    /// ACLUserCheckCmdWithUnrestrictedKeyAccess, asked by SORT before BY and GET).
    pub fn reads_any_key<H>(&self, spec: &'static CommandSpec<H>, full: &str, argv: &[Bytes]) -> bool {
        let Some(id) = command_id(spec) else { return true };
        std::iter::once(&self.root).chain(&self.selectors).any(|s| {
            s.check(id, spec, full, argv).is_ok()
                && (s.all_keys || s.keys.iter().any(|k| k.access & READ != 0 && k.pattern == b"*"))
        })
    }

    /// Whether the user may stay subscribed to `channel` (a pattern subscription when
    /// `is_pattern`).
    pub fn may_subscribe(&self, channel: &[u8], is_pattern: bool) -> bool {
        std::iter::once(&self.root).chain(&self.selectors).any(|s| s.check_channel(channel, is_pattern))
    }

    fn flag_names(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize {
            Some(true) => flags.push("skip-sanitize-payload"),
            Some(false) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// The rules that rebuild this user, as ACL LIST and ACL SAVE write them (without `user name`).
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.flag_names() {
            out.extend_from_slice(f.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&self.root.describe());
        for s in &self.selectors {
            out.extend_from_slice(b" (");
            out.extend_from_slice(&s.describe());
            out.push(b')');
        }
        out
    }

    /// `user <name> <rules>`, as ACL LIST, ACL SAVE and CONFIG REWRITE write it.
    pub fn line(&self) -> Vec<u8> {
        let mut line = b"user ".to_vec();
        line.extend_from_slice(&self.name);
        line.push(b' ');
        line.extend_from_slice(&self.describe());
        line
    }

    /// ACL GETUSER's fields.
    pub fn getuser_reply(&self) -> crate::resp::Reply {
        use crate::resp::Reply;
        let field = |k: &str, v: Reply| (Reply::bulk(k), v);
        let selector_fields = |s: &Selector| {
            vec![
                field("commands", Reply::Bulk(s.describe_commands())),
                field("keys", Reply::Bulk(s.describe_keys())),
                field("channels", Reply::Bulk(s.describe_channels())),
            ]
        };
        let mut m = vec![
            field("flags", Reply::Set(self.flag_names().into_iter().map(Reply::bulk).collect())),
            field("passwords", Reply::Array(self.passwords.iter().map(|p| Reply::bulk(p.as_str())).collect())),
        ];
        m.extend(selector_fields(&self.root));
        m.push(field(
            "selectors",
            Reply::Array(self.selectors.iter().map(|s| Reply::Map(selector_fields(s))).collect()),
        ));
        Reply::Map(m)
    }
}

/// Splits SETUSER's arguments into rules, joining a selector written over several arguments
/// (`(~a*` `+get)`); Err names the argument whose parenthesis is never closed.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    let mut first_of_open = Vec::new();
    for &a in args {
        if let Some(buf) = open.as_mut() {
            buf.push(b' ');
            buf.extend_from_slice(a);
            if a.last() == Some(&b')') {
                out.push(open.take().unwrap_or_default());
            }
        } else if a.first() == Some(&b'(') && a.last() != Some(&b')') {
            open = Some(a.to_vec());
            first_of_open = a.to_vec();
        } else {
            out.push(a.to_vec());
        }
    }
    match open {
        Some(_) => Err(first_of_open),
        None => Ok(out),
    }
}

/// One ACL LOG entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Denied,
    pub context: &'static str,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    pub created_ms: i64,
    pub client_info: String,
}

/// Entries of the same kind within this time are counted in one (Redis's grouping).
const LOG_GROUPING_MS: i64 = 60_000;

/// The server's users and ACL LOG.
#[derive(Debug)]
pub struct Acl {
    pub users: BTreeMap<Vec<u8>, User>,
    pub log: VecDeque<LogEntry>,
    /// The default user allows everything: commands of its clients skip the check.
    pub default_unrestricted: bool,
}

impl Default for Acl {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), User::default_user());
        Acl { users, log: VecDeque::new(), default_unrestricted: true }
    }
}

impl Acl {
    pub fn default_user(&self) -> &User {
        &self.users[&b"default"[..]]
    }

    /// Whether a new connection starts authenticated (the default user is on and needs no password).
    pub fn new_connections_authenticated(&self) -> bool {
        let d = self.default_user();
        d.enabled && d.nopass
    }

    /// Call after any change to the users.
    pub fn refresh(&mut self) {
        self.default_unrestricted = self.default_user().unrestricted() && self.default_user().selectors.is_empty();
    }

    /// requirepass: the default user's only password (none: nopass), as Redis's
    /// ACLUpdateDefaultUserPassword.
    pub fn set_default_password(&mut self, password: Option<&[u8]>) {
        if let Some(d) = self.users.get_mut(&b"default"[..]) {
            d.passwords.clear();
            match password {
                Some(p) if !p.is_empty() => {
                    d.nopass = false;
                    d.passwords.push(sha256_hex(p));
                }
                _ => d.nopass = true,
            }
        }
        self.refresh();
    }

    /// Records a refusal, counting it into a recent entry of the same kind.
    #[allow(clippy::too_many_arguments)]
    pub fn log(
        &mut self,
        reason: Denied,
        context: &'static str,
        object: &[u8],
        username: &[u8],
        client_info: String,
        now_ms: i64,
        max_len: usize,
    ) {
        let same = self.log.iter().position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now_ms - e.created_ms < LOG_GROUPING_MS
        });
        if let Some(i) = same {
            let mut e = self.log.remove(i).unwrap_or_else(|| unreachable!());
            e.count += 1;
            e.created_ms = now_ms;
            e.client_info = client_info;
            self.log.push_front(e);
        } else {
            self.log.push_front(LogEntry {
                count: 1,
                reason,
                context,
                object: object.to_vec(),
                username: username.to_vec(),
                created_ms: now_ms,
                client_info,
            });
        }
        self.log.truncate(max_len);
    }
}

impl LogEntry {
    pub fn reply(&self, now_ms: i64) -> crate::resp::Reply {
        use crate::resp::Reply;
        let field = |k: &str, v: Reply| (Reply::bulk(k), v);
        Reply::Map(vec![
            field("count", Reply::Int(self.count as i64)),
            field("reason", Reply::bulk(self.reason.log_reason())),
            field("context", Reply::bulk(self.context)),
            field("object", Reply::Bulk(self.object.clone())),
            field("username", Reply::Bulk(self.username.clone())),
            field("age-seconds", Reply::Double((now_ms - self.created_ms).max(0) as f64 / 1000.0)),
            field("client-info", Reply::Bulk(self.client_info.clone().into_bytes())),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new(b"u", false);
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u
    }

    #[test]
    fn describes_like_redis() {
        crate::commands::install();
        assert_eq!(User::default_user().describe(), b"on nopass ~* &* +@all");
        assert_eq!(User::new(b"alice", false).describe(), b"off resetchannels -@all");
        assert_eq!(user(&["+@all", "-debug", "~*"]).describe(), b"off ~* resetchannels +@all -debug");
        let bob = user(&["on", "~k*", "%R~r*", "&ch*", "+get", "+set", "-get", "+@hash", "+config|get"]);
        assert_eq!(bob.describe(), b"on ~k* %R~r* resetchannels &ch* -@all +@hash +set +config|get");
    }

    #[test]
    fn sha256_matches_redis() {
        crate::commands::install();
        assert_eq!(sha256_hex(b"pw"), "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4");
    }
}
