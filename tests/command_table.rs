//! Our command table against real Redis: for every command and subcommand that ferrodis lists
//! (COMMAND LIST), COMMAND INFO must answer the same bytes as redis-server 7.0 (name, arity,
//! flags, key range, ACL categories, tips, key specs, subcommands), in RESP2 and RESP3. COMMAND
//! DOCS must have the same structure (arguments, versions, flags), the wording aside.
//!
//! Containers are compared part by part: their own fields exactly, and each subcommand both
//! servers have exactly. A subcommand only Redis has must be listed in NOT_YET_IMPLEMENTED, one
//! only ferrodis has in REDIS_7_2_ADDITIONS or REDIS_7_4_ADDITIONS (whose COMMAND INFO must be
//! what Redis 7.2 / 7.4 prints);
//! an entry of either list that no longer holds fails the test too.
//!
//! A third test checks the generated data of src/spec/docs_data.rs for EVERY Redis 7.0 command,
//! whether or not it is in our table yet: tips and key specs byte for byte, docs structure.
//!
//! A fourth compares the two servers' COMMAND LIST (subcommands included): a Redis 7.0 command
//! that ferrodis lacks must be listed in tests/known_missing_commands.txt with the issue that adds
//! it, and a listed one that ferrodis has fails the test too, so the list stays honest.
//!
//! Needs `redis-server` (see tests/common). Where it is absent the tests fail, unless
//! FERRODIS_ALLOW_NO_REDIS=1 is set, in which case they are skipped with a message. Under
//! FERRODIS_SELFCHECK the comparisons with ferrodis are skipped: Redis 7.0 standing in for it lacks
//! the additions this file checks.
//!
//! Redis lists subcommands in hash order (random per process), so subcommand lists are sorted by
//! name on both sides before comparing.

mod common;

use common::{parse_frame, selfcheck, show, Client, Frame, RedisServer, Server, TestServer};

/// ferrodis, or None (after saying so) under FERRODIS_SELFCHECK.
fn start_ferrodis() -> Option<Server> {
    if selfcheck() {
        eprintln!(
            "SKIPPED: FERRODIS_SELFCHECK puts Redis 7.0 in place of ferrodis, and it lacks the 7.2/7.4 additions"
        );
        return None;
    }
    Some(TestServer::new())
}

/// A connection to `server`, in RESP3 when `resp3`.
fn connect(server: &Server, resp3: bool) -> Client {
    let mut c = server.client();
    if resp3 {
        c.cmd(&["HELLO", "3"]);
    }
    c
}

fn call(c: &mut Client, args: &[&str]) -> Frame {
    parse_frame(&c.cmd(args))
}

/// Sorts the subcommand lists of every entry of a COMMAND INFO reply by name.
fn normalize_info(f: &mut Frame) {
    if let Frame::Agg(_, entries) = f {
        entries.iter_mut().for_each(normalize_entry);
    }
}

fn normalize_entry(f: &mut Frame) {
    if let Frame::Agg(_, fields) = f {
        if fields.len() == 10 {
            if let Frame::Agg(_, subs) = &mut fields[9] {
                subs.iter_mut().for_each(normalize_entry);
                subs.sort_by(|a, b| {
                    a.items().first().and_then(Frame::blob).cmp(&b.items().first().and_then(Frame::blob))
                });
            }
        }
    }
}

