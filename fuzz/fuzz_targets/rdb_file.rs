//! cargo-fuzz target: the whole-file RDB reader (`read_file`) on arbitrary bytes, with a sink that
//! drops what it is given. Any panic, hang or runaway allocation is a loader bug.
#![no_main]

use ferrodis::functions::Library;
use ferrodis::rdb::load::{read_file, DecodeOpts, Decoded, KeyMeta, Sink};

struct Drop;

impl Sink for Drop {
    fn select_db(&mut self, _db: u64) -> Result<(), String> {
        Ok(())
    }
    fn key(&mut self, _key: &[u8], _value: Decoded, _meta: KeyMeta) -> Result<(), String> {
        Ok(())
    }
    fn function(&mut self, _lib: Library) -> Result<(), String> {
        Ok(())
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = read_file(data, &mut Drop, &DecodeOpts::default());
});
