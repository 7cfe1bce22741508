//! cargo-fuzz target: cluster bus frames from a peer (`cluster::msg::decode`). Anyone who can
//! reach the bus port can send one, so no frame may panic or allocate beyond its length; a frame
//! that decodes must re-encode to one that decodes, and from then on encoding and decoding agree
//! (the first pass may normalize: an address or hostname that is not UTF-8 is read lossily).
#![no_main]

use ferrodis::cluster::msg::{decode, encode, Body, Ext};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(msg) = decode(data) else { return };
    // Extensions of unknown types are skipped on decode and cannot be written back.
    if let Body::Ping { exts, .. } = &msg.body {
        if exts.iter().any(|e| matches!(e, Ext::Unknown(_))) {
            return;
        }
    }
    let once = decode(&encode(&msg)).expect("a re-encoded frame must decode");
    let twice = decode(&encode(&once)).expect("a re-encoded frame must decode");
    assert_eq!(format!("{:?}", twice.body), format!("{:?}", once.body));
    assert_eq!(format!("{:?}", twice.hdr), format!("{:?}", once.hdr));
    assert_eq!(once.hdr.typ, msg.hdr.typ);
    assert_eq!(once.hdr.sender, msg.hdr.sender);
});
