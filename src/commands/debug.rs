//! DEBUG and its subcommands: the test and introspection hooks Redis's suite relies on (SLEEP,
//! RELOAD, OBJECT, POPULATE, SET-ACTIVE-EXPIRE, PROTOCOL, CHANGE-REPL-ID, ...).

use super::server::{help_reply, sub_syntax_error};
use super::{Args, CmdError, CmdResult, Ctx};
use crate::resp::Reply;
use crate::types::{RStr, Value};

/// DEBUG subcommand [argument ...]
///
/// Test and introspection hooks: SLEEP, SET-ACTIVE-EXPIRE, OBJECT, LOG, ERROR, PROTOCOL,
/// POPULATE, CHANGE-REPL-ID and HELP. SLEEP blocks the executor like Redis blocks its main
/// thread. A known subcommand with the wrong argument count, or an unknown one, gets Redis's
/// "unknown subcommand or wrong number of arguments" error.
/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the dataset (unless NOSAVE), empties it
/// (unless NOFLUSH) and loads the RDB file back. With NOFLUSH a key already present is an error
/// unless MERGE lets the file's value replace it.
fn debug_reload(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (mut merge, mut noflush, mut nosave) = (false, false, false);
    for opt in args.from(2) {
        match &opt.to_ascii_lowercase()[..] {
            b"merge" => merge = true,
            b"noflush" => noflush = true,
            b"nosave" => nosave = true,
            _ => return Err(CmdError::err("DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.")),
        }
    }
    if !nosave && crate::executor::snapshot::save_foreground(ctx.admin()).is_err() {
        return Err(CmdError::err("Error trying to save the DB"));
    }
    let path = std::path::Path::new(&ctx.config().dir).join(&ctx.config().dbfilename);
    let loaded = crate::rdb::load::load_path(&path, ctx.config(), None);
    if !noflush {
        for idx in 0..ctx.state().dbs.len() {
            crate::commands::keys::empty_db(ctx, idx);
        }
        ctx.admin().functions = Default::default();
    }
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("Failed trying to load the RDB file {}: {}", path.display(), e);
            return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
        }
    };
    let dbs = ctx.state().dbs.len();
    if noflush && !merge {
        // Checked before anything is inserted, so a refused reload changes nothing. A library
        // already loaded clashes as a duplicate key does.
        if let Some(lib) =
            loaded.functions.libs.iter().find(|l| ctx.state().functions.libs.iter().any(|o| o.name == l.name))
        {
            tracing::warn!("Failed loading library: Library '{}' already exists", String::from_utf8_lossy(&lib.name));
            return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
        }
        for (idx, src) in loaded.dbs.iter().enumerate().take(dbs) {
            if let Some((key, _, _)) = src.iter_all().find(|(k, _, _)| ctx.state().dbs[idx].get_ref(k).is_some()) {
                tracing::warn!("RDB has duplicated key '{}' in DB {idx}", String::from_utf8_lossy(key));
                return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
            }
        }
    }
    let now = ctx.now_ms();
    let clock = crate::db::lru_clock(now);
    for (idx, src) in loaded.dbs.iter().enumerate().take(dbs) {
        let db = &mut ctx.admin().dbs[idx];
        for (key, value, expire) in src.iter_all() {
            db.remove(key, now);
            db.insert_new(key, value.clone(), expire, clock);
        }
    }
    for lib in loaded.functions.libs {
        ctx.admin().functions.libs.retain(|l| l.name != lib.name);
        ctx.admin().functions.libs.push(lib);
    }
    ctx.admin().functions.libs.sort_by(|a, b| a.name.cmp(&b.name));
    crate::executor::scripting::host::reload_all(ctx.admin());
    tracing::info!("DB reloaded by DEBUG RELOAD");
    Ok(Reply::Ok)
}

