//! The cluster bus's wire format, Redis 7.0's `clusterMsg`: a fixed 2256-byte header (signature
//! "RCmb", total length, version 1, ports, type, gossip count, epochs, replication offset,
//! sender, the slots bitmap of the sender's shard, its master, its IP, extension count, flags,
//! cluster state, message flags) followed by a body chosen by the type. Every integer is big
//! endian. Encoding and decoding only: no sockets, no state.

use super::{Name, NULL_NAME, SLOT_BYTES};

pub const PING: u16 = 0;
pub const PONG: u16 = 1;
pub const MEET: u16 = 2;
pub const FAIL: u16 = 3;
pub const PUBLISH: u16 = 4;
pub const FAILOVER_AUTH_REQUEST: u16 = 5;
pub const FAILOVER_AUTH_ACK: u16 = 6;
pub const UPDATE: u16 = 7;
pub const MFSTART: u16 = 8;
pub const MODULE: u16 = 9;
pub const PUBLISHSHARD: u16 = 10;
/// Number of message types (stats arrays).
pub const TYPE_COUNT: usize = 11;

/// Names of the types as CLUSTER INFO's stats lines spell them.
pub const TYPE_NAMES: [&str; TYPE_COUNT] =
    ["ping", "pong", "meet", "fail", "publish", "auth-req", "auth-ack", "update", "mfstart", "module", "publishshard"];

/// mflags[0] bits.
pub const MFLAG0_PAUSED: u8 = 1;
pub const MFLAG0_FORCEACK: u8 = 2;
pub const MFLAG0_EXT_DATA: u8 = 4;

/// The header's size: the smallest valid message.
pub const HEADER_LEN: usize = 2256;
/// One gossip section.
pub const GOSSIP_LEN: usize = 104;
/// sizeof(union clusterMsgData): the UPDATE body, the largest member.
pub const UPDATE_BODY_LEN: usize = 8 + 40 + SLOT_BYTES;
/// Ping extension: hostname.
pub const EXT_HOSTNAME: u16 = 0;

const IP_LEN: usize = 46;

#[derive(Debug, Clone)]
pub struct Header {
    pub port: u16,
    pub typ: u16,
    pub count: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub offset: u64,
    pub sender: Name,
    pub myslots: Box<[u8; SLOT_BYTES]>,
    pub slaveof: Name,
    pub myip: String,
    pub extensions: u16,
    pub pport: u16,
    pub cport: u16,
    pub flags: u16,
    pub state: u8,
    pub mflags: [u8; 3],
}

