//! cargo-fuzz target: a redis.conf text. Loading it must not panic; a text that loads must
//! survive CONFIG REWRITE: the rewritten file loads into a fresh configuration with every
//! directive's CONFIG GET value the same (what a restart after CONFIG REWRITE relies on).
//! Lines that reach the filesystem at load time (dir, logfile, include) are dropped.
#![no_main]

use ferrodis::config::{all_names, Config, LoadState};

fn reaches_files(line: &str) -> bool {
    let word = line.trim_start_matches([' ', '\t']).split([' ', '\t']).next().unwrap_or("");
    ["dir", "logfile", "include"].iter().any(|d| word.eq_ignore_ascii_case(d))
}

fn values(cfg: &Config) -> Vec<(&'static str, String)> {
    all_names().map(|(name, desc)| (name, cfg.get(desc))).collect()
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let text: String = text.split('\n').filter(|l| !reaches_files(l)).collect::<Vec<_>>().join("\n");
    let mut cfg = Config::default();
    if cfg.load_string(&text, &mut LoadState { reading_file: true, ..LoadState::default() }).is_err() {
        return;
    }
    let path = std::env::temp_dir().join(format!("ferrodis-fuzz-config-{}.conf", std::process::id()));
    let path = path.to_str().expect("a UTF-8 temp path");
    let _ = std::fs::remove_file(path);
    cfg.rewrite(path, &[], true).expect("CONFIG REWRITE writes");
    let rewritten = std::fs::read_to_string(path).expect("the rewritten file reads back");
    let _ = std::fs::remove_file(path);
    let mut again = Config::default();
    if let Err(e) = again.load_string(&rewritten, &mut LoadState { reading_file: true, ..LoadState::default() }) {
        panic!("the rewritten file does not load: {}\n--- input\n{text}\n--- rewritten\n{rewritten}", e.0);
    }
    for ((name, before), (_, after)) in values(&cfg).into_iter().zip(values(&again)) {
        assert_eq!(before, after, "{name} changed across CONFIG REWRITE\n--- rewritten\n{rewritten}");
    }
});
