//! Differential tests: each script in tests/differential/*.txt is run against a fresh ferrodis and a
//! fresh real redis-server, and every reply is compared byte for byte. Expected bytes come only from
//! the real server; nothing here says what a reply should be.
//!
//! Script format, one command per line, split with redis-cli's quoting (`"a b\x00\n"`, `'it\'s'`):
//! - blank lines and lines starting with `#` are ignored;
//! - `@type CMD ...`   compares only the reply's RESP type byte (time-dependent values: TIME, INFO,
//!   CLIENT ID, OBJECT IDLETIME);
//! - `@near N CMD ...` both replies must be integers within N of each other, or byte-identical
//!   (TTL, PTTL, EXPIRETIME of keys given a relative expiry); a negative integer (-1 no expiry,
//!   -2 no key) must be identical, so a -1 never passes for a -2;
//! - `@sorted CMD ...` an array reply whose elements are compared as a sorted list (KEYS); a
//!   SCAN-shaped reply (cursor, array) has its inner array sorted, the cursor compared exactly;
//! - `@pairs CMD ...`  an array or map reply compared as a sorted list of consecutive (field, value)
//!   pairs (HGETALL of a hashtable-encoded hash, RESP2 or RESP3); a SCAN-shaped reply (cursor, array)
//!   has its inner array compared that way (HSCAN);
//! - `@anyid CMD ...` a map or array reply compared with the value after an `id` field blanked
//!   (HELLO: client ids are opaque and Redis spends some on internal clients);
//! - `@anyidle CMD ...` a reply compared exactly but for idle times in milliseconds: the value after
//!   an `idle` field (XINFO CONSUMERS) and the third element of every `[id, consumer, idle,
//!   deliveries]` entry (XPENDING's extended form) are blanked, ids, names and counts compared;
//! - `@blank F1,F2 CMD ...` a reply compared exactly but for the values of the named fields: in
//!   text (INFO) the value after `F=` or `F:`, in an aggregate the item after an `F` element
//!   (INFO commandstats' usec, LATENCY HISTOGRAM's histogram_usec; counts stay exact);
//! - `@args --name value ...` (anywhere in a script) extra arguments both servers start with;
//! - `@skip CMD ...`   sent to both, replies not compared (setup whose reply is time-dependent).
//!
//! One test per script file. On mismatch the test prints the first mismatching line with both
//! replies and where they diverge, then a one-line list of later mismatches (which may be knock-on).

mod common;

use common::{parse_value, show, split_args, Client, RedisServer, TestServer, Value};

#[derive(Clone, Debug, PartialEq)]
enum Mode {
    Exact,
    TypeOnly,
    Near(i64),
    Sorted,
    Pairs,
    AnyId,
    AnyIdle,
    Blank(Vec<String>),
    Skip,
}

struct Line {
    number: usize,
    text: String,
    mode: Mode,
    argv: Vec<Vec<u8>>,
}

fn parse_script(name: &str, text: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let (mode, rest) = if let Some(r) = t.strip_prefix("@type ") {
            (Mode::TypeOnly, r)
        } else if let Some(r) = t.strip_prefix("@sorted ") {
            (Mode::Sorted, r)
        } else if let Some(r) = t.strip_prefix("@pairs ") {
            (Mode::Pairs, r)
        } else if let Some(r) = t.strip_prefix("@anyid ") {
            (Mode::AnyId, r)
        } else if let Some(r) = t.strip_prefix("@anyidle ") {
            (Mode::AnyIdle, r)
        } else if let Some(r) = t.strip_prefix("@blank ") {
            let (fields, r) =
                r.split_once(' ').unwrap_or_else(|| panic!("{name}:{}: @blank needs fields and a command", i + 1));
            (Mode::Blank(fields.split(',').map(String::from).collect()), r)
        } else if let Some(r) = t.strip_prefix("@skip ") {
            (Mode::Skip, r)
        } else if let Some(r) = t.strip_prefix("@near ") {
            let (n, r) = r.split_once(' ').unwrap_or_else(|| panic!("{name}:{}: @near needs N and a command", i + 1));
            (Mode::Near(n.parse().unwrap_or_else(|_| panic!("{name}:{}: bad @near bound", i + 1))), r)
        } else if t.starts_with("@args ") {
            // Server arguments for the whole script (script_args), not a command.
            continue;
        } else if t.starts_with('@') {
            panic!("{name}:{}: unknown directive in {t:?}", i + 1);
        } else {
            (Mode::Exact, t)
        };
        let argv = split_args(rest.as_bytes()).unwrap_or_else(|| panic!("{name}:{}: unbalanced quotes", i + 1));
        assert!(!argv.is_empty(), "{name}:{}: empty command", i + 1);
        lines.push(Line { number: i + 1, text: t.to_string(), mode, argv });
    }
    lines
}

