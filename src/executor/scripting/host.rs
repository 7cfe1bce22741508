//! What the executor needs from EVAL scripts and FUNCTION libraries outside a run: the flags a
//! script or function makes its command run under (dispatch checks them before it runs), the
//! libraries rebuilt from their stored code after a load, and the running function that FUNCTION
//! STATS reports. The EVAL and FUNCTION handlers are `commands::scripting` / `commands::functions`.

use super::script_flags;
use crate::executor::registry::CommandSpec;
use crate::executor::State;
use crate::resp::Reply;
use crate::spec::flags::*;

/// The flags an EVAL-family command runs under (Redis's evalGetCommandFlags): a script with a
/// shebang declares its own. Without `no-writes` it counts as a write (refused after a failed
/// save, held by CLIENT PAUSE WRITE), and without `allow-oom` or `no-writes` as DENYOOM.
pub fn script_command_flags(st: &State, spec: &CommandSpec, argv: &[bytes::Bytes]) -> u32 {
    let Some(first) = argv.get(1) else { return spec.flags };
    let by_sha = spec.name.starts_with("evalsha");
    let script = if by_sha {
        if first.len() != 40 {
            return spec.flags;
        }
        st.scripting.get(&String::from_utf8_lossy(first).to_ascii_lowercase()).map(|s| s.flags)
    } else {
        st.scripting.by_body(first).map(|s| s.flags)
    };
    let script_flags = match script {
        Some(f) => f,
        None if by_sha => return spec.flags,
        None => match crate::executor::scripting::shebang_flags(first) {
            Ok(f) => f,
            Err(_) => return spec.flags,
        },
    };
    flags_from_script(spec.flags, script_flags)
}

/// A command's flags under a script's (or function's) declared flags (scriptFlagsToCmdFlags).
fn flags_from_script(command_flags: u32, script_flags: u32) -> u32 {
    if script_flags & script_flags::EVAL_COMPAT_MODE != 0 {
        return command_flags;
    }
    let mut out = command_flags & !(STALE | DENYOOM | WRITE | MAY_REPLICATE);
    if script_flags & (script_flags::ALLOW_OOM | script_flags::NO_WRITES) == 0 {
        out |= DENYOOM;
    }
    if script_flags & script_flags::NO_WRITES == 0 {
        out |= WRITE;
    }
    if script_flags & script_flags::ALLOW_STALE != 0 {
        out |= STALE;
    }
    out
}

/// The flags FCALL runs under: its function's, as a script's shebang flags decide EVAL's.
pub fn function_command_flags(st: &State, spec: &CommandSpec, argv: &[bytes::Bytes]) -> u32 {
    match argv.get(1).and_then(|name| st.scripting.registry().function(name)) {
        Some(def) => flags_from_script(spec.flags, def.flags),
        None => spec.flags,
    }
}

/// Rebuilds the engine's libraries from `State::functions` (after an RDB load): each library's
/// code runs again to register its functions. A library that fails is logged and dropped.
pub fn reload_all(st: &mut State) {
    st.scripting.flush_libraries();
    let mut kept = Vec::new();
    for lib in std::mem::take(&mut st.functions.libs) {
        match st.scripting.load_library(&lib.code, false) {
            Ok(_) => kept.push(lib),
            Err(line) => tracing::warn!(
                "Failed to load library {}: {}",
                String::from_utf8_lossy(&lib.name),
                String::from_utf8_lossy(&line)
            ),
        }
    }
    st.functions.libs = kept;
}

/// Stores a loaded library's code beside the engine's copy (sorted by name, replacing one of the
/// same name).
pub fn store_code(st: &mut State, name: &str, code: &[u8]) {
    let libs = &mut st.functions.libs;
    libs.retain(|l| l.name != name.as_bytes());
    let at = libs.partition_point(|l| l.name.as_slice() < name.as_bytes());
    libs.insert(
        at,
        crate::functions::Library { name: name.as_bytes().to_vec(), engine: b"LUA".to_vec(), code: code.to_vec() },
    );
}

/// The function an FCALL is running (FUNCTION STATS's `running_script`).
#[derive(Debug)]
pub struct RunningFunction {
    pub name: String,
    pub command: Vec<bytes::Bytes>,
    pub started_us: u64,
}

/// FUNCTION STATS's reply (also given by a busy function to connections made during it).
pub fn stats_reply(st: &State) -> Reply {
    let running = st.running_function.as_ref().map_or(Reply::Nil, |f| {
        Reply::Map(vec![
            (Reply::bulk("name"), Reply::bulk(f.name.as_str())),
            (Reply::bulk("command"), Reply::Array(f.command.iter().map(|a| Reply::Bulk(a.to_vec())).collect())),
            (
                Reply::bulk("duration_ms"),
                Reply::Int((crate::util::clock::mono_us().saturating_sub(f.started_us) / 1000) as i64),
            ),
        ])
    });
    let registry = st.scripting.registry();
    let lua = Reply::Map(vec![
        (Reply::bulk("libraries_count"), Reply::Int(registry.libraries.len() as i64)),
        (Reply::bulk("functions_count"), Reply::Int(registry.function_count() as i64)),
    ]);
    Reply::Map(vec![
        (Reply::bulk("running_script"), running),
        (Reply::bulk("engines"), Reply::Map(vec![(Reply::bulk("LUA"), lua)])),
    ])
}
