//! Seeded random differential test over the collection types: the same random sequence of list,
//! hash, set and sorted-set commands (plus a few string and keyspace commands) goes to a fresh real
//! redis-server and a fresh ferrodis, and each reply is compared; at the end the whole dataset is
//! compared key by key (type, encoding, contents).
//!
//! Both servers get low encoding thresholds at the start (CONFIG SET), so collections cross from
//! their small encoding (intset, listpack) to the big one (hashtable, skiplist) under the commands.
//! The dataset comparison includes each list's DUMP (its payload shows the quicklist's nodes) and
//! the DUMP of every collection Redis holds in a small encoding (intset, listpack).
//! Each type has its own small key pool, and two keys are shared by all types, so WRONGTYPE replies,
//! overwrites and destination-type changes happen too.
//!
//! Replies whose order Redis does not define are compared as sorted lists: set algebra, whole-set
//! SPOP/SRANDMEMBER/ZRANDMEMBER/HRANDFIELD (counts larger than any key, so the selection is
//! determined), and SMEMBERS/HKEYS/HVALS/HGETALL when the real server holds the key in a hashtable
//! (in intset/listpack the order is defined and compared exactly). Commands whose result is random
//! in content are not generated. Lexicographic range commands only touch keys whose members all
//! have score 0 (lex ranges over mixed scores are undefined and implementation-dependent).
//!
//! About 3% of steps are MULTI/EXEC blocks of ordered-reply commands (blocking pops inside answer
//! at once), some steps change the thresholds with CONFIG SET, and the dataset is compared every
//! 500 steps too. `FERRODIS_COLLECTION_SEEDS=100-140,r7` runs extra seeds (r = RESP3). Two seeds
//! run every command through EVAL, so each reply also crosses into Lua and back.
//!
//! Beside the seeded runs: shape checks of replies that are random in content (SRANDMEMBER,
//! ZRANDMEMBER, HRANDFIELD, SPOP), the SSCAN/ZSCAN full-iteration guarantee on big collections, and
//! a sorted-set blocking scenario (wake-ups by ZADD, ZINCRBY, stores and RENAME) against Redis.
//!
//! On mismatch: the seed, the step, the last 20 commands and both replies.

mod common;

use common::seeded::{self, Draws, MixBounds, Run};
use common::{parse_value, show, Client, RedisServer, TestServer, Value};

const SEEDS: &[u64] = &[3, 77, 0x0C01_1EC7];
const STEPS: usize = 2000;
/// Minimum shares of non-error replies (overall, and per command seen 20 times or more).
const MIX: MixBounds = MixBounds { overall: 0.5, per_command: 0.1, min_samples: 20, exempt: &[] };

/// Thresholds set on both servers before a run: small enough that conversions happen often.
const CONFIG: &[(&str, &str)] = &[
    ("set-max-intset-entries", "6"),
    ("hash-max-listpack-entries", "5"),
    ("hash-max-listpack-value", "8"),
    ("zset-max-listpack-entries", "5"),
    ("zset-max-listpack-value", "8"),
    ("list-max-listpack-size", "4"),
];

/// How a reply is compared.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Order {
    /// Byte for byte.
    Exact,
    /// As a sorted list of elements (Redis defines no order).
    Sorted,
    /// As a sorted list of (field, value) pairs (flat array or map).
    SortedPairs,
    /// Exact when the real server holds the key (argument 1) in a small encoding, else `Sorted`.
    SmallExact,
    /// Like SmallExact, but sorted as pairs.
    SmallExactPairs,
}

struct Gen {
    rng: fastrand::Rng,
}

const SHARED: &[&str] = &["x0", "x1"];
const LISTS: &[&str] = &["l0", "l1", "l2"];
const HASHES: &[&str] = &["h0", "h1", "h2"];
const SETS: &[&str] = &["s0", "s1", "s2", "s3"];
const ZSETS: &[&str] = &["z0", "z1", "z2", "z3"];
/// Sorted sets whose members all have score 0 (the only ones lex-range commands see).
const LEXES: &[&str] = &["lex0", "lex1"];

impl Gen {
    /// A key from a type's pool, sometimes a shared key or a key of another type.
    fn key_of(&mut self, pool: &[&str]) -> Vec<u8> {
        let r = self.rng.u8(..100);
        let k = if r < 80 {
            self.rng.pick(pool)
        } else if r < 94 {
            self.rng.pick(SHARED)
        } else {
            let all: [&[&str]; 4] = [LISTS, HASHES, SETS, ZSETS];
            let p = all[self.rng.usize(..4)];
            self.rng.pick(p)
        };
        k.as_bytes().to_vec()
    }

    fn any_key(&mut self) -> Vec<u8> {
        let all: [&[&str]; 5] = [LISTS, HASHES, SETS, ZSETS, SHARED];
        let p = all[self.rng.usize(..5)];
        self.rng.pick(p).as_bytes().to_vec()
    }

    /// A member/field/element: mostly small integers (intset-friendly), some words, some long
    /// values (above the value thresholds), some odd bytes.
    fn member(&mut self) -> Vec<u8> {
        match self.rng.u8(..20) {
            0..=8 => self.rng.i64(-3..20).to_string().into_bytes(),
            9..=14 => self.rng.pick(&["a", "b", "c", "d", "e", "f", "g"]).as_bytes().to_vec(),
            15 => self.rng.pick(&["", "\x00z", "a b", "007", "+1", "1.5", "-0"]).as_bytes().to_vec(),
            16 => self
                .rng
                .pick(&["9223372036854775807", "-9223372036854775808", "9223372036854775808"])
                .as_bytes()
                .to_vec(),
            17 => format!("long-member-{}", self.rng.u8(..4)).into_bytes(),
            _ => self.rng.pick(&["h", "i", "j", "zz"]).as_bytes().to_vec(),
        }
    }

    fn members(&mut self, argv: &mut Vec<Vec<u8>>, max: usize) {
        for _ in 0..self.rng.usize(1..=max) {
            argv.push(self.member());
        }
    }

