#!/usr/bin/env python3
"""scoreboard_diff.py OLD.json NEW.json: per class pass/fail before -> after, and every scored row
whose verdict changed (work, latency, folio orders, THP success, throughput). Rows a scoreboard
marks trivial (issue 32) are counted apart."""
import json, sys, collections
def load(p):
    d = json.load(open(p)); out = {}
    for s in d['scenarios']:
        for r in s['rows']:
            out[(s['name'], r['row'])] = r
    return d, out
od, o = load(sys.argv[1]); nd, n = load(sys.argv[2])
def cls(r):
    c = r['class']
    if c == 'latency': c += ' p99' if 'p99' in r['row'] else ' p50'
    return c
def v(r):
    x = r['verdict'] if r else None
    if isinstance(x, dict) or x is None: return 'n/a'
    # Scoreboards since issue 32 mark trivial rows (in no pass rate); older ones do not.
    return 'trivial' if r.get('trivial') else x
for name, d in (('old', od), ('new', nd)):
    t = collections.Counter()
    for s in d['scenarios']:
        for r in s['rows']:
            t[(cls(r), v(r))] += 1
    print(name, d['commit'], 'overall', d['pass'], 'pass', d['fail'], 'fail')
    for c in sorted({k[0] for k in t}):
        p, f, tr = t[(c, 'pass')], t[(c, 'fail')], t[(c, 'trivial')]
        print(f'   {c:16} {p:4} pass {f:4} fail  {100*p/max(1,p+f):5.1f} %' + (f'  ({tr} trivial)' if tr else ''))
f = lambda s: '-' if not s else f"{s['mean']:.4g}"
print('rows whose verdict changed (scenario | row | kernel old/new | sim old -> new):')
for k in sorted(set(o) | set(n)):
    a, b = o.get(k), n.get(k)
    if (a or b)['class'] == 'census': continue
    if v(a) != v(b):
        print(f'  {k[0]:24} {k[1]:38} k {f(a and a["kernel"])}/{f(b and b["kernel"])}  s {f(a and a["sim"])} -> {f(b and b["sim"])}  {v(a)} -> {v(b)}')
