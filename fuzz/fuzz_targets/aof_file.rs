//! cargo-fuzz target: an AOF manifest and an AOF command stream from arbitrary bytes. Neither
//! parser may panic or allocate ahead of the bytes present; a stream read up to its last complete
//! command reads back as the same commands and ends cleanly (what truncation relies on).
#![no_main]

use ferrodis::aof::reader::CommandReader;
use ferrodis::aof::Manifest;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::parse(data) {
        let again = Manifest::parse(m.to_text().as_bytes()).expect("a manifest's own text parses");
        assert_eq!(again.to_text(), m.to_text());
    }
    let mut rd = CommandReader::new(data, 0);
    let mut cmds = Vec::new();
    while let Ok(Some(c)) = rd.next_command() {
        cmds.push(c);
    }
    let valid = rd.valid_up_to as usize;
    assert!(valid <= data.len());
    let mut again = CommandReader::new(&data[..valid], 0);
    for c in &cmds {
        assert_eq!(again.next_command().as_ref().ok().and_then(|o| o.as_ref()), Some(c));
    }
    assert_eq!(again.next_command(), Ok(None));
});
