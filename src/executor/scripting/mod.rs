//! The Lua engine behind EVAL and its family: one Lua 5.1 VM for the server's life, the script
//! cache (by SHA1), the sandbox Redis 7.0 gives scripts (its globals, read-only library tables,
//! the `redis` API), and one script run: KEYS/ARGV, redis.call through the executor's `call()` on
//! a client of the script's own, errors worded as Redis words them.
//!
//! Conversions between replies and Lua values live in `convert`; the extra libraries (cjson,
//! cmsgpack, struct, bit) in `libs`. Command handlers are in `commands::scripting`; this module
//! owns no command syntax.
//!
//! A script runs on the executor thread to completion. Redis answers other clients with BUSY
//! after lua-time-limit and lets SCRIPT KILL stop a script that has not written; here the other
//! clients simply wait, so SCRIPT KILL only ever finds no script running.

mod busy;
pub mod convert;
pub mod functions;
pub mod host;
pub mod ldb;
pub mod libs;
mod stack;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use crate::executor::call::Clock;
use crate::executor::clients::{Client, ClientHandle, ConnInfo};
use crate::executor::registry::CommandSpec;
use crate::executor::{Cmd, State};
use crate::resp::Reply;
use crate::spec::error::CmdError;
use crate::spec::flags;
use crate::util::c_str;

/// Shebang flags (`#!lua flags=...`), as Redis 7.0 names them.
pub mod script_flags {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    pub const ALLOW_CROSS_SLOT_KEYS: u32 = 1 << 4;
    /// No shebang: the pre-7.0 rules (may write, runs under OOM until it writes).
    pub const EVAL_COMPAT_MODE: u32 = 1 << 5;

    pub const NAMES: &[(&str, u32)] = &[
        ("no-writes", NO_WRITES),
        ("allow-oom", ALLOW_OOM),
        ("allow-stale", ALLOW_STALE),
        ("no-cluster", NO_CLUSTER),
        ("allow-cross-slot-keys", ALLOW_CROSS_SLOT_KEYS),
    ];
}

/// The chunk name of scripts: errors read `user_script:1: ...` and `on @user_script:1.`.
const SCRIPT_CHUNK: &std::ffi::CStr = c"@user_script";
/// The chunk name of the environment code, whose frames the error handler skips.
const ENV_CHUNK: &str = "=redis_lib";

/// One cached script.
pub struct Script {
    /// Lower-case hex SHA1 of the body.
    pub sha: String,
    pub body: Bytes,
    pub flags: u32,
    /// Where its compiled function is in the engine's table of script functions.
    slot: i32,
}

/// The parts of the VM a run uses, shared so that a run takes them with one reference count
/// instead of a Lua reference each.
struct Vm {
    lua: Lua,
    /// The real global table (KEYS and ARGV are set in it) and the read-only proxy scripts see.
    globals: Table,
    env: Table,
    err_handler: Function,
    xpcall: Function,
    /// The environment of FUNCTION libraries, and the flag that switches it between loading
    /// and running (see env.lua).
    fn_env: Table,
    fn_mode: Table,
}

/// The Lua VM, its script cache and the client scripts run their commands as.
pub struct Engine {
    vm: Arc<Vm>,
    /// FUNCTION libraries as loaded (what their code registered).
    registry: functions::Registry,
    /// Scripts by SHA1, and the same scripts by body: EVAL finds its script by hashing the body
    /// (its SHA1 is only computed when the script is new). The keys share the bodies' bytes.
    scripts: HashMap<String, Arc<Script>>,
    by_body: HashMap<Bytes, Arc<Script>, foldhash::fast::RandomState>,
    /// Bytes of script bodies held by the cache (INFO used_memory_scripts_eval).
    pub bodies_bytes: usize,
    /// The script client, kept between runs (taken out while one runs).
    client: Option<Box<Client>>,
    /// The compiled scripts, by slot, in one Lua table (as Redis keeps them in the Lua state):
    /// a `Function` handle each would take a slot of mlua's auxiliary stack, which Lua 5.1 caps
    /// near 8000, and SCRIPT LOAD of more scripts failed with "out of Lua stack".
    fns: Table,
    /// The slot the next script gets.
    next_slot: i32,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("scripts", &self.scripts.len()).finish()
    }
}

/// Client id of the script client: never a connection's.
pub const SCRIPT_CLIENT_ID: u64 = u64::MAX;

impl Engine {
    pub fn new() -> Engine {
        Self::build().unwrap_or_else(|e| panic!("the Lua environment failed to build: {e}"))
    }