/// Why two replies differ, or None if they agree under `mode`.
fn compare(mode: &Mode, expected: &[u8], actual: &[u8]) -> Option<String> {
    match mode {
        Mode::Skip => None,
        Mode::Exact => (expected != actual).then(|| "bytes differ".to_string()),
        Mode::TypeOnly => (expected.first() != actual.first()).then(|| "reply types differ".to_string()),
        Mode::Blank(fields) => (blank_fields(parse_value(expected), fields)
            != blank_fields(parse_value(actual), fields))
        .then(|| format!("replies differ (ignoring {})", fields.join(", "))),
        &Mode::Near(n) => {
            if expected == actual {
                return None;
            }
            match (parse_value(expected), parse_value(actual)) {
                // A negative TTL is a code (-1 no expiry, -2 no key), not a time: it must match exactly.
                (Value::Int(a), Value::Int(b)) if a < 0 || b < 0 => {
                    Some("integers differ (a negative one is a code, compared exactly)".to_string())
                }
                (Value::Int(a), Value::Int(b)) if (a - b).abs() <= n => None,
                (Value::Int(_), Value::Int(_)) => Some(format!("integers differ by more than {n}")),
                _ => Some("bytes differ (not both integers)".to_string()),
            }
        }
        Mode::AnyId => {
            let blank = |v: Value| match v {
                Value::Agg(k, Some(mut items)) => {
                    for i in 1..items.len() {
                        if items[i - 1] == Value::Bulk(Some(b"id".to_vec())) {
                            items[i] = Value::Int(0);
                        }
                    }
                    Value::Agg(k, Some(items))
                }
                other => other,
            };
            (blank(parse_value(expected)) != blank(parse_value(actual)))
                .then(|| "replies differ (ignoring the id field)".to_string())
        }
        Mode::AnyIdle => (blank_idle(parse_value(expected)) != blank_idle(parse_value(actual)))
            .then(|| "replies differ (ignoring idle times)".to_string()),
        Mode::Sorted => {
            if expected == actual {
                return None;
            }
            fn sorted(v: Value) -> Value {
                match v {
                    Value::Agg(b'*', Some(mut items))
                        if items.len() == 2
                            && matches!(items[0], Value::Bulk(_))
                            && matches!(items[1], Value::Agg(..)) =>
                    {
                        let inner = items.pop().map(sorted);
                        items.extend(inner);
                        Value::Agg(b'*', Some(items))
                    }
                    Value::Agg(k, Some(mut items)) => {
                        items.sort_by_key(|i| format!("{i:?}"));
                        Value::Agg(k, Some(items))
                    }
                    other => other,
                }
            }
            (sorted(parse_value(expected)) != sorted(parse_value(actual)))
                .then(|| "arrays differ as sorted lists".to_string())
        }
        Mode::Pairs => {
            if expected == actual {
                return None;
            }
            (sorted_pairs(parse_value(expected)) != sorted_pairs(parse_value(actual)))
                .then(|| "replies differ as sorted lists of pairs".to_string())
        }
    }
}

/// `text` with the value after each `F=` / `F:` (F one of `fields`, at the start of a line or
/// after a separator) replaced by `_`; values end at `,`, space or end of line.
fn blank_text(text: &[u8], fields: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    'outer: while i < text.len() {
        let at_start = i == 0 || matches!(text[i - 1], b',' | b'\n' | b'\r' | b' ' | b'\t');
        if at_start {
            for f in fields {
                let f = f.as_bytes();
                let after = i + f.len();
                if text[i..].starts_with(f) && matches!(text.get(after), Some(b'=') | Some(b':')) {
                    out.extend_from_slice(&text[i..=after]);
                    out.push(b'_');
                    i = after + 1;
                    while i < text.len() && !matches!(text[i], b',' | b'\n' | b'\r' | b' ') {
                        i += 1;
                    }
                    continue 'outer;
                }
            }
        }
        out.push(text[i]);
        i += 1;
    }
    out
}

