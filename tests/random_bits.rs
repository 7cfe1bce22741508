//! Seeded random differential test of the bitmap, BITFIELD and HyperLogLog commands: the same random
//! sequence of SETBIT/GETBIT/BITCOUNT/BITPOS/BITOP/BITFIELD/BITFIELD_RO, PFADD/PFCOUNT/PFMERGE and the
//! string commands that touch the same values (SET, APPEND, SETRANGE, GETRANGE, STRLEN, GET, DEL,
//! TYPE, OBJECT ENCODING) goes to a fresh real redis-server and a fresh ferrodis, and each reply's
//! bytes are compared; every 500 steps and at the end the whole dataset is compared key by key
//! (type, encoding, value).
//!
//! The key pool is small: bitmap keys, HLL keys and one list and one hash key (RPUSH/HSET), with
//! every command sometimes aimed at a key of another family, so WRONGTYPE replies, HLLs overwritten
//! by strings and bitmaps fed to PFADD all happen. SET stores hand-made "HYLL" strings (valid and
//! corrupt sparse bodies, dense bodies of the right and wrong length, bad encodings, cached
//! cardinalities) and SETRANGE/APPEND corrupt real HLLs; some PFADDs carry hundreds of elements so
//! sparse HLLs cross hll-sparse-max-bytes and turn dense, and the threshold itself is changed now and
//! then. Arguments are drawn from valid and invalid values alike (bad types such as u64/i65, bad
//! offsets, `#N` offsets, bad BYTE/BIT keywords, out-of-range integers). Bit offsets that would make
//! either server allocate hundreds of megabytes are only used for reads.
//!
//! One step is the harness's own: before a PFADD or PFMERGE whose target holds, in Redis, a sparse
//! HLL ending in a cut-off two-byte opcode, both servers get `APPEND key "\x00"`, because Redis
//! would read and write that opcode's second byte past the end of the string (see
//! `complete_dangling_xzero`).
//!
//! On mismatch: the seed, the step, the last 20 commands and both replies.

mod common;

use common::seeded::{self, Draws, MixBounds, Run};
use common::{parse_value, Client, Value};

const SEEDS: &[u64] = &[11, 303, 0xB175, 0x4859_4C4C];
const STEPS: usize = 2000;
/// Minimum shares of non-error replies (overall, and per command seen 20 times or more); HSET and
/// RPUSH only make keys of another type, mostly refused by design.
const MIX: MixBounds = MixBounds { overall: 0.6, per_command: 0.1, min_samples: 20, exempt: &["HSET", "RPUSH"] };

const BIT_KEYS: &[&str] = &["b0", "b1", "b2", "b3", "b4"];
const HLL_KEYS: &[&str] = &["p0", "p1", "p2", "p3"];
const LIST_KEY: &str = "L";
const HASH_KEY: &str = "H";
const ALL_KEYS: &[&str] = &["b0", "b1", "b2", "b3", "b4", "p0", "p1", "p2", "p3", "L", "H"];

/// Registers of an HLL (2^14) and the size of a dense HLL string (16-byte header + 6 bits each).
const HLL_REGISTERS: usize = 16384;
const HLL_DENSE_SIZE: usize = 16 + HLL_REGISTERS * 6 / 8;

struct Gen {
    rng: fastrand::Rng,
}

