#!/usr/bin/env python3
"""Regenerates src/spec/docs_data.rs from a running redis-server 7.0 and our own wording.

Usage:
    redis-server --port 7320 --save '' --appendonly no --daemonize yes
    python3 tools/gen_command_docs.py --port 7320            # writes src/spec/docs_data.rs

What comes from the server (facts about the protocol): every command's and subcommand's group,
`since`, doc flags, deprecation version and replacement, history versions, argument structures
(names, types, tokens, flags, key spec indexes, nesting), command tips and key specs (including
their short notes, which COMMAND INFO replies carry byte for byte).

What comes from tools/command_docs_text.txt (our own words, never Redis's documentation text):
summaries, history descriptions and complexity phrasing. Its lines are

    name | summary                       (name is the full name: `config|get`)
    name | summary | complexity          (overrides the default complexity, see below)
    name @version | what changed         (one per history entry, in the server's order)
    name ~ complexity                    (complexity only)

Without an override, the complexity is the leading big-O expression of the server's text (the
fact itself, e.g. `O(log(N)+M)`). The generator fails listing every entry the text file lacks,
so new commands cannot slip in without a summary.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resp3  # noqa: E402

KS_FLAGS = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key", "incomplete",
            "variable_flags"]
KS_CONST = {f: f.upper() for f in KS_FLAGS}
ARG_TYPES = {"string": "Str", "integer": "Int", "double": "Dbl", "key": "Key", "pattern": "Pattern",
             "unix-time": "UnixTime", "pure-token": "PureToken", "oneof": "OneOf", "block": "Block"}
ARG_FLAGS = {"optional": "opt", "multiple": "multi", "multiple_token": "mtok"}
DOC_FLAGS = {"deprecated": "DEPRECATED", "syscmd": "SYSCMD"}


def rs(s):
    """A Rust string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def as_map(reply):
    t, v = reply
    assert t == "%", reply
    return [(k[1], val) for k, val in v]


def read_text(path):
    summaries, complexities, history = {}, {}, {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(" | ")]
            head = parts[0]
            if " ~ " in line:
                name, text = [p.strip() for p in line.split(" ~ ", 1)]
                complexities[name] = text
                continue
            if "@" in head:
                name, version = [p.strip() for p in head.split("@", 1)]
                history.setdefault(name, []).append((version, parts[1]))
                continue
            if len(parts) not in (2, 3):
                sys.exit(f"{path}:{n}: expected `name | summary [| complexity]`")
            summaries[head] = parts[1]
            if len(parts) == 3:
                complexities[head] = parts[2]
    return summaries, complexities, history


def default_complexity(text):
    m = re.match(r"O\(", text)
    if not m:
        return None
    depth, i = 0, 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                break
    return text[: i + 1]