/// `v` with the named fields blanked (see `@blank`), at any depth.
fn blank_fields(v: Value, fields: &[String]) -> Value {
    match v {
        Value::Bulk(Some(b)) => Value::Bulk(Some(blank_text(&b, fields))),
        Value::Simple(k, b) => Value::Simple(k, blank_text(&b, fields)),
        Value::Agg(k, Some(items)) => {
            let mut items: Vec<Value> = items.into_iter().map(|i| blank_fields(i, fields)).collect();
            for i in 1..items.len() {
                let named = |v: &Value| match v {
                    Value::Bulk(Some(b)) | Value::Simple(_, b) => fields.iter().any(|f| f.as_bytes() == &b[..]),
                    _ => false,
                };
                if named(&items[i - 1]) {
                    items[i] = Value::Int(0);
                }
            }
            Value::Agg(k, Some(items))
        }
        other => other,
    }
}

/// The extra server arguments of a script's `@args` lines.
fn script_args(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("@args "))
        .flat_map(|r| r.split_whitespace().map(String::from).collect::<Vec<_>>())
        .collect()
}

/// `v` with its idle times (see `@anyidle`) replaced by 0, at any depth.
fn blank_idle(v: Value) -> Value {
    match v {
        Value::Agg(k, Some(items)) => {
            let mut items: Vec<Value> = items.into_iter().map(blank_idle).collect();
            let xpending_entry = items.len() == 4
                && matches!(items[0], Value::Bulk(Some(_)))
                && matches!(items[1], Value::Bulk(Some(_)))
                && matches!(items[2], Value::Int(_))
                && matches!(items[3], Value::Int(_));
            if xpending_entry {
                items[2] = Value::Int(0);
            }
            for i in 1..items.len() {
                if items[i - 1] == Value::Bulk(Some(b"idle".to_vec())) && matches!(items[i], Value::Int(_)) {
                    items[i] = Value::Int(0);
                }
            }
            Value::Agg(k, Some(items))
        }
        other => other,
    }
}

/// An aggregate's items regrouped as (field, value) pairs and sorted; the inner array of a
/// SCAN-shaped reply (a bulk cursor followed by an aggregate) gets the same treatment.
fn sorted_pairs(v: Value) -> Value {
    match v {
        Value::Agg(b'*', Some(mut items))
            if items.len() == 2 && matches!(items[0], Value::Bulk(_)) && matches!(items[1], Value::Agg(..)) =>
        {
            let inner = items.pop().map(sorted_pairs);
            items.extend(inner);
            Value::Agg(b'*', Some(items))
        }
        Value::Agg(k, Some(items)) if items.len() % 2 == 0 => {
            let mut pairs: Vec<Vec<Value>> = Vec::new();
            let mut it = items.into_iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                pairs.push(vec![f, v]);
            }
            pairs.sort_by_key(|p| format!("{p:?}"));
            Value::Agg(k, Some(pairs.into_iter().flatten().collect()))
        }
        other => other,
    }
}

/// Offset of the first differing byte.
fn divergence(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
}

