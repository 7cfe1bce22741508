//! String commands (GET, SET, ...). Bootstrap subset; the family is completed in this module.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::resp::Reply;
use crate::types::{RStr, Value};

pub static COMMANDS: &[CommandSpec] = &[
    spec("get", 2, READONLY | FAST, keys(1, 1, 1), acl::STRING, get),
    spec("set", -3, WRITE | DENYOOM, keys(1, 1, 1), acl::STRING, set),
];

/// GET key
///
/// The string under `key`, nil when absent, WRONGTYPE for other types.
pub fn get(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let now = ctx.now_ms;
    match ctx.db().get(args.key(1), now) {
        None => Ok(Reply::Nil),
        Some(Value::Str(s)) => Ok(Reply::Bulk(s.to_vec())),
        #[allow(unreachable_patterns)]
        Some(_) => Err(CmdError::WrongType),
    }
}

/// SET key value
pub fn set(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let now = ctx.now_ms;
    ctx.db().set(args.key(1), Value::Str(RStr::from_bytes(args.get(2))), now);
    ctx.modified(args.key(1));
    Ok(Reply::Ok)
}
