//! ferrodis-check-rdb: checks an RDB file offline (the counterpart of redis-check-rdb) and can
//! rewrite it for another RDB version.
//!
//! `ferrodis-check-rdb FILE` reads the whole file with the server's loader (every object fully
//! validated, the CRC-64 checked) and prints a report: version, AUX fields, keys per database
//! and per type, expiries, functions and the largest keys. Exit status 0 for a good file; 1 with
//! the offset and reason of the first problem for a bad one.
//!
//! `--convert-to VERSION OUT` also writes the file again as RDB VERSION (9 to 12) with the
//! server's writer, atomically (a temp file beside OUT, fsync, rename). What the target cannot
//! express (hash field TTLs below 12, functions below 10) is refused, never silently dropped.
//! Keys are kept as they are in the file, already-expired ones included; empty collections,
//! which no server keeps, are left out.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Arg, ArgAction, Command};
use ferrodis::db::Db;
use ferrodis::functions::{Libraries, Library};
use ferrodis::rdb::load::{read_file, DecodeOpts, Decoded, KeyMeta, Sink};
use ferrodis::rdb::save::{self, Aux, Options};
use ferrodis::types::Value;

/// How many of the largest keys the report lists.
const TOP: usize = 5;
/// Highest database index a file may select (Redis's `databases` has no hard cap, but an index
/// past this is a corrupt file, not a dataset).
const MAX_DB: u64 = 1 << 16;

/// One key among the largest seen so far.
#[derive(Clone)]
struct Big {
    size: u64,
    db: u64,
    key: Vec<u8>,
    kind: &'static str,
}

/// Keeps the `TOP` largest entries, largest first.
fn offer(list: &mut Vec<Big>, b: Big) {
    if list.len() == TOP && list.last().is_some_and(|l| l.size >= b.size) {
        return;
    }
    let at = list.partition_point(|x| x.size >= b.size);
    list.insert(at, b);
    list.truncate(TOP);
}

/// Element count the report ranks by: a string's length in bytes, a collection's entries.
fn elements(v: &Value) -> u64 {
    match v {
        Value::Str(s) => s.with_bytes(|b| b.len() as u64),
        other => other.free_effort() as u64,
    }
}

#[derive(Default)]
struct Report {
    aux: Vec<(Vec<u8>, Vec<u8>)>,
    db: u64,
    now_ms: i64,
    keys_per_db: BTreeMap<u64, u64>,
    expires_per_db: BTreeMap<u64, u64>,
    types: BTreeMap<&'static str, u64>,
    already_expired: u64,
    empty: u64,
    functions: Vec<(Vec<u8>, Vec<u8>)>,
    by_elements: Vec<Big>,
    by_bytes: Vec<Big>,
    /// The key whose file size `progress` will measure.
    pending: Option<Big>,
    last_offset: u64,
    /// Where the keys go when converting.
    keep: Option<(Vec<Db>, Libraries)>,
}

impl Sink for Report {
    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.aux.push((key.to_vec(), value.to_vec()));
        Ok(())
    }

    fn select_db(&mut self, db: u64) -> Result<(), String> {
        if db >= MAX_DB {
            return Err(format!("SELECTDB {db} is out of range"));
        }
        self.db = db;
        Ok(())
    }

    fn key(&mut self, key: &[u8], value: Decoded, meta: KeyMeta) -> Result<(), String> {
        let kind = value.value.type_name();
        *self.keys_per_db.entry(self.db).or_default() += 1;
        *self.types.entry(kind).or_default() += 1;
        if let Some(at) = meta.expire_ms {
            *self.expires_per_db.entry(self.db).or_default() += 1;
            if at < self.now_ms {
                self.already_expired += 1;
            }
        }
        let empty = value.is_empty_collection();
        if empty {
            self.empty += 1;
        }
        offer(&mut self.by_elements, Big { size: elements(&value.value), db: self.db, key: key.to_vec(), kind });
        self.pending = Some(Big { size: 0, db: self.db, key: key.to_vec(), kind });
        if let (Some((dbs, _)), false) = (self.keep.as_mut(), empty) {
            let idx = self.db as usize;
            if dbs.len() <= idx {
                dbs.resize_with(idx + 1, Db::new);
            }
            if !dbs[idx].insert_new(key, value.into_value(), meta.expire_ms, 0) {
                return Err(format!("duplicate key '{}' in db {idx}", String::from_utf8_lossy(key)));
            }
        }
        Ok(())
    }

    fn function(&mut self, lib: Library) -> Result<(), String> {
        self.functions.push((lib.name.clone(), lib.engine.clone()));
        if let Some((_, libs)) = self.keep.as_mut() {
            if libs.libs.iter().any(|l| l.name == lib.name) {
                return Err(format!("library '{}' appears twice", String::from_utf8_lossy(&lib.name)));
            }
            libs.libs.push(lib);
        }
        Ok(())
    }

    fn progress(&mut self, offset: u64) {
        if let Some(mut b) = self.pending.take() {
            b.size = offset.saturating_sub(self.last_offset);
            offer(&mut self.by_bytes, b);
        }
        self.last_offset = offset;
    }
}