pub fn debug(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let n = args.len();
    let sub = args.get(1).to_ascii_lowercase();
    match (&sub[..], n) {
        (b"help", 2) => Ok(debug_help()),
        (b"sleep", 3) => {
            let secs = atof(args.get(2));
            if secs > 0.0 && secs.is_finite() {
                std::thread::sleep(std::time::Duration::from_micros((secs * 1e6) as u64));
            }
            Ok(Reply::Ok)
        }
        (b"reload", _) => debug_reload(ctx, args),
        (b"drop-cluster-packet-filter", 3) => {
            let t = args.i64(2)?;
            if let Some(c) = ctx.admin().cluster.as_deref_mut() {
                c.drop_packet_filter = t;
            }
            Ok(Reply::Ok)
        }
        (b"clusterlink", 5) if args.is(2, "kill") => {
            if ctx.state().cluster.is_none() {
                return Err(CmdError::err("Debug option only available for cluster mode enabled setup!"));
            }
            let id = args.get(4);
            let Some(name) = crate::cluster::parse_name(id)
                .filter(|n| ctx.admin().cluster.as_ref().is_some_and(|c| c.nodes.contains_key(n)))
            else {
                return Err(CmdError::echo(&[b"ERR Unknown node ", id]));
            };
            let (to, from) = match args.get(3).to_ascii_lowercase().as_slice() {
                b"from" => (false, true),
                b"to" => (true, false),
                b"all" => (true, true),
                _ => return Err(CmdError::echo(&[b"ERR Unknown direction ", args.get(3)])),
            };
            crate::executor::cluster::kill_links(ctx.admin(), name, to, from);
            Ok(Reply::Ok)
        }
        (b"set-active-expire", 3) => {
            ctx.admin().active_expire_enabled = crate::util::num::atoi(args.get(2)) != 0;
            Ok(Reply::Ok)
        }
        (b"object", 3) => debug_object(ctx, args.get(2)),
        (b"log", 3) => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(args.get(2)));
            Ok(Reply::Ok)
        }
        (b"error", 3) => Ok(Reply::Error(args.get(2).to_vec())),
        (b"protocol", 3) => debug_protocol(ctx, args.get(2)),
        (b"populate", 3..=5) => debug_populate(ctx, args),
        (b"digest", 2) => Ok(Reply::StatusOwned(hex(&dataset_digest(ctx)))),
        (b"digest-value", _) => {
            let now = ctx.now_ms();
            let digests = args
                .from(2)
                .map(|key| {
                    let db = ctx.db();
                    let expires = db.expire_at(key, now).is_some();
                    let d = db.peek(key, now).map_or([0u8; 20], |v| value_digest(v, expires));
                    Reply::StatusOwned(hex(&d))
                })
                .collect();
            Ok(Reply::Array(digests))
        }
        (b"aof-flush-sleep", 3) => {
            ctx.admin().aof.flush_sleep_us = crate::util::num::atoi(args.get(2)).max(0) as u64;
            Ok(Reply::Ok)
        }
        (b"set-skip-checksum-validation", 3) => {
            let skip = crate::util::num::atoi(args.get(2)) != 0;
            crate::rdb::format::SKIP_CHECKSUM_VALIDATION.store(skip, std::sync::atomic::Ordering::Relaxed);
            Ok(Reply::Ok)
        }
        (b"quicklist-packed-threshold", 3) => {
            let size = crate::config::parse_memory(&args.str(2));
            if !size.is_some_and(crate::types::list::set_packed_threshold) {
                return Err(CmdError::err("argument must be a memory value bigger than 1 and smaller than 4gb"));
            }
            Ok(Reply::Ok)
        }
        (b"set-disable-deny-scripts", 3) => {
            ctx.admin().scripts_may_call_noscript = crate::util::num::atoi(args.get(2)) != 0;
            Ok(Reply::Ok)
        }
        (b"pause-cron", 3) => {
            ctx.admin().cron_paused = crate::util::num::atoi(args.get(2)) != 0;
            Ok(Reply::Ok)
        }
        // How the client cron resizes the (modelled) reply buffers CLIENT LIST shows.
        (b"replybuffer", 4) if args.is(2, "peak-reset-time") => {
            let policy = &mut ctx.admin().reply_buffer;
            policy.peak_reset_ms = if args.is(3, "never") {
                -1
            } else if args.is(3, "reset") {
                crate::executor::clients::REPLY_BUFFER_PEAK_RESET_MS
            } else {
                args.i64(3)?
            };
            Ok(Reply::Ok)
        }
        (b"replybuffer", 4) if args.is(2, "resizing") => {
            ctx.admin().reply_buffer.resizing = crate::util::num::atoi(args.get(3)) != 0;
            Ok(Reply::Ok)
        }
        (b"loadaof", 2) => {
            if !crate::executor::aof::reload_from_disk(ctx.admin()) {
                std::process::exit(1);
            }
            Ok(Reply::Ok)
        }
        (b"segfault", 2) => {
            // As Redis: a write to a read-only page, so the crash report shows a real fault
            // (si_code SEGV_ACCERR and the faulting address), not a signal sent to ourselves.
            // SAFETY: mmap of one fresh anonymous read-only page; the write to it faults, and
            // the crash handler (or the default action) ends the process.
            unsafe {
                let page = libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if page != libc::MAP_FAILED {
                    std::ptr::write_volatile(page as *mut u8, b'x');
                }
                libc::raise(libc::SIGSEGV);
            }
            Ok(Reply::Ok)
        }
        (b"panic", 2) => {
            // A Rust panic, which the panic hook turns into Redis's bug report and the end of
            // the process (log::caught), as any panic of the server would.
            panic!("DEBUG PANIC called at Unix time {}", ctx.now_ms() / 1000)
        }
        (b"assert", 2) => crate::log::server_assert(&assertion_context(ctx, args), "1 == 2"),
        (b"config-rewrite-force-all", 2) => {
            let path = ctx.config().config_file.clone().unwrap_or_default();
            let result = if path.is_empty() {
                Err(std::io::Error::from_raw_os_error(libc::EFAULT))
            } else {
                super::config::rewrite_file(ctx, &path, true)
            };
            result.map(|()| Reply::Ok).map_err(|e| {
                let why = e.raw_os_error().map(crate::config::strerror).unwrap_or_else(|| e.to_string());
                CmdError::err(format!("CONFIG-REWRITE-FORCE-ALL failed: {why}"))
            })
        }
        (b"htstats", 3..) => {
            let db = args.i64(2)?;
            if db < 0 || db as usize >= ctx.state().dbs.len() {
                return Err(CmdError::err("Out of range database"));
            }
            Ok(Reply::Verbatim("txt", ctx.admin().dbs[db as usize].table_stats().into_bytes()))
        }
        (b"htstats-key", 3..) => {
            let now = ctx.now_ms();
            let Some(value) = ctx.db().peek(args.get(2), now) else { return Err(CmdError::err("no such key")) };
            // Redis's text for each encoding that is a hash table (hashtable sets and hashes,
            // skiplist zsets' member dict).
            let stats = match value {
                Value::Set(set) => set.table_stats(),
                Value::Hash(hash) => hash.table_stats(),
                Value::ZSet(zset) => zset.table_stats(),
                _ => None,
            };
            match stats {
                Some(text) => Ok(Reply::Verbatim("txt", text.into_bytes())),
                None => {
                    Err(CmdError::err("The value stored at the specified key is not represented using an hash table"))
                }
            }
        }
        (b"mallctl", 3 | 4) => debug_mallctl(args, false),
        (b"mallctl-str", 3 | 4) => debug_mallctl(args, true),
        (b"change-repl-id", 2) => {
            ctx.admin().repl.new_history();
            Ok(Reply::Ok)
        }
        // Sends the arguments to the replicas as a command of the stream (tests use it to make
        // a replica fail a command).
        (b"replicate", n) if n >= 3 => {
            crate::executor::replication::feed_raw(ctx.admin(), &args.argv[2..]);
            Ok(Reply::Ok)
        }
        _ => Err(sub_syntax_error(args)),
    }
}