    /// A hash value / list element value.
    fn value(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0..=4 => self.rng.i64(-100..100).to_string().into_bytes(),
            5 => format!("{}.{}", self.rng.i32(-10..10), self.rng.u32(..100)).into_bytes(),
            6 => b"a-value-longer-than-the-limit".to_vec(),
            7 => Vec::new(),
            _ => self.rng.pick(&["v", "w", "abc", "1e3", "inf", "9223372036854775807"]).as_bytes().to_vec(),
        }
    }

    fn score(&mut self) -> Vec<u8> {
        match self.rng.u8(..20) {
            0..=9 => self.rng.i64(-5..10).to_string().into_bytes(),
            10..=12 => format!("{}.{}", self.rng.i32(-5..5), self.rng.u32(..10)).into_bytes(),
            13 => self.rng.pick(&["inf", "-inf", "+inf"]).as_bytes().to_vec(),
            14 => self.rng.pick(&["0.1", "1e-7", "-0", "1e300", "0.30000000000000004"]).as_bytes().to_vec(),
            15 => self.rng.pick(&["abc", "nan", "", "1 "]).as_bytes().to_vec(),
            _ => "1".into(),
        }
    }

    fn score_bound(&mut self) -> Vec<u8> {
        let s = match self.rng.u8(..10) {
            0 => return self.rng.pick(&["-inf", "+inf", "(-inf", "inf", "abc", "(", "(1x"]).as_bytes().to_vec(),
            _ => self.rng.i64(-5..10).to_string(),
        };
        if self.rng.chance(30) {
            format!("({s}").into_bytes()
        } else {
            s.into_bytes()
        }
    }

    fn lex_bound(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0 => self.rng.pick(&["-", "+", "x", "", "["]).as_bytes().to_vec(),
            _ => {
                let m = self.rng.pick(&["a", "b", "c", "d", "e", "f", "g", "bb", "1"]);
                format!("{}{m}", self.rng.pick(&["[", "("])).into_bytes()
            }
        }
    }

    fn int(&mut self, lo: i64, hi: i64) -> Vec<u8> {
        if self.rng.chance(94) {
            self.rng.i64(lo..=hi).to_string().into_bytes()
        } else {
            self.rng.pick(&["abc", "1.5", "", "9223372036854775807", "-9223372036854775808"]).as_bytes().to_vec()
        }
    }

    fn limit(&mut self, a: &mut Vec<Vec<u8>>) {
        if self.rng.chance(25) {
            a.push("LIMIT".into());
            a.push(self.int(-1, 4));
            a.push(self.int(-1, 4));
        }
    }

    fn list_cmd(&mut self, a: &mut Vec<Vec<u8>>) -> Order {
        macro_rules! push { ($($e:expr),*) => {{ $( a.push(Vec::from($e)); )* }}; }
        let k = self.key_of(LISTS);
        match self.rng.u8(..18) {
            0..=2 => {
                push!(self.rng.pick(&["LPUSH", "RPUSH", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]), k);
                for _ in 0..self.rng.usize(1..5) {
                    push!(self.value());
                }
            }
            3 | 4 => {
                push!(self.rng.pick(&["LPOP", "RPOP"]), k);
                if self.rng.chance(50) {
                    push!(self.int(0, 5));
                }
            }
            5 => push!("LLEN", k),
            6 | 7 => push!("LRANGE", k, self.int(-6, 6), self.int(-6, 6)),
            8 => push!("LINDEX", k, self.int(-6, 6)),
            9 => push!("LSET", k, self.int(-5, 5), self.value()),
            10 => {
                push!("LINSERT", k, self.rng.pick(&["BEFORE", "AFTER", "before", "MIDDLE"]), self.value(), self.value())
            }
            11 => push!("LREM", k, self.int(-2, 2), self.value()),
            12 => push!("LTRIM", k, self.int(-6, 6), self.int(-6, 6)),
            13 => {
                push!("LPOS", k, self.value());
                if self.rng.chance(40) {
                    push!("RANK", self.int(-2, 2));
                }
                if self.rng.chance(40) {
                    push!("COUNT", self.int(0, 3));
                }
            }
            14 => {
                let d = self.key_of(LISTS);
                push!("LMOVE", k, d, self.rng.pick(&["LEFT", "RIGHT"]), self.rng.pick(&["LEFT", "RIGHT", "UP"]));
            }
            15 => push!("RPOPLPUSH", k, self.key_of(LISTS)),
            16 => {
                push!("LMPOP", "2", k, self.key_of(LISTS), self.rng.pick(&["LEFT", "RIGHT"]));
                if self.rng.chance(50) {
                    push!("COUNT", self.int(0, 4));
                }
            }
            _ => push!("LLEN", k),
        }
        Order::Exact
    }

    fn hash_cmd(&mut self, a: &mut Vec<Vec<u8>>) -> Order {
        macro_rules! push { ($($e:expr),*) => {{ $( a.push(Vec::from($e)); )* }}; }
        let k = self.key_of(HASHES);
        match self.rng.u8(..17) {
            0..=3 => {
                push!(self.rng.pick(&["HSET", "HSET", "HMSET"]), k);
                for _ in 0..self.rng.usize(1..4) {
                    push!(self.member(), self.value());
                }
            }
            4 => push!("HSETNX", k, self.member(), self.value()),
            5 => push!("HGET", k, self.member()),
            6 => {
                push!("HMGET", k);
                self.members(a, 3);
            }
            7 => {
                push!("HDEL", k);
                self.members(a, 3);
            }
            8 => push!("HLEN", k),
            9 => push!("HEXISTS", k, self.member()),
            10 => push!("HINCRBY", k, self.member(), self.int(-100, 100)),
            11 => {
                let inc = if self.rng.chance(85) {
                    format!("{}.{}", self.rng.i32(-9..9), self.rng.u32(..100)).into_bytes()
                } else {
                    self.rng.pick(&["abc", "inf", "1e400", "", "5"]).as_bytes().to_vec()
                };
                push!("HINCRBYFLOAT", k, self.member(), inc)
            }
            12 => push!("HSTRLEN", k, self.member()),
            13 | 14 => {
                push!(self.rng.pick(&["HKEYS", "HVALS", "HGETALL"]), k);
                return if a[0] == b"HGETALL" { Order::SmallExactPairs } else { Order::SmallExact };
            }
            15 => {
                push!("HRANDFIELD", k, "100");
                if self.rng.chance(50) {
                    push!("WITHVALUES");
                    return Order::SortedPairs;
                }
                return Order::Sorted;
            }
            _ => push!("HLEN", k),
        }
        Order::Exact
    }

    fn set_cmd(&mut self, a: &mut Vec<Vec<u8>>) -> Order {
        macro_rules! push { ($($e:expr),*) => {{ $( a.push(Vec::from($e)); )* }}; }
        let k = self.key_of(SETS);
        match self.rng.u8(..20) {
            0..=4 => {
                // s0 and s1 get integers almost only, so they live (and convert) as intsets.
                let ints = k == b"s0" || k == b"s1";
                push!("SADD", k);
                for _ in 0..self.rng.usize(1..=4) {
                    let m = if ints && self.rng.chance(95) {
                        self.rng.i64(-3..20).to_string().into_bytes()
                    } else {
                        self.member()
                    };
                    push!(m);
                }
            }
            5 | 6 => {
                push!("SREM", k);
                self.members(a, 3);
            }
            7 => push!("SISMEMBER", k, self.member()),
            8 => {
                push!("SMISMEMBER", k);
                self.members(a, 3);
            }
            9 => push!("SCARD", k),
            10 | 11 => {
                push!("SMEMBERS", k);
                return Order::SmallExact;
            }
            12 => push!("SMOVE", k, self.key_of(SETS), self.member()),
            13 => {
                push!(self.rng.pick(&["SINTER", "SUNION", "SDIFF"]));
                for _ in 0..self.rng.usize(1..4) {
                    push!(self.key_of(SETS));
                }
                return Order::Sorted;
            }
            14 | 15 => {
                push!(self.rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), self.key_of(SETS));
                for _ in 0..self.rng.usize(1..4) {
                    push!(self.key_of(SETS));
                }
            }
            16 => {
                let n = self.rng.usize(1..4);
                push!("SINTERCARD", n.to_string());
                for _ in 0..n {
                    push!(self.key_of(SETS));
                }
                if self.rng.chance(40) {
                    push!("LIMIT", self.int(0, 3));
                }
            }
            17 => {
                push!("SPOP", k, "100");
                return Order::Sorted;
            }
            18 => {
                push!("SRANDMEMBER", k, "100");
                return Order::Sorted;
            }
            _ => push!("SCARD", k),
        }
        Order::Exact
    }

    fn zset_cmd(&mut self, a: &mut Vec<Vec<u8>>) -> Order {
        macro_rules! push { ($($e:expr),*) => {{ $( a.push(Vec::from($e)); )* }}; }
        let k = self.key_of(ZSETS);
        match self.rng.u8(..36) {
            0..=5 => {
                push!("ZADD", k);
                if self.rng.chance(30) {
                    push!(self.rng.pick(&["NX", "XX", "GT", "LT", "CH", "CH", "INCR"]));
                    if self.rng.chance(30) {
                        push!(self.rng.pick(&["NX", "XX", "GT", "LT", "CH"]));
                    }
                }
                for _ in 0..self.rng.usize(1..4) {
                    push!(self.score(), self.member());
                }
            }
            6 => push!("ZINCRBY", k, self.score(), self.member()),
            7 | 8 => {
                push!("ZREM", k);
                self.members(a, 3);
            }
            9 => push!("ZCARD", k),
            10 => push!("ZSCORE", k, self.member()),
            11 => {
                push!("ZMSCORE", k);
                self.members(a, 3);
            }
            12 => push!(self.rng.pick(&["ZRANK", "ZREVRANK"]), k, self.member()),
            13 | 14 => {
                push!("ZRANGE", k, self.int(-6, 6), self.int(-6, 6));
                if self.rng.chance(30) {
                    push!("REV");
                }
                if self.rng.chance(50) {
                    push!("WITHSCORES");
                }
            }
            15 | 16 => {
                push!("ZRANGE", k);
                let rev = self.rng.chance(30);
                let (lo, hi) = (self.score_bound(), self.score_bound());
                push!(lo, hi, "BYSCORE");
                if rev {
                    push!("REV");
                }
                self.limit(a);
                if self.rng.chance(50) {
                    push!("WITHSCORES");
                }
            }
            17 => {
                push!(self.rng.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]), k, self.score_bound(), self.score_bound());
                if self.rng.chance(40) {
                    push!("WITHSCORES");
                }
                self.limit(a);
            }
            18 => push!("ZREVRANGE", k, self.int(-6, 6), self.int(-6, 6), "WITHSCORES"),
            19 => push!("ZCOUNT", k, self.score_bound(), self.score_bound()),
            20 => push!("ZREMRANGEBYRANK", k, self.int(-5, 5), self.int(-5, 5)),
            21 => push!("ZREMRANGEBYSCORE", k, self.score_bound(), self.score_bound()),
            22 | 23 => {
                push!(self.rng.pick(&["ZPOPMIN", "ZPOPMAX"]), k);
                if self.rng.chance(50) {
                    push!(self.int(0, 4));
                }
            }
            24 => {
                push!("ZMPOP", "2", k, self.key_of(ZSETS), self.rng.pick(&["MIN", "MAX"]));
                if self.rng.chance(50) {
                    push!("COUNT", self.int(0, 4));
                }
            }
            25 => {
                push!(self.rng.pick(&["BZPOPMIN", "BZPOPMAX"]), k, self.key_of(ZSETS), "0");
            }
            26 | 27 => {
                push!(self.rng.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), self.key_of(ZSETS));
                self.zset_sources(a);
            }
            28 => {
                push!(self.rng.pick(&["ZUNION", "ZINTER", "ZDIFF"]));
                self.zset_sources(a);
                if self.rng.chance(60) {
                    push!("WITHSCORES");
                }
            }
            29 => {
                push!("ZRANGESTORE", self.key_of(ZSETS), k, self.int(-5, 5), self.int(-5, 5));
            }
            30 => {
                push!("ZRANGESTORE", self.key_of(ZSETS), k, self.score_bound(), self.score_bound(), "BYSCORE");
                self.limit(a);
            }
            31 => {
                let n = self.rng.usize(1..3);
                push!("ZINTERCARD", n.to_string());
                for _ in 0..n {
                    push!(self.key_of(ZSETS));
                }
            }
            32 => {
                push!("ZRANDMEMBER", k, "100");
                if self.rng.chance(50) {
                    push!("WITHSCORES");
                    return Order::SortedPairs;
                }
                return Order::Sorted;
            }
            _ => self.lex_cmd(a),
        }
        Order::Exact
    }

    /// numkeys, keys (sets allowed as sources), then WEIGHTS/AGGREGATE sometimes.
    fn zset_sources(&mut self, a: &mut Vec<Vec<u8>>) {
        let n = self.rng.usize(1..4);
        a.push(n.to_string().into_bytes());
        for _ in 0..n {
            let k = if self.rng.chance(15) { self.key_of(SETS) } else { self.key_of(ZSETS) };
            a.push(k);
        }
        let diff = a[0].starts_with(b"ZDIFF");
        if !diff && self.rng.chance(30) {
            a.push("WEIGHTS".into());
            for _ in 0..n {
                a.push(self.rng.pick(&["1", "2", "-1", "0.5", "0", "inf"]).into());
            }
        }
        if !diff && self.rng.chance(30) {
            a.push("AGGREGATE".into());
            a.push(self.rng.pick(&["SUM", "MIN", "MAX"]).into());
        }
    }

    fn lex_cmd(&mut self, a: &mut Vec<Vec<u8>>) {
        macro_rules! push { ($($e:expr),*) => {{ $( a.push(Vec::from($e)); )* }}; }
        let k = self.rng.pick(LEXES);
        match self.rng.u8(..8) {
            0 | 1 => {
                push!("ZADD", k);
                for _ in 0..self.rng.usize(1..4) {
                    push!("0", self.rng.pick(&["a", "b", "c", "d", "e", "f", "g", "bb", "1", "long-lex-member"]));
                }
            }
            2 => {
                push!("ZRANGE", k, self.lex_bound(), self.lex_bound(), "BYLEX");
                if self.rng.chance(30) {
                    push!("REV");
                }
                self.limit(a);
            }
            3 => {
                push!(self.rng.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]), k, self.lex_bound(), self.lex_bound());
                self.limit(a);
            }
            4 => push!("ZLEXCOUNT", k, self.lex_bound(), self.lex_bound()),
            5 => push!("ZREMRANGEBYLEX", k, self.lex_bound(), self.lex_bound()),
            6 => push!("ZRANGESTORE", self.rng.pick(LEXES), k, self.lex_bound(), self.lex_bound(), "BYLEX"),
            _ => push!("ZRANGE", k, "0", "-1"),
        }
    }

    fn other_cmd(&mut self, a: &mut Vec<Vec<u8>>) -> Order {
        macro_rules! push { ($($e:expr),*) => {{ $( a.push(Vec::from($e)); )* }}; }
        // Strings and renames land mostly on the shared keys, so the typed pools keep their types
        // often enough for commands to do work; DEL recycles keys taken over by another type.
        match self.rng.u8(..13) {
            0 => {
                let k = if self.rng.chance(85) { self.rng.pick(SHARED).as_bytes().to_vec() } else { self.any_key() };
                push!("SET", k, self.value())
            }
            1 => push!("GET", self.any_key()),
            2..=4 => push!("DEL", self.any_key()),
            5 | 6 => push!("TYPE", self.any_key()),
            7 | 8 => push!("OBJECT", "ENCODING", self.any_key()),
            9 => push!("EXISTS", self.any_key(), self.any_key()),
            10 => {
                let dst = if self.rng.chance(70) { self.rng.pick(SHARED).as_bytes().to_vec() } else { self.any_key() };
                push!(self.rng.pick(&["RENAME", "COPY"]), self.any_key(), dst)
            }
            11 => push!("DBSIZE"),
            _ => {
                // Thresholds move under the data: later writes convert (never back) at new points.
                let (name, _) = CONFIG[self.rng.usize(..CONFIG.len())];
                let v = if name == "list-max-listpack-size" {
                    self.rng.pick(&["1", "2", "4", "-1", "-2"]).to_string()
                } else {
                    self.rng.u8(0..10).to_string()
                };
                push!("CONFIG", "SET", name, v)
            }
        }
        Order::Exact
    }

    fn command(&mut self) -> (Vec<Vec<u8>>, Order) {
        let mut a = Vec::new();
        let order = match self.rng.u8(..20) {
            0..=3 => self.list_cmd(&mut a),
            4..=7 => self.hash_cmd(&mut a),
            8..=12 => self.set_cmd(&mut a),
            13..=18 => self.zset_cmd(&mut a),
            _ => self.other_cmd(&mut a),
        };
        (a, order)
    }
}

