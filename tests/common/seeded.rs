//! The driver the seeded random differential tests (tests/random_*.rs) share: a real redis-server
//! and a ferrodis started side by side, each generated command sent to both, the two replies
//! judged, and on a mismatch a panic naming the seed, the step, the last commands and both replies;
//! the replies' types are counted, and a run whose generator mostly drew errors fails too. It also
//! owns the draws every generator makes ([`Draws`]), the replay check of a generator, and the
//! dataset comparisons the tests end with.
//!
//! A test keeps its own command generator and its own rule for when two replies agree.

use super::{keys_sorted, parse_value, show, show_argv, Client, RedisServer, ReplyMix, Server, TestServer, Value};
use std::collections::{BTreeMap, VecDeque};

/// How many of the last commands a mismatch report shows.
const HISTORY: usize = 20;

/// The draws the generators make besides fastrand's own. Everything a generator produces must come
/// from its seeded RNG, so that the seed alone replays a failure.
pub trait Draws {
    /// One of `items`, each as likely.
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str;
    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: u32) -> bool;
}

impl Draws for fastrand::Rng {
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.usize(..items.len())]
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.u32(..100) < percent
    }
}

/// Fails unless `run` (a generator's first commands for a seed) gives the same twice for one seed
/// and something else for another: a generator that read a clock or a hash order could not be
/// replayed from its seed, and one that ignored its seed would test one sequence only.
pub fn assert_replayable<T: PartialEq + std::fmt::Debug>(run: impl Fn(u64) -> T) {
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

/// The least share of non-error replies a run must see (see [`ReplyMix::assert_mostly_non_errors`]):
/// two servers that agree on errors alone prove little.
pub struct MixBounds {
    /// Over all replies.
    pub overall: f64,
    /// For each command seen at least `min_samples` times.
    pub per_command: f64,
    pub min_samples: usize,
    /// Commands the generator sends to be refused (wrong-type fodder), exempt from `per_command`.
    pub exempt: &'static [&'static str],
}

/// One seeded run: both servers, `clients` connection pairs to them, and what the run has seen.
pub struct Run {
    /// Names the test in a mismatch report ("random streams").
    what: &'static str,
    seed: u64,
    proto: u8,
    /// More about the run for the report (a config the seed chose).
    context: String,
    redis: Server,
    ferro: Server,
    /// (to Redis, to ferrodis), one pair per client of the scenario.
    pairs: Vec<(Client, Client)>,
    history: VecDeque<String>,
    /// Redis's replies by first byte: printed at the end, to show what the run exercised.
    kinds: BTreeMap<char, usize>,
    mix: ReplyMix,
    agreed: usize,
}

impl Run {
    /// Starts a fresh redis-server and a fresh ferrodis and opens `clients` connections to each,
    /// switched to RESP3 when `proto` is 3 (HELLO's reply carries the client id, which differs
    /// between the servers: only its type is compared).
    pub fn start(what: &'static str, seed: u64, proto: u8, clients: usize) -> Run {
        assert!(proto == 2 || proto == 3, "RESP{proto}?");
        let redis = RedisServer::new();
        let ferro = TestServer::new();
        let mut pairs: Vec<(Client, Client)> = (0..clients).map(|_| (redis.client(), ferro.client())).collect();
        if proto == 3 {
            for (rc, fc) in &mut pairs {
                let r = rc.cmd(&["HELLO", "3"]);
                let f = fc.cmd(&["HELLO", "3"]);
                assert!(
                    r.first() == Some(&b'%') && f.first() == r.first(),
                    "HELLO 3: ferrodis {} redis {}",
                    show(&f),
                    show(&r)
                );
            }
        }
        Run {
            what,
            seed,
            proto,
            context: String::new(),
            redis,
            ferro,
            pairs,
            history: VecDeque::new(),
            kinds: BTreeMap::new(),
            mix: ReplyMix::default(),
            agreed: 0,
        }
    }

    /// Adds `context` to every report of this run (what a seed chose beyond its commands).
    pub fn with_context(mut self, context: impl Into<String>) -> Run {
        self.context = context.into();
        self
    }

    /// Connection pair `i` (to Redis, to ferrodis), for look-ups and comparisons of the test's own.
    pub fn clients(&mut self, i: usize) -> (&mut Client, &mut Client) {
        let (rc, fc) = &mut self.pairs[i];
        (rc, fc)
    }

    /// A new connection pair (RESP2), free of any state the run left on its own connections.
    pub fn fresh_clients(&self) -> (Client, Client) {
        (self.redis.client(), self.ferro.client())
    }

