"""Finds barriers that some threads of a PTX kernel may skip or reach
through another copy: a block barrier (bar.sync, bar.red, barrier.sync,
bar.arrive) under a branch whose condition can differ between the threads
of the block, or a warp collective (bar.warp.sync, shfl.sync, redux.sync,
vote.sync, match.sync) under one that can differ between the lanes of a
warp.

bar.sync and bar.red are "aligned": every thread of the block must execute
the same instruction, or the behaviour is undefined (PTX ISA, barrier). The
device headers put each barrier where every thread of its scope reaches it,
but an optimizer that does not know the instruction is convergent may copy
it into both arms of a branch that only the scope's rank 0 takes: the C
wrappers of the Triton bitcode, compiled without -fconvergent-functions, had
Triton's pipeline do exactly that to ccoGdaWait's bar.red. Warp collectives
may be reached through copies on sm_70 and later, but a lane that skips one
stalls its warp; the analysis cannot tell a copy from a skip, so it reports
both.

The analysis is the usual one, conservative: values read from %tid and
%laneid, atomics' results, loads through such addresses, and anything
defined under such a branch (read after the branches join) vary between
threads; a barrier reduction's result does not, a warp-wide broadcast's or
reduction's varies between warps only. A branch's region is what its
successors reach before its immediate post-dominator.

    problems = barrier_problems(ptx_text)   # [] when every barrier is reached by all
"""
from __future__ import annotations

import re
from typing import Dict, List, Set, Tuple

LANE, BLOCK = 1, 2  # varies between the lanes of a warp / between the threads of a block
BLOCK_BARRIER = re.compile(r"\b(bar|barrier)(\.cta)?\.(sync|red|arrive)\b")
WARP_COLLECTIVE = re.compile(r"\b(bar\.warp\.sync|shfl\.sync|redux\.sync|vote\.sync|match\.sync)\b")
WARP_UNIFORM = re.compile(r"\b(shfl\.sync\.idx|redux\.sync|vote\.sync)\b")  # one result for the whole warp
REG = re.compile(r"%[A-Za-z_][\w.]*")
NO_DEF = re.compile(r"^(st|red|bar|barrier|bra|ret|exit|membar|fence|prefetch|trap|call|cp|discard|nanosleep)\b")


def _statements(body: str) -> List[str]:
    """Statements of a function body: labels ("NAME:"), instructions, and
    inline-asm groups ("{ ... }") kept whole; no comments, no directives."""
    body = re.sub(r"//[^\n]*|^\s*\.(loc|file)\b[^\n]*", "", body, flags=re.M)
    out, cur, depth = [], "", 0
    for ch in body:
        if depth == 0 and ch == "{" and not cur.strip():
            cur, depth = "{", 1
            continue
        cur += ch
        if depth:  # a group: its vector operands' braces count too
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if depth == 0:
                out.append(cur.strip())
                cur = ""
        elif ch == ";" or (ch == ":" and re.fullmatch(r"\s*[$\w]+:", cur)):
            out.append(cur.strip())
            cur = ""
    return [s for s in out if s and not s.startswith(".")]


def _instr(stmt: str) -> Tuple[str, str, List[str], List[str]]:
    """(guard register or "", opcode, defs, uses) of one instruction."""
    m = re.match(r"@!?(%\w+)\s+(.*)", stmt, re.S)
    guard, stmt = (m.group(1), m.group(2)) if m else ("", stmt)
    parts = stmt.rstrip(";").split(None, 1)
    op, rest = parts[0], parts[1] if len(parts) > 1 else ""
    if NO_DEF.match(op):
        return guard, op, [], REG.findall(rest)
    if rest.lstrip().startswith("{"):  # a vector result: {%r1, %r2}, ...
        first, others = rest[:rest.index("}") + 1], rest[rest.index("}") + 1:]
    else:
        first, _, others = rest.partition(",")
    return guard, op, REG.findall(first), REG.findall(others)


def _group(stmt: str) -> List[Tuple[str, str, List[str], List[str]]]:
    return [_instr(s) for s in _statements(stmt.strip()[1:-1])]


def _blocks(stmts: List[str]) -> Tuple[List[List[str]], Dict[str, int]]:
    blocks: List[List[str]] = [[]]
    labels: Dict[str, int] = {}
    for s in stmts:
        if s.endswith(":"):
            if blocks[-1]:
                blocks.append([])
            labels[s[:-1]] = len(blocks) - 1
            continue
        blocks[-1].append(s)
        if re.match(r"(@!?%\w+\s+)?(bra|ret|exit)\b", s):
            blocks.append([])
    return blocks, labels


def _successors(blocks: List[List[str]], labels: Dict[str, int]) -> List[List[int]]:
    succ = []
    for i, b in enumerate(blocks):
        last = b[-1] if b else ""
        m = re.match(r"(@!?%\w+\s+)?bra(\.uni)?\s+([$\w]+)", last)
        nxt = [i + 1] if i + 1 < len(blocks) else []
        if m:
            succ.append([labels[m.group(3)]] + (nxt if m.group(1) else []))
        elif re.match(r"(ret|exit)\b", last):
            succ.append([])
        else:
            succ.append(nxt)
    return succ