/// Sorts an aggregate reply's elements (or element pairs) so unordered replies compare equal.
fn normalize(bytes: &[u8], pairs: bool) -> Value {
    match parse_value(bytes) {
        Value::Agg(k, Some(items)) => {
            let key = |v: &Value| format!("{v:?}");
            if pairs && (items.len() % 2 == 0) && !items.iter().any(|v| matches!(v, Value::Agg(..))) {
                let mut chunks: Vec<Vec<Value>> = items.chunks(2).map(|c| c.to_vec()).collect();
                chunks.sort_by_key(|c| format!("{c:?}"));
                Value::Agg(k, Some(chunks.into_iter().flatten().collect()))
            } else {
                // RESP3 pairs are nested arrays: sorting the elements sorts the pairs.
                let mut items = items;
                items.sort_by_key(key);
                Value::Agg(k, Some(items))
            }
        }
        other => other,
    }
}

fn small_encoding(c: &mut Client, key: &[u8]) -> bool {
    let enc = c.cmd(&[b"OBJECT".as_slice(), b"ENCODING", key]);
    enc.ends_with(b"intset\r\n") || enc.ends_with(b"listpack\r\n")
}

fn agree(order: Order, expected: &[u8], actual: &[u8], small: bool) -> bool {
    if expected == actual {
        return true;
    }
    let pairs = matches!(order, Order::SortedPairs | Order::SmallExactPairs);
    match order {
        Order::Exact => false,
        Order::SmallExact | Order::SmallExactPairs if small => false,
        _ => normalize(expected, pairs) == normalize(actual, pairs),
    }
}