    fn remember<A: AsRef<[u8]>>(&mut self, client: usize, argv: &[A], suffix: &str) {
        let who = if self.pairs.len() > 1 { format!("{}: ", (b'A' + client as u8) as char) } else { String::new() };
        self.history.push_back(format!("{who}{}{suffix}", brief(argv)));
        if self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }

    fn report(&self, at: &str, expected: &[u8], actual: &std::io::Result<Vec<u8>>) -> String {
        let actual = match actual {
            Ok(a) => show(a),
            Err(e) => format!("(no reply: {e})"),
        };
        let context = if self.context.is_empty() { String::new() } else { format!(", {}", self.context) };
        format!(
            "{} mismatch: seed {} (RESP{}{context}), {at}\nlast commands:\n  {}\n  redis:    {}\n  ferrodis: {}",
            self.what,
            self.seed,
            self.proto,
            self.history.iter().cloned().collect::<Vec<_>>().join("\n  "),
            show(expected),
            actual
        )
    }

    /// A command of the harness's own (setup, a fix-up between steps) on connection pair `client`:
    /// both replies must be the same bytes. It shows in the history but not in the reply counts.
    /// Returns Redis's reply.
    pub fn harness<A: AsRef<[u8]>>(&mut self, client: usize, argv: &[A]) -> Vec<u8> {
        self.remember(client, argv, " (sent by the harness)");
        let seed = self.seed;
        let (rc, fc) = &mut self.pairs[client];
        let expected = rc.try_cmd(argv).unwrap_or_else(|e| panic!("seed {seed}, harness: redis: {e}"));
        let actual = fc.try_cmd(argv);
        if !matches!(&actual, Ok(a) if *a == expected) {
            panic!("{}", self.report("a command of the harness", &expected, &actual));
        }
        expected
    }

    /// Step `step` of the run on the first connection pair: see [`Run::step_on`].
    pub fn step<A: AsRef<[u8]>>(
        &mut self,
        step: usize,
        argv: &[A],
        agree: impl FnOnce(&mut Client, &[u8], &[u8]) -> bool,
    ) -> Vec<u8> {
        self.step_on(step, 0, "", argv, agree)
    }

    /// Sends `argv` to Redis, then to ferrodis, on connection pair `client`, and fails the test
    /// unless `agree(redis connection, Redis's reply, ferrodis's reply)` holds (the connection is
    /// there for look-ups that decide how to compare, such as an encoding). `note` follows the step
    /// number in the report. Returns Redis's reply.
    pub fn step_on<A: AsRef<[u8]>>(
        &mut self,
        step: usize,
        client: usize,
        note: &str,
        argv: &[A],
        agree: impl FnOnce(&mut Client, &[u8], &[u8]) -> bool,
    ) -> Vec<u8> {
        self.remember(client, argv, "");
        let seed = self.seed;
        let (rc, fc) = &mut self.pairs[client];
        let expected = rc.try_cmd(argv).unwrap_or_else(|e| panic!("seed {seed} step {step}: redis: {e}"));
        *self.kinds.entry(expected.first().map_or('?', |&b| b as char)).or_default() += 1;
        self.mix.record(argv, &expected);
        let actual = fc.try_cmd(argv);
        let ok = match &actual {
            Ok(a) => agree(rc, &expected, a),
            Err(_) => false,
        };
        if !ok {
            panic!("{}", self.report(&format!("step {step}{note}"), &expected, &actual));
        }
        self.agreed += 1;
        expected
    }

    /// Prints what the run exercised and fails unless its replies were mostly not errors. A bug
    /// hunt (extra seeds from a `FERRODIS_*_SEEDS` variable) only reports a poor mix: the
    /// built-in seeds keep the generator honest, and a hunt goes on to find disagreements.
    pub fn finish(&self, bounds: &MixBounds) {
        let seed = self.seed;
        eprintln!("seed {seed}: {} commands agreed; reply kinds {:?}", self.agreed, self.kinds);
        eprintln!("seed {seed}: per command (replies/errors): {}", self.mix.summary());
        let check = || {
            self.mix.assert_mostly_non_errors(
                &format!("seed {seed}"),
                bounds.overall,
                bounds.per_command,
                bounds.min_samples,
                bounds.exempt,
            )
        };
        let hunting = std::env::vars().any(|(k, _)| k.starts_with("FERRODIS_") && k.ends_with("_SEEDS"));
        if hunting {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).is_err() {
                eprintln!("seed {seed}: poor reply mix (above), not counted as a failure in a hunt");
            }
        } else {
            check();
        }
    }
}

