//! Criterion micro-benchmarks of the per-request hot paths: the RESP request parser on a pipelined
//! buffer of SET/GET commands (whole, and arriving in 16 KB reads as from a socket), and the reply
//! writer for the common reply shapes in RESP2 and RESP3, and a sorted set's score updates (what
//! redis-benchmark's ZADD test does: new scores for members already there).
//!
//! Run: `cargo bench --bench hot_paths` (add `-- parser` to filter).

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrodis::resp::writer::write_reply;
use ferrodis::resp::{Parser, Reply};
use std::hint::black_box;

/// `n` pipelined commands alternating `SET key:<i> <value>` and `GET key:<i>`.
fn pipeline(n: usize, value_len: usize) -> Vec<u8> {
    let value = vec![b'x'; value_len];
    let mut out = Vec::new();
    for i in 0..n {
        let key = format!("key:{i:012}");
        if i % 2 == 0 {
            out.extend_from_slice(
                format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n", key.len(), value.len()).as_bytes(),
            );
            out.extend_from_slice(&value);
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).as_bytes());
        }
    }
    out
}

fn parser(c: &mut Criterion) {
    let mut g = c.benchmark_group("parser");
    for (name, n, vlen) in [("pipeline_1000_small", 1000, 3), ("pipeline_100_1k_values", 100, 1024)] {
        let input = pipeline(n, vlen);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("{name}/whole"), |b| {
            b.iter(|| {
                let mut p = Parser::default();
                let mut buf = BytesMut::from(&input[..]);
                let out = p.parse(&mut buf);
                assert_eq!(out.commands.len(), n);
                black_box(out.commands);
            })
        });
        g.bench_function(format!("{name}/16k_reads"), |b| {
            b.iter(|| {
                let mut p = Parser::default();
                let mut buf = BytesMut::with_capacity(32 * 1024);
                let mut count = 0;
                for chunk in input.chunks(16 * 1024) {
                    buf.extend_from_slice(chunk);
                    count += p.parse(&mut buf).commands.len();
                }
                assert_eq!(count, n);
            })
        });
    }
    let inline = b"PING\r\n".repeat(1000);
    g.throughput(Throughput::Elements(1000));
    g.bench_function("inline_ping_1000", |b| {
        b.iter(|| {
            let mut p = Parser::default();
            let mut buf = BytesMut::from(&inline[..]);
            black_box(p.parse(&mut buf).commands.len());
        })
    });
    g.finish();
}

fn writer(c: &mut Criterion) {
    let mut g = c.benchmark_group("writer");
    let cases: Vec<(&str, Reply)> = vec![
        ("ok", Reply::Ok),
        ("int", Reply::Int(1_234_567)),
        ("bulk_16", Reply::Bulk(vec![b'v'; 16])),
        ("bulk_1k", Reply::Bulk(vec![b'v'; 1024])),
        ("nil", Reply::Nil),
        ("array_100_bulks", Reply::Array((0..100).map(|i| Reply::Bulk(format!("member:{i}").into_bytes())).collect())),
        ("map_50", Reply::Map((0..50).map(|i| (Reply::Bulk(format!("f{i}").into_bytes()), Reply::Int(i))).collect())),
        ("double", Reply::Double(2.718_281_828_459_045_5e-3)),
    ];
    for (name, reply) in &cases {
        for proto in [2u8, 3] {
            g.bench_function(format!("{name}/resp{proto}"), |b| {
                let mut out = Vec::with_capacity(16 * 1024);
                b.iter(|| {
                    out.clear();
                    // A batch of 100 replies per iteration, as one write per batch does.
                    for _ in 0..100 {
                        write_reply(&mut out, black_box(reply), proto);
                    }
                    black_box(out.len());
                })
            });
        }
    }
    g.finish();
}

/// ZADD on existing members of a skiplist-encoded zset of 1000 and of 100,000: each call moves
/// one member to a new score.
fn zset(c: &mut Criterion) {
    use ferrodis::types::zset::{Limits, ZSet};
    let limits = Limits { max_entries: 128, max_value: 64 };
    let mut g = c.benchmark_group("zset");
    for n in [1000u32, 100_000] {
        let members: Vec<Vec<u8>> = (0..n).map(|i| format!("element:{i}").into_bytes()).collect();
        let mut z = ZSet::new();
        for (i, m) in members.iter().enumerate() {
            z.insert(m, i as f64, limits);
        }
        let mut rng = fastrand::Rng::with_seed(7);
        g.bench_function(format!("rescore_{n}"), |b| {
            b.iter(|| {
                let m = &members[rng.usize(..members.len())];
                black_box(z.insert(m, rng.u32(..n) as f64, limits))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, parser, writer, zset);
criterion_main!(benches);