impl Gen {
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.rng.u8(..)).collect()
    }

    /// A key of the bitmap family, sometimes any key.
    fn bkey(&mut self) -> Vec<u8> {
        if self.rng.chance(90) { self.rng.pick(BIT_KEYS) } else { self.rng.pick(ALL_KEYS) }.into()
    }

    /// A key of the HLL family, sometimes any key.
    fn pkey(&mut self) -> Vec<u8> {
        if self.rng.chance(85) { self.rng.pick(HLL_KEYS) } else { self.rng.pick(ALL_KEYS) }.into()
    }

    fn anykey(&mut self) -> Vec<u8> {
        self.rng.pick(ALL_KEYS).into()
    }

    /// A plain string value.
    fn value(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0 => self.rng.i64(..).to_string().into_bytes(),
            1 => self.rng.i64(-1000..1000).to_string().into_bytes(),
            2 | 3 => {
                let n = self.rng.usize(..40);
                self.bytes(n)
            }
            4 => vec![[0u8, 0xff, b'x', 0x7f][self.rng.usize(..4)]; self.rng.usize(1..80)],
            5 => Vec::new(),
            _ => {
                const PLAIN: &[&[u8]] = &[
                    b"0",
                    b"1",
                    b"-1",
                    b"abc",
                    b"foobar",
                    b"hello world",
                    b"9223372036854775807",
                    b"-9223372036854775808",
                    b"3.14",
                    b"\xff\xf0\x00",
                    b"\x80",
                    b"HYLL",
                    b"10000",
                    b"007",
                ];
                PLAIN[self.rng.usize(..PLAIN.len())].to_vec()
            }
        }
    }

    /// An integer argument: usually in [lo, hi], sometimes out of range or not a number.
    fn int(&mut self, lo: i64, hi: i64) -> Vec<u8> {
        match self.rng.u8(..20) {
            0 => self
                .rng
                .pick(&[
                    "abc",
                    "1.5",
                    "",
                    "99999999999999999999",
                    "-9223372036854775808",
                    "9223372036854775807",
                    "+1",
                    " 1",
                ])
                .as_bytes()
                .to_vec(),
            1 => self.rng.i64(..).to_string().into_bytes(),
            _ => self.rng.i64(lo..=hi).to_string().into_bytes(),
        }
    }

    /// A bit offset for SETBIT/GETBIT. `read` allows offsets near the 2^32 limit (no allocation).
    fn bit_offset(&mut self, read: bool) -> Vec<u8> {
        match self.rng.u8(..20) {
            0 => self.rng.pick(&["-1", "abc", "4294967296", "", "1.5", "99999999999999999999", "+3"]).into(),
            1 if read => self.rng.pick(&["4294967295", "4294967288", "100000000"]).into(),
            2 => self.rng.u32(..4000).to_string().into_bytes(),
            _ => self.rng.u32(..400).to_string().into_bytes(),
        }
    }

    /// A BITFIELD type: usually valid (i1..i64, u1..u63), sometimes not.
    fn bf_type(&mut self) -> Vec<u8> {
        match self.rng.u8(..25) {
            0 => self
                .rng
                .pick(&["u64", "i65", "i0", "u0", "I8", "U8", "x8", "u08", "i", "", "u-1", "i 8", "u+8", "i128"])
                .into(),
            1 => self.rng.pick(&["i64", "u63", "i1", "u1", "i63", "u32", "i32"]).into(),
            2..=12 => format!("i{}", self.rng.u32(1..=64)).into_bytes(),
            _ => format!("u{}", self.rng.u32(1..=63)).into_bytes(),
        }
    }

    /// A BITFIELD offset: plain bits or `#N` (N times the type's width). Big ones only for GET.
    fn bf_offset(&mut self, read: bool) -> Vec<u8> {
        match self.rng.u8(..40) {
            0 => self.rng.pick(&["-1", "abc", "#-1", "#abc", "#", "4294967296", "1.5", "", "#+1", "##1", "+1"]).into(),
            1 if read => self.rng.pick(&["4294967295", "4294967232", "#67108863", "#1000000", "#4294967295"]).into(),
            2..=9 => format!("#{}", self.rng.u32(..=20)).into_bytes(),
            _ => self.rng.u32(..=300).to_string().into_bytes(),
        }
    }

    /// A BITFIELD SET/INCRBY value.
    fn bf_value(&mut self) -> Vec<u8> {
        match self.rng.u8(..40) {
            0 => self.rng.pick(&["abc", "1.5", "", "9223372036854775808", "+5", "-0", "007", " 1"]).into(),
            1..=3 => self
                .rng
                .pick(&[
                    "127",
                    "128",
                    "-128",
                    "-129",
                    "255",
                    "256",
                    "-1",
                    "0",
                    "1",
                    "2147483647",
                    "-2147483648",
                    "4294967295",
                    "9223372036854775807",
                    "-9223372036854775808",
                    "4611686018427387904",
                ])
                .into(),
            4..=8 => self.rng.i64(..).to_string().into_bytes(),
            9..=11 => {
                let bits = self.rng.u32(1..=63);
                let v = self.rng.i64(-(1i64 << bits)..=(1i64 << bits));
                v.to_string().into_bytes()
            }
            12..=25 => self.rng.i64(-300..=300).to_string().into_bytes(),
            _ => self.rng.i64(-100_000..=100_000).to_string().into_bytes(),
        }
    }

    /// A sparse HLL body: a sequence of ZERO/XZERO/VAL opcodes, usually covering exactly the 16384
    /// registers, sometimes too few or too many (corrupt).
    fn sparse_body(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let target = match self.rng.u8(..10) {
            0 => self.rng.usize(1..HLL_REGISTERS),
            1 => HLL_REGISTERS + self.rng.usize(1..100),
            _ => HLL_REGISTERS,
        };
        let mut idx = 0;
        while idx < target {
            let left = target - idx;
            match self.rng.u8(..3) {
                0 => {
                    let len = self.rng.usize(1..=64).min(left);
                    out.push((len - 1) as u8);
                    idx += len;
                }
                1 => {
                    let len = self.rng.usize(1..=HLL_REGISTERS).min(left);
                    out.push(0x40 | ((len - 1) >> 8) as u8);
                    out.push(((len - 1) & 0xff) as u8);
                    idx += len;
                }
                _ => {
                    let len = self.rng.usize(1..=4).min(left);
                    let val = if self.rng.chance(90) { self.rng.u8(1..=6) } else { self.rng.u8(1..=32) };
                    out.push(0x80 | ((val - 1) << 2) | (len - 1) as u8);
                    idx += len;
                }
            }
        }
        out
    }

    /// A string that looks more or less like an HLL ("HYLL" header).
    fn hll_value(&mut self) -> Vec<u8> {
        let mut v = b"HYLL".to_vec();
        if self.rng.chance(4) {
            let n = self.rng.usize(..12);
            v.extend(self.bytes(n));
            return v;
        }
        let dense = self.rng.chance(35);
        let enc = match self.rng.u8(..20) {
            0 => self.rng.u8(2..),
            _ if dense => 0,
            _ => 1,
        };
        v.push(enc);
        if self.rng.chance(85) {
            v.extend([0, 0, 0]);
        } else {
            v.extend(self.bytes(3));
        }
        match self.rng.u8(..4) {
            0 => v.extend([0u8; 8]),
            1 => {
                let card = self.bytes(8);
                v.extend(card);
            }
            _ => v.extend([0, 0, 0, 0, 0, 0, 0, 0x80]),
        }
        if dense {
            let len = match self.rng.u8(..20) {
                0 => HLL_DENSE_SIZE - 16 - 1,
                1 => HLL_DENSE_SIZE - 16 + 1,
                _ => HLL_DENSE_SIZE - 16,
            };
            match self.rng.u8(..3) {
                0 => v.extend(self.bytes(len)),
                1 => v.resize(16 + len, 0),
                _ => {
                    // Mostly zero registers with a few set bits, and small values.
                    let mut body = vec![0u8; len];
                    for _ in 0..self.rng.usize(..200) {
                        let i = self.rng.usize(..len);
                        body[i] = self.rng.u8(..);
                    }
                    v.extend(body);
                }
            }
        } else {
            match self.rng.u8(..10) {
                0 => {
                    let n = self.rng.usize(..20);
                    v.extend(self.bytes(n))
                }
                1 => {}
                2 => v.extend([0x7f, 0xff]),
                _ => v.extend(self.sparse_body()),
            }
        }
        v
    }

    /// An element for PFADD.
    fn element(&mut self) -> Vec<u8> {
        match self.rng.u8(..10) {
            0 => {
                let n = self.rng.usize(..12);
                self.bytes(n)
            }
            1 => Vec::new(),
            2 => self.rng.i64(..).to_string().into_bytes(),
            _ => format!("e{}", self.rng.u32(..3000)).into_bytes(),
        }
    }

    /// BITCOUNT/BITPOS range index.
    fn range_index(&mut self) -> Vec<u8> {
        match self.rng.u8(..16) {
            0 => self
                .rng
                .pick(&["abc", "", "1.5", "9223372036854775807", "-9223372036854775808", "99999999999999999999"])
                .into(),
            1 => self.rng.i64(-5000..5000).to_string().into_bytes(),
            2..=5 => self.rng.i64(-10..10).to_string().into_bytes(),
            _ => self.rng.i64(-60..100).to_string().into_bytes(),
        }
    }

    fn unit(&mut self) -> Vec<u8> {
        if self.rng.chance(94) {
            self.rng.pick(&["BYTE", "BIT", "bit", "byte", "Bit"]).into()
        } else {
            self.rng.pick(&["BITS", "x", ""]).into()
        }
    }

    fn bitfield(&mut self, ro: bool, a: &mut Vec<Vec<u8>>) {
        a.push(if ro { "BITFIELD_RO" } else { "BITFIELD" }.into());
        a.push(self.bkey());
        let nops = match self.rng.u8(..10) {
            0 => 0,
            1..=6 => self.rng.usize(1..=2),
            _ => self.rng.usize(3..=6),
        };
        for _ in 0..nops {
            if self.rng.chance(if ro { 8 } else { 20 }) {
                a.push(self.rng.pick(&["OVERFLOW", "overflow"]).into());
                let kind = if self.rng.chance(95) {
                    self.rng.pick(&["WRAP", "SAT", "FAIL", "wrap", "sat", "fail"])
                } else {
                    self.rng.pick(&["SATURATE", "x", ""])
                };
                a.push(kind.into());
            }
            let op = match self.rng.u8(..40) {
                0 => self.rng.pick(&["FOO", "get", "set", "incrby", "OVERFLOW"]),
                _ if ro && self.rng.chance(92) => "GET",
                1..=13 => "GET",
                14..=26 => "SET",
                _ => "INCRBY",
            };
            a.push(op.into());
            let read = op.eq_ignore_ascii_case("GET");
            a.push(self.bf_type());
            a.push(self.bf_offset(read));
            if !read && op != "FOO" {
                a.push(self.bf_value());
            }
        }
        if self.rng.chance(5) {
            // Truncated trailing operation (syntax error).
            let n = self.rng.usize(1..=3);
            for part in ["SET", "u8", "0"].iter().take(n) {
                a.push((*part).into());
            }
        }
    }

    fn command(&mut self) -> Vec<Vec<u8>> {
        let mut a: Vec<Vec<u8>> = Vec::new();
        macro_rules! push {
            ($($e:expr),*) => {{ $( a.push(Vec::from($e)); )* }};
        }
        match self.rng.u8(..60) {
            0..=4 => {
                let bit = if self.rng.chance(93) {
                    self.rng.pick(&["0", "1", "1"])
                } else {
                    self.rng.pick(&["2", "-1", "a", "", "01"])
                };
                push!("SETBIT", self.bkey(), self.bit_offset(false), bit)
            }
            5..=7 => push!("GETBIT", self.bkey(), self.bit_offset(true)),
            8..=11 => {
                push!("BITCOUNT", self.bkey());
                match self.rng.u8(..20) {
                    0..=2 => {}
                    3 => push!(self.range_index()),
                    4..=10 => push!(self.range_index(), self.range_index()),
                    11 => push!(self.range_index(), self.range_index(), self.unit(), "extra"),
                    _ => push!(self.range_index(), self.range_index(), self.unit()),
                }
            }
            12..=15 => {
                let bit =
                    if self.rng.chance(92) { self.rng.pick(&["0", "1"]) } else { self.rng.pick(&["2", "-1", "a", ""]) };
                push!("BITPOS", self.bkey(), bit);
                match self.rng.u8(..20) {
                    0..=3 => {}
                    4..=7 => push!(self.range_index()),
                    8..=12 => push!(self.range_index(), self.range_index()),
                    13 => push!(self.range_index(), self.range_index(), self.unit(), "extra"),
                    _ => push!(self.range_index(), self.range_index(), self.unit()),
                }
            }
            16..=19 => {
                let op = match self.rng.u8(..12) {
                    0 => self.rng.pick(&["NAND", "and", "not", "xor", "or", ""]),
                    1..=3 => "NOT",
                    _ => self.rng.pick(&["AND", "OR", "XOR"]),
                };
                push!("BITOP", op, self.bkey());
                let n = if op.eq_ignore_ascii_case("NOT") && self.rng.chance(80) { 1 } else { self.rng.usize(1..=4) };
                for _ in 0..n {
                    push!(self.bkey());
                }
            }
            20..=26 => self.bitfield(false, &mut a),
            27..=28 => self.bitfield(true, &mut a),
            29..=32 => {
                push!("PFADD", self.pkey());
                for _ in 0..self.rng.usize(..6) {
                    push!(self.element());
                }
            }
            33 => {
                // Many elements: sparse HLLs grow past hll-sparse-max-bytes and turn dense.
                push!("PFADD", self.rng.pick(HLL_KEYS));
                let base = self.rng.u32(..1_000_000);
                for _ in 0..self.rng.usize(200..1200) {
                    push!(format!("x{}", base + self.rng.u32(..100_000)));
                }
            }
            34..=36 => {
                push!("PFCOUNT");
                for _ in 0..self.rng.usize(1..=3) {
                    push!(self.pkey());
                }
            }
            37..=38 => {
                push!("PFMERGE", self.pkey());
                for _ in 0..self.rng.usize(..=3) {
                    push!(self.pkey());
                }
            }
            39..=42 => {
                let (key, hll) = if self.rng.chance(50) {
                    (self.rng.pick(HLL_KEYS).into(), self.rng.chance(85))
                } else {
                    (self.bkey(), self.rng.chance(15))
                };
                let v = if hll { self.hll_value() } else { self.value() };
                push!("SET", key, v)
            }
            43 => push!("APPEND", self.bkey(), self.value()),
            44..=45 => {
                if self.rng.chance(30) {
                    // Corrupt an HLL: the header, the first opcodes, or a register in a dense body.
                    let off = match self.rng.u8(..3) {
                        0 => self.rng.usize(..16),
                        1 => self.rng.usize(16..40),
                        _ => self.rng.usize(16..HLL_DENSE_SIZE),
                    };
                    let n = self.rng.usize(1..=3);
                    push!("SETRANGE", self.pkey(), off.to_string(), self.bytes(n))
                } else {
                    let off = if self.rng.chance(95) {
                        self.int(0, 64)
                    } else {
                        self.rng.pick(&["-1", "536870912", "99999999999"]).into()
                    };
                    let v = if off.len() >= 9 { self.rng.pick(&["", "", "x"]).into() } else { self.value() };
                    push!("SETRANGE", self.bkey(), off, v)
                }
            }
            46 => push!("GETRANGE", self.anykey(), self.int(-30, 30), self.int(-30, 30)),
            47 => push!("STRLEN", self.anykey()),
            48 => push!("GET", self.anykey()),
            49 => {
                let first = if self.rng.chance(50) { self.rng.pick(HLL_KEYS).into() } else { self.anykey() };
                push!("DEL", first);
                for _ in 0..self.rng.usize(..=1) {
                    push!(self.anykey());
                }
            }
            50 => push!("TYPE", self.anykey()),
            51 => push!("OBJECT", "ENCODING", self.anykey()),
            52 | 53 => {
                let (list, key) = if self.rng.chance(50) {
                    (true, if self.rng.chance(75) { LIST_KEY.into() } else { self.anykey() })
                } else {
                    (false, if self.rng.chance(75) { HASH_KEY.into() } else { self.anykey() })
                };
                if list {
                    push!("RPUSH", key);
                    for _ in 0..self.rng.usize(1..=3) {
                        push!(self.value());
                    }
                } else {
                    push!("HSET", key);
                    for _ in 0..self.rng.usize(1..=3) {
                        push!(format!("f{}", self.rng.u8(..5)), self.value());
                    }
                }
            }
            54 => {
                if self.rng.chance(30) {
                    push!(
                        "CONFIG",
                        "SET",
                        "hll-sparse-max-bytes",
                        self.rng.pick(&["3000", "3000", "200", "700", "1500", "0"])
                    )
                } else {
                    push!("STRLEN", self.pkey())
                }
            }
            55 => push!("GETRANGE", self.pkey(), self.int(0, 20), self.int(-20, 40)),
            56 => push!("OBJECT", "ENCODING", self.pkey()),
            57 => push!("PFCOUNT", self.rng.pick(HLL_KEYS)),
            58 => push!("GETBIT", self.pkey(), self.bit_offset(true)),
            _ => {
                // Wrong arity.
                match self.rng.u8(..10) {
                    0 => push!("SETBIT", self.bkey(), "1"),
                    1 => push!("GETBIT", self.bkey()),
                    2 => push!("BITCOUNT"),
                    3 => push!("BITPOS", self.bkey()),
                    4 => push!("BITOP", "AND", self.bkey()),
                    5 => push!("BITFIELD"),
                    6 => push!("BITFIELD_RO"),
                    7 => push!("PFADD"),
                    8 => push!("PFCOUNT"),
                    _ => push!("PFMERGE"),
                }
            }
        }
        a
    }
}

