"""MLIR types as the importer needs them: a kind, a shape, an element type and a memory space.

``tensor<128x64xf16, #blocked>`` is a register tile, ``!ttg.memdesc<..., #shared, #smem>`` a tile in
shared memory and ``!ttg.memdesc<..., #ttng.tensor_memory>`` one in tensor memory; a tensor of
pointers (``tensor<128x64x!tt.ptr<f16>>``) is address arithmetic, not a tile. Layout encodings are
read past and dropped: a tile-level schedule does not see them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir import TensorType
from .lexer import CLOSE, OPEN, Source, Token
from .parser import canonical

# MLIR element type -> .tir dtype (contract section 1).
DTYPES = {
    "f64": "f64", "f32": "f32", "tf32": "tf32", "f16": "f16", "bf16": "bf16",
    "f8E4M3FN": "f8e4m3", "f8E4M3FNUZ": "f8e4m3", "f8E4M3": "f8e4m3", "f8E4M3B11FNUZ": "f8e4m3",
    "f8E5M2": "f8e5m2", "f8E5M2FNUZ": "f8e5m2", "f4E2M1FN": "f4",
    "i64": "i64", "i32": "i32", "i16": "i16", "i8": "i8", "i1": "i1",
}
_SCALAR = re.compile(r"(?:[fi]\d+|bf16|tf32|index|f\d+E\w+|none)$")
_DIMS = re.compile(r"((?:\d+x)*)(.*)$")


@dataclass(frozen=True)
class MType:
    kind: str  # tensor, memdesc, scalar, ptr, token, desc, other
    shape: tuple[int, ...] = ()
    elem: str = ""  # the element's MLIR spelling; "ptr" for a tensor of pointers
    space: str = "reg"  # reg for a tensor; smem or tmem for a memdesc
    pointee: str = ""  # for a tensor of pointers: what they point to
    mutable: bool = False  # a memdesc that may be written after it is allocated
    transposed: bool | None = None  # an nvmma_shared memdesc's `transposed` flag (None: no such flag)
    order: tuple[int, ...] | None = None  # a blocked tensor layout's `order`: its dims, fastest first

    @property
    def is_tile(self) -> bool:
        return self.kind in ("tensor", "memdesc") and self.elem != "ptr"

    def tile(self, space: str | None = None) -> TensorType | None:
        """The `.tir` type of this tile (None when its element type has no `.tir` dtype)."""
        dtype = DTYPES.get(self.elem)
        return TensorType(dtype, self.shape, space or self.space) if dtype and self.is_tile else None


UNKNOWN = MType("other")
TOKEN = MType("token")


class TypeReader:
    """Reads types from a token list; `aliases` resolves ``#name`` to its definition."""

    def __init__(self, src: Source, aliases: dict):
        self.src, self.aliases = src, aliases

    def read(self, toks: tuple[Token, ...], i: int) -> tuple[MType, int]:
        """The type starting at toks[i], and the index after it."""
        if i >= len(toks):
            raise self.src.error("expected a type", toks[-1] if toks else Token("eof", "", 1, 1))
        tok = toks[i]
        if tok.is_("tensor") or canonical(tok.text) == "!ttg.memdesc":
            return self.shaped(toks, i)
        if tok.kind == "word" and _SCALAR.match(tok.text):
            return MType("scalar", elem=tok.text), i + 1
        if tok.kind == "type":
            kind = {"!tt.ptr": "ptr", "!ttg.async.token": "token", "!tt.tensordesc": "desc"}.get(tok.text, "other")
            end = _skip_angle(toks, i + 1)
            if kind == "ptr" and end > i + 1:  # !tt.ptr<f16>, !tt.ptr<tensor<...>>: keep the pointee
                inner, _ = self.read(toks, i + 2)
                return MType(kind, inner.shape, inner.elem), end
            return MType(kind), end
        raise self.src.error(f"expected a type, found '{tok.text}'", tok)

    def shaped(self, toks: tuple[Token, ...], i: int) -> tuple[MType, int]:
        is_tensor = toks[i].is_("tensor")  # else a !ttg.memdesc
        if i + 2 >= len(toks) or not toks[i + 1].is_("<"):
            raise self.src.error(f"expected '<' after '{toks[i].text}'", toks[min(i + 1, len(toks) - 1)])
        word = toks[i + 2]
        m = _DIMS.match(word.text) if word.kind == "word" else None
        if m is None and not (word.kind == "type" and word.text == "!tt.ptr"):
            raise self.src.error(f"expected a shape such as 128x64xf16, found '{word.text}'", word)
        dims, elem = (m.group(1), m.group(2)) if m else ("", "")
        j = i + 3
        pointee = ""
        if not elem:  # 128x1x!tt.ptr<f16>: the element is itself a type
            inner, j = self.read(toks, j if m else i + 2)
            elem, pointee = ("ptr", inner.elem) if inner.kind == "ptr" else (inner.elem, "")
        if elem != "ptr" and not _SCALAR.match(elem):
            raise self.src.error(f"unknown element type '{elem}' in '{word.text}'", word)
        shape = tuple(int(d) for d in dims.split("x") if d)
        if 0 in shape:
            raise self.src.error(f"a tile with a dimension of 0 ('{word.text}'): nothing to schedule", word)
        end = _skip_angle(toks, i + 1)
        if is_tensor:
            return MType("tensor", shape, elem, "reg", pointee, order=self._order(toks[j:end - 1])), end
        params = [canonical(self.resolve(t.text)) for t in toks[j:end - 1] if t.kind == "attr"]
        space = "tmem" if "#ttng.tensor_memory" in params else "smem"
        mutable = any(t.is_("mutable") for t in toks[j:end - 1])
        transposed = None
        for t in toks[j:end - 1]:
            if t.kind == "attr" and canonical(self.resolve(t.text)) == "#ttg.nvmma_shared":
                transposed = self._flag(t.text, "transposed")
        return MType("memdesc", shape, elem, space, mutable=mutable, transposed=transposed), end

    def _order(self, toks: tuple[Token, ...]) -> tuple[int, ...] | None:
        """The `order = [1, 0]` of a ``#ttg.blocked`` encoding, named by alias or written inline: for a
        tensor of pointers, the order Triton's coalescing gave it from the addresses' contiguity."""
        for k, t in enumerate(toks):
            if t.kind != "attr":
                continue
            if canonical(self.resolve(t.text)) == "#ttg.blocked":
                body = self.aliases.get(t.text) or toks[k:]
                return _int_list(body, "order")
        return None

    def _flag(self, alias: str, key: str) -> bool | None:
        """`KEY = true|false` in the definition of the alias ``#name`` (None when absent)."""
        toks = self.aliases.get(alias) or ()
        for a, eq, v in zip(toks, toks[1:], toks[2:]):
            if a.text == key and eq.text == "=" and v.text in ("true", "false"):
                return v.text == "true"
        return None

    def resolve(self, name: str) -> str:
        """``#smem`` -> ``#ttg.shared_memory`` (the first token of its definition)."""
        seen = set()
        while name in self.aliases and name not in seen:
            seen.add(name)
            definition = self.aliases[name]
            if not definition:
                break
            name = definition[0].text
        return name

    def read_list(self, toks: tuple[Token, ...], i: int) -> tuple[list[MType], int]:
        """``A, B`` or ``A * B`` or ``(A, B)`` (or ``()``): a list of types."""
        out = []
        if i < len(toks) and toks[i].is_("("):
            i += 1
            while i < len(toks) and not toks[i].is_(")"):
                t, i = self.read(toks, i)
                out.append(t)
                if i < len(toks) and toks[i].is_(","):
                    i += 1
            return out, i + 1
        while i < len(toks):
            t, i = self.read(toks, i)
            out.append(t)
            if not (i < len(toks) and (toks[i].is_(",") or toks[i].is_("*"))):
                break
            i += 1
        return out, i

    def signature(self, toks: tuple[Token, ...]) -> tuple[list[MType], list[MType] | None]:
        """The trailing ``: ins [-> outs | to out]`` of a custom op, after its last top-level ':'."""
        colon = last_top_level(toks, ":")
        if colon is None:
            return [], None
        ins, i = self.read_list(toks, colon + 1)
        if i < len(toks) and (toks[i].kind == "arrow" or toks[i].is_("to")):
            outs, _ = self.read_list(toks, i + 1)
            return ins, outs
        return ins, None


