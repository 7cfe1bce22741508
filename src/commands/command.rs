//! The COMMAND family: COMMAND, COUNT, INFO, DOCS, LIST, GETKEYS, GETKEYSANDFLAGS, HELP. Every
//! reply is derived from the one command table (`super::all()`) plus the facts in `docs.rs`
//! (tips, key specs, argument structures), so a family's commands show up here the moment they
//! are registered, and only then.
//!
//! Key extraction for GETKEYS follows Redis 7.0: key specs first (when their flags are reliable),
//! then a per-command hook for commands whose keys move with their arguments (`movable_keys`),
//! then the table's (first, last, step) range for commands without key specs.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;

use super::docs::{self, ksflags, BeginSearch, Doc, FindKeys};
use super::flags::*;
use super::{acl, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::resp::Reply;
use crate::spec::getkeys::{extract_keys, movable_keys};

const CMD_FLAGS: u32 = LOADING | STALE;

static SUBCOMMANDS: &[CommandSpec] = &[
    super::spec("count", 2, CMD_FLAGS, NO_KEYS, acl::CONNECTION, count),
    super::spec("docs", -2, CMD_FLAGS, NO_KEYS, acl::CONNECTION, docs),
    super::spec("getkeys", -4, CMD_FLAGS, NO_KEYS, acl::CONNECTION, getkeys),
    super::spec("getkeysandflags", -4, CMD_FLAGS, NO_KEYS, acl::CONNECTION, getkeysandflags),
    super::spec("help", 2, CMD_FLAGS, NO_KEYS, acl::CONNECTION, help),
    super::spec("info", -2, CMD_FLAGS, NO_KEYS, acl::CONNECTION, info),
    super::spec("list", -2, CMD_FLAGS, NO_KEYS, acl::CONNECTION, list),
];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "command",
    arity: -1,
    flags: CMD_FLAGS,
    keys: NO_KEYS,
    acl: acl::CONNECTION,
    handler: command,
    subcommands: SUBCOMMANDS,
}];

/// COMMAND
///
/// Describes every command of the server, as COMMAND INFO does for each (the container itself is
/// run only without a subcommand).
pub fn command(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let proto = ctx.proto();
    Ok(Reply::Array(super::all().map(|c| cached_info(c, None, proto)).collect()))
}

/// COMMAND COUNT
///
/// The number of top-level commands (subcommands are not counted).
pub fn count(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(super::all().count() as i64))
}

/// COMMAND INFO [command-name ...]
///
/// Describes the named commands (full names such as `config|get` reach subcommands), a null for
/// each unknown name; without names, every command.
pub fn info(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() == 2 {
        return command(ctx, args);
    }
    let proto = ctx.proto();
    let replies = args
        .from(2)
        .map(|name| match lookup_full(name) {
            Some((spec, parent)) => cached_info(spec, parent, proto),
            None => Reply::Nil,
        })
        .collect();
    Ok(Reply::Array(replies))
}

/// COMMAND DOCS [command-name ...]
///
/// A map from full command name to its documentation (summary, since, group, complexity,
/// history, argument structure, subcommands). Unknown names are left out; without names, every
/// command.
pub fn docs(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let proto = ctx.proto();
    let pairs = if args.len() == 2 {
        super::all().map(|c| cached_docs(c, None, proto)).collect()
    } else {
        args.from(2).filter_map(lookup_full).map(|(spec, parent)| cached_docs(spec, parent, proto)).collect()
    };
    Ok(Reply::Map(pairs))
}