/// Blanks our-own-words fields (summary, complexity, history text) and sorts subcommand maps,
/// so that only the structure of COMMAND DOCS is compared.
fn normalize_docs(f: &mut Frame) {
    let Frame::Agg(_, items) = f else { return };
    let mut i = 0;
    while i + 1 < items.len() {
        let key = items[i].blob().map(<[u8]>::to_vec);
        match key.as_deref() {
            Some(b"summary") | Some(b"complexity") => items[i + 1] = Frame::Blob(b'$', Vec::new()),
            Some(b"history") => {
                if let Frame::Agg(_, entries) = &mut items[i + 1] {
                    for e in entries {
                        if let Frame::Agg(_, pair) = e {
                            if pair.len() == 2 {
                                pair[1] = Frame::Blob(b'$', Vec::new());
                            }
                        }
                    }
                }
            }
            Some(b"subcommands") => {
                if let Frame::Agg(_, subs) = &mut items[i + 1] {
                    let mut pairs: Vec<(Frame, Frame)> = subs.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect();
                    pairs.sort_by(|a, b| a.0.blob().cmp(&b.0.blob()));
                    *subs = pairs
                        .into_iter()
                        .flat_map(|(k, mut v)| {
                            normalize_docs(&mut v);
                            [k, v]
                        })
                        .collect();
                }
            }
            _ => normalize_docs(&mut items[i + 1]),
        }
        i += 2;
    }
}

/// Subcommands Redis 7.0 has that ferrodis does not implement yet. A missing subcommand that is
/// not listed here fails the test, and so does a listed one that ferrodis has: remove it from
/// this list when it lands.
const NOT_YET_IMPLEMENTED: &[&str] = &[];

/// Subcommands ferrodis has that Redis 7.0 lacks, added by Redis 7.2 and kept on purpose (redis-py
/// and other clients send CLIENT SETINFO on connect). Redis 7.0 cannot be the oracle for them:
/// their COMMAND INFO is checked against what Redis 7.2 prints instead (`redis_7_2_info`).
const REDIS_7_2_ADDITIONS: &[&str] = &["client|setinfo", "client|no-touch"];

/// Commands added by Redis 7.4 that ferrodis has (hash field TTLs: 7.4 RDB files hold them).
/// Checked against what Redis 7.4 prints (`redis_7_4_info`), written out from its command JSON.
const REDIS_7_4_ADDITIONS: &[&str] =
    &["hexpire", "hpexpire", "hexpireat", "hpexpireat", "httl", "hpttl", "hexpiretime", "hpexpiretime", "hpersist"];

/// Whether ferrodis has `name` on purpose though Redis 7.0 lacks it (either list above).
fn is_added(name: &str) -> bool {
    REDIS_7_2_ADDITIONS.contains(&name) || REDIS_7_4_ADDITIONS.contains(&name)
}

/// One COMMAND INFO entry with no key range, tips, key specs or subcommands, encoded as Redis
/// encodes it (flags, categories, tips, key specs and an empty subcommand list are sets in RESP3).
fn info_entry(name: &str, arity: i64, flags: &[&str], categories: &[&str], resp3: bool) -> Frame {
    let set = if resp3 { b'~' } else { b'*' };
    let simple =
        |words: &[&str]| Frame::Agg(set, words.iter().map(|w| Frame::Line(b'+', w.as_bytes().to_vec())).collect());
    let int = |n: i64| Frame::Line(b':', n.to_string().into_bytes());
    Frame::Agg(
        b'*',
        vec![
            Frame::Blob(b'$', name.as_bytes().to_vec()),
            int(arity),
            simple(flags),
            int(0),
            int(0),
            int(0),
            simple(categories),
            simple(&[]),
            simple(&[]),
            simple(&[]),
        ],
    )
}

/// What Redis 7.2 answers to COMMAND INFO for each of REDIS_7_2_ADDITIONS (from its
/// client-setinfo.json and client-no-touch.json; no 7.2 server to ask here).
fn redis_7_2_info(name: &str, resp3: bool) -> Option<Frame> {
    let conn = ["noscript", "loading", "stale"];
    let cats = ["@slow", "@connection"];
    match name {
        "client|setinfo" => Some(info_entry(name, 4, &conn, &cats, resp3)),
        "client|no-touch" => Some(info_entry(name, 3, &conn, &cats, resp3)),
        _ => redis_7_4_info(name, resp3),
    }
}

