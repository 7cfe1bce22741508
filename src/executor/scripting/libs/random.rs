//! `math.random` and `math.randomseed` as Redis replaces them: Redis's rand48 generator
//! (redisLrand48), so a script sees the sequence Redis gives. The state starts where C's rand48
//! starts and is never reseeded between scripts (Redis 7.0 stopped resetting it per EVAL), so a
//! fresh server's first `math.random(1000)` is 397, as Redis's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use mlua::{Lua, Table, Value};

use super::{c_int_of, func, LibResult, Ret};

/// C's rand48 starting state (X2, X1, X0 = 0x1234, 0xABCD, 0x330E).
const INITIAL: u64 = 0x1234_ABCD_330E;
const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const ADDEND: u64 = 0xB;
const MASK: u64 = (1 << 48) - 1;
/// REDIS_LRAND48_MAX.
const LRAND48_MAX: i64 = i32::MAX as i64;

/// Advances the state; the next 31-bit value (redisLrand48).
fn lrand48(state: &AtomicU64) -> i64 {
    let x = state.load(Ordering::Relaxed).wrapping_mul(MULTIPLIER).wrapping_add(ADDEND) & MASK;
    state.store(x, Ordering::Relaxed);
    (x >> 17) as i64 & 0x7fff_ffff
}

/// Replaces `random` and `randomseed` in the `math` table.
pub fn install(lua: &Lua, math: &Table) -> mlua::Result<()> {
    let state = Arc::new(AtomicU64::new(INITIAL));
    let s = state.clone();
    math.raw_set(
        "random",
        func(lua, move |a| -> LibResult<Ret> {
            let r = (lrand48(&s) % LRAND48_MAX) as f64 / LRAND48_MAX as f64;
            let n = match a.len() {
                0 => r,
                1 => {
                    let u = c_int_of(a.check_number(1)?) as f64;
                    if u < 1.0 {
                        return Err(a.arg_error(1, "interval is empty"));
                    }
                    (r * u).floor() + 1.0
                }
                2 => {
                    let l = c_int_of(a.check_number(1)?) as f64;
                    let u = c_int_of(a.check_number(2)?) as f64;
                    if l > u {
                        return Err(a.arg_error(2, "interval is empty"));
                    }
                    (r * (u - l + 1.0)).floor() + l
                }
                _ => return Err(a.error("wrong number of arguments")),
            };
            Ok(Ret::One(Value::Number(n)))
        })?,
    )?;
    math.raw_set(
        "randomseed",
        func(lua, move |a| -> LibResult<Ret> {
            let seed = c_int_of(a.check_number(1)?) as u32 as u64;
            state.store((seed << 16) | 0x330E, Ordering::Relaxed);
            Ok(Ret::One(Value::Nil))
        })?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh redis-server 7.0.15 answers `math.random(1000)` twice with 397 and 841.
    #[test]
    fn sequence_matches_redis_rand48() {
        let state = AtomicU64::new(INITIAL);
        let draw = |u: f64| ((lrand48(&state) % LRAND48_MAX) as f64 / LRAND48_MAX as f64 * u).floor() + 1.0;
        assert_eq!(draw(1000.0), 397.0);
        assert_eq!(draw(1000.0), 841.0);
    }
}