fn run_script(file: &str) {
    let path = format!("{}/tests/differential/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let lines = parse_script(file, &text);

    let args = script_args(&text);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let redis = RedisServer::with_args(&args);
    let ferro = TestServer::with_args(&args);
    let mut rc = redis.client();
    let mut fc = ferro.client();
    // The servers are fresh; FLUSHALL is belt and braces, its reply is not part of the comparison.
    let _ = rc.try_cmd(&[b"FLUSHALL"]);
    let _ = fc.try_cmd(&[b"FLUSHALL"]);

    // A hang fails the test within a bound, naming the line (each read also times out).
    let watchdog = common::Watchdog::new(file, std::time::Duration::from_secs(240));
    let mut first: Option<String> = None;
    let mut later = Vec::new();
    for line in &lines {
        watchdog.step(format!("{file}:{}: `{}`", line.number, line.text));
        let expected = rc.try_cmd(&line.argv).unwrap_or_else(|e| {
            panic!("{file}:{}: real redis-server gave no reply to `{}`: {e}", line.number, line.text)
        });
        let actual = match fc.try_cmd(&line.argv) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!(
                    "{file}:{}: `{}`\n  ferrodis gave no reply ({e})\n  expected {}",
                    line.number,
                    line.text,
                    show(&expected)
                );
                if first.is_none() {
                    first = Some(msg);
                } else {
                    later.push(format!("{} ({})", line.number, line.text));
                }
                // The connection is unusable; report what we have.
                break;
            }
        };
        if let Some(why) = compare(&line.mode, &expected, &actual) {
            if first.is_none() {
                let at = divergence(&expected, &actual);
                first = Some(format!(
                    "{file}:{}: `{}` ({why}, first difference at byte {at})\n  redis:    {}\n  ferrodis: {}",
                    line.number,
                    line.text,
                    show(&expected),
                    show(&actual)
                ));
            } else {
                later.push(format!("{}", line.number));
            }
        }
    }
    if let Some(first) = first {
        let mut msg =
            format!("differential mismatch in {file} ({} of {} lines differ)\n{first}\n", later.len() + 1, lines.len());
        if !later.is_empty() {
            let shown: Vec<_> = later.iter().take(60).cloned().collect();
            msg.push_str(&format!(
                "  later mismatching lines (possibly knock-on): {}{}\n",
                shown.join(", "),
                if later.len() > 60 { ", ..." } else { "" }
            ));
        }
        panic!("{msg}");
    }
}

macro_rules! scripts {
    ($($name:ident => $file:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_script($file);
            }
        )*
        const ALL_SCRIPTS: &[&str] = &[$($file),*];
    };
}

scripts! {
    strings_get_set => "strings_get_set.txt",
    strings_misc => "strings_misc.txt",
    strings_counters => "strings_counters.txt",
    strings_ranges => "strings_ranges.txt",
    strings_lcs => "strings_lcs.txt",
    bitmaps => "bitmaps.txt",
    bitfield => "bitfield.txt",
    hyperloglog => "hyperloglog.txt",
    keyspace => "keyspace.txt",
    keyspace_expire => "keyspace_expire.txt",
    keyspace_dbs => "keyspace_dbs.txt",
    access_clock_lfu => "access_clock_lfu.txt",
    access_clock_lru => "access_clock_lru.txt",
    acl => "acl.txt",
    connection => "connection.txt",
    connection_auth => "connection_auth.txt",
    errors_and_arity => "errors_and_arity.txt",
    resp3 => "resp3.txt",
    time_dependent => "time_dependent.txt",
    lists => "lists.txt",
    lists_encoding => "lists_encoding.txt",
    hashes => "hashes.txt",
    hashes_encoding => "hashes_encoding.txt",
    streams => "streams.txt",
    streams_groups => "streams_groups.txt",
    sets => "sets.txt",
    zsets => "zsets.txt",
    zsets_ranges => "zsets_ranges.txt",
    geo => "geo.txt",
    sets_zsets_encoding => "sets_zsets_encoding.txt",
    sort => "sort.txt",
    functions => "functions.txt",
    scripting => "scripting.txt",
    scripting_libs => "scripting_libs.txt",
    server_config => "server_config.txt",
    latency => "latency.txt",
    transactions => "transactions.txt",
    introspection => "introspection.txt",
    scan => "scan.txt",
    pubsub => "pubsub.txt",
    scripting_sandbox => "scripting_sandbox.txt",
    scripting_sandbox_globals => "scripting_sandbox_globals.txt",
    suite_helpers => "suite_helpers.txt",
}

/// Every script file has a test (a new file cannot be silently skipped).
#[test]
fn every_script_is_listed() {
    let dir = format!("{}/tests/differential", env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read tests/differential") {
        let name = entry.expect("dir entry").file_name().to_string_lossy().into_owned();
        if name.ends_with(".txt") && !ALL_SCRIPTS.contains(&name.as_str()) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "add these scripts to the scripts! list in tests/differential.rs: {missing:?}");
}