/// A COMMAND INFO entry of a command with one key at argument 1 (first, last, step 1, 1, 1) and
/// one key spec `index 1, range lastkey 0 keystep 1 limit 0` flagged `ks_flags`, no tips and no
/// subcommands, encoded as Redis encodes it (checked on HSET and HGET, which have that shape).
fn info_entry_one_key(
    name: &str,
    arity: i64,
    flags: &[&str],
    categories: &[&str],
    ks_flags: &[&str],
    resp3: bool,
) -> Frame {
    let set = if resp3 { b'~' } else { b'*' };
    let map = if resp3 { b'%' } else { b'*' };
    let simple =
        |words: &[&str]| Frame::Agg(set, words.iter().map(|w| Frame::Line(b'+', w.as_bytes().to_vec())).collect());
    let int = |n: i64| Frame::Line(b':', n.to_string().into_bytes());
    let bulk = |s: &str| Frame::Blob(b'$', s.as_bytes().to_vec());
    let spec = Frame::Agg(
        map,
        vec![
            bulk("flags"),
            simple(ks_flags),
            bulk("begin_search"),
            Frame::Agg(
                map,
                vec![bulk("type"), bulk("index"), bulk("spec"), Frame::Agg(map, vec![bulk("index"), int(1)])],
            ),
            bulk("find_keys"),
            Frame::Agg(
                map,
                vec![
                    bulk("type"),
                    bulk("range"),
                    bulk("spec"),
                    Frame::Agg(map, vec![bulk("lastkey"), int(0), bulk("keystep"), int(1), bulk("limit"), int(0)]),
                ],
            ),
        ],
    );
    Frame::Agg(
        b'*',
        vec![
            bulk(name),
            int(arity),
            simple(flags),
            int(1),
            int(1),
            int(1),
            simple(categories),
            simple(&[]),
            Frame::Agg(set, vec![spec]),
            simple(&[]),
        ],
    )
}

/// What Redis 7.4 answers to COMMAND INFO for each of REDIS_7_4_ADDITIONS (from its hexpire.json,
/// httl.json, hpersist.json ...: arity, command flags, ACL categories, one key spec).
fn redis_7_4_info(name: &str, resp3: bool) -> Option<Frame> {
    let cats_w = ["@write", "@hash", "@fast"];
    let cats_r = ["@read", "@hash", "@fast"];
    match name {
        "hexpire" | "hpexpire" | "hexpireat" | "hpexpireat" => {
            Some(info_entry_one_key(name, -6, &["write", "denyoom", "fast"], &cats_w, &["RW", "update"], resp3))
        }
        "httl" | "hpttl" | "hexpiretime" | "hpexpiretime" => {
            Some(info_entry_one_key(name, -5, &["readonly", "fast"], &cats_r, &["RO", "access"], resp3))
        }
        "hpersist" => Some(info_entry_one_key(name, -5, &["write", "fast"], &cats_w, &["RW", "update"], resp3)),
        _ => None,
    }
}

/// A reply for one name, split into the command's own fields and its subcommand entries.
struct Split {
    own: Frame,
    subs: Vec<(String, Frame)>,
}

/// COMMAND INFO reply `[entry]`: the entry with its subcommand list emptied, and the entries in
/// that list. None when the server answers null (does not know the name).
fn split_info(reply: &Frame) -> Option<Split> {
    let entry = reply.items().first()?;
    let Frame::Agg(p, fields) = entry else { return None };
    let mut own = fields.clone();
    let subs = match own.get_mut(9) {
        Some(Frame::Agg(_, subs)) => std::mem::take(subs),
        _ => Vec::new(),
    };
    let subs = subs
        .into_iter()
        .map(|s| {
            let name = s.items().first().and_then(Frame::blob).map(|b| String::from_utf8_lossy(b).into_owned());
            (name.unwrap_or_default(), s)
        })
        .collect();
    Some(Split { own: Frame::Agg(*p, own), subs })
}

/// COMMAND DOCS reply `{name: docs}`: the docs without their `subcommands` pair, and the pairs of
/// that map. None when the server leaves the name out (does not know it).
fn split_docs(reply: &Frame) -> Option<Split> {
    let Frame::Agg(p, items) = reply.items().get(1)? else { return None };
    let mut own = Vec::new();
    let mut subs = Vec::new();
    for kv in items.chunks(2) {
        if kv[0].blob() == Some(&b"subcommands"[..]) {
            for pair in kv[1].items().chunks(2) {
                let name = pair[0].blob().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
                subs.push((name, pair[1].clone()));
            }
        } else {
            own.extend_from_slice(kv);
        }
    }
    Some(Split { own: Frame::Agg(*p, own), subs })
}