/// DEBUG MALLCTL key [value] / DEBUG MALLCTL-STR key [value]: reads (and first writes, when
/// given) a jemalloc setting, an integer or a string; `VOID` as the value of MALLCTL-STR calls a
/// setting that takes nothing (thread.tcache.flush). Errors carry strerror's text, as Redis's.
fn debug_mallctl(args: &Args, string: bool) -> CmdResult {
    use std::ffi::CString;
    let name = CString::new(args.get(2).to_vec()).map_err(|_| CmdError::err("Invalid argument"))?;
    let err = |code: i32| CmdError::err(crate::config::strerror(code));
    // SAFETY: each mallctl call gets a NUL-terminated name and pointers to locals of the size
    // passed with them; jemalloc writes at most that size.
    unsafe {
        if string {
            if args.len() == 4 && args.is(3, "void") {
                let rc = tikv_jemalloc_sys::mallctl(
                    name.as_ptr(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                );
                return if rc == 0 { Ok(Reply::Ok) } else { Err(err(rc)) };
            }
            let mut old: *const std::ffi::c_char = std::ptr::null();
            let mut len = std::mem::size_of::<*const std::ffi::c_char>();
            let new_value = if args.len() == 4 {
                Some(CString::new(args.get(3).to_vec()).map_err(|_| err(libc::EINVAL))?)
            } else {
                None
            };
            let mut new_ptr = new_value.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
            let (np, nl) = if new_value.is_some() {
                (&mut new_ptr as *mut _ as *mut std::ffi::c_void, std::mem::size_of::<*const std::ffi::c_char>())
            } else {
                (std::ptr::null_mut(), 0)
            };
            let rc = tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                &mut old as *mut _ as *mut std::ffi::c_void,
                &mut len,
                np,
                nl,
            );
            if rc != 0 {
                return Err(err(rc));
            }
            let text = if old.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(old).to_string_lossy().into_owned()
            };
            return Ok(Reply::bulk(text.into_bytes()));
        }
        // Integers: the setting's width is found as Redis finds it, halving the size while
        // jemalloc answers EINVAL; a write-only setting (EPERM on read) is just written.
        let mut value: u64 = if args.len() == 4 { crate::util::num::atoi(args.get(3)) as u64 } else { 0 };
        let mut size = std::mem::size_of::<u64>();
        while size > 0 {
            let mut old: u64 = 0;
            let mut len = size;
            let (np, nl) = if args.len() == 4 {
                (&mut value as *mut u64 as *mut std::ffi::c_void, size)
            } else {
                (std::ptr::null_mut(), 0)
            };
            let rc = tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                &mut old as *mut u64 as *mut std::ffi::c_void,
                &mut len,
                np,
                nl,
            );
            match rc {
                0 => return Ok(Reply::Int(old as i64)),
                libc::EPERM if args.len() == 4 => {
                    if tikv_jemalloc_sys::mallctl(name.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), np, nl)
                        == 0
                    {
                        return Ok(Reply::Ok);
                    }
                    return Err(err(rc));
                }
                libc::EINVAL => size /= 2,
                _ => return Err(err(rc)),
            }
        }
        Err(err(libc::EINVAL))
    }
}