/// COMMAND LIST [FILTERBY MODULE module-name | ACLCAT category | PATTERN pattern]
///
/// The full names of all commands and subcommands, optionally only those of a module (none
/// here), of an ACL category, or matching a glob pattern (case-insensitive).
pub fn list(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    enum Filter<'a> {
        All,
        Nothing,
        Category(u64),
        Pattern(&'a [u8]),
    }
    let filter = match args.len() {
        2 => Filter::All,
        5 if args.is(2, "filterby") => {
            let value = args.get(4);
            if args.is(3, "module") {
                Filter::Nothing
            } else if args.is(3, "aclcat") {
                acl::NAMES
                    .iter()
                    .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(value))
                    .map_or(Filter::Nothing, |&(bit, _)| Filter::Category(bit))
            } else if args.is(3, "pattern") {
                Filter::Pattern(value)
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let keep = |spec: &CommandSpec, full: &str| match filter {
        Filter::All => true,
        Filter::Nothing => false,
        Filter::Category(bit) => spec.acl_categories() & bit != 0,
        Filter::Pattern(p) => crate::glob::glob_match(p, full.as_bytes(), true),
    };
    let mut out = Vec::new();
    for cmd in super::all() {
        if keep(cmd, cmd.name) {
            out.push(Reply::bulk(cmd.name));
        }
        for sub in cmd.subcommands {
            let full = format!("{}|{}", cmd.name, sub.name);
            if keep(sub, &full) {
                out.push(Reply::bulk(full));
            }
        }
    }
    Ok(Reply::Array(out))
}

/// COMMAND GETKEYS command [arg ...]
///
/// The key arguments of a full command line, as the server would extract them.
pub fn getkeys(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    getkeys_impl(args, false)
}

/// COMMAND GETKEYSANDFLAGS command [arg ...]
///
/// Like GETKEYS, each key paired with its access flags (`RO`, `RW`, `OW`, `RM`, `access`, ...).
pub fn getkeysandflags(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    getkeys_impl(args, true)
}

/// COMMAND HELP
///
/// Lists the subcommands, one status line each.
pub fn help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    const LINES: &[&str] = &[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Describe every command of the server.",
        "COUNT",
        "    Number of commands this server has.",
        "LIST",
        "    Names of all commands and subcommands of this server.",
        "INFO [<command-name> ...]",
        "    Describe the named commands.",
        "    Without names, every command is described",
        "    (full names such as config|get reach subcommands).",
        "DOCS [<command-name> ...]",
        "    Documentation of the named commands.",
        "    Without names, every command is documented",
        "    (full names such as config|get reach subcommands).",
        "GETKEYS <full-command>",
        "    Extract the key names from a complete command line.",
        "GETKEYSANDFLAGS <full-command>",
        "    Extract the key names and their access flags from a complete command line.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(LINES.iter().map(|l| Reply::Status(l)).collect()))
}

/// The table and the docs never change while the server runs, so each entry is encoded once per
/// protocol on first use and copied from then on (redis-cli asks for all the docs on connect).
fn cached(kind: u8, spec: &'static CommandSpec, proto: u8, build: impl FnOnce() -> Reply) -> Reply {
    /// (INFO or DOCS, spec address, protocol) -> encoded entry.
    type Cache = HashMap<(u8, usize, u8), Vec<u8>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let key = (kind, spec as *const CommandSpec as usize, proto);
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let bytes = cache.entry(key).or_insert_with(|| {
        let mut out = Vec::new();
        crate::resp::writer::write_reply(&mut out, &build(), proto);
        out
    });
    Reply::Raw(bytes.clone())
}

fn cached_info(spec: &'static CommandSpec, parent: Option<&'static CommandSpec>, proto: u8) -> Reply {
    cached(0, spec, proto, || info_reply(spec, parent))
}

fn cached_docs(spec: &'static CommandSpec, parent: Option<&'static CommandSpec>, proto: u8) -> (Reply, Reply) {
    (Reply::bulk(full_name(spec, parent)), cached(1, spec, proto, || doc_map(spec, parent)))
}

/// Resolves `name` or `container|sub` (case-insensitive) to (spec, parent).
fn lookup_full(name: &[u8]) -> Option<(&'static CommandSpec, Option<&'static CommandSpec>)> {
    let mut parts = name.split(|&c| c == b'|');
    let base = super::lookup(parts.next()?)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some((base, None)),
        (Some(sub), None) if base.is_container() => Some((base.subcommand(sub)?, Some(base))),
        _ => None,
    }
}

fn full_name(spec: &'static CommandSpec, parent: Option<&'static CommandSpec>) -> String {
    match parent {
        Some(p) => format!("{}|{}", p.name, spec.name),
        None => spec.name.to_string(),
    }
}

/// One COMMAND INFO entry: name, arity, flags, first/last/step, categories, tips, key specs,
/// subcommands.
fn info_reply(spec: &'static CommandSpec, parent: Option<&'static CommandSpec>) -> Reply {
    let full = full_name(spec, parent);
    let doc = docs::find(&full);
    let flags = NAMES.iter().filter(|(bit, _)| spec.flags & bit != 0).map(|&(_, n)| Reply::Status(n)).collect();
    let cats = spec.acl_categories();
    let cats = acl::NAMES
        .iter()
        .filter(|(bit, _)| cats & bit != 0)
        .map(|(_, n)| Reply::StatusOwned(format!("@{n}")))
        .collect();
    let tips = doc.map_or(Reply::Set(Vec::new()), tips_reply);
    let key_specs = doc.map_or(Reply::Set(Vec::new()), key_specs_reply);
    // Redis answers an empty set for "no subcommands" but an array when there are some.
    let subs = if spec.subcommands.is_empty() {
        Reply::Set(Vec::new())
    } else {
        Reply::Array(spec.subcommands.iter().map(|s| info_reply(s, Some(spec))).collect())
    };
    Reply::Array(vec![
        Reply::bulk(full),
        Reply::Int(spec.arity as i64),
        Reply::Set(flags),
        Reply::Int(spec.keys.first as i64),
        Reply::Int(spec.keys.last as i64),
        Reply::Int(spec.keys.step as i64),
        Reply::Set(cats),
        tips,
        key_specs,
        subs,
    ])
}

/// COMMAND INFO's tips element for a command's docs.
pub fn tips_reply(d: &Doc) -> Reply {
    Reply::Set(d.tips.iter().map(|t| Reply::bulk(*t)).collect())
}

/// COMMAND INFO's key specs element for a command's docs.
pub fn key_specs_reply(d: &Doc) -> Reply {
    Reply::Set(d.key_specs.iter().map(key_spec_reply).collect())
}

/// COMMAND DOCS's map for one command, subcommands aside.
pub fn doc_reply(d: &Doc) -> Reply {
    let mut m = Vec::new();
    doc_fields(d, &mut m);
    Reply::Map(m)
}

fn field(name: &'static str, value: Reply) -> (Reply, Reply) {
    (Reply::bulk(name), value)
}

fn key_flag_names(flags: u16) -> Reply {
    Reply::Set(ksflags::NAMES.iter().filter(|(bit, _)| flags & bit != 0).map(|&(_, n)| Reply::Status(n)).collect())
}

fn key_spec_reply(ks: &docs::KeySpec) -> Reply {
    let mut m = Vec::with_capacity(4);
    if !ks.notes.is_empty() {
        m.push(field("notes", Reply::bulk(ks.notes)));
    }
    m.push(field("flags", key_flag_names(ks.flags)));
    let (kind, spec) = match ks.begin {
        BeginSearch::Index(i) => ("index", vec![field("index", Reply::Int(i as i64))]),
        BeginSearch::Keyword(word, from) => {
            ("keyword", vec![field("keyword", Reply::bulk(word)), field("startfrom", Reply::Int(from as i64))])
        }
        BeginSearch::Unknown => ("unknown", Vec::new()),
    };
    m.push(field("begin_search", Reply::Map(vec![field("type", Reply::bulk(kind)), field("spec", Reply::Map(spec))])));
    let (kind, spec) = match ks.find {
        FindKeys::Range(last, step, limit) => (
            "range",
            vec![
                field("lastkey", Reply::Int(last as i64)),
                field("keystep", Reply::Int(step as i64)),
                field("limit", Reply::Int(limit as i64)),
            ],
        ),
        FindKeys::Keynum(idx, first, step) => (
            "keynum",
            vec![
                field("keynumidx", Reply::Int(idx as i64)),
                field("firstkey", Reply::Int(first as i64)),
                field("keystep", Reply::Int(step as i64)),
            ],
        ),
        FindKeys::Unknown => ("unknown", Vec::new()),
    };
    m.push(field("find_keys", Reply::Map(vec![field("type", Reply::bulk(kind)), field("spec", Reply::Map(spec))])));
    Reply::Map(m)
}

/// The documentation map of one command for COMMAND DOCS (subcommands nested for containers).
fn doc_map(spec: &'static CommandSpec, parent: Option<&'static CommandSpec>) -> Reply {
    let mut m = Vec::new();
    if let Some(d) = docs::find(&full_name(spec, parent)) {
        doc_fields(d, &mut m);
    }
    if spec.is_container() {
        let subs = spec.subcommands.iter().map(|s| (Reply::bulk(full_name(s, Some(spec))), doc_map(s, Some(spec))));
        m.push(field("subcommands", Reply::Map(subs.collect())));
    }
    Reply::Map(m)
}

fn doc_fields(d: &Doc, m: &mut Vec<(Reply, Reply)>) {
    m.push(field("summary", Reply::bulk(d.summary)));
    m.push(field("since", Reply::bulk(d.since)));
    m.push(field("group", Reply::bulk(d.group)));
    if !d.complexity.is_empty() {
        m.push(field("complexity", Reply::bulk(d.complexity)));
    }
    if d.doc_flags != 0 {
        let names = docs::DOC_FLAG_NAMES.iter().filter(|(bit, _)| d.doc_flags & bit != 0);
        m.push(field("doc_flags", Reply::Set(names.map(|&(_, n)| Reply::Status(n)).collect())));
    }
    if !d.deprecated_since.is_empty() {
        m.push(field("deprecated_since", Reply::bulk(d.deprecated_since)));
    }
    if !d.replaced_by.is_empty() {
        m.push(field("replaced_by", Reply::bulk(d.replaced_by)));
    }
    if !d.history.is_empty() {
        let entries = d.history.iter().map(|(v, t)| Reply::Array(vec![Reply::bulk(*v), Reply::bulk(*t)]));
        m.push(field("history", Reply::Set(entries.collect())));
    }
    if !d.args.is_empty() {
        m.push(field("arguments", args_reply(d.args)));
    }
}

fn args_reply(args: &[docs::Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut m = vec![field("name", Reply::bulk(a.name)), field("type", Reply::bulk(a.kind.name()))];
                if a.key_spec >= 0 {
                    m.push(field("key_spec_index", Reply::Int(a.key_spec as i64)));
                }
                if let Some(token) = a.token {
                    m.push(field("token", Reply::bulk(token)));
                }
                if !a.since.is_empty() {
                    m.push(field("since", Reply::bulk(a.since)));
                }
                if !a.deprecated_since.is_empty() {
                    m.push(field("deprecated_since", Reply::bulk(a.deprecated_since)));
                }
                if a.flags != 0 {
                    let names = docs::ARG_FLAG_NAMES.iter().filter(|(bit, _)| a.flags & bit != 0);
                    m.push(field("flags", Reply::Set(names.map(|&(_, n)| Reply::Status(n)).collect())));
                }
                if !a.args.is_empty() {
                    m.push(field("arguments", args_reply(a.args)));
                }
                Reply::Map(m)
            })
            .collect(),
    )
}