/// How one of COMMAND INFO / COMMAND DOCS is compared.
struct Kind {
    what: &'static str,
    subcommand: &'static str,
    normalize: fn(&mut Frame),
    split: fn(&Frame) -> Option<Split>,
    /// The known Redis 7.2 answer for one of REDIS_7_2_ADDITIONS (an entry, as nested in its
    /// container's reply), or None where there is none to check against.
    redis_7_2: fn(&str, bool) -> Option<Frame>,
}

/// For every name ferrodis lists (COMMAND LIST, subcommands included), in both protocols: the
/// command's own fields must equal Redis's, and so must every subcommand both have. Subcommands
/// only Redis has must be in NOT_YET_IMPLEMENTED, those only ferrodis has in REDIS_7_2_ADDITIONS
/// (and match Redis 7.2 where `redis_7_2` knows the answer). Fails listing every difference,
/// and every entry of the two lists that is out of date.
fn compare_all(kind: Kind) {
    use std::collections::BTreeSet;
    let (Some(redis), Some(ferrodis)) = (RedisServer::or_skip(), start_ferrodis()) else { return };
    let names: Vec<String> = command_list(&ferrodis).into_iter().collect();
    assert!(!names.is_empty(), "ferrodis lists no commands");
    let mut mismatches = Vec::new();
    // List maintenance problems, once for both protocols.
    let mut stale = BTreeSet::new();
    let mut seen_missing = BTreeSet::new();
    let mut seen_added = BTreeSet::new();
    let mut check_added = |name: &str, ours: &Frame, resp3: bool, place: &str, mismatches: &mut Vec<String>| {
        seen_added.insert(name.to_string());
        if let Some(expected) = (kind.redis_7_2)(name, resp3) {
            if *ours != expected {
                let proto = if resp3 { "RESP3" } else { "RESP2" };
                mismatches.push(format!(
                    "{name} ({proto}, {place}), a Redis 7.2 addition:\n  ferrodis:  {}\n  redis 7.2: {}",
                    show(&ours.bytes()),
                    show(&expected.bytes())
                ));
            }
        }
    };
    for resp3 in [false, true] {
        let proto = if resp3 { "RESP3" } else { "RESP2" };
        let mut ours_client = connect(&ferrodis, resp3);
        let mut theirs_client = connect(&redis, resp3);
        for name in &names {
            let mut ours = call(&mut ours_client, &["COMMAND", kind.subcommand, name]);
            let mut theirs = call(&mut theirs_client, &["COMMAND", kind.subcommand, name]);
            (kind.normalize)(&mut ours);
            (kind.normalize)(&mut theirs);
            let is_addition = is_added(name);
            let (ours_split, theirs_split) = match ((kind.split)(&ours), (kind.split)(&theirs)) {
                (None, _) => {
                    mismatches.push(format!(
                        "{name} ({proto}): listed by ferrodis's COMMAND LIST, unknown to its COMMAND {}: {}",
                        kind.subcommand,
                        show(&ours.bytes())
                    ));
                    continue;
                }
                (Some(o), None) if is_addition => {
                    check_added(name, &o.own, resp3, "asked for by name", &mut mismatches);
                    continue;
                }
                (Some(_), None) => {
                    mismatches.push(format!(
                        "{name} ({proto}): ferrodis has it, Redis 7.0 does not (nor is it in REDIS_7_2_ADDITIONS or REDIS_7_4_ADDITIONS)\n  ferrodis: {}",
                        show(&ours.bytes())
                    ));
                    continue;
                }
                (Some(o), Some(t)) => (o, t),
            };
            if is_addition {
                stale.insert(format!("{name} is in an additions list, but Redis 7.0 has it"));
            }
            if ours_split.own != theirs_split.own {
                let container = if ours_split.subs.is_empty() && theirs_split.subs.is_empty() {
                    ""
                } else {
                    " (its own fields, subcommands aside)"
                };
                mismatches.push(format!(
                    "{name} ({proto}){container}:\n  ferrodis: {}\n  redis:    {}",
                    show(&ours_split.own.bytes()),
                    show(&theirs_split.own.bytes())
                ));
            }
            let sub_names: BTreeSet<&str> =
                ours_split.subs.iter().chain(&theirs_split.subs).map(|(n, _)| n.as_str()).collect();
            for sub in sub_names {
                let find = |subs: &[(String, Frame)]| subs.iter().find(|(n, _)| n == sub).map(|(_, f)| f.clone());
                match (find(&ours_split.subs), find(&theirs_split.subs)) {
                    (Some(o), Some(t)) => {
                        if NOT_YET_IMPLEMENTED.contains(&sub) {
                            stale.insert(format!("{sub} is in NOT_YET_IMPLEMENTED, but ferrodis has it now: remove it from the list"));
                        }
                        if is_added(sub) {
                            stale.insert(format!("{sub} is in an additions list, but Redis 7.0 has it"));
                        }
                        if o != t {
                            mismatches.push(format!(
                                "{sub} ({proto}), subcommand of {name}:\n  ferrodis: {}\n  redis:    {}",
                                show(&o.bytes()),
                                show(&t.bytes())
                            ));
                        }
                    }
                    (None, Some(_)) if NOT_YET_IMPLEMENTED.contains(&sub) => {
                        seen_missing.insert(sub.to_string());
                    }
                    (None, Some(t)) => mismatches.push(format!(
                        "{sub} ({proto}): Redis has this subcommand of {name}, ferrodis lacks it (and it is not in NOT_YET_IMPLEMENTED)\n  redis: {}",
                        show(&t.bytes())
                    )),
                    (Some(o), None) if is_added(sub) => {
                        check_added(sub, &o, resp3, &format!("in {name}'s subcommands"), &mut mismatches);
                    }
                    (Some(o), None) => mismatches.push(format!(
                        "{sub} ({proto}): ferrodis has this subcommand of {name}, Redis 7.0 does not (nor is it in REDIS_7_2_ADDITIONS or REDIS_7_4_ADDITIONS)\n  ferrodis: {}",
                        show(&o.bytes())
                    )),
                    (None, None) => unreachable!(),
                }
            }
        }
    }
    for name in NOT_YET_IMPLEMENTED {
        if !seen_missing.contains(*name) && !stale.iter().any(|s| s.starts_with(&format!("{name} "))) {
            stale.insert(format!(
                "{name} is in NOT_YET_IMPLEMENTED, but is no subcommand Redis lists for a command ferrodis has"
            ));
        }
    }
    for name in REDIS_7_2_ADDITIONS.iter().chain(REDIS_7_4_ADDITIONS) {
        if !seen_added.contains(*name) && !stale.iter().any(|s| s.starts_with(&format!("{name} "))) {
            stale.insert(format!("{name} is in REDIS_7_2_ADDITIONS, but ferrodis does not have it"));
        }
    }
    let mut problems = mismatches;
    problems.extend(stale);
    assert!(
        problems.is_empty(),
        "{} problem(s) comparing {} of {} names (x2 protocols) with redis-server:\n{}",
        problems.len(),
        kind.what,
        names.len(),
        problems.join("\n")
    );
}