fn configure(c: &mut Client, who: &str) {
    for (name, value) in CONFIG {
        let r = c.cmd(&["CONFIG", "SET", name, value]);
        assert_eq!(r, b"+OK\r\n", "{who}: CONFIG SET {name} {value}: {}", show(&r));
    }
}

fn run_seed(seed: u64, proto: u8) {
    run_seed_with(seed, proto, false)
}

/// `scripted`: every command but MULTI/EXEC goes through a script instead
/// (`EVAL "redis.setresp(N) return redis.pcall(unpack(ARGV))" 0 cmd args...`, N alternating 2
/// and 3), so each reply is converted into Lua and back, in both protocols.
fn run_seed_with(seed: u64, proto: u8, scripted: bool) {
    let mut run = Run::start("random collections", seed, proto, 1);
    if scripted {
        run = run.with_context("through scripts");
    }
    let (rc, fc) = run.clients(0);
    configure(rc, "redis");
    configure(fc, "ferrodis");
    let mut gen = Gen { rng: fastrand::Rng::with_seed(seed) };
    let mut encodings = std::collections::BTreeMap::<String, usize>::new();
    let mut errors = std::collections::BTreeMap::<String, usize>::new();
    for step in 0..STEPS {
        let mut batch = Vec::new();
        if gen.rng.chance(3) {
            // A transaction of ordered-reply commands; blocking pops inside MULTI answer at once.
            batch.push((vec![b"MULTI".to_vec()], Order::Exact));
            let n = gen.rng.usize(2..5);
            while batch.len() <= n {
                let (argv, order) = gen.command();
                if order == Order::Exact {
                    batch.push((argv, order));
                }
            }
            batch.push((vec![b"EXEC".to_vec()], Order::Exact));
        } else {
            let (argv, order) = gen.command();
            if argv[0].starts_with(b"BZPOP") {
                // Never block: only sent when one of its keys holds a non-empty sorted set (or is
                // of the wrong type, which errors at once) on the real server.
                let rc = run.clients(0).0;
                let busy = argv[1..3].iter().any(|k| rc.cmd(&[b"EXISTS".as_slice(), k]) == b":1\r\n");
                if !busy {
                    continue;
                }
            }
            batch.push((argv, order));
        }
        for (argv, order) in batch {
            let argv = if scripted && argv[0] != b"MULTI" && argv[0] != b"EXEC" {
                let body = format!("redis.setresp({}) return redis.pcall(unpack(ARGV))", 2 + step % 2);
                let mut wrapped = vec![b"EVAL".to_vec(), body.into_bytes(), b"0".to_vec()];
                wrapped.extend(argv);
                wrapped
            } else {
                argv
            };
            let key = if scripted && argv[0] == b"EVAL" { argv.get(4) } else { argv.get(1) };
            let expected = run.step_on(step, 0, &format!(" ({order:?})"), &argv, |rc, e, a| {
                let small = matches!(order, Order::SmallExact | Order::SmallExactPairs)
                    && key.is_some_and(|k| small_encoding(rc, k));
                agree(order, e, a, small)
            });
            if expected.first() == Some(&b'-') {
                let text = String::from_utf8_lossy(&expected);
                *errors.entry(text.chars().take(24).collect::<String>()).or_default() += 1;
            }
            if argv[0] == b"OBJECT" {
                *encodings.entry(String::from_utf8_lossy(&expected).into_owned()).or_default() += 1;
            }
        }
        if step % 500 == 499 {
            let (rc, fc) = run.clients(0);
            compare_dataset(seed, rc, fc);
        }
    }
    eprintln!("seed {seed}: encodings seen {encodings:?}");
    run.finish(&MIX);
    eprintln!("seed {seed}: errors {errors:?}");
    let (rc, fc) = run.clients(0);
    compare_dataset(seed, rc, fc);
}

