//! `Reply`: the only answer vocabulary of command handlers. It names RESP3 shapes; the writer
//! lowers them to RESP2 where the client speaks RESP2 (maps and sets become arrays, doubles become
//! bulk strings, booleans become integers, null becomes `$-1` or `*-1`).

/// One reply, as a tree. Constructors for the common cases keep handlers short.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`
    Ok,
    /// `+text` from a static string (PONG, QUEUED, ...).
    Status(&'static str),
    /// `+text` built at run time (TYPE, CLIENT INFO's status replies, ...).
    StatusOwned(String),
    /// `-text`: the full error line without the leading `-`, e.g. `ERR syntax error`. Bytes,
    /// not a string: Redis echoes client arguments into errors as they came.
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// Null bulk string: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// Null array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    /// RESP3 map, a flat array of key, value, key, value in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set, an array in RESP2.
    Set(Vec<Reply>),
    /// RESP3 double; a bulk string in RESP2, formatted as Redis formats it.
    Double(f64),
    /// RESP3 boolean; `:1` / `:0` in RESP2.
    Bool(bool),
    /// RESP3 verbatim string (`=len\r\ntxt:...`); a bulk string in RESP2.
    Verbatim(&'static str, Vec<u8>),
    /// RESP3 big number; a bulk string in RESP2.
    BigNumber(String),
    /// RESP3 push (pub/sub messages); an array in RESP2.
    Push(Vec<Reply>),
    /// Bytes already encoded for the client's protocol, copied through unchanged.
    Raw(Vec<u8>),
    /// A big reply over a snapshot of the data, encoded when it is written: off the executor
    /// thread when the command ran straight from a connection's batch, in place otherwise
    /// (inside MULTI, scripts, pending commands), by `write_reply`.
    Deferred(Deferred),
}

/// What a deferred reply encodes: it owns a snapshot of what it lists (the data as it was when
/// the command ran), so it can be encoded on any thread, later, while the data changes.
pub trait Encode: Send + Sync {
    /// Appends the reply's bytes for a client speaking protocol `proto`.
    fn encode(&self, proto: u8, out: &mut Vec<u8>);
    /// About how many bytes `encode` appends (a capacity hint).
    fn size_hint(&self) -> usize;
    /// Bytes `encode` appends at the least, known before encoding: a client whose output limit
    /// this breaks is closed at once, without encoding a reply that would be dropped.
    fn min_size(&self) -> usize {
        0
    }
    /// Whether the encoding may turn out to be an error reply (SORT of a member that is not a
    /// number). Such a reply counts in INFO's errorstats and failed_calls once encoded, and is
    /// encoded off the executor only as the last command of its batch (see `executor::call`).
    fn may_fail(&self) -> bool {
        false
    }
    /// `encode`, telling what error it wrote (the line without `-`), if it wrote one.
    fn encode_checked(&self, proto: u8, out: &mut Vec<u8>) -> Option<&'static str> {
        self.encode(proto, out);
        None
    }
    /// Appends the next piece of the reply from where `cursor` stands (a new cursor: the
    /// start), ending between two elements once it holds `PIECE_BYTES` or more. The pieces in
    /// order are `encode`'s bytes. A streaming encoder keeps its place in the cursor, so no
    /// thread waits while the client takes a piece; the default encodes the whole reply in one
    /// piece (what may fail does: an error is always a whole reply).
    fn encode_piece(&self, proto: u8, cursor: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let _ = cursor;
        Piece::Done(self.encode_checked(proto, out))
    }
    /// Whether `encode_piece` streams (else its one piece is the whole reply, and its buffer
    /// is sized for it up front: grown by doubling, it held up to twice the reply).
    fn streams(&self) -> bool {
        false
    }
    /// Whether the reply is ready to encode: Pending while the executor still produces it (a
    /// KEYS walk, see `Later`), registering `cx` to be woken; Ready(false) when it never will be
    /// (the connection then closes).
    fn poll_ready(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<bool> {
        let _ = cx;
        std::task::Poll::Ready(true)
    }
}

/// A reply the executor completes later, a step at a time, while other clients run (KEYS over a
/// big table): its connection waits for it (`Encode::poll_ready`), then writes its bytes, which
/// come in parts so the executor never copies a big reply to join them. The executor holds it
/// weakly: once the connection drops it (the client went away), the work behind it stops.
#[derive(Default)]
pub struct Later {
    state: std::sync::Mutex<LaterState>,
}

#[derive(Default)]
struct LaterState {
    parts: Option<Vec<Vec<u8>>>,
    abandoned: bool,
    waker: Option<std::task::Waker>,
}

impl Later {
    fn lock(&self) -> std::sync::MutexGuard<'_, LaterState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands over the reply's bytes (their concatenation) and wakes the connection.
    pub fn complete(&self, parts: Vec<Vec<u8>>) {
        let waker = {
            let mut st = self.lock();
            st.parts = Some(parts);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The reply will not come (what produced it is gone): the connection closes.
    pub fn abandon(&self) {
        let waker = {
            let mut st = self.lock();
            st.abandoned = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Encode for Later {
    fn encode(&self, _proto: u8, out: &mut Vec<u8>) {
        if let Some(parts) = &self.lock().parts {
            for p in parts {
                out.extend_from_slice(p);
            }
        }
    }

    fn size_hint(&self) -> usize {
        self.lock().parts.as_ref().map_or(0, |p| p.iter().map(Vec::len).sum())
    }

    /// Parts from `cursor.a` (the part) and `cursor.b` (the offset in it), a piece's worth.
    fn encode_piece(&self, _proto: u8, cursor: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let st = self.lock();
        let Some(parts) = &st.parts else { return Piece::Done(None) };
        while cursor.a < parts.len() {
            let part = &parts[cursor.a];
            let take = (part.len() - cursor.b).min(PIECE_BYTES.saturating_sub(out.len()));
            out.extend_from_slice(&part[cursor.b..cursor.b + take]);
            cursor.b += take;
            if cursor.b == part.len() {
                cursor.a += 1;
                cursor.b = 0;
            }
            if out.len() >= PIECE_BYTES {
                return if cursor.a < parts.len() { Piece::More } else { Piece::Done(None) };
            }
        }
        Piece::Done(None)
    }

    fn streams(&self) -> bool {
        true
    }

    fn poll_ready(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<bool> {
        let mut st = self.lock();
        if st.parts.is_some() {
            return std::task::Poll::Ready(true);
        }
        if st.abandoned {
            return std::task::Poll::Ready(false);
        }
        st.waker = Some(cx.waker().clone());
        std::task::Poll::Pending
    }
}

/// How much of a streamed reply one piece holds at the least (but for the last): the
/// connection encodes the next piece once the socket took the ones before, so a big reply
/// holds a few pieces of memory instead of its whole encoding (Redis holds the whole reply).
pub const PIECE_BYTES: usize = 256 * 1024;

/// Where a streamed encoding stands between two pieces; what the fields mean is the encoder's
/// (a position in a snapshot, elements left to send).
#[derive(Debug, Default, Clone, Copy)]
pub struct Cursor {
    pub started: bool,
    pub a: usize,
    pub b: usize,
    pub c: u64,
    pub d: u64,
}

/// What `Encode::encode_piece` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// More pieces follow.
    More,
    /// That was the last, and the error the reply turned out to be, if it is one.
    Done(Option<&'static str>),
}

/// A shared handle on a deferred reply's encoder.
#[derive(Clone)]
pub struct Deferred(pub std::sync::Arc<dyn Encode>);

impl Deferred {
    pub fn new(e: impl Encode + 'static) -> Self {
        Deferred(std::sync::Arc::new(e))
    }
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Deferred")
    }
}

/// Two deferred replies are equal when they encode the same bytes (tests compare replies).
impl PartialEq for Deferred {
    fn eq(&self, other: &Self) -> bool {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        self.0.encode(3, &mut a);
        other.0.encode(3, &mut b);
        a == b
    }
}

impl Reply {
    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(bytes.into())
    }

    pub fn error(text: impl Into<Vec<u8>>) -> Reply {
        Reply::Error(text.into())
    }

    /// An array of bulk strings.
    pub fn bulks<I, B>(items: I) -> Reply
    where
        I: IntoIterator<Item = B>,
        B: Into<Vec<u8>>,
    {
        Reply::Array(items.into_iter().map(|b| Reply::Bulk(b.into())).collect())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}
