//! Key extraction as Redis 7.0's getKeysFromCommand does it: key specs first (when their flags
//! are reliable), then a per-command hook for commands whose keys move with their arguments
//! (`movable_keys`), then the table's (first, last, step) range. Used by dispatch (ACL key
//! checks, tracking, cluster slots) and by COMMAND GETKEYS.

use bytes::Bytes;

use super::docs::{ksflags, BeginSearch, Doc, FindKeys};
use super::CommandSpec;

/// One extracted key: its position in argv and its key spec flags.
pub type KeyRef = (usize, u16);

/// A command-specific key extractor (Redis's getkeys_proc).
pub type KeysFn = fn(&[Bytes]) -> Vec<KeyRef>;

/// Extracts keys for commands whose key specs cannot say it alone (variable flags, incomplete
/// specs): by full command name. Families with such commands add their extractor here.
pub fn movable_keys(full_name: &str) -> Option<KeysFn> {
    match full_name {
        "set" => Some(set_keys),
        "bitfield" => Some(bitfield_keys),
        "sort" => Some(sort_keys),
        "sort_ro" => Some(sort_ro_keys),
        "migrate" => Some(migrate_keys),
        _ => None,
    }
}

/// BITFIELD only reads when every operation is a complete GET (OVERFLOW aside); anything else,
/// malformed operations included, counts as a write.
fn bitfield_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    use ksflags::*;
    let mut readonly = true;
    let mut i = 2;
    while i < argv.len() {
        let rest = argv.len() - i - 1;
        let op = &argv[i];
        if op.eq_ignore_ascii_case(b"get") && rest >= 2 {
            i += 3;
        } else if op.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
            i += 2;
        } else {
            readonly = false;
            break;
        }
    }
    vec![(1, if readonly { RO | ACCESS } else { RW | ACCESS | UPDATE })]
}

/// SORT reads its key and writes the target of its last STORE option; the arguments of LIMIT,
/// GET and BY are skipped so that `GET store` is not taken for the option.
fn sort_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    use ksflags::*;
    let mut keys = vec![(1, RO | ACCESS)];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let a = &argv[i];
        if a.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store.map(|p| (p, OW | UPDATE)));
    keys
}

fn sort_ro_keys(_argv: &[Bytes]) -> Vec<KeyRef> {
    vec![(1, ksflags::RO | ksflags::ACCESS)]
}

/// MIGRATE moves either its third argument or, when that is empty, the keys after KEYS (both at
/// once is an error: no keys). AUTH and AUTH2 arguments are skipped.
fn migrate_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    use ksflags::*;
    let flags = RW | ACCESS | DELETE;
    let mut i = 6;
    while i < argv.len() {
        let a = &argv[i];
        if a.eq_ignore_ascii_case(b"auth") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"keys") {
            if !argv[3].is_empty() {
                return Vec::new();
            }
            return (i + 1..argv.len()).map(|p| (p, flags)).collect();
        }
        i += 1;
    }
    if argv.len() > 3 {
        vec![(3, flags)]
    } else {
        Vec::new()
    }
}

/// SET reads the old value only with GET; otherwise it overwrites blindly.
pub fn set_keys(argv: &[Bytes]) -> Vec<KeyRef> {
    use ksflags::*;
    let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
    let flags = if get { RW | ACCESS | UPDATE } else { OW | UPDATE };
    vec![(1, flags)]
}

/// Key positions (within `argv`, the command name at 0) with their flags.
pub fn extract_keys<H>(spec: &CommandSpec<H>, doc: Option<&Doc>, full: &str, argv: &[Bytes]) -> Vec<KeyRef> {
    if let Some(d) = doc.filter(|d| !d.key_specs.is_empty()) {
        let reliable = d.key_specs.iter().any(|k| k.flags & ksflags::NOT_KEY == 0)
            && d.key_specs.iter().all(|k| k.flags & ksflags::VARIABLE_FLAGS == 0);
        if reliable {
            if let Some(keys) = keys_from_specs(d, spec.arity, argv) {
                return keys;
            }
        }
        return movable_keys(full).map_or(Vec::new(), |f| f(argv));
    }
    if let Some(f) = movable_keys(full) {
        return f(argv);
    }
    spec.key_positions(argv.len()).into_iter().map(|p| (p, 0)).collect()
}

/// Walks the key specs as Redis does; None when a spec cannot be applied to these arguments
/// (unknown or incomplete spec, out-of-range positions, bad key count).
pub fn keys_from_specs(d: &Doc, arity: i32, argv: &[Bytes]) -> Option<Vec<KeyRef>> {
    let argc = argv.len() as i64;
    let mut out = Vec::new();
    for ks in d.key_specs {
        if ks.flags & ksflags::NOT_KEY != 0 {
            continue;
        }
        let first = match ks.begin {
            BeginSearch::Index(i) => i as i64,
            BeginSearch::Keyword(word, from) => {
                let from = from as i64;
                // Like Redis: forwards up to the last-but-one argument (a key must follow), or
                // backwards down to argument 2.
                let is_word = |i: &i64| argv[*i as usize].eq_ignore_ascii_case(word.as_bytes());
                let found = if from > 0 {
                    (from.max(1)..argc - 1).find(is_word)
                } else {
                    (2..=(argc + from).min(argc - 1)).rev().find(is_word)
                };
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            BeginSearch::Unknown => return None,
        };
        // Found where an incomplete spec's keys start: only the command's own extractor knows
        // the rest (Redis tests this after the keyword search, so a missing keyword is fine).
        if ks.flags & ksflags::INCOMPLETE != 0 {
            return None;
        }
        let (first, last, step) = match ks.find {
            FindKeys::Range(lastkey, keystep, limit) => {
                let (lastkey, limit) = (lastkey as i64, limit as i64);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, keystep as i64)
            }
            FindKeys::Keynum(idx, firstkey, keystep) => {
                let at = first + idx as i64;
                if at >= argc {
                    return None;
                }
                let n = crate::util::num::parse_i64(&argv[at as usize]).filter(|&n| n >= 0)?;
                let first = first + firstkey as i64;
                // A client's numkeys may be anything up to i64::MAX: past argc it is refused below.
                (first, first.saturating_add(n) - 1, keystep as i64)
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc || step <= 0 {
            return None;
        }
        let mut i = first;
        while i <= last {
            if i >= argc {
                // Only variadic commands get here (fixed arities were checked): no key.
                if arity < 0 {
                    i += step;
                    continue;
                }
                return None;
            }
            out.push((i as usize, ks.flags));
            i += step;
        }
    }
    Some(out)
}