#[test]
fn command_info_matches_redis() {
    compare_all(Kind {
        what: "COMMAND INFO",
        subcommand: "INFO",
        normalize: normalize_info,
        split: split_info,
        redis_7_2: redis_7_2_info,
    });
}

#[test]
fn command_docs_structure_matches_redis() {
    compare_all(Kind {
        what: "COMMAND DOCS (wording aside)",
        subcommand: "DOCS",
        normalize: normalize_docs,
        split: split_docs,
        // Not checked: our docs data is generated from Redis 7.0, which has no entry for them, so
        // ferrodis answers an empty docs map for them (Redis 7.2 documents them).
        redis_7_2: |_, _| None,
    });
}

/// `info_entry_one_key`, which spells out the Redis 7.4 answers, encodes as Redis does: checked on
/// HSET (RW update) and HGET (RO access), whose entries have that shape.
#[test]
fn redis_7_4_shapes_encode_as_redis_does() {
    let Some(redis) = RedisServer::or_skip() else { return };
    for resp3 in [false, true] {
        let mut c = connect(&redis, resp3);
        for (name, arity, flags, cats, ks) in [
            ("hset", -4, &["write", "denyoom", "fast"][..], ["@write", "@hash", "@fast"], ["RW", "update"]),
            ("hget", 3, &["readonly", "fast"][..], ["@read", "@hash", "@fast"], ["RO", "access"]),
        ] {
            let reply = call(&mut c, &["COMMAND", "INFO", name]);
            let expected = info_entry_one_key(name, arity, flags, &cats, &ks, resp3);
            assert_eq!(
                reply.items().first(),
                Some(&expected),
                "{name}: redis {} vs ours {}",
                show(&reply.bytes()),
                show(&expected.bytes())
            );
        }
    }
}

