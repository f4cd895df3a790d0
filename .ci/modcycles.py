#!/usr/bin/env python3
"""Module import cycles of one crate: lists the intra-crate edges per file
(paths starting crate::, super::, self::, or a child module's name, outside
comments and strings; an edge goes to the file of the deepest module the
path names, a crate-root re-export to the module it re-exports) and prints
the strongly connected components of more than one file. Each file is a
node; --merge=DIR counts a folder as one node (a type's methods split across
a folder's files are calls no path shows). Exits 1 if there is a cycle.

Usage: .ci/modcycles.py executor/src [--edges] [--merge=executor]"""
import os, re, sys

src = sys.argv[1]
show_edges = '--edges' in sys.argv

# module path (tuple) -> file
files = {}
for root, _, names in os.walk(src):
    for n in names:
        if not n.endswith('.rs'):
            continue
        p = os.path.relpath(os.path.join(root, n), src)
        parts = p[:-3].split(os.sep)
        if parts == ['lib']:
            mod = ()
        elif parts[-1] == 'mod':
            mod = tuple(parts[:-1])
        else:
            mod = tuple(parts)
        files[mod] = p

def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    text = re.sub(r'"(?:\\[\s\S]|[^"\\])*"', '""', text)
    return re.sub(r'//[^\n]*', '', text)

# lib.rs re-exports: name -> module tuple
reexports = {}
lib = strip_comments(open(os.path.join(src, files[()])).read())
for m in re.finditer(r'pub\s+use\s+(\w+)::(\{[^}]*\}|\w+)\s*;', lib, flags=re.S):
    mod, names = m.group(1), m.group(2)
    if (mod,) not in files:
        continue  # a re-export of another crate: no edge inside this one
    for n in re.findall(r'\w+', names):
        reexports[n] = (mod,)

def resolve(segs):
    """segs: absolute path segments after crate. Return module tuple of the
    deepest existing module prefix."""
    cur = ()
    for s in segs:
        if cur + (s,) in files:
            cur = cur + (s,)
        else:
            if cur == () and s in reexports:
                return reexports[s]
            break
    return cur

path_re = re.compile(r'\b((?:crate|super|self|[a-z_][a-z0-9_]*)(?:\s*::\s*(?:\w+|\*|\{))+)')
edges = {}
for mod, f in sorted(files.items()):
    text = strip_comments(open(os.path.join(src, f)).read())
    children = set(c[-1] for c in files if len(c) == len(mod) + 1 and c[:len(mod)] == mod)
    # track inline `mod x {` blocks so `super::` inside them resolves right
    out = set()
    depth = 0
    inline = []  # (name, depth at open)
    tokens = re.finditer(r'\bmod\s+(\w+)\s*\{|\{|\}|' + path_re.pattern, text)
    for t in tokens:
        s = t.group(0)
        if s.startswith('mod'):
            depth += 1
            inline.append((t.group(1), depth))
            continue
        if s == '{':
            depth += 1; continue
        if s == '}':
            if inline and inline[-1][1] == depth:
                inline.pop()
            depth -= 1; continue
        segs = [x.strip() for x in s.split('::')]
        if segs[-1] == '{':
            depth += 1
            segs = segs[:-1]
        here = list(mod) + [n for n, _ in inline]
        if segs[0] == 'crate':
            absol = segs[1:]
        elif segs[0] in ('super', 'self'):
            base = list(here)
            while segs and segs[0] in ('super', 'self'):
                if segs[0] == 'super':
                    base = base[:-1]
                segs = segs[1:]
            absol = base + segs
        elif segs[0] in children and not inline:
            absol = list(mod) + segs
        else:
            continue
        target = resolve(absol)
        if target != mod and target != ():
            out.add(target)
        elif target == () and absol and reexports.get(absol[0]) in files:
            out.add(reexports[absol[0]])
    edges[mod] = out

name = lambda m: files[m]
# --merge DIR: count a folder's files as one node (methods of one type are
# often split across a folder's files, which path edges do not show)
merge = [a.split('=',1)[1] for a in sys.argv if a.startswith('--merge=')]
if merge:
    def key(m):
        for d in merge:
            if m[:1] == (d,):
                return (d,)
        return m
    new = {}
    for m, out in edges.items():
        new.setdefault(key(m), set()).update(key(t) for t in out if key(t) != key(m))
    edges = new
    name = lambda m: (m[0] + '/') if m[:1] and m[0] in merge and len(m) == 1 else files[m]
if show_edges:
    for m in sorted(edges, key=name):
        if edges[m]:
            print(f'{name(m)} -> ' + ', '.join(sorted(name(t) for t in edges[m])))
    print()

# Tarjan
index = {}; low = {}; stack = []; on = set(); sccs = []; counter = [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in edges.get(v, ()):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in edges:
    if v not in index:
        strong(v)
cyc = [c for c in sccs if len(c) > 1]
print(f'{len(edges)} nodes, {sum(len(e) for e in edges.values())} edges, {len(cyc)} cyclic SCC(s)')
for c in sorted(cyc, key=len, reverse=True):
    print(f'SCC size {len(c)}: ' + ' '.join(sorted(name(m) for m in c)))
sys.exit(1 if cyc else 0)
