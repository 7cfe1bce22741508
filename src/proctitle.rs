//! The process title, what `ps` and `/proc/PID/cmdline` show, rendered from
//! `proc-title-template` as Redis does (`{title} {listen-addr} {server-mode}` by default).
//!
//! Linux has no call that sets the command line: like Redis's setproctitle, `init` claims the
//! memory of the original argv and environment strings (after moving the environment to the heap),
//! and `set` writes the title over it. The kernel then reports everything up to the first NUL as the
//! command line, so a title may be as long as argv and environ were together.

use std::ffi::CString;
use std::sync::Mutex;

use crate::config::{self, Config};

/// The writable span of argv (and environ, when it follows argv), once `init` has claimed it.
struct Area {
    start: usize,
    len: usize,
}

static AREA: Mutex<Option<Area>> = Mutex::new(None);

/// The program as started (argv[0]), `{title}` in the template.
static PROGRAM: Mutex<String> = Mutex::new(String::new());

extern "C" {
    // glibc keeps these pointing into argv[0]; they must survive the title overwriting it.
    static mut program_invocation_name: *mut libc::c_char;
    static mut program_invocation_short_name: *mut libc::c_char;
}

/// Claims the argv and environ memory for the title. Must run while the process has one thread
/// (it rebuilds the environment) and after the command line was read: `std::env::args` reads the
/// original argv memory, which later titles overwrite.
pub fn init(program: &str) {
    *PROGRAM.lock().unwrap_or_else(|e| e.into_inner()) = program.to_string();
    let Some([arg_start, arg_end, env_start, env_end]) = read_bounds() else { return };
    if arg_end <= arg_start {
        return;
    }
    let mut end = arg_end;
    if env_start == arg_end && env_end > env_start {
        let vars: Vec<_> = std::env::vars_os().collect();
        // SAFETY: single-threaded (the caller's contract), so nothing reads the environment while
        // it is rebuilt; setenv copies each pair to the heap, after which no pointer into the
        // original environ strings remains in libc.
        unsafe {
            libc::clearenv();
            for (k, v) in &vars {
                let (Ok(k), Ok(v)) = (CString::new(k.as_encoded_bytes()), CString::new(v.as_encoded_bytes())) else {
                    continue;
                };
                libc::setenv(k.as_ptr(), v.as_ptr(), 1);
            }
        }
        end = env_end;
    }
    // SAFETY: as above; the copies are leaked on purpose, glibc keeps using them for the process's
    // lifetime.
    unsafe {
        if let Ok(name) = CString::new(program.as_bytes()) {
            let short = program.rsplit('/').next().unwrap_or(program);
            let short = CString::new(short.as_bytes()).unwrap_or_else(|_| name.clone());
            program_invocation_name = name.into_raw();
            program_invocation_short_name = short.into_raw();
        }
    }
    *AREA.lock().unwrap_or_else(|e| e.into_inner()) = Some(Area { start: arg_start, len: end - arg_start });
}

/// arg_start, arg_end, env_start and env_end: fields 48 to 51 of /proc/self/stat.
fn read_bounds() -> Option<[usize; 4]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is parenthesized and may hold spaces: count from after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    Some([field(48)?, field(49)?, field(50)?, field(51)?])
}

/// Sets the title from `cfg`'s template (nothing when set-proc-title is off or `init` could not
/// claim the memory).
pub fn set(cfg: &Config) {
    let program = PROGRAM.lock().unwrap_or_else(|e| e.into_inner()).clone();
    set_as(cfg, &program);
}

/// Expands the template's variables as Redis does (`config::expand_proc_title`). The directive
/// only takes templates that expand, so the template itself is never shown.
pub fn render(template: &str, program: &str, cfg: &Config) -> String {
    let tls_port = config::lookup("tls-port").map(|d| cfg.get(d)).unwrap_or_else(|| "0".into());
    let unixsocket = cfg.unixsocket.clone().unwrap_or_default();
    let var = |name: &str| {
        Some(match name {
            "title" => program.to_string(),
            "listen-addr" => {
                let port = if cfg.port != 0 { cfg.port.to_string() } else { tls_port.clone() };
                if port != "0" {
                    format!("{}:{port}", cfg.bind.first().map_or("*", String::as_str))
                } else {
                    format!("unixsocket:{unixsocket}")
                }
            }
            "server-mode" if config::lookup("cluster-enabled").is_some_and(|d| cfg.get(d) == "yes") => {
                "[cluster]".to_string()
            }
            "server-mode" => String::new(),
            "port" => cfg.port.to_string(),
            "tls-port" => tls_port.clone(),
            "unixsocket" => unixsocket.clone(),
            "config-file" => cfg.config_file.clone().unwrap_or_else(|| "-".into()),
            _ => return None,
        })
    };
    config::expand_proc_title(template, var).unwrap_or_else(|| template.to_string())
}

/// Sets the title from the template with `title` for `{title}` (a fork child's
/// `redis-rdb-bgsave`, as Redis names them).
pub fn set_as(cfg: &Config, title: &str) {
    if !cfg.set_proc_title {
        return;
    }
    let template = config::lookup("proc-title-template").map(|d| cfg.get(d)).unwrap_or_default();
    write(&render(&template, title, cfg));
}

fn write(title: &str) {
    let guard = AREA.lock().unwrap_or_else(|e| e.into_inner());
    let Some(area) = guard.as_ref() else { return };
    let n = title.len().min(area.len - 1);
    // SAFETY: [start, start + len) is this process's own argv/environ memory, which `init` took
    // over: nothing else references it any more, and the lock serializes writers.
    unsafe {
        let dst = area.start as *mut u8;
        std::ptr::copy_nonoverlapping(title.as_ptr(), dst, n);
        std::ptr::write_bytes(dst.add(n), 0, area.len - n);
    }
}
