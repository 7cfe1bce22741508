-- The script environment, run once when the engine starts (chunk name "=redis_lib": the error
-- handler skips frames of this chunk when it looks for the script line that failed).
--
-- `prim` holds the Rust primitives.
local prim = ...

local error, tostring, type, select, next, rawget, rawset, ipairs, setmetatable, getmetatable =
    error, tostring, type, select, next, rawget, rawset, ipairs, setmetatable, getmetatable
local G = _G

-- The functions of `redis` are C closures made in Rust (a Lua wrapper would be a frame of its
-- own, and a tail call to it would hide the script's line from the error handler).
local redis = {}
for _, name in ipairs({ "call", "pcall", "setresp", "log", "sha1hex", "error_reply", "status_reply", "set_repl", "acl_check_cmd" }) do
    redis[name] = prim[name]
end
redis.replicate_commands = function() return true end
redis.breakpoint = prim.breakpoint
redis.debug = prim.debug
redis.LOG_DEBUG = 0
redis.LOG_VERBOSE = 1
redis.LOG_NOTICE = 2
redis.LOG_WARNING = 3
redis.REPL_NONE = 0
redis.REPL_AOF = 1
redis.REPL_SLAVE = 2
redis.REPL_REPLICA = 2
redis.REPL_ALL = 3
redis.REDIS_VERSION = prim.version
redis.REDIS_VERSION_NUM = prim.version_num
G.redis = redis
G.__redis__err__handler = prim.err_handler

-- What Redis 7.0 leaves in the global table; everything else the standard libraries define goes.
local keep = {
    _G = true, _VERSION = true, __redis__err__handler = true, assert = true, bit = true,
    cjson = true, cmsgpack = true, collectgarbage = true, coroutine = true, error = true,
    gcinfo = true, getmetatable = true, ipairs = true, load = true, loadstring = true, math = true,
    next = true, pairs = true, pcall = true, rawequal = true, rawget = true, rawset = true,
    redis = true, select = true, setmetatable = true, string = true, struct = true, table = true,
    tonumber = true, tostring = true, type = true, unpack = true, xpcall = true,
}
local drop = {}
for k in next, G do
    if not keep[k] then
        drop[#drop + 1] = k
    end
end
for _, k in ipairs(drop) do
    rawset(G, k, nil)
end

-- Read-only tables. Redis 7.0 patches the Lua VM with a read-only flag, which refuses every
-- write to a table. Our Lua has the flag for raw writes (rawset, table.insert, a new metatable:
-- `prim.readonly`); each protected table is an empty proxy with that flag whose metatable reads
-- through to the real table and refuses writes. The functions that look at raw contents see
-- through the proxies.
local backing = {}
-- The metatables made here (of proxies, of the global table, of the function environment):
-- a script that got one from getmetatable could change how every script resolves names, so
-- getmetatable shows each through a read-only proxy, as Redis's read-only flag covers them.
-- `proxy_of_mt` maps a proxy's metatable to the proxy's real table, whose metatable (or none)
-- is what the script sees.
local internal_mt = {}
local proxy_of_mt = {}
local function refuse_write()
    error("Attempt to modify a readonly table", 2)
end
local function protect(real)
    local proxy = {}
    backing[proxy] = real
    local mt = { __index = real, __newindex = refuse_write }
    internal_mt[mt] = true
    proxy_of_mt[mt] = real
    setmetatable(proxy, mt)
    prim.readonly(proxy)
    return proxy
end
local mt_views = {}
local function shown_metatable(v)
    local mt = getmetatable(v)
    local real_t = mt ~= nil and proxy_of_mt[mt]
    if real_t then
        mt = getmetatable(real_t)
    end
    if mt == nil or not internal_mt[mt] then
        return mt
    end
    local view = mt_views[mt]
    if view == nil then
        view = protect(mt)
        mt_views[mt] = view
    end
    return view
end
local function real(t)
    return backing[t] or t
end

local function proxy_next(t, k)
    return next(real(t), k)
end

-- The replacements of the base functions that must see through proxies are C closures
-- (`prim.c_wrap`): a function answering (true, results...) or (false, message[, positioned]).
-- A C function leaves the script's frame in place, so errors carry the script's line as the
-- originals' do; `positioned` prefixes the message with it, as luaL_argerror does.
local c_wrap = prim.c_wrap
local function arg_type(n, ...)
    if select("#", ...) < n then
        return "no value"
    end
    return type((select(n, ...)))
end
local function bad_arg(fname, n, expected, ...)
    return false, "bad argument #" .. n .. " to '" .. fname .. "' (" .. expected .. " expected, got " .. arg_type(n, ...) .. ")", true
end
local function table_arg(fname, ...)
    if type((...)) ~= "table" then
        return bad_arg(fname, 1, "table", ...)
    end
end

rawset(G, "next", c_wrap(function(...)
    local t, k = ...
    if type(t) ~= "table" then return bad_arg("next", 1, "table", ...) end
    return true, next(real(t), k)
end))
rawset(G, "pairs", c_wrap(function(...)
    local t = ...
    if type(t) ~= "table" then return bad_arg("pairs", 1, "table", ...) end
    return true, proxy_next, t, nil
end))
rawset(G, "ipairs", c_wrap(function(...)
    local t = ...
    if type(t) ~= "table" then return bad_arg("ipairs", 1, "table", ...) end
    return true, ipairs(real(t))
end))
rawset(G, "rawget", c_wrap(function(...)
    local t, k = ...
    if type(t) ~= "table" then return bad_arg("rawget", 1, "table", ...) end
    return true, rawget(real(t), k)
end))
rawset(G, "rawset", c_wrap(function(...)
    local t, k, v = ...
    if type(t) ~= "table" then return bad_arg("rawset", 1, "table", ...) end
    if backing[t] or t == G then
        return false, "Attempt to modify a readonly table"
    end
    return true, rawset(t, k, v)
end))
rawset(G, "setmetatable", c_wrap(function(...)
    local t, mt = ...
    if type(t) ~= "table" then return bad_arg("setmetatable", 1, "table", ...) end
    if mt ~= nil and type(mt) ~= "table" then
        return false, "bad argument #2 to 'setmetatable' (nil or table expected)", true
    end
    local old = getmetatable(t)
    if type(old) ~= "table" and old ~= nil then
        return false, "cannot change a protected metatable", true
    end
    if backing[t] or t == G then
        return false, "Attempt to modify a readonly table"
    end
    return true, setmetatable(t, mt)
end))

rawset(G, "getmetatable", c_wrap(function(...)
    if select("#", ...) == 0 then
        return false, "bad argument #1 to 'getmetatable' (value expected)", true
    end
    return true, shown_metatable((...))
end))

-- Redis 7.0's pcall, which catches redis.call's {err=...} errors as their message.
rawset(G, "pcall", prim.base_pcall)

-- The `redis` of FUNCTION libraries: what scripts have but the debugger's and the
-- effects-replication entry points.
local fn_redis = {}
for k, v in next, redis do
    if k ~= "breakpoint" and k ~= "debug" and k ~= "replicate_commands" then
        fn_redis[k] = v
    end
end

for _, name in ipairs({ "string", "table", "math", "coroutine", "redis", "bit", "cjson", "struct", "cmsgpack" }) do
    local lib = rawget(G, name)
    if lib ~= nil then
        rawset(G, name, protect(lib))
    end
end

-- Methods on strings resolve through the same (protected) `string` table scripts see, so
-- `getmetatable("").__index == string` holds, as in Redis.
-- Redis's read-only flag covers the strings' metatable too.
local string_mt = getmetatable("")
string_mt.__index = rawget(G, "string")
internal_mt[string_mt] = true

-- The global table itself: scripts run with the proxy as their environment; the real table
-- (also the environment of chunks made by loadstring) refuses new globals and reading unknown
-- ones, with Redis's messages.
local function missing_global(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local env = protect(G)
rawset(G, "_G", env)

-- FUNCTION libraries share one environment that changes with the phase, as Redis's does: while
-- a library's code runs (FUNCTION LOAD) it sees only a `redis` with register_function and log;
-- when one of its functions runs (FCALL) it sees the script globals without KEYS and ARGV.
local fn_mode = { loading = false }
local fn_run = {}
for k, v in next, G do
    if k ~= "KEYS" and k ~= "ARGV" and k ~= "__redis__err__handler" and k ~= "redis" then
        fn_run[k] = v
    end
end
local fn_load_redis = {
    register_function = prim.register_function,
    log = redis.log,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
local fn_load_redis_mt = { __index = missing_global, __newindex = refuse_write }
internal_mt[fn_load_redis_mt] = true
setmetatable(fn_load_redis, fn_load_redis_mt)
local fn_load = { redis = protect(fn_load_redis) }
local fn_env = {}
fn_run.redis = protect(fn_redis)
fn_run._G = fn_env
backing[fn_env] = fn_run
local fn_env_mt = {
    __index = function(_, k)
        local v = rawget(fn_mode.loading and fn_load or fn_run, k)
        if v == nil then
            error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
        end
        return v
    end,
    __newindex = refuse_write,
}
internal_mt[fn_env_mt] = true
setmetatable(fn_env, fn_env_mt)
prim.readonly(fn_env)

local g_mt = { __index = missing_global, __newindex = refuse_write }
internal_mt[g_mt] = true
-- Scripts see the globals' metatable as Redis's: an __index only (writes are refused by the
-- read-only flag there, by __newindex here).
mt_views[g_mt] = protect({ __index = missing_global })
setmetatable(G, g_mt)
return env, fn_env, fn_mode