/// `info_entry`, which spells out the Redis 7.2 answers, encodes as Redis does: checked on a
/// Redis 7.0 subcommand of the same shape (CLIENT GETNAME: arity 2, same flags and categories).
#[test]
fn redis_7_2_shapes_encode_as_redis_does() {
    let Some(redis) = RedisServer::or_skip() else { return };
    for resp3 in [false, true] {
        let reply = call(&mut connect(&redis, resp3), &["COMMAND", "INFO", "client|getname"]);
        let expected =
            info_entry("client|getname", 2, &["noscript", "loading", "stale"], &["@slow", "@connection"], resp3);
        assert_eq!(
            reply.items().first(),
            Some(&expected),
            "RESP{}: redis {} vs info_entry {}",
            if resp3 { 3 } else { 2 },
            show(&reply.bytes()),
            show(&expected.bytes())
        );
    }
}

/// The docs.rs entry of every command and subcommand Redis has, rendered as COMMAND INFO (tips,
/// key specs) and COMMAND DOCS (wording aside) render it, against Redis's own answer.
#[test]
fn docs_data_matches_redis_for_every_command() {
    use ferrodis::commands::{command, docs};
    let Some(redis) = RedisServer::or_skip() else { return };
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for proto in [2u8, 3] {
        let mut c = connect(&redis, proto == 3);
        let render = |r: &ferrodis::resp::Reply| {
            let mut out = Vec::new();
            ferrodis::resp::writer::write_reply(&mut out, r, proto);
            parse_frame(&out)
        };
        // COMMAND INFO: [name, arity, flags, first, last, step, categories, tips, key specs, subs].
        let mut stack: Vec<Frame> = call(&mut c, &["COMMAND", "INFO"]).items().to_vec();
        while let Some(entry) = stack.pop() {
            let f = entry.items();
            let name = String::from_utf8_lossy(f[0].blob().expect("name")).into_owned();
            stack.extend(f[9].items().iter().cloned());
            checked += 1;
            let Some(d) = docs::find(&name) else {
                mismatches.push(format!("{name}: missing from docs.rs"));
                continue;
            };
            for (what, ours, theirs) in [
                ("tips", render(&command::tips_reply(d)), &f[7]),
                ("key specs", render(&command::key_specs_reply(d)), &f[8]),
            ] {
                if &ours != theirs {
                    mismatches.push(format!(
                        "{name} {what} (RESP{proto}):\n  ours:  {}\n  redis: {}",
                        show(&ours.bytes()),
                        show(&theirs.bytes())
                    ));
                }
            }
        }
        // COMMAND DOCS: name -> map, subcommands nested in a `subcommands` map.
        let mut stack: Vec<Frame> = call(&mut c, &["COMMAND", "DOCS"]).items().to_vec();
        while stack.len() >= 2 {
            let mut theirs = stack.pop().expect("doc");
            let name = String::from_utf8_lossy(stack.pop().expect("name").blob().expect("name")).into_owned();
            if let Frame::Agg(_, items) = &mut theirs {
                if let Some(i) = items.chunks(2).position(|kv| kv[0].blob() == Some(&b"subcommands"[..])) {
                    let subs = items.drain(2 * i..2 * i + 2).nth(1).expect("subcommands");
                    stack.extend(subs.items().iter().cloned());
                }
            }
            let Some(d) = docs::find(&name) else {
                mismatches.push(format!("{name}: missing from docs.rs"));
                continue;
            };
            let mut ours = render(&command::doc_reply(d));
            normalize_docs(&mut ours);
            normalize_docs(&mut theirs);
            if ours != theirs {
                mismatches.push(format!(
                    "{name} docs (RESP{proto}):\n  ours:  {}\n  redis: {}",
                    show(&ours.bytes()),
                    show(&theirs.bytes())
                ));
            }
        }
    }
    assert!(checked > 600, "only {checked} commands checked");
    assert!(
        mismatches.is_empty(),
        "docs.rs differs from redis-server (regenerate with tools/gen_command_docs.py):\n{}",
        mismatches.join("\n")
    );
}

