"""The one sanitiser every C identifier of a generated project comes from, and the escaping of
model names in comments.

A model's own names never become identifiers: an identifier is derived from a role and an index
(``t12``, ``w3``, ``part2``) plus, for readability, a cleaned fragment of the name; it is a valid C
identifier, unique within its ``Names`` scope, not a keyword, not a reserved name (leading ``_``,
``__``, ``_Upper``), and not a name the C library, the kernel libraries or TVM's runtime define.
A model's name appears only inside comments, escaped so it can neither close the comment, start a
directive, continue a line, nor form a trigraph.
"""

from __future__ import annotations

import re

C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
asm typeof bool true false alignas alignof static_assert thread_local nullptr constexpr
""".split())  # fmt: skip
# names the generated program links against or includes: never shadowed by a generated identifier
LIBRARY = frozenset("""
main exit abort malloc calloc realloc free memcpy memset memmove memcmp strlen strcmp printf fprintf puts
fopen fclose fread fwrite stdin stdout stderr errno assert NULL EOF FILE size_t int8_t int16_t int32_t int64_t
uint8_t uint16_t uint32_t uint64_t float_t double_t INFINITY NAN expf logf sqrtf tanhf erff erfcf floorf ceilf
roundf fabsf fmaxf fminf powf exp log sqrt tanh erf floor ceil round fabs
npukit_model_run npukit_model_inputs npukit_model_outputs npukit_arena npukit_weights
DLTensor DLDevice DLDataType TVMFFIAny TVMBackendAllocWorkspace TVMBackendFreeWorkspace
""".split())  # fmt: skip
_RESERVED_PREFIXES = ("npk_", "NPK_", "TVM", "tvm", "__", "arm_", "cmsis_")
_CLEAN = re.compile(r"[^A-Za-z0-9]+")


def fragment(name: str, n: int = 24) -> str:
    """A readable, safe fragment of a model name: ASCII letters and digits joined by ``_``, lower
    case, at most ``n`` characters ("/conv1/Conv" -> "conv1_conv")."""
    s = _CLEAN.sub("_", name).strip("_").lower()
    return s[:n].rstrip("_")


class Names:
    """A scope of unique C identifiers.  ``ident(role, name)`` -> ``<role>_<fragment>`` made unique
    with a numeric suffix; the same (role, name) asks twice for two identifiers."""

    def __init__(self, reserved=()):
        self._used: set[str] = set(C_KEYWORDS) | set(LIBRARY) | set(reserved)

    def ident(self, role: str, name: str = "") -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", role):
            raise ValueError(f"names: role {role!r} must be lower-case letters, digits and _")
        frag = fragment(name)
        base = f"{role}_{frag}" if frag else role
        cand, k = base, 1
        while cand in self._used or cand.startswith(_RESERVED_PREFIXES) or cand.lower() in self._lower():
            k += 1
            cand = f"{base}_{k}"
        self._used.add(cand)
        return cand

    def _lower(self) -> set[str]:
        # identifiers differing only by case would confuse a reader (and some toolchains' map files)
        return {u.lower() for u in self._used if u not in C_KEYWORDS and u not in LIBRARY}

    def reserve(self, name: str) -> str:
        """Take a fixed identifier (an API name); it must be free."""
        if name in self._used:
            raise ValueError(f"names: {name!r} is already taken")
        self._used.add(name)
        return name


_PLAIN = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII but backslash and double quote: the common case


def comment(text: str) -> str:
    """``text`` safe inside a C block comment on one line: no ``*/``, no ``/*``, no newline or
    line continuation, no trigraph (``??``), no control character; non-ASCII as ``\\u`` escapes."""
    text = str(text)
    if _PLAIN.fullmatch(text) and "*/" not in text and "/*" not in text and "??" not in text:
        return text
    out = []
    for ch in str(text):
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif o < 32 or o == 127:
            out.append(f"\\x{o:02x}")
        elif o > 126:
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    s = "".join(out).replace("*/", "*\\/").replace("/*", "/\\*").replace("??", "?\\?")
    return s