impl Header {
    pub fn new(typ: u16, sender: Name) -> Header {
        Header {
            port: 0,
            typ,
            count: 0,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender,
            myslots: Box::new([0; SLOT_BYTES]),
            slaveof: NULL_NAME,
            myip: String::new(),
            extensions: 0,
            pport: 0,
            cport: 0,
            flags: 0,
            state: 0,
            mflags: [0; 3],
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gossip {
    pub name: Name,
    pub ping_sent: u32,
    pub pong_received: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Ext {
    Hostname(String),
    /// A type this version does not know, skipped.
    Unknown(u16),
}

#[derive(Debug, Clone)]
pub enum Body {
    /// PING, PONG, MEET: gossip sections and extensions.
    Ping {
        gossip: Vec<Gossip>,
        exts: Vec<Ext>,
    },
    Fail {
        name: Name,
    },
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    Update {
        config_epoch: u64,
        name: Name,
        slots: Box<[u8; SLOT_BYTES]>,
    },
    /// FAILOVER_AUTH_REQUEST / ACK, MFSTART, and MODULE (ignored).
    Empty,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub hdr: Header,
    pub body: Body,
}

/// Why a message was not taken.
#[derive(Debug, PartialEq)]
pub enum DecodeError {
    /// Signature or length of the frame's first 8 bytes: the link is dropped.
    BadFrame,
    /// A frame of the wrong size for its type, or of another version: ignored.
    Invalid(String),
}

/// The length a frame announces in its first 8 bytes, or BadFrame (Redis frees the link then).
pub fn frame_len(head: &[u8]) -> Result<usize, DecodeError> {
    if head.len() < 8 || &head[..4] != b"RCmb" {
        return Err(DecodeError::BadFrame);
    }
    let len = u32::from_be_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if len < HEADER_LEN {
        return Err(DecodeError::BadFrame);
    }
    Ok(len)
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}
fn name_at(b: &[u8], at: usize) -> Name {
    let mut n = NULL_NAME;
    n.copy_from_slice(&b[at..at + 40]);
    n
}
fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Decodes one whole frame (as `frame_len` delimited it), checking each type's length as
/// Redis's clusterIsValidPacket does.
pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
    let totlen = frame_len(buf)?;
    if totlen != buf.len() {
        return Err(DecodeError::Invalid(format!("frame of {} bytes announces {totlen}", buf.len())));
    }
    let ver = be16(buf, 8);
    if ver != 1 {
        return Err(DecodeError::Invalid(format!("version {ver}")));
    }
    let mut slots = Box::new([0u8; SLOT_BYTES]);
    slots.copy_from_slice(&buf[80..80 + SLOT_BYTES]);
    let hdr = Header {
        port: be16(buf, 10),
        typ: be16(buf, 12),
        count: be16(buf, 14),
        current_epoch: be64(buf, 16),
        config_epoch: be64(buf, 24),
        offset: be64(buf, 32),
        sender: name_at(buf, 40),
        myslots: slots,
        slaveof: name_at(buf, 2128),
        myip: cstr(&buf[2168..2168 + IP_LEN]),
        extensions: be16(buf, 2214),
        pport: be16(buf, 2246),
        cport: be16(buf, 2248),
        flags: be16(buf, 2250),
        state: buf[2252],
        mflags: [buf[2253], buf[2254], buf[2255]],
    };
    let data = &buf[HEADER_LEN..];
    let invalid = |expected: usize| {
        Err(DecodeError::Invalid(format!(
            "Received invalid {} packet of length {} but expected length {}",
            TYPE_NAMES.get(hdr.typ as usize).copied().unwrap_or("unknown"),
            totlen,
            expected
        )))
    };
    let body = match hdr.typ {
        PING | PONG | MEET => {
            let count = hdr.count as usize;
            let mut explen = HEADER_LEN + count * GOSSIP_LEN;
            if totlen < explen {
                return invalid(explen);
            }
            let mut gossip = Vec::with_capacity(count);
            for i in 0..count {
                let g = &data[i * GOSSIP_LEN..(i + 1) * GOSSIP_LEN];
                gossip.push(Gossip {
                    name: name_at(g, 0),
                    ping_sent: be32(g, 40),
                    pong_received: be32(g, 44),
                    ip: cstr(&g[48..48 + IP_LEN]),
                    port: be16(g, 94),
                    cport: be16(g, 96),
                    flags: be16(g, 98),
                    pport: be16(g, 100),
                });
            }
            let mut exts = Vec::new();
            if hdr.mflags[0] & MFLAG0_EXT_DATA != 0 {
                for _ in 0..hdr.extensions {
                    if totlen < explen + 8 {
                        return invalid(explen + 8);
                    }
                    let e = &buf[explen..];
                    let typ = be16(e, 0);
                    let len = be32(e, 4) as usize;
                    if len < 8 || !len.is_multiple_of(8) || totlen < explen + len {
                        return invalid(explen + len.max(8));
                    }
                    exts.push(match typ {
                        EXT_HOSTNAME => Ext::Hostname(cstr(&e[8..len])),
                        other => Ext::Unknown(other),
                    });
                    explen += len;
                }
            }
            if totlen != explen {
                return invalid(explen);
            }
            Body::Ping { gossip, exts }
        }
        FAIL => {
            if totlen != HEADER_LEN + 40 {
                return invalid(HEADER_LEN + 40);
            }
            Body::Fail { name: name_at(data, 0) }
        }
        PUBLISH | PUBLISHSHARD => {
            if data.len() < 8 {
                return invalid(HEADER_LEN + 8);
            }
            let clen = be32(data, 0) as usize;
            let mlen = be32(data, 4) as usize;
            let explen = HEADER_LEN + 8 + clen + mlen;
            if totlen != explen {
                return invalid(explen);
            }
            Body::Publish { channel: data[8..8 + clen].to_vec(), message: data[8 + clen..8 + clen + mlen].to_vec() }
        }
        FAILOVER_AUTH_REQUEST | FAILOVER_AUTH_ACK | MFSTART => {
            if totlen != HEADER_LEN {
                return invalid(HEADER_LEN);
            }
            Body::Empty
        }
        UPDATE => {
            if totlen != HEADER_LEN + UPDATE_BODY_LEN {
                return invalid(HEADER_LEN + UPDATE_BODY_LEN);
            }
            let mut slots = Box::new([0u8; SLOT_BYTES]);
            slots.copy_from_slice(&data[48..48 + SLOT_BYTES]);
            Body::Update { config_epoch: be64(data, 0), name: name_at(data, 8), slots }
        }
        _ => Body::Empty,
    };
    Ok(Message { hdr, body })
}

fn put_str(out: &mut Vec<u8>, s: &str, len: usize) {
    let b = s.as_bytes();
    let n = b.len().min(len - 1);
    out.extend_from_slice(&b[..n]);
    out.resize(out.len() + (len - n), 0);
}

/// Encodes a message; the header's count and extensions are taken from the body.
pub fn encode(msg: &Message) -> Vec<u8> {
    let h = &msg.hdr;
    let mut count = h.count;
    let mut extensions = h.extensions;
    let mut mflags = h.mflags;
    if let Body::Ping { gossip, exts } = &msg.body {
        count = gossip.len() as u16;
        extensions = exts.len() as u16;
        if !exts.is_empty() {
            mflags[0] |= MFLAG0_EXT_DATA;
        }
    }
    let mut out = Vec::with_capacity(HEADER_LEN + 256);
    out.extend_from_slice(b"RCmb");
    out.extend_from_slice(&[0; 4]); // totlen, set at the end
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&h.port.to_be_bytes());
    out.extend_from_slice(&h.typ.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&h.current_epoch.to_be_bytes());
    out.extend_from_slice(&h.config_epoch.to_be_bytes());
    out.extend_from_slice(&h.offset.to_be_bytes());
    out.extend_from_slice(&h.sender);
    out.extend_from_slice(&h.myslots[..]);
    out.extend_from_slice(&h.slaveof);
    put_str(&mut out, &h.myip, IP_LEN);
    out.extend_from_slice(&extensions.to_be_bytes());
    out.extend_from_slice(&[0; 30]);
    out.extend_from_slice(&h.pport.to_be_bytes());
    out.extend_from_slice(&h.cport.to_be_bytes());
    out.extend_from_slice(&h.flags.to_be_bytes());
    out.push(h.state);
    out.extend_from_slice(&mflags);
    debug_assert_eq!(out.len(), HEADER_LEN);
    match &msg.body {
        Body::Ping { gossip, exts } => {
            for g in gossip {
                out.extend_from_slice(&g.name);
                out.extend_from_slice(&g.ping_sent.to_be_bytes());
                out.extend_from_slice(&g.pong_received.to_be_bytes());
                put_str(&mut out, &g.ip, IP_LEN);
                out.extend_from_slice(&g.port.to_be_bytes());
                out.extend_from_slice(&g.cport.to_be_bytes());
                out.extend_from_slice(&g.flags.to_be_bytes());
                out.extend_from_slice(&g.pport.to_be_bytes());
                out.extend_from_slice(&[0; 2]);
            }
            for e in exts {
                if let Ext::Hostname(h) = e {
                    // Header, the name and its NUL, padded to 8 bytes.
                    let len = (8 + h.len() + 1).div_ceil(8) * 8;
                    out.extend_from_slice(&EXT_HOSTNAME.to_be_bytes());
                    out.extend_from_slice(&[0; 2]);
                    out.extend_from_slice(&(len as u32).to_be_bytes());
                    out.extend_from_slice(h.as_bytes());
                    out.resize(out.len() + (len - 8 - h.len()), 0);
                }
            }
        }
        Body::Fail { name } => out.extend_from_slice(name),
        Body::Publish { channel, message } => {
            out.extend_from_slice(&(channel.len() as u32).to_be_bytes());
            out.extend_from_slice(&(message.len() as u32).to_be_bytes());
            out.extend_from_slice(channel);
            out.extend_from_slice(message);
        }
        Body::Update { config_epoch, name, slots } => {
            out.extend_from_slice(&config_epoch.to_be_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&slots[..]);
        }
        Body::Empty => {}
    }
    let len = (out.len() as u32).to_be_bytes();
    out[4..8].copy_from_slice(&len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_round_trips() {
        let mut hdr = Header::new(PING, *b"e37a9c27217bf22a6fcf09b634e73bf58d092f30");
        hdr.port = 20001;
        hdr.cport = 30001;
        hdr.flags = 17;
        hdr.myslots[0] = 0x80;
        let g = Gossip {
            name: *b"fe8107ac0852d83ba0fce802298f26d35a3dcf1c",
            ping_sent: 1,
            pong_received: 2,
            ip: "127.0.0.1".into(),
            port: 20002,
            cport: 30002,
            flags: 1,
            pport: 0,
        };
        let msg =
            Message { hdr, body: Body::Ping { gossip: vec![g.clone()], exts: vec![Ext::Hostname("host-a".into())] } };
        let bytes = encode(&msg);
        assert_eq!(bytes.len(), HEADER_LEN + GOSSIP_LEN + 16);
        let back = decode(&bytes).expect("valid");
        assert_eq!(back.hdr.port, 20001);
        assert_eq!(back.hdr.flags, 17);
        assert_eq!(back.hdr.myslots[0], 0x80);
        match back.body {
            Body::Ping { gossip, exts } => {
                assert_eq!(gossip, vec![g]);
                assert_eq!(exts, vec![Ext::Hostname("host-a".into())]);
            }
            _ => panic!("not a ping"),
        }
    }

    #[test]
    fn bad_lengths_are_refused() {
        let msg = Message { hdr: Header::new(FAIL, NULL_NAME), body: Body::Fail { name: NULL_NAME } };
        let mut bytes = encode(&msg);
        assert!(decode(&bytes).is_ok());
        bytes.truncate(HEADER_LEN + 10);
        let len = (bytes.len() as u32).to_be_bytes();
        bytes[4..8].copy_from_slice(&len);
        assert!(matches!(decode(&bytes), Err(DecodeError::Invalid(_))));
        assert_eq!(frame_len(b"RCmb\0\0\0\x10"), Err(DecodeError::BadFrame));
        assert_eq!(frame_len(b"XXXX\0\0\x10\0"), Err(DecodeError::BadFrame));
    }

    /// The cargo-fuzz target's property (fuzz/fuzz_targets/cluster_msg.rs) as a seeded loop, so
    /// CI runs it on the stable toolchain: well-formed frames of every type, with random bytes
    /// changed, cut or appended and the length fixed up or not, never panic, and what decodes
    /// re-encodes to a frame that decodes the same from then on.
    #[test]
    fn mutated_frames_never_panic() {
        let name = *b"e37a9c27217bf22a6fcf09b634e73bf58d092f30";
        let gossip = Gossip {
            name,
            ping_sent: 1,
            pong_received: 2,
            ip: "10.0.0.1".into(),
            port: 7001,
            cport: 17001,
            flags: 0,
            pport: 0,
        };
        let bodies = [
            (PING, Body::Ping { gossip: vec![gossip.clone(), gossip], exts: vec![Ext::Hostname("node-a".into())] }),
            (MEET, Body::Ping { gossip: vec![], exts: vec![] }),
            (FAIL, Body::Fail { name }),
            (PUBLISH, Body::Publish { channel: b"ch".to_vec(), message: b"hello".to_vec() }),
            (UPDATE, Body::Update { config_epoch: 9, name, slots: Box::new([0xF0; SLOT_BYTES]) }),
            (FAILOVER_AUTH_REQUEST, Body::Empty),
        ];
        let seeds: Vec<Vec<u8>> =
            bodies.into_iter().map(|(typ, body)| encode(&Message { hdr: Header::new(typ, name), body })).collect();
        let mut rng = fastrand::Rng::with_seed(0xB05);
        let mut decoded = 0;
        for _ in 0..20_000 {
            let mut f = seeds[rng.usize(..seeds.len())].clone();
            for _ in 0..rng.usize(1..8) {
                if f.is_empty() {
                    break;
                }
                match rng.u8(..4) {
                    0 => {
                        let at = rng.usize(..f.len());
                        f[at] = rng.u8(..);
                    }
                    1 => {
                        // A count, length or type field of the header or body.
                        let at = [12, 13, 14, 15, 2214, 2215, 2253, HEADER_LEN, HEADER_LEN + 3, HEADER_LEN + 7]
                            [rng.usize(..10)]
                        .min(f.len() - 1);
                        f[at] = rng.u8(..);
                    }
                    2 => f.truncate(rng.usize(..=f.len())),
                    _ => f.extend((0..rng.usize(..64)).map(|_| rng.u8(..))),
                }
            }
            if rng.bool() && f.len() >= 8 {
                let len = (f.len() as u32).to_be_bytes();
                f[4..8].copy_from_slice(&len);
            }
            let Ok(msg) = decode(&f) else { continue };
            decoded += 1;
            if let Body::Ping { exts, .. } = &msg.body {
                if exts.iter().any(|e| matches!(e, Ext::Unknown(_))) {
                    continue;
                }
            }
            let once = decode(&encode(&msg)).expect("a re-encoded frame decodes");
            let twice = decode(&encode(&once)).expect("a re-encoded frame decodes");
            assert_eq!(format!("{:?}", twice.body), format!("{:?}", once.body));
            assert_eq!(format!("{:?}", twice.hdr), format!("{:?}", once.hdr));
        }
        assert!(decoded > 1000, "too few mutated frames decoded ({decoded}) to test re-encoding");
    }
}