/// The reviewed list of Redis 7.0 commands ferrodis knowingly lacks: (name, issue).
fn known_missing() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/known_missing_commands.txt");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().expect("a name").to_lowercase();
            let issue = words.next().unwrap_or_else(|| panic!("{path}: `{l}` names no issue")).to_string();
            assert!(issue.parse::<u32>().is_ok(), "{path}: `{l}`: the issue must be a number");
            assert!(words.next().is_none(), "{path}: `{l}`: one name and one issue per line");
            (name, issue)
        })
        .collect()
}

fn command_list(server: &Server) -> std::collections::BTreeSet<String> {
    call(&mut connect(server, false), &["COMMAND", "LIST"])
        .items()
        .iter()
        .filter_map(|f| f.blob().map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect()
}

/// Every command and subcommand Redis 7.0 lists is listed by ferrodis too, or is on the reviewed
/// list of known-missing commands (tests/known_missing_commands.txt); nothing on that list is
/// present in ferrodis; the list names each command once.
#[test]
fn every_redis_command_is_present_or_known_missing() {
    let (Some(redis), Some(ferrodis)) = (RedisServer::or_skip(), start_ferrodis()) else { return };
    let theirs = command_list(&redis);
    let ours = command_list(&ferrodis);
    assert!(theirs.len() > 200, "Redis lists only {} commands", theirs.len());
    let missing_list = known_missing();
    let listed = |name: &str| {
        let container = name.split('|').next().unwrap_or(name);
        missing_list.iter().any(|(n, _)| n == name || n == container)
    };
    let mut problems = Vec::new();
    for name in &theirs {
        if !ours.contains(name) && !listed(name) {
            problems.push(format!(
                "{name}: Redis 7.0 has it, ferrodis lacks it, and tests/known_missing_commands.txt does not list it"
            ));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, issue) in &missing_list {
        if !seen.insert(name.clone()) {
            problems.push(format!("{name} is listed twice in tests/known_missing_commands.txt"));
        }
        if ours.contains(name) {
            problems.push(format!(
                "{name} (issue {issue}) is listed as missing, but ferrodis has it now: remove it from tests/known_missing_commands.txt"
            ));
        }
        if !theirs.contains(name) {
            problems.push(format!("{name} (issue {issue}) is listed as missing, but Redis 7.0 has no such command"));
        }
    }
    // A listed container that ferrodis has does not excuse its missing subcommands.
    for name in &theirs {
        if let Some((container, _)) = name.split_once('|') {
            if ours.contains(container) && !ours.contains(name) && !missing_list.iter().any(|(n, _)| n == name) {
                problems
                    .push(format!("{name}: ferrodis has {container} but not this subcommand, and it is not listed"));
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{} problem(s) with COMMAND LIST:\n{}", problems.len(), problems.join("\n"));
}