/// `d ^= sha1(data)`.
fn xor_digest(d: &mut [u8; 20], data: &[u8]) {
    use sha1::Digest;
    let h = sha1::Sha1::digest(data);
    for (a, b) in d.iter_mut().zip(h.iter()) {
        *a ^= b;
    }
}

/// `d = sha1(d ^ sha1(data))`: order-sensitive mixing.
fn mix_digest(d: &mut [u8; 20], data: &[u8]) {
    use sha1::Digest;
    xor_digest(d, data);
    let h = sha1::Sha1::digest(&d[..]);
    d.copy_from_slice(&h);
}

fn hex(d: &[u8; 20]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Mixes one value into `d` as Redis's DEBUG digests do: its type code, its contents, and a
/// marker when the key has a TTL. Collections add their elements here as they arrive.
fn object_digest(d: &mut [u8; 20], v: &Value, expires: bool) {
    // Redis's type codes: OBJ_STRING 0, LIST 1, SET 2, ZSET 3, HASH 4, STREAM 6.
    let type_code: u32 = match v {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    };
    mix_digest(d, &type_code.to_be_bytes());
    match v {
        Value::Str(s) => s.with_bytes(|b| mix_digest(d, b)),
        // Ordered values mix each element in; unordered ones xor a digest per element.
        Value::List(l) => {
            for e in l.iter() {
                e.with_bytes(|b| mix_digest(d, b));
            }
        }
        Value::Set(s) => s.for_each(|e| e.with_bytes(|b| xor_digest(d, b))),
        Value::ZSet(z) => z.walk(0, z.len().saturating_sub(1), false, &mut |member, score| {
            let mut e = [0u8; 20];
            mix_digest(&mut e, member);
            mix_digest(&mut e, crate::util::num::fmt_g17(score).as_bytes());
            xor_digest(d, &e);
            true
        }),
        Value::Hash(h) => {
            for (field, value) in h.iter() {
                let mut e = [0u8; 20];
                mix_digest(&mut e, field);
                mix_digest(&mut e, value);
                xor_digest(d, &e);
            }
        }
        Value::Stream(s) => {
            s.range(crate::types::stream::StreamId::MIN, crate::types::stream::StreamId::MAX, false, |entry| {
                mix_digest(d, format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
                entry.for_each_pair(|f, v| {
                    mix_digest(d, &f.to_vec());
                    mix_digest(d, &v.to_vec());
                });
                true
            })
        }
    }
    if expires {
        xor_digest(d, b"!!expire!!");
    }
}

/// DEBUG DIGEST-VALUE's digest of one key's value (all zeros for a missing key).
fn value_digest(v: &Value, expires: bool) -> [u8; 20] {
    let mut d = [0u8; 20];
    object_digest(&mut d, v, expires);
    d
}

/// DEBUG DIGEST: per non-empty database (in order) its index mixed in, then each key's digest
/// (name, then value) xored in, so key order does not matter. All zeros when empty. As Redis,
/// it reads the table as it is: keys past their TTL but not yet deleted count, and nothing is
/// expired by looking (a replica holding such a key until its master's DEL agrees with the
/// master meanwhile).
fn dataset_digest(ctx: &mut Ctx) -> [u8; 20] {
    let mut total = [0u8; 20];
    for (i, db) in ctx.state().dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        mix_digest(&mut total, &(i as u32).to_be_bytes());
        for (k, v, expire) in db.iter_all() {
            let mut d = [0u8; 20];
            mix_digest(&mut d, k);
            object_digest(&mut d, v, expire.is_some());
            xor_digest(&mut total, &d);
        }
    }
    total
}

/// Redis's OBJ_SHARED_REFCOUNT: shared small integers report it as their refcount.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

fn debug_object(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let now = ctx.now_ms();
    let compress = ctx.config().rdbcompression;
    let list_depth = ctx.config().list_compress_depth;
    let shared_ints = crate::executor::evict::shares_integers(ctx.admin());
    let db = ctx.db();
    // As Redis, a direct look in the table: a key past its TTL but not yet expired is shown.
    let idle = db.idle_seconds_peek(key, now).unwrap_or(0);
    let Some(v) = db.get_ref(key) else {
        return Err(CmdError::NoSuchKey);
    };
    let shared = shared_ints && matches!(v.as_str(), Some(RStr::Int(i)) if (0..10000).contains(i));
    let refcount = if shared { SHARED_REFCOUNT } else { 1 };
    let lru = crate::db::lru_clock(now).wrapping_sub(idle as u32) & crate::db::LRU_CLOCK_MAX;
    // A list (a quicklist to Redis 7.0) adds its node figures, as Redis's DEBUG OBJECT does: its
    // nodes are Redis's, their size is counted as listpacks, and the fill is the one the list was
    // made with. The compression is the configuration's now (nodes are never compressed here):
    // Redis shows the list's, which differs only after a CONFIG SET of list-compress-depth.
    let quicklist = match v {
        Value::List(l) => format!(
            " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
            l.node_count(),
            l.len() as f64 / l.node_count().max(1) as f64,
            l.fill(),
            u8::from(list_depth != 0),
            l.listpack_bytes()
        ),
        _ => String::new(),
    };
    Ok(Reply::StatusOwned(format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}{}",
        v as *const Value,
        refcount,
        v.encoding_name(),
        serialized_length(v, compress),
        lru,
        idle,
        quicklist
    )))
}