/// Bytes as redis-cli would quote them when they are not plain printable text.
fn show(b: &[u8]) -> String {
    if b.iter().all(|&c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\') {
        return String::from_utf8_lossy(b).into_owned();
    }
    let mut s = String::from("\"");
    for &c in b {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

fn print_report(path: &Path, version: u32, bytes: u64, r: &Report) {
    println!("[info] {}: RDB version {version}, {bytes} bytes", path.display());
    for (k, v) in &r.aux {
        println!("[aux] {} = {}", show(k), show(v));
    }
    let total: u64 = r.keys_per_db.values().sum();
    let expires: u64 = r.expires_per_db.values().sum();
    println!("[info] {total} keys, {expires} with an expire, {} already expired", r.already_expired);
    for (db, n) in &r.keys_per_db {
        println!("[db {db}] {n} keys, {} expires", r.expires_per_db.get(db).copied().unwrap_or(0));
    }
    for (t, n) in &r.types {
        println!("[type] {t}: {n}");
    }
    if r.empty > 0 {
        println!("[info] {} empty collections (a server skips them on load)", r.empty);
    }
    println!("[info] {} function libraries", r.functions.len());
    for (name, engine) in &r.functions {
        println!("[function] {} ({})", show(name), show(engine));
    }
    for b in &r.by_elements {
        println!("[largest by elements] db {} {} {}: {}", b.db, b.kind, show(&b.key), b.size);
    }
    for b in &r.by_bytes {
        println!("[largest by bytes] db {} {} {}: {} bytes", b.db, b.kind, show(&b.key), b.size);
    }
}

/// Writes the converted file beside `out` and renames it into place.
fn write_converted(out: &Path, version: u32, dbs: &[Db], libs: &Libraries) -> Result<u64, String> {
    save::check_version(version, dbs, libs).map_err(|e| format!("cannot convert to RDB {version}: {e}"))?;
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = out.file_name().ok_or_else(|| format!("{} is not a file name", out.display()))?;
    let tmp: PathBuf = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| format!("create {}: {e}", tmp.display()))?;
        let ctime =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let (mut file, n) = save::write_snapshot(
            file,
            dbs,
            libs,
            &Aux { ctime, used_mem: 0, aof_base: false, repl: None },
            &Options::new(version),
        )
        .map_err(|e| format!("write {}: {e}", tmp.display()))?;
        file.flush().and_then(|_| file.sync_all()).map_err(|e| format!("sync {}: {e}", tmp.display()))?;
        drop(file);
        std::fs::rename(&tmp, out).map_err(|e| format!("rename to {}: {e}", out.display()))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(n)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn cli() -> Command {
    Command::new("ferrodis-check-rdb")
        .about("Checks an RDB file and reports what it holds; optionally rewrites it for another RDB version")
        .arg(Arg::new("file").value_name("FILE").required(true).help("the RDB file to check"))
        .arg(
            Arg::new("convert-to")
                .long("convert-to")
                .num_args(2)
                .value_names(["VERSION", "OUT"])
                .action(ArgAction::Set)
                .help("also write the dataset to OUT as RDB VERSION (9, 10, 11 or 12)"),
        )
}

fn main() -> ExitCode {
    let m = cli().get_matches();
    let Some(path) = m.get_one::<String>("file").map(PathBuf::from) else {
        return ExitCode::from(2);
    };
    let convert = match m.get_many::<String>("convert-to").map(|v| v.cloned().collect::<Vec<_>>()) {
        None => None,
        Some(v) => match v[0].parse::<u32>() {
            Ok(n) if (save::MIN_WRITE_VERSION..=save::MAX_WRITE_VERSION).contains(&n) => {
                Some((n, PathBuf::from(&v[1])))
            }
            _ => {
                eprintln!("--convert-to: VERSION must be 9, 10, 11 or 12, not '{}'", v[0]);
                return ExitCode::from(2);
            }
        },
    };
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("[offset 0] cannot open {}: {e}", path.display());
            return ExitCode::from(1);
        }
    };
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let mut report = Report { now_ms, ..Report::default() };
    if convert.is_some() {
        report.keep = Some((Vec::new(), Libraries::default()));
    }
    let info = match read_file(file, &mut report, &DecodeOpts::default()) {
        Ok(info) => info,
        Err(e) => {
            println!("--- RDB ERROR DETECTED ---");
            println!("[offset {}] {}", e.offset, e.reason);
            println!("[info] {} keys read before the error", report.keys_per_db.values().sum::<u64>());
            return ExitCode::from(1);
        }
    };
    print_report(&path, info.version, info.bytes, &report);
    println!("RDB file is OK");
    if let (Some((version, out)), Some((dbs, libs))) = (convert, report.keep.as_ref()) {
        match write_converted(&out, version, dbs, libs) {
            Ok(n) => println!("[convert] wrote {} as RDB {version} ({n} bytes)", out.display()),
            Err(why) => {
                eprintln!("[convert] {why}");
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}