class Gen:
    def __init__(self, text):
        self.summaries, self.complexities, self.history = text
        self.missing = []
        self.out = []

    def key_spec(self, spec):
        m = dict(as_map(spec))
        flags = [f[1] for f in m["flags"][1]]
        flag_expr = " | ".join(KS_CONST[f] for f in flags) or "0"
        bs = dict(as_map(m["begin_search"]))
        bs_spec = dict(as_map(bs["spec"]))
        if bs["type"][1] == "index":
            bs_rs = f"Index({bs_spec['index'][1]})"
        elif bs["type"][1] == "keyword":
            bs_rs = f"Keyword({rs(bs_spec['keyword'][1])}, {bs_spec['startfrom'][1]})"
        else:
            assert bs["type"][1] == "unknown"
            bs_rs = "BsUnknown"
        fk = dict(as_map(m["find_keys"]))
        fk_spec = dict(as_map(fk["spec"]))
        if fk["type"][1] == "range":
            fk_rs = f"Range({fk_spec['lastkey'][1]}, {fk_spec['keystep'][1]}, {fk_spec['limit'][1]})"
        elif fk["type"][1] == "keynum":
            fk_rs = f"Keynum({fk_spec['keynumidx'][1]}, {fk_spec['firstkey'][1]}, {fk_spec['keystep'][1]})"
        else:
            assert fk["type"][1] == "unknown"
            fk_rs = "FkUnknown"
        s = f"ks({flag_expr}, {bs_rs}, {fk_rs})"
        if "notes" in m:
            s += f".note({rs(m['notes'][1])})"
        return s

    def arg(self, arg, indent):
        m = as_map(arg)
        keys = [k for k, _ in m]
        order = ["name", "type", "display_text", "key_spec_index", "token", "summary", "since",
                 "deprecated_since", "flags", "arguments"]
        assert keys == [k for k in order if k in keys], keys
        assert "display_text" not in keys and "summary" not in keys, "7.2 fields: extend Arg"
        m = dict(m)
        s = f"a({rs(m['name'][1])}, {ARG_TYPES[m['type'][1]]})"
        if "key_spec_index" in m:
            s += f".ks({m['key_spec_index'][1]})"
        if "token" in m:
            s += f".tok({rs(m['token'][1])})"
        if "since" in m:
            s += f".since({rs(m['since'][1])})"
        if "deprecated_since" in m:
            s += f".dep({rs(m['deprecated_since'][1])})"
        for f in m.get("flags", ("~", []))[1]:
            s += f".{ARG_FLAGS[f[1]]}()"
        pad = "    " * indent
        if "arguments" in m:
            inner = "".join(self.arg(a, indent + 1) for a in m["arguments"][1])
            return f"{pad}{s}.sub(&[\n{inner}{pad}]),\n"
        return f"{pad}{s},\n"

    def command(self, name, doc, info):
        d = as_map(doc)
        keys = [k for k, _ in d]
        order = ["summary", "since", "group", "complexity", "doc_flags", "deprecated_since",
                 "replaced_by", "history", "arguments", "subcommands"]
        assert keys == [k for k in order if k in keys], (name, keys)
        d = dict(d)
        if name not in self.summaries:
            self.missing.append(f"{name} | ")
        summary = self.summaries.get(name, "")
        complexity = ""
        if "complexity" in d:
            complexity = self.complexities.get(name) or default_complexity(d["complexity"][1])
            if complexity is None:
                complexity = ""
                self.missing.append(f"{name} | {summary or '...'} | (complexity: {d['complexity'][1]})")
        line = f"    d({rs(name)}, {rs(d['group'][1])}, {rs(d['since'][1])}, {rs(summary)}, {rs(complexity)})"
        if "doc_flags" in d:
            line += ".flags(" + " | ".join(DOC_FLAGS[f[1]] for f in d["doc_flags"][1]) + ")"
        if "deprecated_since" in d or "replaced_by" in d:
            line += f".deprecated({rs(d['deprecated_since'][1])}, {rs(d['replaced_by'][1])})"
        if "history" in d:
            versions = [h[1][0][1] for h in d["history"][1]]
            ours = self.history.get(name, [])
            if [v for v, _ in ours] != versions:
                for v in versions:
                    self.missing.append(f"{name} @{v} | ")
            else:
                line += ".hist(&[" + ", ".join(f"({rs(v)}, {rs(t)})" for v, t in ours) + "])"
        iv = info[1]
        tips = [t[1] for t in iv[7][1]]
        if tips:
            line += ".tips(&[" + ", ".join(rs(t) for t in tips) + "])"
        specs = iv[8][1]
        if specs:
            line += ".keys(&[" + ", ".join(self.key_spec(s) for s in specs) + "])"
        if "arguments" in d:
            inner = "".join(self.arg(a, 2) for a in d["arguments"][1])
            line += f".args(&[\n{inner}    ])"
        self.out.append(line + ",\n")
        if "subcommands" in d:
            subinfo = {s[1][0][1]: s for s in iv[9][1]}
            for (_, sub), sdoc in sorted(d["subcommands"][1], key=lambda e: e[0][1]):
                self.command(sub, sdoc, subinfo[sub])


BEGIN = "// BEGIN GENERATED by tools/gen_command_docs.py: do not edit by hand.\n"
END = "// END GENERATED\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6379)
    p.add_argument("--text", default=os.path.join(here, "command_docs_text.txt"))
    p.add_argument("--out", default=os.path.join(here, "..", "src", "spec", "docs_data.rs"))
    a = p.parse_args()

    conn = resp3.Conn(a.host, a.port)
    conn.call("HELLO", "3")
    infos = {e[1][0][1]: e for e in conn.call("COMMAND", "INFO")[1]}
    docs = dict((k[1], v) for k, v in conn.call("COMMAND", "DOCS")[1])
    gen = Gen(read_text(a.text))
    for name in sorted(docs):
        gen.command(name, docs[name], infos[name])
    if gen.missing:
        sys.stderr.write(f"{a.text} lacks {len(gen.missing)} entries:\n")
        sys.stderr.write("\n".join(gen.missing) + "\n")
        sys.exit(1)
    with open(a.out, encoding="utf-8") as f:
        text = f.read()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = "#[rustfmt::skip]\npub static DOCS: &[Doc] = &[\n" + "".join(gen.out) + "];\n"
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(head + BEGIN + body + END + tail)
    print(f"wrote {a.out}: {len(gen.out)} entries")


if __name__ == "__main__":
    main()