/// Replies that agree only byte for byte.
pub fn exact(_: &mut Client, expected: &[u8], actual: &[u8]) -> bool {
    expected == actual
}

/// Whether two replies to a command named `cmd` agree: byte for byte, or, for a command listed in
/// `tolerances` (a read of a clock-relative value such as TTL), as two non-negative integers at most
/// the listed distance apart (the servers ran the command a moment apart).
pub fn within_tolerance(cmd: &[u8], expected: &[u8], actual: &[u8], tolerances: &[(&str, i64)]) -> bool {
    if expected == actual {
        return true;
    }
    let Some(&(_, n)) = tolerances.iter().find(|(name, _)| cmd.eq_ignore_ascii_case(name.as_bytes())) else {
        return false;
    };
    match (parse_value(expected), parse_value(actual)) {
        (Value::Int(a), Value::Int(b)) => a >= 0 && b >= 0 && (a - b).abs() <= n,
        _ => false,
    }
}

/// A command line for a report, shortened when very long (hundreds of PFADD elements, a dense
/// HLL value): the report has to stay readable.
pub fn brief<A: AsRef<[u8]>>(argv: &[A]) -> String {
    let line = if argv.len() > 12 {
        format!("{} ... ({} arguments)", show_argv(&argv[..12]), argv.len())
    } else {
        show_argv(argv)
    };
    // show_argv escapes every byte outside printable ASCII, so any cut is a char boundary.
    if line.len() > 800 {
        format!("{}... ({} bytes)", &line[..800], line.len())
    } else {
        line
    }
}

/// The keys of the database each connection has selected, which must be the same on both servers
/// (`what` says when and where); returns them sorted.
pub fn same_keys(what: &str, rc: &mut Client, fc: &mut Client) -> Vec<Vec<u8>> {
    let rkeys = keys_sorted(rc);
    let fkeys = keys_sorted(fc);
    assert_eq!(
        rkeys.iter().map(|k| show(k)).collect::<Vec<_>>(),
        fkeys.iter().map(|k| show(k)).collect::<Vec<_>>(),
        "{what}: KEYS * differ (left redis, right ferrodis)"
    );
    rkeys
}

/// Sends `argv` to both servers and fails, saying `what`, unless `agree(Redis's reply, ferrodis's)`.
pub fn check<A: AsRef<[u8]>>(
    what: &str,
    rc: &mut Client,
    fc: &mut Client,
    argv: &[A],
    agree: impl FnOnce(&[u8], &[u8]) -> bool,
) {
    let e = rc.cmd(argv);
    let a = fc.cmd(argv);
    assert!(agree(&e, &a), "{what}: `{}`\n  redis:    {}\n  ferrodis: {}", show_argv(argv), show(&e), show(&a));
}

/// SELECT `db` on both connections; both must accept it.
pub fn select(what: &str, rc: &mut Client, fc: &mut Client, db: &str) {
    assert_eq!(rc.cmd(&["SELECT", db]), b"+OK\r\n", "{what}: redis SELECT {db}");
    assert_eq!(fc.cmd(&["SELECT", db]), b"+OK\r\n", "{what}: ferrodis SELECT {db}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_applies_to_listed_commands_only() {
        let t = &[("TTL", 2)];
        assert!(within_tolerance(b"ttl", b":100\r\n", b":98\r\n", t));
        assert!(!within_tolerance(b"TTL", b":100\r\n", b":97\r\n", t));
        assert!(!within_tolerance(b"TTL", b":-1\r\n", b":0\r\n", t), "-1 and -2 are states, not times");
        assert!(!within_tolerance(b"PTTL", b":100\r\n", b":99\r\n", t));
        assert!(within_tolerance(b"GET", b"$1\r\nx\r\n", b"$1\r\nx\r\n", t));
    }

    #[test]
    fn brief_shortens_long_commands() {
        let many: Vec<String> = (0..20).map(|i| format!("a{i}")).collect();
        assert_eq!(brief(&many), "a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 ... (20 arguments)");
        let long = ["SET".to_string(), "k".to_string(), "\u{e9}".repeat(500)];
        let b = brief(&long);
        assert!(b.starts_with("SET k \"\\xc3\\xa9") && b.len() < 830 && b.ends_with(" bytes)"), "{b}");
        assert_eq!(brief(&["GET", "k"]), "GET k");
    }
}
