//! GEO commands: GEOADD, GEODIST, GEOHASH, GEOPOS, the GEORADIUS family (with STORE/STOREDIST and
//! the read-only `_RO` forms), GEOSEARCH and GEOSEARCHSTORE. Positions live in an ordinary sorted
//! set whose scores are 52-bit geohashes (`types::geohash` does the arithmetic); this module parses
//! arguments with Redis 7.0's error precedence, scans the nine cells covering a search, and shapes
//! replies.
//!
//! Byte-for-byte points worth knowing:
//! - coordinates are printed as C's `%.17Lf` with trailing zeros removed (a bulk string in RESP2,
//!   a double in RESP3); distances as `%.4f` bulk strings in both protocols;
//! - keywords and units compare as C strings (`strcasecmp`), so an argument is read up to a NUL;
//! - unsorted results come in scan order (cell by cell, score order within a cell); sorted ones
//!   use the same algorithms as Redis so that ties land where they do there: glibc's stable merge
//!   sort for a full sort, and the Bentley-McIlroy partial quicksort Redis runs when COUNT keeps
//!   only the first N (`partial_sort`).

use super::flags::*;
use super::zsets::limits;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::pubsub::ev;
use crate::resp::Reply;
use crate::types::geohash::{self, Search, Shape};
use crate::types::{Value, ZSet};

pub static COMMANDS: &[CommandSpec] = &[
    spec("geoadd", -5, WRITE | DENYOOM, keys(1, 1, 1), acl::GEO, geoadd),
    spec("geodist", -4, READONLY, keys(1, 1, 1), acl::GEO, geodist),
    spec("geohash", -2, READONLY, keys(1, 1, 1), acl::GEO, geohash),
    spec("geopos", -2, READONLY, keys(1, 1, 1), acl::GEO, geopos),
    spec("georadius", -6, WRITE | DENYOOM | MOVABLEKEYS, keys(1, 1, 1), acl::GEO, georadius),
    spec("georadius_ro", -6, READONLY, keys(1, 1, 1), acl::GEO, georadius_ro),
    spec("georadiusbymember", -5, WRITE | DENYOOM | MOVABLEKEYS, keys(1, 1, 1), acl::GEO, georadiusbymember),
    spec("georadiusbymember_ro", -5, READONLY, keys(1, 1, 1), acl::GEO, georadiusbymember_ro),
    spec("geosearch", -7, READONLY, keys(1, 1, 1), acl::GEO, geosearch),
    spec("geosearchstore", -8, WRITE | DENYOOM, keys(1, 2, 1), acl::GEO, geosearchstore),
];

// ---------------------------------------------------------------------------------------------
// argument and reply helpers

/// `strcasecmp(arg, word) == 0`: the argument read as a C string (up to a NUL).
fn ceq(arg: &[u8], word: &str) -> bool {
    let end = memchr::memchr(0, arg).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(word.as_bytes())
}

/// A double as Redis's getDoubleFromObject reads one.
fn parse_double(arg: &[u8]) -> Option<f64> {
    crate::util::num::parse_f64(arg)
}

/// A longitude/latitude pair at `args[i]`, `args[i + 1]`, with Redis's two errors.
fn parse_lonlat(args: &Args, i: usize) -> Result<(f64, f64), CmdError> {
    let lon = parse_double(args.get(i)).ok_or(CmdError::NotFloat)?;
    let lat = parse_double(args.get(i + 1)).ok_or(CmdError::NotFloat)?;
    if !geohash::valid_lonlat(lon, lat) {
        return Err(CmdError::err(format!("invalid longitude,latitude pair {},{}", c_fixed(lon, 6), c_fixed(lat, 6))));
    }
    Ok((lon, lat))
}

/// Metres per unit: M, KM, FT, MI (any case).
fn parse_unit(arg: &[u8]) -> Result<f64, CmdError> {
    for (name, m) in [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)] {
        if ceq(arg, name) {
            return Ok(m);
        }
    }
    Err(CmdError::err("unsupported unit provided. please use M, KM, FT, MI"))
}