/// The harness itself: a mismatch is detected and reported (runs against the real server only).
#[test]
fn harness_detects_mismatch() {
    assert!(compare(&Mode::Exact, b"+OK\r\n", b"+OK\r\n").is_none());
    assert!(compare(&Mode::Exact, b"+OK\r\n", b"-ERR x\r\n").is_some());
    assert!(compare(&Mode::TypeOnly, b":5\r\n", b":7\r\n").is_none());
    assert!(compare(&Mode::Near(1), b":100\r\n", b":99\r\n").is_none());
    assert!(compare(&Mode::Near(1), b":100\r\n", b":97\r\n").is_some());
    assert!(compare(&Mode::Near(5), b":-1\r\n", b":-2\r\n").is_some(), "@near: -1 is not -2");
    assert!(compare(&Mode::Near(5), b":-2\r\n", b":1\r\n").is_some(), "@near: no key is not a TTL");
    assert!(compare(&Mode::Near(5), b":0\r\n", b":-1\r\n").is_some(), "@near: 0 is not -1");
    assert!(compare(&Mode::Near(5), b":-2\r\n", b":-2\r\n").is_none());
    assert!(compare(&Mode::Sorted, b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", b"*2\r\n$1\r\nb\r\n$1\r\na\r\n").is_none());
    let ab = b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    assert!(compare(&Mode::Pairs, ab, b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n").is_none());
    assert!(compare(&Mode::Pairs, ab, b"*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n").is_some());
    assert!(compare(&Mode::Pairs, b"%1\r\n$1\r\na\r\n$1\r\n1\r\n", ab).is_some());
    let scan = b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    assert!(
        compare(&Mode::Pairs, scan, b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n").is_none()
    );
    assert!(
        compare(&Mode::Pairs, scan, b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n").is_some()
    );
    let pel =
        |idle: &str, count: &str| format!("*1\r\n*4\r\n$3\r\n1-1\r\n$1\r\nc\r\n:{idle}\r\n:{count}\r\n").into_bytes();
    assert!(compare(&Mode::AnyIdle, &pel("4", "1"), &pel("9", "1")).is_none());
    assert!(compare(&Mode::AnyIdle, &pel("4", "1"), &pel("4", "2")).is_some(), "@anyidle: deliveries count");
    let consumer = |idle: &str, pending: &str| {
        format!("*1\r\n*6\r\n$4\r\nname\r\n$1\r\nc\r\n$7\r\npending\r\n:{pending}\r\n$4\r\nidle\r\n:{idle}\r\n")
            .into_bytes()
    };
    assert!(compare(&Mode::AnyIdle, &consumer("3", "1"), &consumer("70", "1")).is_none());
    assert!(compare(&Mode::AnyIdle, &consumer("3", "1"), &consumer("3", "0")).is_some());
    let blank = Mode::Blank(vec!["usec".into(), "usec_per_call".into()]);
    let stat = |usec: &str, calls: &str| {
        let body = format!("cmdstat_get:calls={calls},usec={usec},usec_per_call={usec}.00,rejected_calls=0\r\n");
        format!("${}\r\n{body}\r\n", body.len()).into_bytes()
    };
    assert!(compare(&blank, &stat("7", "1"), &stat("12", "1")).is_none());
    assert!(compare(&blank, &stat("7", "1"), &stat("7", "2")).is_some(), "@blank keeps calls exact");
    let hist = |usec: &str| format!("*2\r\n$14\r\nhistogram_usec\r\n:{usec}\r\n").into_bytes();
    assert!(compare(&Mode::Blank(vec!["histogram_usec".into()]), &hist("1"), &hist("4")).is_none());
    let scan = |a: &str, b: &str| format!("*2\r\n$1\r\n0\r\n*2\r\n$1\r\n{a}\r\n$1\r\n{b}\r\n").into_bytes();
    assert!(compare(&Mode::Sorted, &scan("a", "b"), &scan("b", "a")).is_none(), "@sorted sorts SCAN's keys");
    assert!(compare(&Mode::Sorted, &scan("a", "b"), &scan("b", "c")).is_some());
    assert_eq!(script_args("@args --a 1\nPING\n@args --b 2\n"), vec!["--a", "1", "--b", "2"]);
    let lines = parse_script("t", "# c\n\n@near 2 TTL k\n@skip TIME\nSET \"a b\" 'c'\n");
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].mode, Mode::Near(2));
    assert_eq!(lines[2].argv, vec![b"SET".to_vec(), b"a b".to_vec(), b"c".to_vec()]);
    let _ = Client::try_connect; // keep the import used in every configuration
}