    fn build() -> mlua::Result<Engine> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        // A collection cycle starts as soon as the previous one ends (pause 100 instead of Lua's
        // 200): scripts leave garbage on every run (KEYS, ARGV, replies), and with the default the
        // heap would sit near twice its live size; this VM's live size is larger than Redis's
        // (the sandbox proxies), so the doubling would show in used_memory_lua.
        // SAFETY: a protected call that only sets a collector parameter.
        unsafe {
            lua.exec_raw::<()>((), |state| {
                mlua::ffi::lua_gc(state, mlua::ffi::LUA_GCSETPAUSE, 100);
            })?;
        }
        libs::load(&lua)?;
        let prim = lua.create_table()?;
        prim.raw_set("version", crate::REDIS_VERSION)?;
        prim.raw_set("version_num", version_num(crate::REDIS_VERSION))?;
        prim.raw_set("err_handler", lua.create_function(err_handler)?)?;
        prim.raw_set("c_wrap", lua.create_function(|lua, f: Function| raising(lua, f))?)?;
        // SAFETY: these are C functions written for the Lua 5.1 API (see `stack`).
        prim.raw_set("call", unsafe { lua.create_c_function(stack::redis_call)? })?;
        prim.raw_set("pcall", unsafe { lua.create_c_function(stack::redis_pcall)? })?;
        prim.raw_set("base_pcall", unsafe { lua.create_c_function(stack::base_pcall)? })?;
        prim.raw_set("readonly", unsafe { lua.create_c_function(stack::make_readonly)? })?;
        prim.raw_set("debug", unsafe { lua.create_c_function(ldb::redis_debug)? })?;
        prim.raw_set("breakpoint", unsafe { lua.create_c_function(ldb::redis_breakpoint)? })?;
        prim.raw_set("setresp", raising(&lua, lua.create_function(prim_setresp)?)?)?;
        prim.raw_set("register_function", raising(&lua, lua.create_function(functions::prim_register_function)?)?)?;
        prim.raw_set("log", raising(&lua, lua.create_function(prim_log)?)?)?;
        prim.raw_set("sha1hex", raising(&lua, lua.create_function(prim_sha1hex)?)?)?;
        prim.raw_set("error_reply", raising(&lua, lua.create_function(prim_error_reply)?)?)?;
        prim.raw_set("status_reply", raising(&lua, lua.create_function(prim_status_reply)?)?)?;
        prim.raw_set("set_repl", raising(&lua, lua.create_function(prim_set_repl)?)?)?;
        prim.raw_set("acl_check_cmd", raising(&lua, lua.create_function(prim_acl_check_cmd)?)?)?;
        let globals = lua.globals();
        let err_handler: Function = prim.raw_get("err_handler")?;
        install_hook(&lua)?;
        let xpcall: Function = globals.raw_get("xpcall")?;
        let (env, fn_env, fn_mode): (Table, Table, Table) =
            lua.load(include_str!("env.lua")).set_name(ENV_CHUNK).call(prim)?;
        let fns = lua.create_table()?;
        Ok(Engine {
            vm: Arc::new(Vm { lua, globals, env, err_handler, xpcall, fn_env, fn_mode }),
            registry: functions::Registry::default(),
            scripts: HashMap::new(),
            by_body: HashMap::default(),
            bodies_bytes: 0,
            client: None,
            fns,
            next_slot: 1,
        })
    }

    /// Whether the cache holds `sha` (lower-case hex).
    pub fn contains(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    pub fn get(&self, sha: &str) -> Option<&Arc<Script>> {
        self.scripts.get(sha)
    }

    /// The cached script with this body, if any (no SHA1 computed).
    pub fn by_body(&self, body: &[u8]) -> Option<&Arc<Script>> {
        self.by_body.get(body)
    }

    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// Bytes the script cache holds beyond the VM (INFO used_memory_scripts_eval): the bodies
    /// and an entry per script, as Redis counts its dict of scripts.
    pub fn cache_memory(&self) -> usize {
        // Redis's evalScriptsMemory: per script its SHA (a 40-byte sds, 48 bytes allocated), its
        // body, a dict entry (24) and its luaScript record (16); plus the dict's bucket array.
        let n = self.scripts.len();
        let buckets = if n == 0 { 0 } else { n.next_power_of_two().max(4) };
        self.bodies_bytes + n * (48 + 24 + 16) + buckets * 8
    }

    /// Bytes the allocator holds for the Lua VM (mlua's tally, cheap to read): what used_memory
    /// leaves out.
    pub fn vm_allocated(&self) -> usize {
        self.vm.lua.used_memory()
    }

    /// Bytes the Lua VM holds as INFO used_memory_lua reports them: the collector's own count,
    /// as Redis reads it.
    pub fn vm_memory(&self) -> usize {
        let mut bytes = 0usize;
        // SAFETY: a protected C call that only reads the collector's counters.
        let counted = unsafe {
            self.vm.lua.exec_raw::<()>((), |state| {
                let kb = mlua::ffi::lua_gc(state, mlua::ffi::LUA_GCCOUNT, 0).max(0) as usize;
                let rem = mlua::ffi::lua_gc(state, mlua::ffi::LUA_GCCOUNTB, 0).max(0) as usize;
                bytes = kb * 1024 + rem;
            })
        };
        if counted.is_ok() {
            bytes
        } else {
            self.vm.lua.used_memory()
        }
    }

    /// Compiles `body` into the cache under its SHA1 unless it is there; returns the SHA1, or the
    /// error line (a shebang error or Lua's compile error).
    pub fn create(&mut self, body: &[u8]) -> Result<Arc<Script>, Vec<u8>> {
        if let Some(script) = self.by_body.get(body) {
            return Ok(script.clone());
        }
        let flags = shebang_flags(body)?;
        // The shebang becomes a comment, so line numbers stay those of the script as sent.
        let mut source = body.to_vec();
        if flags & script_flags::EVAL_COMPAT_MODE == 0 {
            source[..2].copy_from_slice(b"--");
        }
        let func = compile(&self.vm, &source, SCRIPT_CHUNK, &self.vm.env)
            .map_err(|message| [&b"ERR Error compiling script (new function): "[..], c_str(&message)].concat())?;
        let body = Bytes::copy_from_slice(body);
        if self.next_slot == i32::MAX {
            return Err(b"ERR Error compiling script (new function): too many scripts".to_vec());
        }
        let slot = self.next_slot;
        self.fns
            .raw_set(slot, func)
            .map_err(|e| format!("ERR Error compiling script (new function): {e}").into_bytes())?;
        self.next_slot += 1;
        let script = Arc::new(Script { sha: sha1_hex(&body), body: body.clone(), flags, slot });
        self.bodies_bytes += body_memory(body.len());
        self.scripts.insert(script.sha.clone(), script.clone());
        self.by_body.insert(body, script.clone());
        Ok(script)
    }

    /// Empties the cache (SCRIPT FLUSH) and collects what the scripts held.
    pub fn flush(&mut self) {
        self.scripts.clear();
        self.by_body.clear();
        self.bodies_bytes = 0;
        if let Ok(t) = self.vm.lua.create_table() {
            self.fns = t;
            self.next_slot = 1;
        }
        let _ = self.vm.lua.gc_collect();
        let _ = self.vm.lua.gc_collect();
    }
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

/// `7.0.15` → 0x07000f, as REDIS_VERSION_NUM.
fn version_num(v: &str) -> i64 {
    let mut parts = v.split('.').map(|p| p.parse::<i64>().unwrap_or(0));
    let (a, b, c) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a << 16) | (b << 8) | c
}