fn compare_dataset(seed: u64, rc: &mut Client, fc: &mut Client) {
    let what = format!("seed {seed}");
    for key in &seeded::same_keys(&what, rc, fc) {
        let k = key.as_slice();
        let ty = rc.cmd(&[b"TYPE".as_slice(), k]);
        let mut checks: Vec<(Vec<&[u8]>, Order)> =
            vec![(vec![b"TYPE", k], Order::Exact), (vec![b"OBJECT", b"ENCODING", k], Order::Exact)];
        match ty.as_slice() {
            b"+string\r\n" => checks.push((vec![b"GET", k], Order::Exact)),
            b"+list\r\n" => {
                checks.push((vec![b"LRANGE", k, b"0", b"-1"], Order::Exact));
                // The payload shows the quicklist's nodes: they must be cut where Redis cuts them.
                checks.push((vec![b"DUMP", k], Order::Exact));
            }
            b"+hash\r\n" => checks.push((vec![b"HGETALL", k], Order::SmallExactPairs)),
            b"+set\r\n" => checks.push((vec![b"SMEMBERS", k], Order::SmallExact)),
            b"+zset\r\n" => checks.push((vec![b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"], Order::Exact)),
            other => panic!("seed {seed}: unexpected type {} for {}", show(other), show(k)),
        }
        if ty.as_slice() != b"+string\r\n" && small_encoding(rc, k) {
            checks.push((vec![b"DUMP", k], Order::Exact));
        }
        for (argv, order) in checks {
            let small = small_encoding(rc, k);
            seeded::check(&what, rc, fc, &argv, |e, a| agree(order, e, a, small));
        }
    }
}

#[test]
fn random_collections_seed_3() {
    run_seed(SEEDS[0], 2);
}

#[test]
fn random_collections_seed_77() {
    run_seed(SEEDS[1], 2);
}

#[test]
fn random_collections_seed_c011ec7() {
    run_seed(SEEDS[2], 2);
}

/// The same commands run by a script (replies through Lua and back, RESP2 and RESP3 inside),
/// for a RESP2 and a RESP3 caller.
#[test]
fn random_collections_through_scripts_seed_11() {
    run_seed_with(11, 2, true);
}

#[test]
fn random_collections_through_scripts_seed_12_resp3() {
    run_seed_with(12, 3, true);
}

/// The same generator over RESP3 (maps, sets, doubles and nulls are encoded differently).
#[test]
fn random_collections_seed_5_resp3() {
    run_seed(5, 3);
}

/// The generator is deterministic per seed (a failure can be replayed).
#[test]
fn generator_is_deterministic() {
    seeded::assert_replayable(|seed| {
        let mut g = Gen { rng: fastrand::Rng::with_seed(seed) };
        (0..300).map(|_| g.command().0).collect::<Vec<_>>()
    });
}

/// Unordered replies compare equal when sorted, pairs stay pairs, and exact mode stays strict.
#[test]
fn normalization() {
    let a = b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let b = b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n";
    let c = b"*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n";
    assert!(agree(Order::SortedPairs, a, b, false));
    assert!(!agree(Order::SortedPairs, a, c, false));
    assert!(!agree(Order::SmallExactPairs, a, b, true));
    assert!(agree(Order::SmallExactPairs, a, b, false));
    assert!(!agree(Order::Exact, a, b, false));
    assert!(agree(Order::Sorted, a, c, false));
}

/// Elements of an array reply as byte strings (flattening RESP3 pairs); None for a non-array.
fn flat_strings(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    fn walk(v: Value, out: &mut Vec<Vec<u8>>) {
        match v {
            Value::Bulk(Some(b)) => out.push(b),
            Value::Simple(_, b) => out.push(b),
            Value::Int(i) => out.push(i.to_string().into_bytes()),
            Value::Agg(_, Some(items)) => items.into_iter().for_each(|i| walk(i, out)),
            other => out.push(format!("{other:?}").into_bytes()),
        }
    }
    match parse_value(bytes) {
        Value::Agg(_, Some(items)) => {
            let mut out = Vec::new();
            items.into_iter().for_each(|i| walk(i, &mut out));
            Some(out)
        }
        _ => None,
    }
}

/// Replies that are random in content (SRANDMEMBER, SPOP, ZRANDMEMBER, HRANDFIELD with counts
/// smaller than the collection, negative counts) cannot be compared to Redis byte for byte; here
/// their shape is: the same length as Redis's reply, only members of the key, distinct members for
/// positive counts, the right score/value next to each member, and SPOP really removing what it
/// returns. Small and big encodings, RESP2 and RESP3.
#[test]
fn random_picks_are_consistent() {
    for proto in [2u8, 3] {
        let redis = RedisServer::new();
        let ferro = TestServer::new();
        let mut rc = redis.client();
        let mut fc = ferro.client();
        configure(&mut rc, "redis");
        configure(&mut fc, "ferrodis");
        if proto == 3 {
            rc.cmd(&["HELLO", "3"]);
            fc.cmd(&["HELLO", "3"]);
        }
        for c in [&mut rc, &mut fc] {
            c.cmd(&["SADD", "si", "1", "2", "3", "4"]);
            let mut big: Vec<String> = vec!["SADD".into(), "sh".into()];
            big.extend((0..40).map(|i| format!("m{i}")));
            c.cmd(&big);
            c.cmd(&["ZADD", "zl", "1", "a", "2", "b", "3", "c"]);
            let mut zs: Vec<String> = vec!["ZADD".into(), "zs".into()];
            for i in 0..40 {
                zs.push(format!("{}.5", i));
                zs.push(format!("z{i}"));
            }
            c.cmd(&zs);
            c.cmd(&["HSET", "hl", "f1", "v1", "f2", "v2", "f3", "v3"]);
            let mut hs: Vec<String> = vec!["HSET".into(), "hs".into()];
            for i in 0..40 {
                hs.push(format!("f{i}"));
                hs.push(format!("v{i}"));
            }
            c.cmd(&hs);
        }
        for key in ["si", "sh", "zl", "zs", "hl", "hs"] {
            let enc = fc.cmd(&["OBJECT", "ENCODING", key]);
            assert_eq!(enc, rc.cmd(&["OBJECT", "ENCODING", key]), "{key}: encodings differ");
        }
        for count in ["1", "2", "3", "4", "5", "39", "40", "41", "-1", "-3", "-50"] {
            // (command, key, pairs?)
            let cases: &[(&[&str], bool)] = &[
                (&["SRANDMEMBER", "si"], false),
                (&["SRANDMEMBER", "sh"], false),
                (&["ZRANDMEMBER", "zl"], false),
                (&["ZRANDMEMBER", "zs"], false),
                (&["ZRANDMEMBER", "zl", "", "WITHSCORES"], true),
                (&["ZRANDMEMBER", "zs", "", "WITHSCORES"], true),
                (&["HRANDFIELD", "hl"], false),
                (&["HRANDFIELD", "hs"], false),
                (&["HRANDFIELD", "hl", "", "WITHVALUES"], true),
                (&["HRANDFIELD", "hs", "", "WITHVALUES"], true),
            ];
            for (base, pairs) in cases {
                let mut argv: Vec<&str> = base.to_vec();
                if argv.len() > 2 {
                    argv[2] = count;
                } else {
                    argv.push(count);
                }
                let key = argv[1];
                let e = rc.cmd(&argv);
                let a = fc.cmd(&argv);
                let what = format!("RESP{proto} `{}`", argv.join(" "));
                let (Some(ev), Some(av)) = (flat_strings(&e), flat_strings(&a)) else {
                    assert_eq!(show(&e), show(&a), "{what}: not arrays");
                    continue;
                };
                assert_eq!(
                    ev.len(),
                    av.len(),
                    "{what}: lengths differ\n  redis:    {}\n  ferrodis: {}",
                    show(&e),
                    show(&a)
                );
                assert_eq!(e.first(), a.first(), "{what}: reply types differ");
                // Each member (and its score or value) must exist in the key.
                let truth = match argv[0] {
                    "SRANDMEMBER" => flat_strings(&rc.cmd(&["SMEMBERS", key])).unwrap_or_default(),
                    "ZRANDMEMBER" => {
                        flat_strings(&rc.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"])).unwrap_or_default()
                    }
                    _ => flat_strings(&rc.cmd(&["HGETALL", key])).unwrap_or_default(),
                };
                let step = if *pairs { 2 } else { 1 };
                let members: Vec<&[u8]> = av.iter().step_by(step).map(|m| m.as_slice()).collect();
                for (i, m) in members.iter().enumerate() {
                    let known = if argv[0] == "SRANDMEMBER" {
                        truth.iter().any(|t| t == m)
                    } else {
                        truth.chunks(2).any(|c| c[0] == *m && (!*pairs || c[1] == av[i * 2 + 1]))
                    };
                    assert!(known, "{what}: {} is not in the key (or its score/value is wrong): {}", show(m), show(&a));
                }
                if !count.starts_with('-') {
                    let mut sorted = members.clone();
                    sorted.sort();
                    sorted.dedup();
                    assert_eq!(
                        sorted.len(),
                        members.len(),
                        "{what}: repeated members for a positive count: {}",
                        show(&a)
                    );
                }
            }
        }
        // SPOP with counts: returned members are removed, the rest stays.
        for (src, count) in [("si", "2"), ("sh", "7"), ("sh", "30"), ("si", "1")] {
            for c in [&mut rc, &mut fc] {
                c.cmd(&["DEL", "popme"]);
                c.cmd(&["COPY", src, "popme"]);
            }
            let e = rc.cmd(&["SPOP", "popme", count]);
            let a = fc.cmd(&["SPOP", "popme", count]);
            let what = format!("RESP{proto} SPOP copy-of-{src} {count}");
            let (ev, av) = (flat_strings(&e).expect("redis SPOP array"), flat_strings(&a).unwrap_or_default());
            assert_eq!(ev.len(), av.len(), "{what}: lengths differ: redis {} ferrodis {}", show(&e), show(&a));
            let before = flat_strings(&fc.cmd(&["SMEMBERS", src])).unwrap_or_default();
            let mut after = flat_strings(&fc.cmd(&["SMEMBERS", "popme"])).unwrap_or_default();
            assert_eq!(after.len() + av.len(), before.len(), "{what}: popped + left != before");
            after.extend(av.iter().cloned());
            after.sort();
            let mut before = before;
            before.sort();
            assert_eq!(after, before, "{what}: popped and remaining members do not make the original set");
            assert_eq!(
                rc.cmd(&["OBJECT", "ENCODING", "popme"]),
                fc.cmd(&["OBJECT", "ENCODING", "popme"]),
                "{what}: encoding after SPOP"
            );
        }
    }
}

/// Extra seeds for bug hunting or replay: `FERRODIS_COLLECTION_SEEDS=100-140` or `=5,9` (RESP2;
/// prefix a seed or range with `r` for RESP3: `r7`, `r100-130`, `r100-r130`). Does nothing when the variable is unset.
#[test]
fn random_collections_env_seeds() {
    for (seed, proto) in common::env_seeds("FERRODIS_COLLECTION_SEEDS") {
        run_seed(seed, proto);
    }
}

/// SSCAN/ZSCAN over big (hashtable/skiplist) collections, where the order is ferrodis's own: a full
/// iteration with small COUNTs ends at cursor 0 and returns every member (with its score for ZSCAN),
/// also when members are added and removed between calls (those present throughout must appear).
#[test]
fn big_scans_return_every_member() {
    let ferro = TestServer::new();
    let mut c = ferro.client();
    let mut sadd: Vec<String> = vec!["SADD".into(), "s".into()];
    sadd.extend((0..1500).map(|i| format!("m{i}")));
    c.cmd(&sadd);
    let mut zadd: Vec<String> = vec!["ZADD".into(), "z".into()];
    for i in 0..1500 {
        zadd.push(i.to_string());
        zadd.push(format!("m{i}"));
    }
    c.cmd(&zadd);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "s"]), b"$9\r\nhashtable\r\n");
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "z"]), b"$8\r\nskiplist\r\n");
    for (cmd, key) in [("SSCAN", "s"), ("ZSCAN", "z")] {
        for churn in [false, true] {
            let mut seen = std::collections::HashMap::<Vec<u8>, Vec<u8>>::new();
            let mut cursor = b"0".to_vec();
            let mut calls = 0;
            loop {
                let reply = c.cmd(&[cmd.as_bytes(), key.as_bytes(), &cursor, b"COUNT", b"17"]);
                let Value::Agg(_, Some(parts)) = parse_value(&reply) else { panic!("{cmd}: {}", show(&reply)) };
                let (Value::Bulk(Some(next)), Value::Agg(_, Some(items))) = (&parts[0], &parts[1]) else {
                    panic!("{cmd}: {}", show(&reply))
                };
                let items: Vec<Vec<u8>> = items
                    .iter()
                    .map(|v| match v {
                        Value::Bulk(Some(b)) => b.clone(),
                        other => panic!("{cmd}: element {other:?}"),
                    })
                    .collect();
                if cmd == "ZSCAN" {
                    for p in items.chunks(2) {
                        seen.insert(p[0].clone(), p[1].clone());
                    }
                } else {
                    for m in items {
                        seen.insert(m, Vec::new());
                    }
                }
                calls += 1;
                if churn {
                    // Members m1500.. come and go; m0..m1499 stay.
                    let extra = format!("m{}", 1500 + calls % 50);
                    if cmd == "SSCAN" {
                        c.cmd(&["SADD", key, &extra]);
                        c.cmd(&["SREM", key, &format!("m{}", 1500 + (calls + 25) % 50)]);
                    } else {
                        c.cmd(&["ZADD", key, "99999", &extra]);
                        c.cmd(&["ZREM", key, &format!("m{}", 1500 + (calls + 25) % 50)]);
                    }
                }
                cursor = next.clone();
                if cursor == b"0" {
                    break;
                }
                assert!(calls < 10_000, "{cmd}: the scan does not terminate");
            }
            for i in 0..1500 {
                let m = format!("m{i}").into_bytes();
                let got = seen.get(&m);
                assert!(got.is_some(), "{cmd} (churn {churn}): m{i} never returned in {calls} calls");
                if cmd == "ZSCAN" {
                    assert_eq!(got.map(|s| s.as_slice()), Some(i.to_string().as_bytes()), "ZSCAN score of m{i}");
                }
            }
        }
    }
}

