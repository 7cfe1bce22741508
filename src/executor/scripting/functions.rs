//! FUNCTION libraries on the Lua engine: a library's metadata line, running its code to collect
//! what it registers (redis.register_function), the registry of functions by name, and one
//! FCALL. Library code as stored and saved stays in `crate::functions`; this module holds what
//! running that code produced.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::{failure, script_flags, success, Engine};
use crate::util::c_str;

/// A function a library registered.
pub struct FunctionDef {
    pub name: String,
    pub description: Option<Vec<u8>>,
    /// `script_flags` bits (never EVAL_COMPAT_MODE).
    pub flags: u32,
    pub(super) callback: Function,
}

/// A loaded library: its functions in registration order.
pub struct LoadedLibrary {
    pub name: String,
    pub functions: Vec<Arc<FunctionDef>>,
}

/// Every loaded library by name, and their functions by lower-cased name (FCALL finds them
/// case-insensitively, as Redis's dict of functions does).
#[derive(Default)]
pub struct Registry {
    pub libraries: BTreeMap<String, LoadedLibrary>,
    functions: HashMap<String, (String, Arc<FunctionDef>)>,
}

impl Registry {
    pub fn function(&self, name: &[u8]) -> Option<&Arc<FunctionDef>> {
        // The usual lower-case name is looked up as it is; only other names are copied.
        let found = match std::str::from_utf8(name) {
            Ok(s) if !s.bytes().any(|c| c.is_ascii_uppercase()) => self.functions.get(s),
            _ => self.functions.get(&String::from_utf8_lossy(name).to_ascii_lowercase()),
        };
        found.map(|(_, f)| f)
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    fn remove(&mut self, library: &str) -> Option<LoadedLibrary> {
        let lib = self.libraries.remove(library)?;
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    fn insert(&mut self, lib: LoadedLibrary) {
        for f in &lib.functions {
            self.functions.insert(f.name.to_ascii_lowercase(), (lib.name.clone(), f.clone()));
        }
        self.libraries.insert(lib.name.clone(), lib);
    }
}

/// Letters, digits and underscores, at least one (Redis's rule for function names).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Redis 7.0 words a bad function name as it words a bad library name.
const BAD_NAME: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// The library name of `code`'s metadata line (`#!lua name=<name>`), or the error line.
fn library_name(code: &[u8]) -> Result<String, Vec<u8>> {
    crate::functions::Library::parse(code.to_vec()).map(|lib| String::from_utf8_lossy(&lib.name).into_owned())
}

thread_local! {
    /// The functions the library being loaded has registered so far.
    static REGISTERING: RefCell<Option<Vec<FunctionDef>>> = const { RefCell::new(None) };
}

impl Engine {
    /// Runs a library's code and adds what it registers; `replace` lets it take the place of a
    /// library of the same name. Returns the library's name, or the error line.
    pub fn load_library(&mut self, code: &[u8], replace: bool) -> Result<String, Vec<u8>> {
        let name = library_name(code)?;
        if self.registry.libraries.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists").into_bytes());
        }
        let mut source = code.to_vec();
        source[..2].copy_from_slice(b"--");
        let chunk = super::compile(&self.vm, &source, c"@user_function", &self.vm.fn_env)
            .map_err(|message| [&b"ERR Error compiling function: "[..], c_str(&message)].concat())?;
        let functions = self.run_library_code(&chunk)?;
        if functions.is_empty() {
            return Err(b"ERR No functions registered".to_vec());
        }
        for f in &functions {
            if let Some((owner, _)) = self.registry.functions.get(&f.name.to_ascii_lowercase()) {
                if *owner != name {
                    return Err(format!("ERR Function {} already exists", f.name).into_bytes());
                }
            }
        }
        self.registry.remove(&name);
        let functions = functions.into_iter().map(Arc::new).collect();
        self.registry.insert(LoadedLibrary { name: name.clone(), functions });
        Ok(name)
    }

    fn run_library_code(&self, chunk: &Function) -> Result<Vec<FunctionDef>, Vec<u8>> {
        let mode = &self.vm.fn_mode;
        REGISTERING.with(|r| *r.borrow_mut() = Some(Vec::new()));
        let _ = mode.raw_set("loading", true);
        let result = super::with_load_deadline(&self.vm.lua, || {
            self.vm.xpcall.call::<MultiValue>((chunk.clone(), self.vm.err_handler.clone()))
        });
        let _ = mode.raw_set("loading", false);
        let registered = REGISTERING.with(|r| r.borrow_mut().take()).unwrap_or_default();
        let mut values = result.map_err(|e| format!("ERR Error registering functions: {e}").into_bytes())?.into_iter();
        if !matches!(values.next(), Some(Value::Boolean(true))) {
            let msg = match values.next() {
                Some(Value::Table(t)) => match t.raw_get::<Value>("err") {
                    Ok(Value::String(s)) => s.as_bytes().to_vec(),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            return Err([&b"ERR Error registering functions: "[..], c_str(&msg)].concat());
        }
        Ok(registered)
    }

    /// Removes a library; false when there is none of that name.
    pub fn delete_library(&mut self, name: &str) -> bool {
        self.registry.remove(name).is_some()
    }

    pub fn flush_libraries(&mut self) {
        self.registry = Registry::default();
        let _ = self.vm.lua.gc_collect();
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// redis.register_function(name, callback) or redis.register_function{function_name=...,
/// callback=..., flags={...}, description=...}, while a library loads.
pub(super) fn prim_register_function(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let def = match parse_registration(&args) {
        Ok(def) => def,
        Err(msg) => return failure(lua, msg),
    };
    let outcome = REGISTERING.with(|r| {
        let mut r = r.borrow_mut();
        let Some(list) = r.as_mut() else {
            return Err("redis.register_function can only be called on FUNCTION LOAD command");
        };
        if list.iter().any(|f| f.name == def.name) {
            return Err("Function already exists in the library");
        }
        list.push(def);
        Ok(())
    });
    match outcome {
        Ok(()) => Ok(success(Value::Nil)),
        Err(msg) => failure(lua, msg),
    }
}

fn parse_registration(args: &MultiValue) -> Result<FunctionDef, &'static str> {
    let (name, callback, flags, description) = match args.len() {
        1 => {
            let Value::Table(t) = &args[0] else {
                return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            named_registration(t)?
        }
        2 => {
            let name = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                _ => return Err("first argument to redis.register_function must be a string"),
            };
            let Value::Function(f) = &args[1] else {
                return Err("second argument to redis.register_function must be a function");
            };
            (name, f.clone(), 0, None)
        }
        _ => return Err("wrong number of arguments to redis.register_function"),
    };
    if !valid_name(&name) {
        return Err(BAD_NAME);
    }
    Ok(FunctionDef { name: String::from_utf8_lossy(&name).into_owned(), description, flags, callback })
}

type Registration = (Vec<u8>, Function, u32, Option<Vec<u8>>);

fn named_registration(t: &Table) -> Result<Registration, &'static str> {
    let (mut name, mut callback, mut flags, mut description) = (None, None, 0, None);
    for pair in t.pairs::<Value, Value>() {
        let Ok((key, value)) = pair else {
            return Err("named argument key given to redis.register_function is not a string");
        };
        let Value::String(key) = key else {
            return Err("named argument key given to redis.register_function is not a string");
        };
        match &key.as_bytes()[..] {
            b"function_name" => match value {
                Value::String(s) => name = Some(s.as_bytes().to_vec()),
                _ => return Err("function_name argument given to redis.register_function must be a string"),
            },
            b"description" => match value {
                Value::String(s) => description = Some(s.as_bytes().to_vec()),
                Value::Integer(i) => description = Some(i.to_string().into_bytes()),
                Value::Number(n) => description = Some(crate::util::num::fmt_g(n, 14).into_bytes()),
                _ => return Err("description argument given to redis.register_function must be a string"),
            },
            b"callback" => match value {
                Value::Function(f) => callback = Some(f),
                _ => return Err("callback argument given to redis.register_function must be a function"),
            },
            b"flags" => {
                let Value::Table(list) = value else {
                    return Err(
                        "flags argument to redis.register_function must be a table representing function flags",
                    );
                };
                for item in list.sequence_values::<Value>() {
                    let Ok(Value::String(flag)) = item else { return Err("unknown flag given") };
                    let flag = flag.to_string_lossy();
                    let Some(&(_, bit)) = script_flags::NAMES.iter().find(|(n, _)| *n == flag) else {
                        return Err("unknown flag given");
                    };
                    flags |= bit;
                }
            }
            _ => return Err("unknown argument given to redis.register_function"),
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let callback = callback.ok_or("redis.register_function must get a callback argument")?;
    Ok((name, callback, flags, description))
}