/// Lower-case hex SHA1.
pub fn sha1_hex(data: &[u8]) -> String {
    use sha1::Digest;
    let digest = sha1::Sha1::digest(data);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(40);
    for b in digest.iter() {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// Compiles `source` as chunk `name` with `env` as its environment, as Redis's luaL_loadbuffer
/// does; the error is Lua's message as bytes (it quotes the source, which may be any bytes).
fn compile(vm: &Vm, source: &[u8], name: &std::ffi::CStr, env: &Table) -> Result<Function, Vec<u8>> {
    use mlua::ffi;
    // SAFETY: `exec_raw` runs the closure as a protected C function whose stack holds `env` at 1.
    // luaL_loadbuffer leaves one value (the function or the message) at 2; setfenv pops the copy
    // of `env` it is given, and lua_replace leaves that one value as the closure's result.
    let compiled = unsafe {
        vm.lua.exec_raw::<Value>(env, |state| {
            let failed = ffi::luaL_loadbuffer(state, source.as_ptr() as *const _, source.len(), name.as_ptr()) != 0;
            if !failed {
                ffi::lua_pushvalue(state, 1);
                ffi::lua_setfenv(state, -2);
            }
            ffi::lua_replace(state, 1);
        })
    };
    match compiled {
        Ok(Value::Function(f)) => Ok(f),
        Ok(Value::String(message)) => Err(message.as_bytes().to_vec()),
        Ok(other) => Err(format!("{other:?}").into_bytes()),
        Err(e) => Err(e.to_string().into_bytes()),
    }
}

/// The flags of a `#!lua flags=a,b` first line, or EVAL_COMPAT_MODE without one; the error is
/// the reply line. The line is split as Redis's sdssplitargs splits it, names compared as C
/// strings.
pub fn shebang_flags(body: &[u8]) -> Result<u32, Vec<u8>> {
    if !body.starts_with(b"#!") {
        return Ok(script_flags::EVAL_COMPAT_MODE);
    }
    // Redis finds the line's end with strchr: a NUL before it ends the search.
    let Some(end) = memchr::memchr2(b'\n', 0, body).filter(|&i| body[i] == b'\n') else {
        return Err(b"ERR Invalid script shebang".to_vec());
    };
    let parts = crate::resp::parser::split_args(&body[..end]).unwrap_or_default();
    let Some((engine, options)) = parts.split_first() else {
        return Err(b"ERR Invalid engine in script shebang".to_vec());
    };
    if c_str(engine) != b"#!lua" {
        return Err(CmdError::echo(&[b"ERR Unexpected engine in script shebang: ", engine]).into_line());
    }
    let mut flags = 0;
    for option in options {
        let Some(list) = option.strip_prefix(b"flags=") else {
            return Err(CmdError::echo(&[b"ERR Unknown lua shebang option: ", option]).into_line());
        };
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&c| c == b',') {
            let Some(&(_, bit)) = script_flags::NAMES.iter().find(|(n, _)| n.as_bytes() == c_str(name)) else {
                return Err(CmdError::echo(&[b"ERR Unexpected flag in script shebang: ", name]).into_line());
            };
            flags |= bit;
        }
    }
    Ok(flags)
}

/// How a run may behave, from the command (the `_RO` forms) and the script's flags.
#[derive(Debug, Clone, Copy)]
pub struct RunRules {
    /// Write commands fail ("Write commands are not allowed from read-only scripts.").
    pub read_only: bool,
    /// The script may use DENYOOM commands while memory is over maxmemory.
    pub allow_oom: bool,
    /// Memory was over maxmemory when the command started.
    pub oom_at_start: bool,
    /// Cluster mode: the script may touch keys of several slots (old-style EVAL, or the
    /// allow-cross-slot-keys flag).
    pub allow_cross_slot: bool,
}

/// What the callbacks of one run share.
struct Run<'a> {
    st: &'a mut State,
    client: &'a mut Client,
    clock: Clock,
    rules: RunRules,
    /// A write command ran: OOM no longer stops the script halfway.
    wrote: bool,
    /// The last command's encoded reply, converted for Lua from here.
    reply_buf: Vec<u8>,
    /// Time and kill state against busy-reply-threshold.
    busy: busy::Busy,
}