/// Bytes an RDB length prefix for `n` takes.
fn rdb_len_size(n: usize) -> usize {
    if n < 1 << 6 {
        1
    } else if n < 1 << 14 {
        2
    } else if n as u64 <= u32::MAX as u64 {
        5
    } else {
        9
    }
}

/// Size of a string as RDB would write it: small integers in their int encodings, long
/// compressible strings LZF-compressed, the rest as length + bytes.
fn rdb_string_size(bytes: &[u8]) -> usize {
    if bytes.len() <= 11 {
        if let Some(n) = crate::util::num::parse_i64(bytes) {
            if n.to_string().as_bytes() == bytes {
                if i8::try_from(n).is_ok() {
                    return 2;
                } else if i16::try_from(n).is_ok() {
                    return 3;
                } else if i32::try_from(n).is_ok() {
                    return 5;
                }
            }
        }
    }
    if bytes.len() > 20 {
        if let Ok(c) = lzf::compress(bytes) {
            if c.len() <= bytes.len() - 4 {
                return 1 + rdb_len_size(c.len()) + rdb_len_size(bytes.len()) + c.len();
            }
        }
    }
    rdb_len_size(bytes.len()) + bytes.len()
}

/// DEBUG OBJECT's serializedlength: the value's RDB encoding without its type byte, as Redis's
/// rdbSavedObjectLen (a string is sized without being written; a collection is encoded, which
/// takes as long as in Redis).
fn serialized_length(v: &Value, compress: bool) -> usize {
    match v.as_str() {
        Some(s) => s.with_bytes(rdb_string_size),
        None => {
            crate::rdb::save::encode_value(v, super::dump::DUMP_VERSION, compress).map_or(0, |(_, body)| body.len())
        }
    }
}