/// Every call of a full *SCAN iteration from cursor 0 to cursor 0: the reply's elements, in
/// order, and how many calls it took. Panics on a reply that is not a cursor and an array.
fn full_iteration(c: &mut Client, argv: &[&str]) -> (Vec<Vec<u8>>, usize) {
    let cursor_at = if argv[0] == "SCAN" { 1 } else { 2 };
    let mut argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let mut out = Vec::new();
    for calls in 1..=100_000 {
        let reply = c.cmd(&argv);
        let Value::Agg(_, Some(parts)) = parse_value(&reply) else { panic!("{argv:?}: {}", show(&reply)) };
        let (Value::Bulk(Some(next)), Value::Agg(_, Some(items))) = (&parts[0], &parts[1]) else {
            panic!("{argv:?}: {}", show(&reply))
        };
        for v in items {
            let Value::Bulk(Some(b)) = v else { panic!("{argv:?}: element {v:?}") };
            out.push(b.clone());
        }
        if next == b"0" {
            return (out, calls);
        }
        argv[cursor_at] = String::from_utf8_lossy(next).into_owned();
    }
    panic!("{argv:?}: the scan does not terminate");
}

/// The distinct entries of a full iteration: names alone, or name and value for HSCAN and ZSCAN
/// (a walk may return an entry twice; the SCAN guarantee is about the set).
fn scan_entries(c: &mut Client, argv: &[&str]) -> std::collections::BTreeSet<Vec<Vec<u8>>> {
    let (items, _) = full_iteration(c, argv);
    let pairs = matches!(argv[0], "HSCAN" | "ZSCAN");
    items.chunks(if pairs { 2 } else { 1 }).map(|e| e.to_vec()).collect()
}

