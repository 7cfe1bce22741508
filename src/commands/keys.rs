//! Generic keyspace commands (DEL, EXISTS, EXPIRE, SCAN, ...). Bootstrap subset.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdResult, CommandSpec, Ctx};
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[spec("del", -2, WRITE, keys(1, -1, 1), acl::KEYSPACE, del)];

/// DEL key [key ...]
///
/// Removes the keys; replies with how many existed.
pub fn del(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let now = ctx.now_ms;
    let mut n = 0;
    for key in args.from(1) {
        if ctx.db().remove(key, now).is_some() {
            n += 1;
            ctx.modified(key);
        }
    }
    Ok(Reply::Int(n))
}