fn run_seed(seed: u64) {
    run_seed_proto(seed, 2);
}

fn run_seed_proto(seed: u64, proto: u8) {
    let mut run = Run::start("random bits", seed, proto, 1);
    let mut gen = Gen { rng: fastrand::Rng::with_seed(seed) };
    for step in 0..STEPS {
        let argv = gen.command();
        if (argv[0] == b"PFADD" || argv[0] == b"PFMERGE") && argv.len() > 1 {
            complete_dangling_xzero(&argv[1], &mut run);
        }
        run.step(step, &argv, seeded::exact);
        if step % 500 == 499 {
            let (rc, fc) = run.clients(0);
            compare_dataset(&format!("seed {seed} step {step}"), rc, fc);
        }
    }
    run.finish(&MIX);
    let (rc, fc) = run.clients(0);
    compare_dataset(&format!("seed {seed} end"), rc, fc);
}

/// Whether `v` is a sparse HLL whose last opcode is the first byte of a two-byte XZERO cut off by the
/// end of the string.
fn dangling_xzero(v: &[u8]) -> bool {
    if v.len() < 16 || &v[..4] != b"HYLL" || v[4] != 1 {
        return false;
    }
    let mut i = 16;
    while i < v.len() {
        if v[i] & 0xc0 == 0x40 {
            if i + 1 == v.len() {
                return true;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

/// Redis reads a cut-off XZERO's second byte from the string's NUL terminator, and when PFADD or
/// PFMERGE rewrites that opcode it writes the replacement's last byte there, past the string's end
/// (hllSparseSet copies the whole new sequence); the next register update, in the same command or
/// a later one, reads that hidden byte, which no GET shows and ferrodis cannot have. So before a
/// PFADD or PFMERGE whose target holds such an HLL in Redis, both servers get `APPEND key "\x00"`,
/// which spells out the byte Redis would read, and no write past the end happens.
fn complete_dangling_xzero(key: &[u8], run: &mut Run) {
    let Value::Bulk(Some(v)) = parse_value(&run.clients(0).0.cmd(&[b"GET", key])) else { return };
    if dangling_xzero(&v) {
        run.harness(0, &[b"APPEND", key, b"\x00"]);
    }
}

/// An HGETALL reply (flat array or map) as sorted (field, value) pairs; other replies as they are.
fn sorted_pairs(reply: &[u8]) -> Result<Vec<(Value, Value)>, Vec<u8>> {
    match parse_value(reply) {
        Value::Agg(_, Some(items)) if items.len() % 2 == 0 => {
            let mut pairs: Vec<(Value, Value)> = items.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
            pairs.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
            Ok(pairs)
        }
        _ => Err(reply.to_vec()),
    }
}

fn compare_dataset(when: &str, rc: &mut Client, fc: &mut Client) {
    for key in &seeded::same_keys(when, rc, fc) {
        let k: &[u8] = key;
        let checks: [Vec<&[u8]>; 5] = [
            vec![b"TYPE", k],
            vec![b"OBJECT", b"ENCODING", k],
            vec![b"GET", k],
            vec![b"LRANGE", k, b"0", b"-1"],
            vec![b"HGETALL", k],
        ];
        for argv in &checks {
            // A hash in a hashtable has no defined order: HGETALL is compared as sorted pairs.
            let hash = argv[0] == b"HGETALL";
            seeded::check(when, rc, fc, argv, |e, a| if hash { sorted_pairs(e) == sorted_pairs(a) } else { e == a });
        }
    }
}

#[test]
fn random_bits_seed_11() {
    run_seed(SEEDS[0]);
}

#[test]
fn random_bits_seed_303() {
    run_seed(SEEDS[1]);
}

#[test]
fn random_bits_seed_b175() {
    run_seed(SEEDS[2]);
}

#[test]
fn random_bits_seed_48594c4c() {
    run_seed(SEEDS[3]);
}

/// The same generator over RESP3 (nulls inside BITFIELD replies are encoded differently).
#[test]
fn random_bits_seed_17_resp3() {
    run_seed_proto(17, 3);
}

/// The generator is deterministic per seed (a failure can be replayed).
#[test]
fn generator_is_deterministic() {
    seeded::assert_replayable(|seed| {
        let mut g = Gen { rng: fastrand::Rng::with_seed(seed) };
        (0..300).map(|_| g.command()).collect::<Vec<_>>()
    });
}

/// Extra seeds from the environment, for longer hunts: `FERRODIS_BITS_SEEDS=100-400` (RESP2) or
/// `r100-r140` (RESP3). Without the variable this runs nothing.
#[test]
fn random_bits_extra_seeds() {
    for (seed, proto) in common::env_seeds("FERRODIS_BITS_SEEDS") {
        run_seed_proto(seed, proto);
    }
}