/// SCAN, SSCAN, HSCAN and ZSCAN walked to the end against real Redis: the same set of entries
/// (keys, members, field-value and member-score pairs), with MATCH, TYPE and COUNTs from 1 up,
/// over small encodings (returned whole) and big tables (walked bucket by bucket).
#[test]
fn scan_family_full_iterations_match_redis() {
    let redis = RedisServer::new();
    let ferro = TestServer::new();
    let mut clients = [redis.client(), ferro.client()];
    for c in clients.iter_mut() {
        for i in 0..300 {
            c.cmd(&["SET", &format!("str:{i}"), "v"]);
        }
        for i in 0..40 {
            c.cmd(&["RPUSH", &format!("list:{i}"), "x"]);
        }
        for (key, n) in [("bigset", 700), ("smallset", 20)] {
            let mut argv = vec!["SADD".to_string(), key.to_string()];
            argv.extend((0..n).map(|i| format!("m{i}")));
            c.cmd(&argv);
        }
        let mut ints = vec!["SADD".to_string(), "intset".to_string()];
        ints.extend((0..100).map(|i| (i * 7 - 300).to_string()));
        c.cmd(&ints);
        for (key, n) in [("bighash", 700), ("smallhash", 20)] {
            let mut argv = vec!["HSET".to_string(), key.to_string()];
            argv.extend((0..n).flat_map(|i| [format!("f{i}"), format!("v{i}")]));
            c.cmd(&argv);
        }
        for (key, n) in [("bigzset", 700), ("smallzset", 20)] {
            let mut argv = vec!["ZADD".to_string(), key.to_string()];
            argv.extend((0..n).flat_map(|i| [format!("{}.5", i as i64 - 100), format!("m{i}")]));
            c.cmd(&argv);
        }
    }
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for count in ["1", "7", "100", "10000"] {
        cases.push(vec!["SCAN", "0", "COUNT", count]);
        cases.push(vec!["SCAN", "0", "COUNT", count, "MATCH", "str:1*"]);
        cases.push(vec!["SCAN", "0", "COUNT", count, "TYPE", "list"]);
        cases.push(vec!["SCAN", "0", "MATCH", "*:3*", "TYPE", "string", "COUNT", count]);
        for key in ["bigset", "smallset", "intset", "bighash", "smallhash", "bigzset", "smallzset"] {
            let cmd = if key.ends_with("zset") {
                "ZSCAN"
            } else if key.ends_with("hash") {
                "HSCAN"
            } else {
                "SSCAN"
            };
            cases.push(vec![cmd, key, "0", "COUNT", count]);
            cases.push(vec![cmd, key, "0", "COUNT", count, "MATCH", "*1*"]);
        }
    }
    for argv in &cases {
        let expected = scan_entries(&mut clients[0], argv);
        let got = scan_entries(&mut clients[1], argv);
        assert!(!expected.is_empty(), "{argv:?}: Redis returned nothing");
        assert_eq!(got, expected, "{argv:?}");
    }
    // COUNT is about entries for every type: a big table gives about COUNT entries per call (so
    // a pair type returns twice as many elements), never the whole table at once.
    for (argv, per_entry) in [
        (["SSCAN", "bigset", "0", "COUNT", "50"], 1),
        (["HSCAN", "bighash", "0", "COUNT", "50"], 2),
        (["ZSCAN", "bigzset", "0", "COUNT", "50"], 2),
    ] {
        let (items, calls) = full_iteration(&mut clients[1], &argv);
        let entries = items.len() / per_entry;
        assert!(calls > 1 && entries / calls >= 40, "{argv:?}: {entries} entries in {calls} calls");
    }
}

