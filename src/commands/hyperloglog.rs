//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST. An HLL is a plain string
//! in Redis's byte format (`types::hll`), so GET/SET/DUMP/RESTORE move it between ferrodis and
//! Redis unchanged. Strings that are not HLLs answer `WRONGTYPE Key is not a valid HyperLogLog
//! string value.`; sparse bodies that do not decode answer `INVALIDOBJ Corrupted HLL object
//! detected`, at the same points Redis does.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::pubsub::ev;
use crate::resp::Reply;
use crate::types::hll::{self, Corrupt};
use crate::types::{RStr, Value};

pub static COMMANDS: &[CommandSpec] = &[
    spec("pfadd", -2, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HYPERLOGLOG, pfadd),
    spec("pfcount", -2, READONLY | MAY_REPLICATE, keys(1, -1, 1), acl::HYPERLOGLOG, pfcount),
    spec("pfmerge", -2, WRITE | DENYOOM, keys(1, -1, 1), acl::HYPERLOGLOG, pfmerge),
    spec("pfdebug", 3, WRITE | DENYOOM | ADMIN, keys(2, 2, 1), acl::HYPERLOGLOG, pfdebug),
    spec("pfselftest", 1, ADMIN, NO_KEYS, acl::HYPERLOGLOG, pfselftest),
];

/// hll-sparse-max-bytes: past this size a sparse HLL is converted to the dense encoding.
fn sparse_max_bytes(ctx: &Ctx) -> usize {
    ctx.config().hll_sparse_max_bytes
}

fn not_hll() -> CmdError {
    CmdError::Raw("WRONGTYPE Key is not a valid HyperLogLog string value.".into())
}

fn corrupt(_: Corrupt) -> CmdError {
    CmdError::Raw("INVALIDOBJ Corrupted HLL object detected".into())
}

/// Checks that `v` is a string holding an HLL (Redis's isHLLObjectOrReply): WRONGTYPE for other
/// types, the HLL-specific WRONGTYPE for other strings (integer-encoded ones included).
fn check_hll(v: &Value) -> Result<&RStr, CmdError> {
    match v {
        Value::Str(s) => {
            if s.encoding_name() == "int" || !s.with_bytes(hll::is_hll) {
                return Err(not_hll());
            }
            Ok(s)
        }
        #[allow(unreachable_patterns)]
        _ => Err(CmdError::WrongType),
    }
}

/// The bytes of a value already accepted by `check_hll`, made `raw` for in-place edits.
fn hll_bytes_mut(v: &mut Value) -> &mut Vec<u8> {
    match v {
        Value::Str(s) => s.make_raw(),
        #[allow(unreachable_patterns)]
        _ => unreachable!("checked by check_hll"),
    }
}

fn raw_string(bytes: Vec<u8>) -> Value {
    let mut s = RStr::from_bytes_no_int(b"");
    *s.make_raw() = bytes;
    Value::Str(s)
}

/// PFADD key [element ...]
///
/// Adds the elements to the HLL under `key`, creating an empty one when absent. Replies 1 when
/// the key was created or some register changed (so the estimate may have), else 0.
pub fn pfadd(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let max = sparse_max_bytes(ctx);
    // Like Redis, the dirty counter grows by one per changed register (plus one for creation).
    let updated = match ctx.lookup_write(key) {
        None => {
            let mut h = hll::new_sparse();
            let mut updated = 1;
            for ele in args.from(2) {
                updated += hll::add(&mut h, ele, max).map_err(corrupt)? as u64;
            }
            hll::invalidate_card(&mut h);
            ctx.set_key(key, raw_string(h));
            updated
        }
        Some(v) => {
            check_hll(v)?;
            let h = hll_bytes_mut(v);
            let mut updated = 0;
            for ele in args.from(2) {
                updated += hll::add(h, ele, max).map_err(corrupt)? as u64;
            }
            if updated > 0 {
                hll::invalidate_card(h);
            }
            updated
        }
    };
    if updated > 0 {
        ctx.modified(key, updated);
        ctx.notify(ev::STRING, "pfadd", key);
    }
    Ok(Reply::Int((updated > 0) as i64))
}

/// PFCOUNT key [key ...]
///
/// The estimated cardinality of the HLL under `key` (0 when absent), from the cached value when
/// it is still valid, else computed and cached in the string (a write, though the command is
/// read-only). With several keys, the cardinality of their union, computed on a temporary
/// merge and cached nowhere.
pub fn pfcount(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 2 {
        let mut max = vec![0u8; hll::REGISTERS];
        for key in args.from(1) {
            let Some(v) = ctx.lookup_read(key) else {
                continue;
            };
            let s = check_hll(v)?;
            s.with_bytes(|b| hll::merge_into(&mut max, b)).map_err(corrupt)?;
        }
        return Ok(Reply::Int(hll::estimate(&hll::raw_histogram(&max)) as i64));
    }

    let key = args.key(1);
    match ctx.lookup_read(key) {
        None => return Ok(Reply::Int(0)),
        Some(v) => {
            check_hll(v)?;
        }
    }
    // Found by the read lookup above, which stamped its access time once, as Redis's does.
    let Some(v) = ctx.db().get_ref_mut(key) else {
        return Ok(Reply::Int(0));
    };
    let h = hll_bytes_mut(v);
    if let Some(card) = hll::cached_card(h) {
        return Ok(Reply::Int(card as i64));
    }
    let card = hll::count(h).map_err(corrupt)?;
    hll::store_card(h, card);
    ctx.modified(key, 1);
    Ok(Reply::Int(card as i64))
}