fn debug_protocol(ctx: &mut Ctx, kind: &[u8]) -> CmdResult {
    let resp3 = ctx.proto() >= 3;
    let kind = kind.to_ascii_lowercase();
    Ok(match &kind[..] {
        b"string" => Reply::bulk("Hello World"),
        b"integer" => Reply::Int(12345),
        // Redis's fixed test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => Reply::Double(3.141),
        b"bignum" => Reply::BigNumber("1234567999999999999999999999999999999".into()),
        b"null" => Reply::Nil,
        b"array" => Reply::Array((0..3).map(Reply::Int).collect()),
        b"set" => Reply::Set((0..3).map(Reply::Int).collect()),
        b"map" => Reply::Map((0..3).map(|i| (Reply::Int(i), Reply::Bool(i == 1))).collect()),
        b"attrib" => {
            let mut raw = Vec::new();
            if resp3 {
                raw.extend_from_slice(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n");
            }
            raw.extend_from_slice(b"$39\r\nSome real reply following the attribute\r\n");
            Reply::Raw(raw)
        }
        b"push" => {
            if !resp3 {
                return Err(CmdError::err("RESP2 is not supported by this command"));
            }
            Reply::Raw(
                b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n$40\r\nSome real reply following the push reply\r\n".to_vec(),
            )
        }
        b"verbatim" => Reply::Verbatim("txt", b"This is a verbatim\nstring".to_vec()),
        b"true" => Reply::Bool(true),
        b"false" => Reply::Bool(false),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    })
}

/// DEBUG POPULATE count [prefix] [size]: creates `prefix:N` keys holding `value:N` (cut or
/// zero-padded to `size`), skipping names that exist.
fn debug_populate(ctx: &mut Ctx, args: &Args) -> CmdResult {
    // Test data of this server alone: Redis neither logs nor replicates it.
    ctx.no_propagate();
    let positive = || CmdError::err("value is out of range, must be positive");
    let count = crate::util::num::parse_i64(args.get(2)).filter(|&n| n >= 0).ok_or_else(positive)?;
    let prefix: &[u8] = if args.len() >= 4 { args.get(3) } else { b"key" };
    let size = if args.len() == 5 {
        Some(crate::util::num::parse_i64(args.get(4)).filter(|&n| n >= 0).ok_or_else(positive)? as usize)
    } else {
        None
    };
    let now = ctx.now_ms();
    let mut key = Vec::with_capacity(prefix.len() + 21);
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(j.to_string().as_bytes());
        if ctx.db().contains(&key, now) {
            continue;
        }
        let mut val = format!("value:{j}").into_bytes();
        if let Some(size) = size {
            val.resize(size, 0);
        }
        let value = RStr::from_bytes(&val);
        ctx.db().set(&key, Value::Str(value), now);
        ctx.dirty(1);
    }
    Ok(Reply::Ok)
}

