//! Sentinel over ferrodis, end to end: `tools/sentinel_failover.sh` starts a ferrodis master, two
//! ferrodis replicas and three of Debian's `redis-sentinel` (7.0) on loopback, kills the master with
//! SIGKILL under redis-benchmark's writes, and checks that a replica is promoted, the other follows
//! it, the sentinels name it, and the old master, restarted, rejoins as its replica. The script
//! prints each step with its time; this test runs it on the binary cargo built and asserts that
//! every step passed (about 20 s).
//!
//! `make deps` installs redis-sentinel. Where it is missing the test fails, unless
//! `FERRODIS_ALLOW_NO_REDIS=1` lets it pass without it (as the differential tests do without
//! redis-server).

use std::path::Path;
use std::process::Command;

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

#[test]
fn sentinels_fail_over_a_killed_master() {
    if !on_path("redis-sentinel") {
        if std::env::var("FERRODIS_ALLOW_NO_REDIS").as_deref() == Ok("1") {
            eprintln!("SKIPPED: redis-sentinel not found and FERRODIS_ALLOW_NO_REDIS=1");
            return;
        }
        panic!("redis-sentinel is missing (apt-get install -y redis-sentinel, or run `make test`, which installs it)");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/sentinel_failover.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["--server", env!("CARGO_BIN_EXE_ferrodis-server")])
        .output()
        .expect("run tools/sentinel_failover.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("PASS: failover to"),
        "the failover scenario failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!("{stdout}");
}