fn pause() {
    std::thread::sleep(std::time::Duration::from_millis(100));
}

/// Sorted-set blocking pops woken by the commands that add members (ZADD, ZINCRBY, stores, RENAME),
/// not woken by other types or by a transaction that leaves the key empty, served in arrival order,
/// with the replies of both protocols and of timeouts. Run against both servers; replies compared.
fn zset_blocking_scenario(server: &common::Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut w1 = server.client();
    let mut w2 = server.client();
    out.push(ctl.cmd(&["FLUSHALL"]));

    // Two waiters, min and max, one ZADD.
    common::send(&mut w1, &["BZPOPMIN", "z", "0"]);
    pause();
    common::send(&mut w2, &["BZPOPMAX", "z", "0"]);
    pause();
    out.push(ctl.cmd(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]));
    out.push(w1.read_reply().expect("w1"));
    out.push(w2.read_reply().expect("w2"));
    out.push(ctl.cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]));

    // BZMPOP woken by a store into its second key.
    out.push(ctl.cmd(&["ZADD", "zsrc", "1", "x", "2", "y", "3", "w"]));
    common::send(&mut w1, &["BZMPOP", "0", "2", "z1", "z2", "MAX", "COUNT", "2"]);
    pause();
    out.push(ctl.cmd(&["ZUNIONSTORE", "z2", "1", "zsrc"]));
    out.push(w1.read_reply().expect("bzmpop"));
    out.push(ctl.cmd(&["ZRANGE", "z2", "0", "-1"]));

    // A transaction that adds and removes leaves the waiter blocked; a later ZADD serves it.
    common::send(&mut w1, &["BZPOPMIN", "zz", "0"]);
    pause();
    out.push(ctl.cmd(&["MULTI"]));
    out.push(ctl.cmd(&["ZADD", "zz", "1", "a"]));
    out.push(ctl.cmd(&["ZREM", "zz", "a"]));
    out.push(ctl.cmd(&["EXEC"]));
    pause();
    out.push(ctl.cmd(&["ZADD", "zz", "5", "q"]));
    out.push(w1.read_reply().expect("after exec"));

    // Another type on the key does not serve the waiter; a sorted set there later does.
    common::send(&mut w1, &["BZPOPMIN", "k", "0"]);
    pause();
    out.push(ctl.cmd(&["SADD", "k", "x"]));
    pause();
    out.push(ctl.cmd(&["DEL", "k"]));
    out.push(ctl.cmd(&["ZINCRBY", "k", "2.5", "m"]));
    out.push(w1.read_reply().expect("zincrby wake"));

    // RENAME onto the waited key, ZRANGESTORE and ZINTERSTORE into it.
    common::send(&mut w1, &["BZPOPMAX", "r", "0"]);
    pause();
    out.push(ctl.cmd(&["ZADD", "tmp", "7", "t"]));
    out.push(ctl.cmd(&["RENAME", "tmp", "r"]));
    out.push(w1.read_reply().expect("rename wake"));
    common::send(&mut w1, &["BZPOPMAX", "r2", "r3", "0"]);
    pause();
    out.push(ctl.cmd(&["ZRANGESTORE", "r3", "zsrc", "0", "0"]));
    out.push(w1.read_reply().expect("zrangestore wake"));
    common::send(&mut w1, &["BZPOPMIN", "r4", "0"]);
    pause();
    out.push(ctl.cmd(&["ZINTERSTORE", "r4", "2", "zsrc", "zsrc"]));
    out.push(w1.read_reply().expect("zinterstore wake"));

    // COUNT larger than the key: everything, and the key is gone.
    common::send(&mut w2, &["BZMPOP", "0", "1", "q", "MIN", "COUNT", "10"]);
    pause();
    out.push(ctl.cmd(&["ZADD", "q", "1", "a", "2", "b"]));
    out.push(w2.read_reply().expect("count"));
    out.push(ctl.cmd(&["EXISTS", "q"]));

    // Timeouts, RESP2 and RESP3, and a RESP3 waiter served.
    common::send(&mut w1, &["BZPOPMIN", "none", "0.2"]);
    out.push(w1.read_reply().expect("timeout"));
    common::send(&mut w1, &["BZMPOP", "0.2", "1", "none", "MIN"]);
    out.push(w1.read_reply().expect("timeout"));
    let hello = w2.cmd(&["HELLO", "3"]);
    out.push(hello[..1].to_vec());
    common::send(&mut w2, &["BZPOPMIN", "none", "0.2"]);
    out.push(w2.read_reply().expect("timeout"));
    common::send(&mut w2, &["BZMPOP", "0.2", "1", "none", "MIN"]);
    out.push(w2.read_reply().expect("timeout"));
    common::send(&mut w2, &["BZPOPMIN", "z3", "0"]);
    pause();
    out.push(ctl.cmd(&["ZADD", "z3", "1.5", "a"]));
    out.push(w2.read_reply().expect("resp3 served"));
    common::send(&mut w2, &["BZMPOP", "0", "1", "z4", "MAX", "COUNT", "3"]);
    pause();
    out.push(ctl.cmd(&["ZADD", "z4", "0.5", "a", "inf", "b"]));
    out.push(w2.read_reply().expect("resp3 bzmpop"));
    out
}

#[test]
fn zset_blocking_matches_redis() {
    let redis = RedisServer::new();
    let ferro = TestServer::new();
    let expected = zset_blocking_scenario(&redis);
    let got = zset_blocking_scenario(&ferro);
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(show(g), show(e), "step {i} (left ferrodis, right redis)");
    }
    assert_eq!(expected.len(), got.len());
}