/// `radius unit` at `args[i]`: (radius, metres per unit).
fn parse_distance(args: &Args, i: usize) -> Result<(f64, f64), CmdError> {
    let r = parse_double(args.get(i)).ok_or_else(|| CmdError::err("need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((r, parse_unit(args.get(i + 1))?))
}

/// `width height unit` at `args[i]`: (width, height, metres per unit).
fn parse_box(args: &Args, i: usize) -> Result<(f64, f64, f64), CmdError> {
    let w = parse_double(args.get(i)).ok_or_else(|| CmdError::err("need numeric width"))?;
    let h = parse_double(args.get(i + 1)).ok_or_else(|| CmdError::err("need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::err("height or width cannot be negative"));
    }
    Ok((w, h, parse_unit(args.get(i + 2))?))
}

/// C's `%.<decimals>f`, with glibc's spellings of infinities and NaN.
fn c_fixed(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    format!("{v:.decimals$}")
}

/// A distance reply: `%.4f` as a bulk string (RESP3 too).
fn distance_reply(d: f64) -> Reply {
    Reply::Bulk(c_fixed(d, 4).into_bytes())
}

/// A coordinate as Redis's "human" long double: `%.17Lf` of the value, trailing zeros and a
/// trailing dot removed, `-0` printed as `0`. A bulk string in RESP2, a double in RESP3.
fn coord_reply(v: f64, proto: u8) -> Reply {
    let mut s = c_fixed(v, 17);
    if s.contains('.') {
        let keep = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(keep);
    }
    if s == "-0" {
        s = "0".into();
    }
    if proto >= 3 {
        Reply::Raw(format!(",{s}\r\n").into_bytes())
    } else {
        Reply::Bulk(s.into_bytes())
    }
}

fn coords_reply(lon: f64, lat: f64, proto: u8) -> Reply {
    Reply::Array(vec![coord_reply(lon, proto), coord_reply(lat, proto)])
}

// ---------------------------------------------------------------------------------------------
// GEOADD / GEODIST / GEOHASH / GEOPOS

/// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member ...]
///
/// Adds or moves members to positions (stored as ZADD would store their geohash scores),
/// creating the zset when absent. NX only adds, XX only moves, CH counts moved members too.
/// Replies with the number of members added (or changed, with CH).
pub fn geoadd(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = args.get(i);
        if ceq(a, "nx") {
            nx = true;
        } else if ceq(a, "xx") {
            xx = true;
        } else if ceq(a, "ch") {
            ch = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = args.len() - i;
    // The second test is ZADD's (GEOADD hands its work to ZADD): no elements at all.
    if !rest.is_multiple_of(3) || (xx && nx) || rest == 0 {
        return Err(CmdError::Syntax);
    }
    let mut elements = Vec::with_capacity(rest / 3);
    let mut bits = Vec::with_capacity(rest / 3);
    for j in (i..args.len()).step_by(3) {
        let (lon, lat) = parse_lonlat(args, j)?;
        let hash = geohash::encode_score(lon, lat).unwrap_or(0);
        bits.push(hash);
        elements.push((hash as f64, j + 2));
    }
    let options_end = i;
    let key = args.key(1);
    let lim = limits(ctx);
    let created = ctx.write::<ZSet>(key)?.is_none();
    if created && xx {
        return Ok(Reply::Int(0));
    }
    let z = ctx.again_or_create::<ZSet>(key)?;
    let (mut added, mut updated) = (0i64, 0i64);
    for (score, at) in elements {
        let member = args.get(at);
        match z.score(member) {
            Some(cur) => {
                if !nx && cur != score {
                    z.insert(member, score, lim);
                    updated += 1;
                }
            }
            None => {
                if !xx {
                    z.insert(member, score, lim);
                    added += 1;
                }
            }
        }
    }
    if z.is_empty() {
        let now = ctx.now_ms();
        ctx.db().remove(key, now);
    }
    if added + updated > 0 {
        ctx.notify(ev::ZSET, "zadd", key);
        ctx.modified(key, (added + updated) as u64);
        if created {
            ctx.signal_ready(key);
        }
        // Propagated as the ZADD it amounts to (Redis hands GEOADD to ZADD): "zadd", the key
        // and options as given, then each 52-bit score with its member.
        if ctx.propagating() {
            let scores: Vec<String> = bits.iter().map(u64::to_string).collect();
            let mut parts: Vec<&[u8]> = vec![b"zadd"];
            parts.extend(args.from(1).take(options_end - 1));
            for (n, j) in (options_end..args.len()).step_by(3).enumerate() {
                parts.push(scores[n].as_bytes());
                parts.push(args.get(j + 2));
            }
            ctx.propagate_as_parts(&parts);
        }
    }
    Ok(Reply::Int(if ch { added + updated } else { added }))
}

/// GEODIST key member1 member2 [M|KM|FT|MI]
///
/// The distance between two members in the unit (metres by default), four decimals; null when
/// the key or either member is missing.
pub fn geodist(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let to_meters = match args.len() {
        5 => parse_unit(args.get(4))?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let Some(z) = ctx.read::<ZSet>(args.key(1))? else {
        return Ok(Reply::Nil);
    };
    let (Some(s1), Some(s2)) = (z.score(args.get(2)), z.score(args.get(3))) else {
        return Ok(Reply::Nil);
    };
    let (lon1, lat1) = geohash::decode_score(s1);
    let (lon2, lat2) = geohash::decode_score(s2);
    Ok(distance_reply(geohash::distance(lon1, lat1, lon2, lat2) / to_meters))
}

/// GEOHASH key [member ...]
///
/// The standard 11-character geohash string of each member (null for missing ones).
pub fn geohash(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let z = ctx.read::<ZSet>(args.key(1))?;
    let out = args
        .from(2)
        .map(|m| match z.and_then(|z| z.score(m)) {
            Some(s) => Reply::Bulk(geohash::geohash_string(s).to_vec()),
            None => Reply::Nil,
        })
        .collect();
    Ok(Reply::Array(out))
}

/// GEOPOS key [member ...]
///
/// The `[longitude, latitude]` of each member (a null array for missing ones).
pub fn geopos(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let proto = ctx.proto();
    let z = ctx.read::<ZSet>(args.key(1))?;
    let out = args
        .from(2)
        .map(|m| match z.and_then(|z| z.score(m)) {
            Some(s) => {
                let (lon, lat) = geohash::decode_score(s);
                coords_reply(lon, lat, proto)
            }
            None => Reply::NilArray,
        })
        .collect();
    Ok(Reply::Array(out))
}

// ---------------------------------------------------------------------------------------------
// searches

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS / GEORADIUS_RO: centre and radius are positional.
    Coords,
    /// GEORADIUSBYMEMBER / GEORADIUSBYMEMBER_RO: a member and radius are positional.
    Member,
    /// GEOSEARCH / GEOSEARCHSTORE: FROMMEMBER|FROMLONLAT and BYRADIUS|BYBOX options.
    Search,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

/// One member found inside the shape.
struct Found {
    member: Vec<u8>,
    score: f64,
    lon: f64,
    lat: f64,
    /// Metres from the centre.
    dist: f64,
}

/// The position of `member`, or Redis's error for a member it cannot find.
fn member_position(z: &ZSet, member: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(member).map(geohash::decode_score).ok_or_else(|| CmdError::err("could not decode requested zset member"))
}

/// Collects the members inside `search`, cell by cell in Redis's order, stopping once `limit`
/// (when non-zero) have been found.
fn collect(z: &ZSet, search: &Search, limit: usize) -> Vec<Found> {
    let cells = search.cells();
    let mut found = Vec::new();
    let mut last = 0usize;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_none() {
            continue;
        }
        // Huge radii can make neighbours coincide; like Redis, only a repeat of the last scanned
        // cell is skipped (and never a repeat of the centre, which is index 0).
        if last != 0 && *cell == cells[last] {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        let first = z.count_below_score(min as f64, false);
        let end = z.count_below_score(max as f64, false);
        if first < end {
            z.walk(first, end - 1, false, &mut |m, s| {
                let (lon, lat) = geohash::decode_score(s);
                if let Some(dist) = search.contains(lon, lat) {
                    found.push(Found { member: m.to_vec(), score: s, lon, lat, dist });
                }
                !(limit != 0 && found.len() >= limit)
            });
        }
        last = i;
    }
    found
}

/// The qsort comparator Redis uses: by distance, NaN comparing as "less" both ways.
fn cmp_dist(a: f64, b: f64) -> i32 {
    if a > b {
        1
    } else if a == b {
        0
    } else {
        -1
    }
}

/// glibc's qsort: a stable top-down merge sort splitting at n/2.
fn merge_sort(v: &mut [usize], tmp: &mut Vec<usize>, cmp: &dyn Fn(usize, usize) -> i32) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    {
        let (b1, b2) = v.split_at_mut(n1);
        merge_sort(b1, tmp, cmp);
        merge_sort(b2, tmp, cmp);
    }
    tmp.clear();
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if cmp(v[i], v[j]) <= 0 {
            tmp.push(v[i]);
            i += 1;
        } else {
            tmp.push(v[j]);
            j += 1;
        }
    }
    tmp.extend_from_slice(&v[i..n1]);
    // Whatever is left of the second half is already in place at the end.
    let k = tmp.len();
    v[..k].copy_from_slice(tmp);
}

/// Redis's partial sort (`util::pqsort`) of result indexes over positions `lo..=hi`, so that when
/// COUNT keeps the first N results the same members are kept, in the same order, as Redis keeps.
fn partial_sort(v: &mut [usize], lo: usize, hi: usize, cmp: &dyn Fn(usize, usize) -> i32) {
    let n = v.len();
    crate::util::pqsort::pqsort(v, 0, n, &|a: &usize, b: &usize| cmp(*a, *b).cmp(&0), lo, hi);
}

/// The shared body of GEORADIUS, GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and
/// GEOSEARCHSTORE, in Redis's order: source type, positional centre and radius, options left
/// to right (each failing with its own error), option conflicts, a missing source, the search.
fn search_generic(ctx: &mut Ctx, args: &Args, kind: Kind, store_allowed: bool, search_store: bool) -> CmdResult {
    let proto = ctx.proto();
    let src_index = if search_store { 2 } else { 1 };
    let z = ctx.read::<ZSet>(args.key(src_index))?;

    let mut center: Option<(f64, f64)> = None;
    let mut shape: Option<Shape> = None;
    let mut to_meters = 0.0;
    let mut store: Option<usize> = None;
    let base = match kind {
        Kind::Coords => {
            center = Some(parse_lonlat(args, 2)?);
            let (r, m) = parse_distance(args, 4)?;
            shape = Some(Shape::Radius(r));
            to_meters = m;
            6
        }
        Kind::Member => {
            if let Some(z) = z {
                center = Some(member_position(z, args.get(2))?);
                let (r, m) = parse_distance(args, 3)?;
                shape = Some(Shape::Radius(r));
                to_meters = m;
            }
            5
        }
        Kind::Search if search_store => {
            store = Some(1);
            3
        }
        Kind::Search => 2,
    };
    let is_search = kind == Kind::Search;

    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut storedist = false;
    let mut order = Order::None;
    let mut count: i64 = 0;
    let remaining = args.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let at = base + i;
        let a = args.get(at);
        if ceq(a, "withdist") {
            withdist = true;
        } else if ceq(a, "withhash") {
            withhash = true;
        } else if ceq(a, "withcoord") {
            withcoord = true;
        } else if ceq(a, "any") {
            any = true;
        } else if ceq(a, "asc") {
            order = Order::Asc;
        } else if ceq(a, "desc") {
            order = Order::Desc;
        } else if ceq(a, "count") && i + 1 < remaining {
            count = args.i64(at + 1)?;
            if count <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if (ceq(a, "store") || ceq(a, "storedist")) && i + 1 < remaining && store_allowed && !is_search {
            store = Some(at + 1);
            storedist = ceq(a, "storedist");
            i += 1;
        } else if ceq(a, "storedist") && is_search && search_store {
            storedist = true;
        } else if ceq(a, "frommember") && i + 1 < remaining && is_search && !fromloc {
            if let Some(z) = z {
                center = Some(member_position(z, args.get(at + 1))?);
            }
            frommember = true;
            i += 1;
        } else if ceq(a, "fromlonlat") && i + 2 < remaining && is_search && !frommember {
            center = Some(parse_lonlat(args, at + 1)?);
            fromloc = true;
            i += 2;
        } else if ceq(a, "byradius") && i + 2 < remaining && is_search && !bybox {
            let (r, m) = parse_distance(args, at + 1)?;
            shape = Some(Shape::Radius(r));
            to_meters = m;
            byradius = true;
            i += 2;
        } else if ceq(a, "bybox") && i + 3 < remaining && is_search && !byradius {
            let (w, h, m) = parse_box(args, at + 1)?;
            shape = Some(Shape::Box { width: w, height: h });
            to_meters = m;
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }

    if store.is_some() && (withdist || withhash || withcoord) {
        let what = if search_store { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(CmdError::err(format!("{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")));
    }
    if is_search && !(frommember || fromloc) {
        return Err(CmdError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            args.str(0)
        )));
    }
    if is_search && !(byradius || bybox) {
        return Err(CmdError::echo(&[b"ERR exactly one of BYRADIUS and BYBOX can be specified for ", args.get(0)]));
    }
    if any && count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }

    let (Some(z), Some((lon, lat)), Some(shape)) = (z, center, shape) else {
        // No source key: an empty result (the destination of a store is deleted).
        return match store {
            Some(dst) => store_result(ctx, args.key(dst), Vec::new(), ""),
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    if count != 0 && order == Order::None && !any {
        order = Order::Asc;
    }
    let search = Search { lon, lat, shape, to_meters };
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let found = collect(z, &search, if any { count } else { 0 });
    if found.is_empty() && store.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }

    let returned = if count == 0 { found.len() } else { found.len().min(count) };
    let mut idx: Vec<usize> = (0..found.len()).collect();
    if order != Order::None {
        let sign = if order == Order::Desc { -1 } else { 1 };
        let cmp = |a: usize, b: usize| sign * cmp_dist(found[a].dist, found[b].dist);
        if returned == found.len() {
            merge_sort(&mut idx, &mut Vec::with_capacity(found.len()), &cmp);
        } else {
            partial_sort(&mut idx, 0, returned - 1, &cmp);
        }
    }
    idx.truncate(returned);

    if let Some(dst) = store {
        let pairs: Vec<(Vec<u8>, f64)> = idx
            .iter()
            .map(|&k| {
                let f = &found[k];
                (f.member.clone(), if storedist { f.dist / to_meters } else { f.score })
            })
            .collect();
        let event = if is_search { "geosearchstore" } else { "georadiusstore" };
        return store_result(ctx, args.key(dst), pairs, event);
    }

    let options = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
    let out = idx
        .iter()
        .map(|&k| {
            let f = &found[k];
            if options == 0 {
                return Reply::Bulk(f.member.clone());
            }
            let mut item = Vec::with_capacity(options + 1);
            item.push(Reply::Bulk(f.member.clone()));
            if withdist {
                item.push(distance_reply(f.dist / to_meters));
            }
            if withhash {
                item.push(Reply::Int(geohash::c_double_to_i64(f.score)));
            }
            if withcoord {
                item.push(coords_reply(f.lon, f.lat, proto));
            }
            Reply::Array(item)
        })
        .collect();
    Ok(Reply::Array(out))
}

/// Stores a search result as the zset `dst` (replacing whatever was there, TTL included) and
/// replies with its size; an empty result deletes `dst`.
fn store_result(ctx: &mut Ctx, dst: &[u8], mut pairs: Vec<(Vec<u8>, f64)>, event: &str) -> CmdResult {
    let now = ctx.now_ms();
    if pairs.is_empty() {
        if ctx.db().remove(dst, now).is_some() {
            ctx.modified(dst, 1);
            ctx.notify(ev::GENERIC, "del", dst);
        }
        return Ok(Reply::Int(0));
    }
    // Results are distinct members; keep that an invariant of what is stored whatever happens.
    let mut seen = std::collections::HashSet::with_capacity(pairs.len());
    pairs.retain(|(m, _)| seen.insert(m.clone()));
    let n = pairs.len();
    let z = ZSet::from_pairs(pairs, limits(ctx));
    ctx.set_key(dst, Value::ZSet(Box::new(z)));
    ctx.notify(ev::ZSET, event, dst);
    ctx.modified(dst, n as u64);
    Ok(Reply::Int(n as i64))
}

/// GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key|STOREDIST key]
///
/// Members within `radius` of a position (optionally with distance, geohash and coordinates,
/// sorted by distance, limited to the nearest `count` or to any `count`); STORE saves them with
/// their geohashes, STOREDIST with their distances, and replies with how many.
pub fn georadius(ctx: &mut Ctx, args: &Args) -> CmdResult {
    search_generic(ctx, args, Kind::Coords, true, false)
}

/// GEORADIUS_RO key longitude latitude radius M|KM|FT|MI [options]
///
/// GEORADIUS without STORE/STOREDIST.
pub fn georadius_ro(ctx: &mut Ctx, args: &Args) -> CmdResult {
    search_generic(ctx, args, Kind::Coords, false, false)
}

/// GEORADIUSBYMEMBER key member radius M|KM|FT|MI [options] [STORE key|STOREDIST key]
///
/// GEORADIUS centred on a member's position.
pub fn georadiusbymember(ctx: &mut Ctx, args: &Args) -> CmdResult {
    search_generic(ctx, args, Kind::Member, true, false)
}

/// GEORADIUSBYMEMBER_RO key member radius M|KM|FT|MI [options]
///
/// GEORADIUSBYMEMBER without STORE/STOREDIST.
pub fn georadiusbymember_ro(ctx: &mut Ctx, args: &Args) -> CmdResult {
    search_generic(ctx, args, Kind::Member, false, false)
}

/// GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude
/// BYRADIUS radius unit|BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD]
/// [WITHDIST] [WITHHASH]
///
/// Members inside a circle or an axis-aligned box around a member or a position.
pub fn geosearch(ctx: &mut Ctx, args: &Args) -> CmdResult {
    search_generic(ctx, args, Kind::Search, false, false)
}

/// GEOSEARCHSTORE destination source FROMMEMBER ...|FROMLONLAT ... BYRADIUS ...|BYBOX ...
/// [ASC|DESC] [COUNT count [ANY]] [STOREDIST]
///
/// GEOSEARCH whose result is stored in `destination` (scores: geohashes, or distances with
/// STOREDIST); replies with the number of members stored.
pub fn geosearchstore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    search_generic(ctx, args, Kind::Search, false, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_parse_like_redis() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"0x10"), Some(16.0));
        assert_eq!(parse_double(b"1e400"), None);
        assert_eq!(parse_double(b"1e-400"), None);
        assert_eq!(parse_double(b"0e-400"), Some(0.0));
        assert_eq!(parse_double(b" 1"), None);
        assert_eq!(parse_double(b"1 "), None);
        assert_eq!(parse_double(b"nan"), None);
        assert_eq!(parse_double(b""), None);
        assert_eq!(parse_double(b"-"), None);
        assert_eq!(parse_double(b".5"), Some(0.5));
    }

    #[test]
    fn coordinates_print_like_redis() {
        let (lon, lat) = geohash::decode_score(3479099956230698.0);
        assert_eq!(coord_reply(lon, 2), Reply::Bulk(b"13.36138933897018433".to_vec()));
        assert_eq!(coord_reply(lat, 3), Reply::Raw(b",38.11555639549629859\r\n".to_vec()));
        assert_eq!(coord_reply(85.05112878, 2), Reply::Bulk(b"85.0511287799999991".to_vec()));
        assert_eq!(coord_reply(180.0, 2), Reply::Bulk(b"180".to_vec()));
        assert_eq!(coord_reply(-0.0, 2), Reply::Bulk(b"0".to_vec()));
    }

    fn check_sorts(d: &[f64]) {
        let cmp = |a: usize, b: usize| cmp_dist(d[a], d[b]);
        let mut v: Vec<usize> = (0..d.len()).collect();
        merge_sort(&mut v, &mut Vec::new(), &cmp);
        assert!(v.windows(2).all(|w| d[w[0]] <= d[w[1]]), "{v:?}");
        for k in 1..=d.len() {
            let mut v: Vec<usize> = (0..d.len()).collect();
            partial_sort(&mut v, 0, k - 1, &cmp);
            let mut sorted = d.to_vec();
            sorted.sort_by(f64::total_cmp);
            let got: Vec<f64> = v[..k].iter().map(|&i| d[i]).collect();
            assert_eq!(got, sorted[..k].to_vec());
        }
    }

    #[test]
    fn sorts_sort() {
        check_sorts(&[]);
        check_sorts(&[3.0, 1.0, 2.0]);
        let mut x = 12345u64;
        let d: Vec<f64> = (0..200)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((x >> 33) % 50) as f64
            })
            .collect();
        check_sorts(&d);
    }
}