/// What a run calls: a cached EVAL script, or a FUNCTION library's function.
pub enum Callable<'a> {
    Script(&'a Script),
    Function(&'a functions::FunctionDef),
}

/// Runs a script or function for `caller` with its keys and arguments; returns the reply (an
/// error reply for a script error).
pub fn run(
    st: &mut State,
    caller: &mut Client,
    what: Callable,
    keys: &[Bytes],
    args: &[Bytes],
    rules: RunRules,
    now_ms: i64,
) -> Reply {
    let vm = st.scripting.vm.clone();
    let script_fns = st.scripting.fns.clone();
    let mut client = st.scripting.client.take().unwrap_or_else(|| Box::new(script_client(now_ms)));
    client.db = caller.db;
    client.user = caller.user.clone();
    client.script_caller = Some(caller.id);
    client.caller_tracked_keys = caller.tracking.remembers_reads().then(|| keys.to_vec());
    client.proto = 2;
    client.in_exec = true;
    client.script_dirty = false;
    take_error_counted();
    let name = match &what {
        Callable::Script(s) => s.sha.as_str(),
        Callable::Function(f) => f.name.as_str(),
    };

    let clock = Clock::new(now_ms);
    let busy = busy::Busy::new(matches!(what, Callable::Function(_)), clock.last_us);
    st.prop.script_targets = crate::executor::propagate::ALL;
    let mut run = Run { st: &mut *st, client: &mut client, clock, rules, wrote: false, reply_buf: Vec::new(), busy };
    // A debugged EVAL runs under the debugger's hook instead of the busy one (as in Redis, the
    // debugger's own timeout stops a script that runs too long).
    let debugged = ldb::active();
    if debugged {
        if let Err(e) = ldb::install_hook(&vm.lua) {
            tracing::warn!("Lua debugger hook could not be set: {e}");
        }
    }
    let result = {
        let _current = CurrentRun::enter(&mut run);
        let outcome = match &what {
            Callable::Script(script) => call_lua(&vm, &script_fns, Some(script.slot), false, keys, args),
            Callable::Function(def) => call_lua(&vm, &def.callback, None, true, keys, args),
        };
        outcome.map(|result| result.unwrap_or_else(|error| script_error(&error, name)))
    };
    run.st.prop.script_targets = crate::executor::propagate::ALL;
    collect_garbage_now_and_then(&vm.lua);
    let killed = run.busy.killed;
    crate::executor::handoff::hand_over(std::mem::take(&mut run.busy.accepted));
    let reply = result.unwrap_or_else(|e| Reply::error(format!("ERR Error running script {name}: {e}")));
    if !matches!(reply, Reply::Error(_)) {
        // Only an error reply that call() counts may carry the mark out of the run.
        take_error_counted();
    }
    client.script_caller = None;
    client.caller_tracked_keys = None;
    caller.dirty_cas |= std::mem::take(&mut client.caller_dirty_cas);
    st.scripting.client = Some(client);
    if killed || debugged {
        // The kill made the hook fire on every instruction (or the debugger's hook ran): back
        // to the usual one.
        if let Err(e) = install_hook(&vm.lua) {
            tracing::warn!("Lua hook could not be reset: {e}");
        }
    }
    reply
}

thread_local! {
    /// The script's error reply was counted in errorstats where it happened (a command's error
    /// or refusal): `call()` counts the reply as a failed call only.
    static ERROR_COUNTED: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn note_error_counted() {
    ERROR_COUNTED.with(|c| c.set(true));
}

/// Whether the error reply just produced by a script was counted already (and forgets it).
pub fn take_error_counted() -> bool {
    ERROR_COUNTED.with(|c| c.replace(false))
}

/// Every this many runs, the collector takes as many steps (Redis's LUA_GC_CYCLE_PERIOD): each
/// run leaves garbage (its KEYS and ARGV tables, its reply's strings), and a step now and then
/// keeps the heap small without paying for a full cycle at an unlucky moment.
const GC_PERIOD: u32 = 50;

fn collect_garbage_now_and_then(lua: &Lua) {
    thread_local! {
        static RUNS: Cell<u32> = const { Cell::new(0) };
    }
    let runs = RUNS.with(|r| {
        let n = r.get() + 1;
        r.set(n % GC_PERIOD);
        n
    });
    if runs == GC_PERIOD {
        // SAFETY: a protected C call whose body only runs the collector, which needs no stack.
        let _ = unsafe {
            lua.exec_raw::<()>((), |state| {
                mlua::ffi::lua_gc(state, mlua::ffi::LUA_GCSTEP, GC_PERIOD as std::ffi::c_int);
            })
        };
    }
}

/// What Redis counts for a script body it keeps (the EVAL argument's string object): an embedded
/// string up to 44 bytes (object and sds in one allocation, less the object), else an sds.
fn body_memory(len: usize) -> usize {
    use crate::util::alloc::{sds_alloc, size_class};
    if len <= 44 {
        return size_class(16 + 3 + len + 1) - 16;
    }
    sds_alloc(len)
}

/// Instructions between two looks at the clock (Redis's count hook uses the same).
const HOOK_EVERY: u32 = 100_000;

/// The count hook: serves other clients once a script is busy, and stops it when killed. A
/// killed script is stopped again at every instruction, so a `pcall` cannot swallow the kill.
/// A library's code (FUNCTION LOAD, FUNCTION RESTORE, loading) past LOAD_TIMEOUT_MS is stopped
/// with Redis's error, the same way.
fn install_hook(lua: &Lua) -> mlua::Result<()> {
    lua.set_global_hook(mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY), |lua, _| {
        let stop = match with_run(busy::tick) {
            Some(true) => Some(busy::KILLED),
            Some(false) => None,
            None => load_timed_out().then_some(LOAD_TIMEOUT),
        };
        if let Some(message) = stop {
            lua.set_global_hook(mlua::HookTriggers::new().every_nth_instruction(1), move |_, _| {
                Err(mlua::Error::runtime(message))
            })?;
            return Err(mlua::Error::runtime(message));
        }
        Ok(mlua::VmState::Continue)
    })
}

/// How long a library's code may run while it loads (Redis's LOAD_TIMEOUT_MS).
const LOAD_TIMEOUT_MS: u64 = 500;
const LOAD_TIMEOUT: &str = "FUNCTION LOAD timeout";

thread_local! {
    /// When the library being loaded started (`executor::mono_us`); None outside a load.
    static LOAD_STARTED_US: Cell<Option<u64>> = const { Cell::new(None) };
}

fn load_timed_out() -> bool {
    LOAD_STARTED_US
        .with(|c| c.get())
        .is_some_and(|t| crate::util::clock::mono_us().saturating_sub(t) / 1000 > LOAD_TIMEOUT_MS)
}

/// Runs a library's top-level code under the load deadline; the hook is put back to its usual
/// pace after a timeout.
fn with_load_deadline<R>(lua: &Lua, f: impl FnOnce() -> R) -> R {
    LOAD_STARTED_US.with(|c| c.set(Some(crate::util::clock::mono_us())));
    let result = f();
    let timed_out = load_timed_out();
    LOAD_STARTED_US.with(|c| c.set(None));
    if timed_out {
        if let Err(e) = install_hook(lua) {
            tracing::warn!("Lua hook could not be reset: {e}");
        }
    }
    result
}

/// Calls a script (KEYS and ARGV set as globals) or a function (keys and arguments tables as
/// its two parameters) under the error handler, in one pass over the Lua C API (each mlua call
/// would take the VM's lock): the reply converted on the stack, or the error table.
/// `target` is the function to call, or with `slot` the table holding it at that index.
fn call_lua(
    vm: &Vm,
    target: impl mlua::IntoLua,
    slot: Option<i32>,
    as_function: bool,
    keys: &[Bytes],
    args: &[Bytes],
) -> mlua::Result<Result<Reply, Value>> {
    use mlua::ffi;
    let mut reply = None;
    // SAFETY: `exec_raw` runs the closure as a protected C function whose stack holds the three
    // values passed (globals, target, handler) at 1..3. Building the two tables uses at most
    // five slots beyond those, within LUA_MINSTACK; errors (memory) there longjmp to exec_raw's
    // protection over a frame holding only slices. The reply is converted after reserving
    // REPLY_STACK slots, so that converting a usual result cannot raise (see `stack::reply_at`).
    let error = unsafe {
        vm.lua.exec_raw::<Value>((&vm.globals, target, &vm.err_handler), |state| {
            if let Some(slot) = slot {
                ffi::lua_rawgeti(state, 2, slot as _);
                ffi::lua_replace(state, 2);
            }
            let push_strings = |items: &[Bytes]| {
                ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as i32, 0);
                for (i, item) in items.iter().enumerate() {
                    ffi::lua_pushlstring(state, item.as_ptr() as *const std::ffi::c_char, item.len());
                    ffi::lua_rawseti(state, -2, (i + 1) as _);
                }
            };
            let nargs = if as_function {
                ffi::lua_pushvalue(state, 2);
                push_strings(keys);
                push_strings(args);
                2
            } else {
                for (name, items) in [(c"KEYS", keys), (c"ARGV", args)] {
                    ffi::lua_pushstring(state, name.as_ptr());
                    push_strings(items);
                    ffi::lua_rawset(state, 1);
                }
                ffi::lua_pushvalue(state, 2);
                0
            };
            if ffi::lua_pcall(state, nargs, 1, 3) != 0 {
                // The error table is the closure's one result.
                ffi::lua_replace(state, 1);
                ffi::lua_settop(state, 1);
                return;
            }
            ffi::luaL_checkstack(state, stack::REPLY_STACK, std::ptr::null());
            let resp = with_run(|run| run.client.proto).unwrap_or(2);
            reply = Some(stack::reply_at(state, -1, resp, 0));
            ffi::lua_settop(state, 0);
        })
    }?;
    Ok(reply.ok_or(error))
}