/// PFMERGE destkey [sourcekey ...]
///
/// Stores the union of `destkey` and the source HLLs under `destkey` (created when absent). The
/// result is dense as soon as any input is dense, else it stays sparse while it fits.
pub fn pfmerge(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut max = vec![0u8; hll::REGISTERS];
    let mut use_dense = false;
    for key in args.from(1) {
        let Some(v) = ctx.lookup_read(key) else {
            continue;
        };
        let s = check_hll(v)?;
        s.with_bytes(|b| {
            use_dense |= hll::encoding(b) == hll::DENSE;
            hll::merge_into(&mut max, b)
        })
        .map_err(corrupt)?;
    }

    let dest = args.key(1);
    let sparse_max = sparse_max_bytes(ctx);
    let apply = |h: &mut Vec<u8>| -> Result<(), Corrupt> {
        if use_dense {
            hll::sparse_to_dense(h)?;
        }
        for (i, &m) in max.iter().enumerate() {
            if m != 0 {
                // Like Redis, a register that cannot be set leaves the others to go on.
                let _ = hll::set_register(h, i, m, sparse_max);
            }
        }
        hll::invalidate_card(h);
        Ok(())
    };
    match ctx.lookup_write(dest) {
        Some(v) => apply(hll_bytes_mut(v)).map_err(corrupt)?,
        None => {
            let mut h = hll::new_sparse();
            apply(&mut h).map_err(corrupt)?;
            ctx.set_key(dest, raw_string(h));
        }
    }
    ctx.modified(dest, 1);
    ctx.notify(ev::STRING, "pfadd", dest);
    Ok(Reply::Ok)
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key
///
/// Debugging views of an HLL: its 16384 registers (converting a sparse HLL to dense first), the
/// sparse opcodes as text, the encoding name, or an explicit conversion to dense (1 if it
/// converted).
pub fn pfdebug(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(2);
    let Some(v) = ctx.lookup_write(key) else {
        return Err(CmdError::err("The specified key does not exist"));
    };
    check_hll(v)?;
    let h = hll_bytes_mut(v);
    if args.is(1, "getreg") {
        let converted = hll::encoding(h) == hll::SPARSE;
        hll::sparse_to_dense(h).map_err(corrupt)?;
        let regs = &h[hll::HDR_SIZE..];
        let out = (0..hll::REGISTERS).map(|i| Reply::Int(hll::dense_get(regs, i) as i64)).collect();
        if converted {
            ctx.dirty(1);
        }
        Ok(Reply::Array(out))
    } else if args.is(1, "decode") {
        if hll::encoding(h) != hll::SPARSE {
            return Err(CmdError::err("HLL encoding is not sparse"));
        }
        Ok(Reply::Bulk(hll::decode_sparse(h).into_bytes()))
    } else if args.is(1, "encoding") {
        Ok(Reply::Status(if hll::encoding(h) == hll::DENSE { "dense" } else { "sparse" }))
    } else if args.is(1, "todense") {
        let converted = hll::encoding(h) == hll::SPARSE;
        hll::sparse_to_dense(h).map_err(corrupt)?;
        if converted {
            ctx.dirty(1);
        }
        Ok(Reply::Int(converted as i64))
    } else {
        Err(CmdError::echo(&[b"ERR Unknown PFDEBUG subcommand '", args.get(1), b"'"]))
    }
}

/// PFSELFTEST
///
/// Self-test of the HLL implementation: dense registers keep random values without disturbing
/// their neighbours, and sparse and dense HLLs fed the same elements agree, with estimates
/// within a few standard errors. Runs fewer rounds than Redis (which adds ten million
/// elements) to stay quick; replies OK or an error naming the failure.
pub fn pfselftest(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let sparse_max = sparse_max_bytes(ctx);
    let mut regs = vec![0u8; hll::DENSE_SIZE - hll::HDR_SIZE];
    let mut model = vec![0u8; hll::REGISTERS];
    for _ in 0..20 {
        for (i, m) in model.iter_mut().enumerate() {
            *m = fastrand::u8(0..64);
            hll::dense_set(&mut regs, i, *m);
        }
        for (i, &m) in model.iter().enumerate() {
            let got = hll::dense_get(&regs, i);
            if got != m {
                return Err(CmdError::err(format!("TESTFAILED Register {i} should be {m} but is {got}")));
            }
        }
    }

    let mut dense = hll::new_sparse();
    let _ = hll::sparse_to_dense(&mut dense);
    let mut sparse = hll::new_sparse();
    let rel_err = 1.04 / (hll::REGISTERS as f64).sqrt();
    let seed = fastrand::u64(..);
    let mut checkpoint: u64 = 1;
    for j in 1..=1_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let failed =
            hll::add(&mut dense, &ele, sparse_max).is_err() || hll::add(&mut sparse, &ele, sparse_max).is_err();
        if failed {
            return Err(CmdError::err("TESTFAILED corrupted HLL during self-test"));
        }
        if j != checkpoint {
            continue;
        }
        if j < sparse_max as u64 / 2 && hll::encoding(&sparse) != hll::SPARSE {
            return Err(CmdError::err("TESTFAILED sparse encoding not used"));
        }
        let (d, s) = (hll::count(&dense), hll::count(&sparse));
        if d != s {
            return Err(CmdError::err("TESTFAILED dense/sparse disagree"));
        }
        let est = d.unwrap_or(0);
        let abs_err = checkpoint.abs_diff(est);
        let max_err = if j == 10 { 1 } else { (rel_err * 6.0 * checkpoint as f64).ceil() as u64 };
        if abs_err > max_err {
            return Err(CmdError::err(format!("TESTFAILED Too big error. card:{checkpoint} abserr:{abs_err}")));
        }
        checkpoint *= 10;
    }
    Ok(Reply::Ok)
}
