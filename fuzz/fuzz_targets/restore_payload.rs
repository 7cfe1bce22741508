//! cargo-fuzz target: RESTORE payload bodies (`decode_value`). The first byte picks the RDB
//! object type, the rest is the body. A decoded value must also survive re-encoding.
#![no_main]

use ferrodis::rdb::load::{decode_value, DecodeOpts};
use ferrodis::rdb::save::encode_value;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&t, body)) = data.split_first() else { return };
    if let Ok((d, used)) = decode_value(t, body, &DecodeOpts::default()) {
        assert!(used <= body.len());
        // What we accepted must be writable, and what we write must read back the same.
        if let Ok((t2, bytes)) = encode_value(&d.value, 12, true) {
            let (d2, n2) = decode_value(t2, &bytes, &DecodeOpts::default()).expect("re-encoded value must decode");
            assert_eq!(n2, bytes.len());
            // Encodings may legitimately differ (node grouping, intset vs listpack), so compare
            // the logical shape only.
            assert_eq!(d2.value.type_name(), d.value.type_name());
            assert_eq!(d2.value.free_effort(), d.value.free_effort());
        }
    }
});