thread_local! {
    /// The run in progress on this thread (a `*mut Run`), for redis.call and redis.setresp.
    static CURRENT_RUN: Cell<*mut ()> = const { Cell::new(std::ptr::null_mut()) };
}

/// Publishes a run to the callbacks for as long as it lives (cleared on unwind too).
struct CurrentRun;

impl CurrentRun {
    fn enter(run: &mut Run<'_>) -> CurrentRun {
        CURRENT_RUN.with(|c| c.set(run as *mut Run<'_> as *mut ()));
        CurrentRun
    }
}

impl Drop for CurrentRun {
    fn drop(&mut self) {
        CURRENT_RUN.with(|c| c.set(std::ptr::null_mut()));
    }
}

/// Runs `f` on the run in progress; None outside a run.
fn with_run<R>(f: impl FnOnce(&mut Run<'_>) -> R) -> Option<R> {
    let ptr = CURRENT_RUN.with(|c| c.get());
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `run` set the pointer to a `Run` on its stack that outlives the script's execution
    // and clears it before that `Run` goes away. The borrow is exclusive: callbacks take it only
    // for the duration of `f`, and nothing `f` does (a command through `call()`) can call back
    // into Lua, since every command that runs a script is refused inside one (NOSCRIPT).
    let run = unsafe { &mut *(ptr as *mut Run<'_>) };
    Some(f(run))
}

/// The client scripts run their commands as: authenticated, never connected.
fn script_client(now_ms: i64) -> Client {
    // MONITOR shows the script's commands as coming from `lua`, as Redis does.
    let info = ConnInfo { addr: "lua".into(), laddr: String::new(), fd: -1, unix: false, local: true, tls: false };
    Client::new(SCRIPT_CLIENT_ID, info, std::sync::Arc::new(ClientHandle::default()), now_ms, true)
}

/// The reply for a script that raised `err` (the error handler's table).
fn script_error(err: &Value, sha: &str) -> Reply {
    let Value::Table(t) = err else {
        return Reply::error(format!("ERR Error running script (call to {sha}): @user_script"));
    };
    if t.raw_get::<bool>("ignore_error_stats_update").unwrap_or(false) {
        note_error_counted();
    }
    let mut text = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.as_bytes().to_vec(),
        _ => Vec::new(),
    };
    let source = t.raw_get::<Option<mlua::LuaString>>("source").ok().flatten();
    let line = t.raw_get::<Option<i64>>("line").ok().flatten();
    text.extend_from_slice(b" script: ");
    text.extend_from_slice(sha.as_bytes());
    if let (Some(source), Some(line)) = (source, line) {
        text.extend_from_slice(b", on ");
        text.extend_from_slice(&source.as_bytes());
        text.extend_from_slice(format!(":{line}.").as_bytes());
    }
    convert::line_reply(b'-', text)
}

/// The message handler of every run (Redis's `__redis__err__handler`): turns the error into a
/// table `{err=...}` ("ERR " before a non-table error) and notes the script line it came from,
/// the first frame up the stack that is neither C nor the environment's wrappers.
fn err_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let table = match err {
        Value::Table(t) => t,
        other => {
            let text = match &other {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Nil => b"nil".to_vec(),
                Value::Boolean(b) => b.to_string().into_bytes(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => crate::util::num::fmt_g(*n, 14).into_bytes(),
                Value::Error(e) => root_message(e).into_bytes(),
                v => format!("{}: {:p}", v.type_name(), v.to_pointer()).into_bytes(),
            };
            let t = lua.create_table()?;
            let mut msg = b"ERR ".to_vec();
            msg.extend_from_slice(&text);
            t.raw_set("err", lua.create_string(&msg)?)?;
            t
        }
    };
    for level in 1..64 {
        let frame = lua.inspect_stack(level, |d| {
            let src = d.source();
            (src.what, src.source.map(|s| s.into_owned()), d.current_line())
        });
        let Some((what, source, line)) = frame else { break };
        if what == "C" || source.as_deref() == Some(ENV_CHUNK) {
            continue;
        }
        if let Some(source) = source {
            table.raw_set("source", lua.create_string(&source)?)?;
        }
        if let Some(line) = line {
            table.raw_set("line", line as i64)?;
        }
        break;
    }
    Ok(table)
}

/// The message of the error at the root of an mlua error (a hook's or callback's).
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(msg) => msg.clone(),
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        other => other.to_string(),
    }
}

/// `(false, {err=msg})` for the environment's wrappers to raise: `msg` in Redis's error-table
/// form (luaPushError): a leading `-CODE ` stays the code, anything else gets `ERR `.
pub(crate) fn failure(lua: &Lua, msg: &str) -> mlua::Result<MultiValue> {
    ldb::log_if_enabled(|| format!("<error> {msg}").into_bytes());
    let t = lua.create_table()?;
    t.raw_set("err", convert::error_table_text(msg))?;
    Ok(MultiValue::from_iter([Value::Boolean(false), Value::Table(t)]))
}

/// error_reply/status_reply with a bad argument return (not raise) an error table.
fn bad_reply_arguments(lua: &Lua) -> mlua::Result<MultiValue> {
    let t = lua.create_table()?;
    t.raw_set("err", "ERR wrong number or type of arguments")?;
    Ok(success(Value::Table(t)))
}

/// Wraps `inner`, which answers `(true, results...)` or `(false, error[, positioned])`, in a C
/// closure that returns the results or raises the error (any Lua value, a table included, as C
/// code can and Rust callbacks cannot; `positioned` prefixes a message with the caller's
/// `chunk:line:`, as luaL_error does). Being a C function, it leaves the calling script's frame in
/// place even when called in a tail position, so the error handler finds the script's line.
fn raising(lua: &Lua, inner: Function) -> mlua::Result<Function> {
    // SAFETY: `lua_pushcclosure` pops the one value `exec_raw` pushed (`inner`) as the closure's
    // upvalue and pushes the closure, which `exec_raw` returns.
    unsafe { lua.exec_raw::<Function>(inner, |state| mlua::ffi::lua_pushcclosure(state, raise_shim, 1)) }
}

/// The C side of `raising`.
unsafe extern "C-unwind" fn raise_shim(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    // SAFETY (whole function): Lua C API calls on the running state; `lua_call` leaves the
    // results on the stack (Lua grows it for them), and the few pushes after it are within the
    // LUA_MINSTACK slots a C function has. No Rust value with a destructor lives in this frame,
    // so `lua_error` may longjmp over it.
    let nargs = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, nargs, ffi::LUA_MULTRET);
    let nresults = ffi::lua_gettop(state);
    if ffi::lua_toboolean(state, 1) != 0 {
        ffi::lua_remove(state, 1);
        return nresults - 1;
    }
    let positioned = nresults >= 3 && ffi::lua_toboolean(state, 3) != 0;
    ffi::lua_settop(state, 2);
    if positioned {
        ffi::luaL_where(state, 1);
        ffi::lua_insert(state, 2);
        ffi::lua_concat(state, 2);
    }
    ffi::lua_error(state)
}

pub(crate) fn success(value: Value) -> MultiValue {
    MultiValue::from_iter([Value::Boolean(true), value])
}

/// The command's arguments: strings as they are, numbers as `%.17g`.
fn command_argv(args: &MultiValue) -> Result<Vec<Bytes>, &'static str> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|v| match v {
            Value::String(s) => Ok(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(i) => Ok(Bytes::from(crate::util::num::fmt_g17(*i as f64))),
            Value::Number(n) => Ok(Bytes::from(crate::util::num::fmt_g17(*n))),
            _ => Err("Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// Why a script's command was refused: Redis's message (`-CODE text`, or text that gets `ERR`).
pub(super) type Refusal = std::borrow::Cow<'static, str>;

/// The checks Redis makes before a script's command (scriptCall), then the command itself; the
/// encoded reply is left in the run's buffer, or the refusal message returned.
fn run_command(run: &mut Run, argv: Vec<Bytes>) -> Result<(), Refusal> {
    let result = checked_call(run, argv);
    if let Err(refusal) = &result {
        // Counted in errorstats here, as Redis's scriptCall does: a script that catches it with
        // redis.pcall still shows it, and one that returns it is not counted again.
        match refusal.strip_prefix('-') {
            Some(_) => run.st.stats.count_error(refusal.as_bytes()),
            None => run.st.stats.count_error(format!("ERR {refusal}")),
        }
    }
    result
}

fn checked_call(run: &mut Run, argv: Vec<Bytes>) -> Result<(), Refusal> {
    let Some(top) = crate::executor::registry::lookup(&argv[0]) else {
        return Err("Unknown Redis command called from script".into());
    };
    let spec: &'static CommandSpec = if top.is_container() && argv.len() >= 2 {
        top.subcommand(&argv[1]).ok_or("Unknown Redis command called from script")?
    } else {
        top
    };
    let parent = (!std::ptr::eq(spec, top)).then_some(top);
    if let Err(refusal) = check_command(run, spec, parent, top, &argv) {
        // A refused command counts as a rejected call of its own, as Redis's scriptCall does.
        let name = crate::executor::call::stat_key(spec, parent);
        run.st.stats.commands.entry(name).or_default().rejected_calls += 1;
        return Err(refusal);
    }
    // Dirty from the command after the first write on (the first is still checked).
    run.client.script_dirty = run.wrote;
    if spec.has_flag(flags::WRITE) {
        run.wrote = true;
    }
    let Run { st, client, clock, reply_buf, .. } = run;
    reply_buf.clear();
    crate::executor::call::call(st, client, Cmd { spec: Some(top), argv }, reply_buf, clock);
    Ok(())
}

/// Whether a script may run this command now (Redis's scriptCall checks, in its order): the
/// refusal message if not.
fn check_command(
    run: &mut Run,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    top: &'static CommandSpec,
    argv: &[Bytes],
) -> Result<(), Refusal> {
    if !spec.arity_ok(argv.len()) || (top.is_container() && argv.len() < 2) {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    if spec.has_flag(flags::NOSCRIPT) && !run.st.scripts_may_call_noscript {
        return Err("This Redis command is not allowed from script".into());
    }
    if !spec.has_flag(flags::STALE) && crate::executor::call::running_stale(run.st) {
        return Err("Can not execute the command on a stale replica".into());
    }
    crate::executor::access::check(run.st, run.client, spec, parent, argv)
        .map_err(crate::executor::access::script_refusal_text)?;
    // May-replicate commands count as writes here (PUBLISH from EVAL_RO), so read-only scripts
    // can run through CLIENT PAUSE WRITE, as Redis rules.
    if spec.has_flag(flags::WRITE | flags::MAY_REPLICATE) && run.rules.read_only {
        return Err("Write commands are not allowed from read-only scripts.".into());
    }
    // Redis's scriptVerifyWriteCommandAllow, ahead of the OOM check: a script's first write is
    // refused while the server refuses writes (call() checks the same for every command, in
    // processCommand's order, where OOM comes first).
    if spec.has_flag(flags::WRITE) && !run.wrote && !run.client.master {
        if let Some(refusal) = crate::executor::call::write_refusal(run.st) {
            return Err(refusal);
        }
    }
    if !run.rules.allow_oom
        && run.st.config.maxmemory > 0
        && !run.wrote
        && run.rules.oom_at_start
        && spec.has_flag(flags::DENYOOM)
    {
        return Err("-OOM command not allowed when used memory > 'maxmemory'.".into());
    }
    if run.st.cluster.is_some() {
        check_cluster(run, spec, parent, argv)?;
    }
    Ok(())
}

/// Cluster mode (Redis's scriptVerifyClusterState): a script's keys must be served here, and
/// all in the slot of the script's first key unless cross-slot access is allowed.
fn check_cluster(
    run: &mut Run,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    argv: &[Bytes],
) -> Result<(), Refusal> {
    let positions = crate::executor::call::key_positions(spec, parent, argv);
    let keys: Vec<&[u8]> = positions.iter().filter_map(|&i| argv.get(i)).map(|a| &a[..]).collect();
    let routed = [crate::executor::cluster::Routed {
        keys: &keys,
        write: spec.has_flag(flags::WRITE),
        is_migrate: false,
        asking_cmd: spec.has_flag(flags::ASKING),
        pubsubshard: spec.name == "spublish",
    }];
    let (asking, readonly) = run.st.cluster_caller_flags;
    use crate::executor::cluster::Redirect;
    let slot = match crate::executor::cluster::route(run.st, &routed, asking, readonly) {
        Ok(slot) => slot,
        Err(Redirect::DownRoState) => {
            return Err("Script attempted to execute a write command while the cluster is down and readonly".into())
        }
        Err(Redirect::DownState) => {
            return Err("Script attempted to execute a command while the cluster is down".into())
        }
        Err(_) => return Err("Script attempted to access a non local key in a cluster node".into()),
    };
    if let Some(slot) = slot {
        if !run.rules.allow_cross_slot {
            match run.st.cluster_caller_slot {
                None => run.st.cluster_caller_slot = Some(slot),
                Some(s) if s != slot => {
                    return Err("Script attempted to access keys that do not hash to the same slot".into())
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// redis.setresp(2|3): the protocol the script's commands reply in.
fn prim_setresp(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if args.len() != 1 {
        return failure(lua, "redis.setresp() requires one argument.");
    }
    let resp = match &args[0] {
        Value::Integer(i) => *i,
        Value::Number(n) => *n as i64,
        Value::String(s) => crate::util::num::parse_i64(&s.as_bytes()).unwrap_or(0),
        _ => 0,
    };
    if resp != 2 && resp != 3 {
        return failure(lua, "RESP version must be 2 or 3.");
    }
    with_run(|run| run.client.proto = resp as u8);
    Ok(success(Value::Nil))
}

/// redis.log(level, message, ...): the words joined by spaces, at the server's log level.
fn prim_log(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if args.len() < 2 {
        return failure(lua, "redis.log() requires two arguments or more.");
    }
    let level = match &args[0] {
        Value::Integer(i) => *i,
        Value::Number(n) => *n as i64,
        _ => return failure(lua, "First argument must be a number (log level)."),
    };
    if !(0..=3).contains(&level) {
        return failure(lua, "Invalid debug level.");
    }
    let mut text = Vec::new();
    for (i, v) in args.iter().skip(1).enumerate() {
        if i > 0 {
            text.push(b' ');
        }
        if let Some(s) = lua.coerce_string(v.clone())? {
            text.extend_from_slice(&s.as_bytes());
        }
    }
    let text = String::from_utf8_lossy(&text);
    match level {
        0 => tracing::trace!("{text}"),
        1 => tracing::debug!("{text}"),
        2 => tracing::info!("{text}"),
        _ => tracing::warn!("{text}"),
    }
    Ok(success(Value::Nil))
}

fn prim_sha1hex(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if args.len() != 1 {
        return failure(lua, "wrong number of arguments");
    }
    let data = lua.coerce_string(args[0].clone())?.map(|s| s.as_bytes().to_vec()).unwrap_or_default();
    Ok(success(Value::String(lua.create_string(sha1_hex(&data))?)))
}

/// redis.error_reply(msg): `{err=...}` in the error-table form (a `-` is added when missing).
fn prim_error_reply(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let (1, Some(Value::String(s))) = (args.len(), args.front()) else {
        return bad_reply_arguments(lua);
    };
    let msg = String::from_utf8_lossy(&s.as_bytes()).into_owned();
    let msg = if msg.starts_with('-') { msg } else { format!("-{msg}") };
    let t = lua.create_table()?;
    t.raw_set("err", convert::error_table_text(&msg))?;
    Ok(success(Value::Table(t)))
}

fn prim_status_reply(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let (1, Some(Value::String(s))) = (args.len(), args.front()) else {
        return bad_reply_arguments(lua);
    };
    let t = lua.create_table()?;
    t.raw_set("ok", s.clone())?;
    Ok(success(Value::Table(t)))
}

/// redis.set_repl(flags): which targets the script's following commands propagate to: the AOF
/// (REPL_AOF, 1), the replicas (REPL_REPLICA, 2), both or neither.
fn prim_set_repl(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if args.len() != 1 {
        return failure(lua, "redis.set_repl() requires one argument.");
    }
    let flags = match &args[0] {
        Value::Integer(i) => *i,
        Value::Number(n) => *n as i64,
        _ => -1,
    };
    if !(0..=3).contains(&flags) {
        return failure(lua, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
    }
    with_run(|run| run.st.prop.script_targets = flags as u8);
    Ok(success(Value::Nil))
}

/// redis.acl_check_cmd(cmd, ...): the default user may run every command.
fn prim_acl_check_cmd(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let argv = match command_argv(&args) {
        Ok(argv) => argv,
        Err(msg) => return failure(lua, msg),
    };
    // Found as Redis's lookupCommand finds it: no arity check, a container alone is itself.
    let found = crate::executor::registry::lookup(&argv[0]).and_then(|top| {
        if top.is_container() && argv.len() >= 2 {
            top.subcommand(&argv[1]).map(|s| (s, Some(top)))
        } else {
            Some((top, None))
        }
    });
    let Some((spec, parent)) = found else {
        return failure(lua, "Invalid command passed to redis.acl_check_cmd()");
    };
    let allowed = with_run(|run| {
        let full = parent.map_or(spec.name, |p| crate::executor::call::full_name(p, spec));
        run.st.acl.users.get(run.client.user_name()).is_some_and(|u| u.check(spec, full, &argv).is_ok())
    });
    Ok(success(Value::Boolean(allowed.unwrap_or(true))))
}