/// Resolves a full command line to its spec the way command dispatch does.
fn lookup_argv(argv: &[Bytes]) -> Option<(&'static CommandSpec, Option<&'static CommandSpec>)> {
    let base = super::lookup(argv.first()?)?;
    if base.is_container() && argv.len() >= 2 {
        return Some((base.subcommand(&argv[1])?, Some(base)));
    }
    Some((base, None))
}

fn getkeys_impl(args: &Args, with_flags: bool) -> CmdResult {
    let argv = &args.argv[2..];
    let Some((spec, parent)) = lookup_argv(argv) else {
        return Err(CmdError::err("Invalid command specified"));
    };
    let full = full_name(spec, parent);
    let doc = docs::find(&full);
    let has_keys = match doc {
        Some(d) if !d.key_specs.is_empty() => d.key_specs.iter().any(|k| k.flags & ksflags::NOT_KEY == 0),
        _ => spec.keys.first > 0 || spec.has_flag(MOVABLEKEYS) || movable_keys(&full).is_some(),
    };
    if !has_keys {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !spec.arity_ok(argv.len()) {
        return Err(CmdError::err("Invalid number of arguments specified for command"));
    }
    let keys = extract_keys(spec, doc, &full, argv);
    if keys.is_empty() {
        if spec.has_flag(NO_MANDATORY_KEYS) {
            return Ok(Reply::Array(Vec::new()));
        }
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    let out = keys
        .into_iter()
        .map(|(pos, flags)| {
            let key = Reply::bulk(&argv[pos][..]);
            if with_flags {
                Reply::Array(vec![key, key_flag_names(flags)])
            } else {
                key
            }
        })
        .collect();
    Ok(Reply::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::getkeys::{keys_from_specs, set_keys, KeyRef};

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn full_names_resolve_case_insensitively() {
        crate::commands::install();
        let (spec, parent) = lookup_full(b"COMMAND|Info").expect("command|info");
        assert_eq!((spec.name, parent.map(|p| p.name)), ("info", Some("command")));
        assert!(lookup_full(b"command|nosuch").is_none());
        assert!(lookup_full(b"command|info|x").is_none());
    }

    #[test]
    fn set_flags_depend_on_get() {
        crate::commands::install();
        assert_eq!(set_keys(&argv(&["set", "k", "v"])), vec![(1, ksflags::OW | ksflags::UPDATE)]);
        let rw = ksflags::RW | ksflags::ACCESS | ksflags::UPDATE;
        assert_eq!(set_keys(&argv(&["set", "k", "v", "GET"])), vec![(1, rw)]);
    }

    #[test]
    fn keynum_and_keyword_specs() {
        crate::commands::install();
        use docs::ksflags::*;
        static ZS: &[docs::KeySpec] = &[
            docs::KeySpec { notes: "", flags: OW, begin: BeginSearch::Index(1), find: FindKeys::Range(0, 1, 0) },
            docs::KeySpec { notes: "", flags: RO, begin: BeginSearch::Index(2), find: FindKeys::Keynum(0, 1, 1) },
        ];
        let doc = Doc { key_specs: ZS, ..*docs::find("get").unwrap_or(&EMPTY) };
        let keys = keys_from_specs(&doc, -4, &argv(&["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"]));
        assert_eq!(keys, Some(vec![(1, OW), (3, RO), (4, RO)]));
        assert_eq!(keys_from_specs(&doc, -4, &argv(&["zunionstore", "d", "0", "a"])), None);
        assert_eq!(keys_from_specs(&doc, -4, &argv(&["zunionstore", "d", "x", "a"])), None);

        static XR: &[docs::KeySpec] = &[docs::KeySpec {
            notes: "",
            flags: RO,
            begin: BeginSearch::Keyword("STREAMS", 1),
            find: FindKeys::Range(-1, 1, 2),
        }];
        let doc = Doc { key_specs: XR, ..*docs::find("get").unwrap_or(&EMPTY) };
        let keys = keys_from_specs(&doc, -4, &argv(&["xread", "COUNT", "2", "streams", "a", "b", "0", "0"]));
        assert_eq!(keys, Some(vec![(4, RO), (5, RO)]));
    }

    /// Expected values are what redis-server 7.0.15 answers to COMMAND GETKEYSANDFLAGS.
    #[test]
    fn key_specs_of_real_commands() {
        crate::commands::install();
        use docs::ksflags::*;
        type Case = (&'static str, i32, &'static str, Option<&'static [KeyRef]>);
        let cases: &[Case] = &[
            ("georadius", -6, "georadius g 1 2 3 m store d", Some(&[(1, RO | ACCESS), (7, OW | UPDATE)])),
            (
                "georadius",
                -6,
                "georadius g 1 2 3 m store d storedist e",
                Some(&[(1, RO | ACCESS), (7, OW | UPDATE), (9, OW | UPDATE)]),
            ),
            ("georadius", -6, "georadius g 1 2 3 m withdist store", Some(&[(1, RO | ACCESS)])),
            ("xread", -4, "xread count 2 streams a b 0 0", Some(&[(4, RO | ACCESS), (5, RO | ACCESS)])),
            ("xreadgroup", -7, "xreadgroup group g c streams a 0", Some(&[(5, RO | ACCESS)])),
            (
                "zunionstore",
                -4,
                "zunionstore d 2 a b weights 1 2",
                Some(&[(1, OW | UPDATE), (3, RO | ACCESS), (4, RO | ACCESS)]),
            ),
            ("zinterstore", -4, "zinterstore d 3 a b", None),
            ("mset", -3, "mset a 1 b 2", Some(&[(1, OW | UPDATE), (3, OW | UPDATE)])),
            ("lmpop", -4, "lmpop 2 a b left", Some(&[(2, RW | ACCESS | DELETE), (3, RW | ACCESS | DELETE)])),
            ("eval", -3, "eval x 2 a b c", Some(&[(3, RW | ACCESS | UPDATE), (4, RW | ACCESS | UPDATE)])),
            ("blpop", -3, "blpop a b 0", Some(&[(1, RW | ACCESS | DELETE), (2, RW | ACCESS | DELETE)])),
        ];
        for &(name, arity, line, expected) in cases {
            let doc = docs::find(name).expect(name);
            let words: Vec<&str> = line.split(' ').collect();
            let got = keys_from_specs(doc, arity, &argv(&words));
            assert_eq!(got.as_deref(), expected, "{line}");
        }
    }

    /// Expected values are redis-server 7.0.15's COMMAND GETKEYSANDFLAGS answers.
    #[test]
    fn movable_key_commands() {
        crate::commands::install();
        use docs::ksflags::*;
        type Case = (&'static str, &'static [KeyRef]);
        const RWU: u16 = RW | ACCESS | UPDATE;
        const MIG: u16 = RW | ACCESS | DELETE;
        let cases: &[Case] = &[
            ("bitfield k", &[(1, RO | ACCESS)]),
            ("bitfield k get u8 0 overflow sat", &[(1, RO | ACCESS)]),
            ("bitfield k incrby u8 0 1", &[(1, RWU)]),
            ("bitfield k foo", &[(1, RWU)]),
            ("bitfield k get u8", &[(1, RWU)]),
            ("bitfield k overflow", &[(1, RWU)]),
            ("bitfield k get u8 0 set", &[(1, RWU)]),
            ("sort a store b", &[(1, RO | ACCESS), (3, OW | UPDATE)]),
            ("sort a by store store b", &[(1, RO | ACCESS), (5, OW | UPDATE)]),
            ("sort a limit 0 1 store b", &[(1, RO | ACCESS), (6, OW | UPDATE)]),
            ("sort a store b store c", &[(1, RO | ACCESS), (5, OW | UPDATE)]),
            ("sort a get store", &[(1, RO | ACCESS)]),
            ("sort a store", &[(1, RO | ACCESS)]),
            ("sort a limit 0 store b", &[(1, RO | ACCESS)]),
            ("sort_ro a by x", &[(1, RO | ACCESS)]),
            ("migrate h p k 0 0 keys a", &[]),
            ("migrate h p  0 0 keys a b", &[(7, MIG), (8, MIG)]),
            ("migrate h p  0 0 auth keys keys a", &[(9, MIG)]),
            ("migrate h p  0 0 auth2 u keys keys a", &[(10, MIG)]),
            ("migrate h p  0 0 auth2 keys keys keys a", &[(10, MIG)]),
            ("migrate h p  0 0 copy replace keys a", &[(9, MIG)]),
            ("migrate h p  0 0", &[(3, MIG)]),
            ("migrate h p  0 0 keys", &[(3, MIG)]),
            ("migrate h p  0 0 auth keys", &[(3, MIG)]),
        ];
        for &(line, expected) in cases {
            let words: Vec<&str> = line.split(' ').collect();
            let name = words[0];
            let doc = docs::find(name).expect(name);
            let fake = super::super::CommandSpec {
                name: "",
                arity: -3,
                flags: 0,
                keys: NO_KEYS,
                acl: 0,
                handler: super::count,
                subcommands: &[],
            };
            assert_eq!(extract_keys(&fake, Some(doc), name, &argv(&words)), expected, "{line}");
        }
    }

    static EMPTY: Doc = Doc {
        name: "",
        group: "",
        since: "",
        summary: "",
        complexity: "",
        doc_flags: 0,
        deprecated_since: "",
        replaced_by: "",
        history: &[],
        tips: &[],
        key_specs: &[],
        args: &[],
    };
}