def _postdominators(succ: List[List[int]]) -> List[int]:
    """Post-dominator sets as bit masks (bit len(succ): the exit)."""
    n = len(succ)
    exit_bit, full = 1 << n, (1 << (n + 1)) - 1
    pdom = [full] * n
    changed = True
    while changed:
        changed = False
        for i in reversed(range(n)):
            new = full
            for s in succ[i]:
                new &= pdom[s]
            if not succ[i]:
                new = exit_bit
            new |= 1 << i
            if new != pdom[i]:
                pdom[i], changed = new, True
    return pdom


def _region(i: int, succ: List[List[int]], pdom: List[int]) -> Set[int]:
    """Blocks reachable from block i's successors before its immediate
    post-dominator: of the strict post-dominators, which form a chain, the
    one with the most post-dominators of its own."""
    stop = [j for j in range(len(succ)) if j != i and pdom[i] >> j & 1]
    ipdom = max(stop, key=lambda j: bin(pdom[j]).count("1")) if stop else None
    seen: Set[int] = set()
    work = list(succ[i])
    while work:
        b = work.pop()
        if b == ipdom or b in seen:
            continue
        seen.add(b)
        work.extend(succ[b])
    return seen


def _function_problems(name: str, body: str) -> List[str]:
    blocks, labels = _blocks(_statements(body))
    succ = _successors(blocks, labels)
    pdom = _postdominators(succ)
    taint: Dict[str, int] = {}
    control = [0] * len(blocks)  # taint of the branches each block is under

    def of(regs: List[str]) -> int:
        t = 0
        for r in regs:
            t |= taint.get(r, 0)
        return t

    def define(regs: List[str], t: int) -> bool:
        grew = False
        for r in regs:
            if t & ~taint.get(r, 0):
                taint[r] = taint.get(r, 0) | t
                grew = True
        return grew

    changed = True
    while changed:
        changed = False
        for bi, b in enumerate(blocks):
            for s in b:
                if s.startswith("{"):
                    instrs = _group(s)
                    if BLOCK_BARRIER.search(s):  # a barrier reduction: the same result everywhere
                        continue
                    uses = [u for _, _, _, us in instrs for u in us] + [g for g, _, _, _ in instrs if g]
                    defs = [d for _, _, ds, _ in instrs for d in ds]
                    t = of(uses) | (LANE | BLOCK if re.search(r"%tid|%laneid|\batom\.", s) else 0)
                    if WARP_UNIFORM.search(s):
                        t = BLOCK if t else 0
                    changed |= define(defs, t | control[bi])
                    continue
                guard, op, defs, uses = _instr(s)
                t = of(uses) | (taint.get(guard, 0) if guard else 0) | control[bi]
                if re.search(r"%tid|%laneid", s) or op.startswith("atom"):
                    t |= LANE | BLOCK
                if WARP_UNIFORM.match(op):
                    t = BLOCK if t else 0
                changed |= define(defs, t)
        for bi, b in enumerate(blocks):
            last = b[-1] if b else ""
            m = re.match(r"@!?(%\w+)\s+bra", last)
            if not m or not taint.get(m.group(1)):
                continue
            t = taint[m.group(1)] | control[bi]
            for r in _region(bi, succ, pdom):
                if t & ~control[r]:
                    control[r] |= t
                    changed = True

    problems = []
    for bi, b in enumerate(blocks):
        for s in b:
            guard = re.match(r"@!?(%\w+)", s)
            t = control[bi] | (taint.get(guard.group(1), 0) if guard else 0)
            if BLOCK_BARRIER.search(s) and t & BLOCK:
                problems.append(f"{name}: {BLOCK_BARRIER.search(s).group(0)} under a branch that differs between "
                                f"the block's threads: {' '.join(s.split())[:100]}")
            elif WARP_COLLECTIVE.search(s) and t & LANE:
                problems.append(f"{name}: {WARP_COLLECTIVE.search(s).group(0)} under a branch that differs between "
                                f"a warp's lanes: {' '.join(s.split())[:100]}")
    return problems


def barrier_problems(ptx: str) -> List[str]:
    """One line per barrier some threads may not reach together, for every
    kernel (.entry) and function (.func) of the module."""
    problems: List[str] = []
    for m in re.finditer(r"\.(entry|func)\s+(?:\([^)]*\)\s*)?([$\w]+)", ptx):
        start, semi = ptx.find("{", m.end()), ptx.find(";", m.end())
        if start < 0 or 0 <= semi < start:
            continue  # a declaration (.extern .func ...;): no body
        depth, i = 0, start
        while i < len(ptx):
            depth += {"{": 1, "}": -1}.get(ptx[i], 0)
            if depth == 0:
                break
            i += 1
        problems += _function_problems(m.group(2), ptx[start + 1:i])
    return problems
