//! The command table as dispatch sees it: the handler type, the rows every family exports
//! (installed here once at startup by `commands::install`), lookup by name under
//! `rename-command`, and the container rows (CONFIG, CLIENT, ...) whose work is done by their
//! subcommands.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::ctx::Ctx;
use crate::spec::{Args, CmdError, CmdResult, NO_KEYS};

/// What every command's row points at: synchronous, no I/O, a reply or an error.
pub type Handler = fn(&mut Ctx, &Args) -> CmdResult;

/// One row of the command table, with the executor's handler type.
pub type CommandSpec = crate::spec::CommandSpec<Handler>;

/// A container command whose work is done by its subcommands.
pub const fn container(name: &'static str, arity: i32, acl: u64, subcommands: &'static [CommandSpec]) -> CommandSpec {
    CommandSpec { name, arity, flags: 0, keys: NO_KEYS, acl, handler: container_without_subcommand, subcommands }
}

fn container_without_subcommand(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    Err(CmdError::WrongArity(String::from_utf8_lossy(args.get(0)).to_lowercase()))
}

struct Registry {
    families: &'static [&'static [CommandSpec]],
    by_name: HashMap<Vec<u8>, &'static CommandSpec, foldhash::fast::FixedState>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// Installs the command table (every family's rows, from `commands`), once, before any lookup:
/// the executor dispatches through it without depending on the handlers' module. ACL numbers
/// the commands for its bitmaps from the same table.
pub fn install(families: &'static [&'static [CommandSpec]]) {
    REGISTRY.get_or_init(|| {
        let mut by_name = HashMap::with_hasher(foldhash::fast::FixedState::default());
        for family in families {
            for spec in family.iter() {
                let previous = by_name.insert(spec.name.as_bytes().to_vec(), spec);
                assert!(previous.is_none(), "command {} defined twice", spec.name);
            }
        }
        crate::acl::install_catalog(families);
        crate::config::install_rename_check(|renames| renamed_table(renames).map(|_| ()));
        Registry { families, by_name }
    });
}

fn registry() -> &'static Registry {
    static EMPTY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get().unwrap_or_else(|| {
        debug_assert!(false, "command table used before executor::registry::install");
        EMPTY.get_or_init(|| Registry { families: &[], by_name: HashMap::default() })
    })
}

/// Every command family's table.
pub fn families() -> &'static [&'static [CommandSpec]] {
    registry().families
}

/// `rename-command` directives in effect: lowercased name → the command it now names, or None
/// for a name renamed away (or to ""). Installed once at startup, before any client.
pub type Renames = HashMap<Vec<u8>, Option<&'static CommandSpec>>;
static RENAMES: OnceLock<Renames> = OnceLock::new();

/// Applies `rename-command from to` directives in order, as Redis's config loader does on its
/// command table (a later directive sees the earlier renames): the errors are Redis's.
pub fn renamed_table(renames: &[(String, String)]) -> Result<Renames, &'static str> {
    let mut table = Renames::new();
    for (from, to) in renames {
        let from = from.to_ascii_lowercase().into_bytes();
        let current = match table.get(&from) {
            Some(entry) => *entry,
            None => registry().by_name.get(&from).copied(),
        };
        let Some(spec) = current else { return Err("No such command in rename-command") };
        table.insert(from, None);
        if !to.is_empty() {
            let to = to.to_ascii_lowercase().into_bytes();
            let taken = match table.get(&to) {
                Some(entry) => entry.is_some(),
                None => registry().by_name.contains_key(&to),
            };
            if taken {
                return Err("Target command name already exists");
            }
            table.insert(to, Some(spec));
        }
    }
    Ok(table)
}

/// Puts the renames into effect for the process's lifetime (called once, at startup).
pub fn install_renames(renames: Renames) {
    let _ = RENAMES.set(renames);
}

/// Finds a top-level command by name, case-insensitively, under `rename-command`.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut lower = [0u8; 32];
    if name.len() > lower.len() {
        return None;
    }
    for (dst, src) in lower.iter_mut().zip(name) {
        *dst = src.to_ascii_lowercase();
    }
    let key = &lower[..name.len()];
    if let Some(renames) = RENAMES.get() {
        if let Some(entry) = renames.get(key) {
            return *entry;
        }
    }
    registry().by_name.get(key).copied()
}

/// `lookup` with a one-entry memo: a connection usually sends the same command again (a
/// pipeline, a job loop, a benchmark), and comparing one name is cheaper than hashing it.
pub fn lookup_cached(name: &[u8], last: &mut Option<&'static CommandSpec>) -> Option<&'static CommandSpec> {
    if let Some(spec) = *last {
        // Under rename-command a command's own name may no longer reach it.
        if RENAMES.get().is_none() && spec.name.as_bytes().eq_ignore_ascii_case(name) {
            return Some(spec);
        }
    }
    let found = lookup(name);
    if found.is_some() {
        *last = found;
    }
    found
}

/// Every top-level command.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    families().iter().flat_map(|f| f.iter())
}