fn debug_help() -> Reply {
    help_reply(
        "DEBUG",
        &[
            "AOF-FLUSH-SLEEP <microsec>",
            "    Server will sleep before flushing the AOF, this is used for testing.",
            "ASSERT",
            "    Crash by assertion failed.",
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "CONFIG-REWRITE-FORCE-ALL",
            "    Like CONFIG REWRITE but writes all configuration options, including",
            "    keywords not listed in original configuration file or default values.",
            "CRASH-AND-RECOVER [<milliseconds>]",
            "    Hard crash and restart after a <milliseconds> delay (default 0).",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LEAK <string>",
            "    Create a memory leak of the input string.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "HTSTATS <dbid>",
            "    Return hash table statistics of the specified Redis database.",
            "HTSTATS-KEY <key>",
            "    Like HTSTATS but for the hash table stored at <key>'s value.",
            "LOADAOF",
            "    Flush the AOF buffers on disk and reload the AOF in memory.",
            "REPLICATE <string>",
            "    Replicates the provided string to replicas, allowing data divergence.",
            "MALLCTL <key> [<val>]",
            "    Get or set a malloc tuning integer.",
            "MALLCTL-STR <key> [<val>]",
            "    Get or set a malloc tuning string.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "DROP-CLUSTER-PACKET-FILTER <packet-type>",
            "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
            "OOM",
            "    Crash the server simulating an out-of-memory error.",
            "PANIC",
            "    Crash the server simulating a panic.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
            "    * MERGE: conflicting keys will be loaded from RDB.",
            "    * NOFLUSH: the existing database will not be removed before load, but",
            "      conflicting keys will generate an exception and kill the server.",
            "    * NOSAVE: the database will be loaded from an existing RDB file.",
            "    Examples:",
            "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
            "      the database.",
            "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
            "      existing RDB file.",
            "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
            "      file to the database.",
            "RESTART [<milliseconds>]",
            "    Graceful restart: save config, db, restart after a <milliseconds> delay (default 0).",
            "SDSLEN <key>",
            "    Show low level SDS string info representing `key` and value.",
            "SEGFAULT",
            "    Crash the server with sigsegv.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "STRINGMATCH-TEST",
            "    Run a fuzz tester against the stringmatchlen() function.",
            "STRUCTSIZE",
            "    Return the size of different Redis core C structures.",
            "LISTPACK <key>",
            "    Show low level info about the listpack encoding of <key>.",
            "QUICKLIST <key> [<0|1>]",
            "    Show low level info about the quicklist encoding of <key>.",
            "    The optional argument (0 by default) sets the level of detail",
            "CLIENT-EVICTION",
            "    Show low level client eviction pools info (maxmemory-clients).",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
            "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
            "    In case NEVER is provided the last observed peak will never be reset",
            "    In case RESET is provided the peak reset time will be restored to the default value",
            "REPLYBUFFER RESIZING <0|1>",
            "    Enable or disable the reply buffer resize cron job",
            "CLUSTERLINK KILL <to|from|all> <node-id>",
            "    Kills the link based on the direction to/from (both) with the provided node.",
        ],
    )
}

