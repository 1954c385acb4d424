"""SoC profiles: a TOML (or JSON) description of the processors, their limits, costs and links.

``schema`` holds the fields as data (and generates docs/soc-profile.md), ``profile`` the validated
value types, ``load`` the loader / validator (``checks`` its field checks, ``parse_processor`` the
reading of a processor's section).  Errors name the file and the field:
``soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3``.
"""

from .load import bundled, load_soc, parse_profile
from .profile import Link, OpRule, Processor, SocProfile
from .schema import (
    BIT_WIDTH,
    BITS,
    CONVERT_ON,
    DTYPES,
    KERNEL_CLASS_DOC,
    KERNEL_CLASSES,
    KINDS,
    LAYOUTS,
    SECTION_FIELDS,
    Field,
    class_variant_ok,
    reference_markdown,
)  # fmt: skip

__all__ = [
    "BIT_WIDTH", "BITS", "CONVERT_ON", "DTYPES", "KERNEL_CLASS_DOC", "KERNEL_CLASSES", "KINDS", "LAYOUTS",
    "SECTION_FIELDS", "Field", "Link", "OpRule", "Processor", "SocProfile", "bundled", "class_variant_ok",
    "load_soc", "parse_profile", "reference_markdown",
]  # fmt: skip