def last_top_level(toks: tuple[Token, ...], text: str) -> int | None:
    """Index of the last token spelled `text` outside any brackets."""
    depth, found = 0, None
    for i, tok in enumerate(toks):
        if tok.kind == "punct" and tok.text in OPEN:
            depth += 1
        elif tok.kind == "punct" and tok.text in CLOSE:
            depth -= 1
        elif depth == 0 and tok.is_(text):
            found = i
    return found


def _skip_angle(toks: tuple[Token, ...], i: int) -> int:
    """If toks[i] is '<', the index after its matching '>'; else i."""
    if i >= len(toks) or not toks[i].is_("<"):
        return i
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind == "punct" and toks[j].text in OPEN:
            depth += 1
        elif toks[j].kind == "punct" and toks[j].text in CLOSE:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(toks)


def _int_list(toks, key: str) -> tuple[int, ...] | None:
    """``KEY = [1, 0]`` among `toks` as a tuple of ints (None when absent or not all integers)."""
    for k in range(len(toks) - 2):
        if toks[k].text == key and toks[k + 1].text == "=" and toks[k + 2].text == "[":
            out = []
            for t in toks[k + 3:]:
                if t.text == "]":
                    return tuple(out)
                if t.text != ",":
                    try:
                        out.append(int(t.text))
                    except ValueError:
                        return None
    return None