/// C `strtod` on a whole argument, 0 when it is not a number (DEBUG SLEEP).
fn atof(s: &[u8]) -> f64 {
    crate::util::num::parse_f64(s).unwrap_or(0.0)
}

/// serverAssertWithInfo's context lines for DEBUG ASSERT: the client (its flags as Redis's
/// bits, for the states Ferrodis tracks: MULTI and DENY_BLOCKING while EXEC runs it, PUBSUB,
/// UNIX_SOCKET, TRACKING), its arguments, and the object asserted on (argv[0]: a string, raw or
/// embstr by length).
fn assertion_context(ctx: &Ctx, args: &Args) -> Vec<String> {
    let client = ctx.client();
    let mut flags: u64 = 0;
    if client.in_exec || client.multi.is_some() {
        flags |= 1 << 3 | 1 << 41;
    }
    if ctx.state().pubsub.is_subscribed(client.id) {
        flags |= 1 << 18;
    }
    if client.info.unix {
        flags |= 1 << 11;
    }
    if client.tracking.on {
        flags |= 1 << 31;
    }
    let mut lines = vec![
        "=== ASSERTION FAILED CLIENT CONTEXT ===".to_string(),
        format!("client->flags = {flags}"),
        format!("client->conn = fd={}", client.info.fd),
        format!("client->argc = {}", args.len()),
    ];
    for (j, arg) in args.argv.iter().enumerate() {
        // Redis prints the argument as a C string: up to its first NUL.
        let text = arg.split(|&b| b == 0).next().unwrap_or_default();
        lines.push(format!("client->argv[{j}] = \"{}\" (refcount: 1)", String::from_utf8_lossy(text)));
    }
    let encoding = if args.argv[0].len() <= crate::types::string::EMBSTR_LIMIT { 8 } else { 0 };
    lines.push("=== ASSERTION FAILED OBJECT CONTEXT ===".into());
    lines.push("Object type: 0".into());
    lines.push(format!("Object encoding: {encoding}"));
    lines.push("Object refcount: 1".into());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdb_sizes_match_debug_object() {
        assert_eq!(rdb_string_size(b"123"), 2);
        assert_eq!(rdb_string_size(b"10001"), 3);
        assert_eq!(rdb_string_size(b"barx"), 5);
        assert_eq!(rdb_string_size(&[b'a'; 60]), 12);
        assert_eq!(rdb_string_size(b"012"), 4);
    }

    #[test]
    fn digests_match_redis() {
        use crate::executor::clients::{ClientHandle, ConnInfo};
        let v = Value::Str(RStr::from_bytes(b"bar"));
        assert_eq!(hex(&value_digest(&v, false)), "68467c70ae30376e7ce005bcc8827f5ba7fd67dc");
        assert_eq!(hex(&value_digest(&v, true)), "8ec3828f7209dd3abdf6ee448de8b0c0bd53265f");
        let mut st = crate::executor::State::new(crate::config::Config::default());
        let info = ConnInfo { addr: String::new(), laddr: String::new(), fd: 0, unix: false, local: true, tls: false };
        let mut client =
            crate::executor::clients::Client::new(1, info, std::sync::Arc::new(ClientHandle::default()), 0, true);
        let far = i64::MAX / 2;
        st.dbs[0].set(b"foo", v, 0);
        st.dbs[0].set_expire(b"foo", far);
        st.dbs[0].set(b"n", Value::Str(RStr::from_bytes(b"123")), 0);
        let spec = &super::super::server::COMMANDS[0];
        let mut ctx = Ctx::new(&mut st, &mut client, 1000, spec);
        assert_eq!(hex(&dataset_digest(&mut ctx)), "7568d5279aa6c244d229b00c2026ef70e142ae1c");
        ctx.admin().dbs[1].set(b"x", Value::Str(RStr::from_bytes(b"y")), 0);
        assert_eq!(hex(&dataset_digest(&mut ctx)), "aec541f463b8302e1e5bd3726e790955ab38fa6d");
    }
}
