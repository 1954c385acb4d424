"""The generated code and the exports of ``study.Study`` (``StudyOutputs``): the C project of the
current config, its export, build and memory fit; Model Explorer and annotated ONNX files, netron,
the HTML report and the timeline figure.
"""

from __future__ import annotations

from pathlib import Path

from . import pipeline as pl


class StudyOutputs:
    """The generated code and the exports of ``study.Study`` (see the module docstring)."""

    # ------------------------------------------------------------------------------------------
    # generated code

    @property
    def project(self):
        """The generated C project of the current config (``npukit.codegen.project.Project``)."""
        return pl.code(self.result, self.data)

    @property
    def code(self) -> dict[str, str]:
        """The generated C project: relative path -> file text (follows every edit)."""
        return dict(self.project.files)

    def export(self, directory) -> object:
        """Write the generated project to ``directory`` atomically; ``make`` builds it.  Returns the
        Project (files, manifest, memory figures).  ``directory`` must be new, empty, or an earlier
        export (what it and its build wrote is replaced, your own files in it are kept); a
        directory holding anything else, or an earlier export made read-only (``chmod -R a-w``), is
        refused (NpukitError) and left as it was."""
        from .codegen.project import build_outputs, check_io_dtypes  # noqa: PLC0415
        from .export_dir import atomic_write_tree, check_export_target  # noqa: PLC0415

        check_export_target(directory)  # before the code is generated: a wrong directory fails fast
        check_io_dtypes(self.graph)
        proj = self.project
        atomic_write_tree(directory, proj.files, build_outputs())
        self._warn_partition_limits("the exported program")
        return proj

    @property
    def partition_limits(self) -> tuple[str, ...]:
        """Per accelerator that this plan gives more offloaded partitions than its runtime takes
        (``processors.<name>.max_partitions``), what is over, in words; empty when every limit holds.
        The plan is estimated all the same; ``export()`` and ``build()`` warn
        (``npukit.PartitionLimitWarning``)."""
        from .plan import partition_limits  # noqa: PLC0415

        return partition_limits(self.plan, self.soc)

    def _warn_partition_limits(self, what: str) -> None:
        import warnings  # noqa: PLC0415

        from .errors import PartitionLimitWarning  # noqa: PLC0415

        for text in self.partition_limits:
            warnings.warn(f"npukit: {what}: {text}", PartitionLimitWarning, stacklevel=3)

    def fit(self, directory=None, *, target: str | None = None) -> dict:
        """Does it fit?  Export, build for the profile's target (or ``target``) and hold the
        toolchain's ``size`` figures against the profile's ``flash_bytes`` / ``sram_bytes``: flash =
        code + constants + .data image, SRAM = .data + .bss (the arena) + heap + stack, with the
        weights' and arena's own sections where the linker script keeps them apart.  Warns
        (``npukit.codegen.fit.MemoryBudgetWarning``) when over budget; ``study.memory`` shows it
        afterwards.  Keeps the build in ``directory`` when given."""
        from .codegen.fit import fit_study  # noqa: PLC0415

        return fit_study(self, directory, target)

    def build(self, directory=None, *, samples: int = 16, target: bool = False) -> dict:
        """Export, compile and run the generated program on the study's data; its outputs against the
        simulation of the same config, its memory, and (``target=True``) the profile's target build
        under its emulator.  ``outputs_agree`` is False, and ``mismatches`` names them, when an output
        is beyond its tolerance of the simulation (``npukit.codegen.build``; docs/targets.md).  Without
        ``directory`` it builds in a temporary one, removed after (the report's ``directory`` is None)."""
        from .codegen.build import build_and_compare  # noqa: PLC0415

        self._warn_partition_limits("the built program")
        return build_and_compare(self, directory, samples=samples, target=target)

    # ------------------------------------------------------------------------------------------
    # exports

    def to_model_explorer(self, out_dir, include_error: bool = False) -> Path:
        """Model Explorer graph JSON + node-data overlays (processor, latency, energy[, error])."""
        from .export import to_model_explorer  # noqa: PLC0415

        return to_model_explorer(self, out_dir, include_error)

    def annotated_onnx(self, path) -> Path:
        """The ONNX model with npukit's placement and figures on every node (for Netron)."""
        from .export import annotated_onnx  # noqa: PLC0415

        return annotated_onnx(self, path)

    def netron(self, path=None, port: int | None = None, height: int = 600):
        """Serve the annotated ONNX with netron on loopback and show it in the notebook."""
        from .export import netron_frame  # noqa: PLC0415

        return netron_frame(self, path, port, height)

    def report(self, path, include_error: bool = False, include_memory: bool = True) -> Path:
        """A standalone HTML report (tables + timeline; with ``include_memory`` the memory fit of the
        generated code against the profile's flash / SRAM, and of the target build after ``fit()``)."""
        from .report import write_report  # noqa: PLC0415

        return write_report(self, path, include_error, include_memory)

    def timeline_figure(self):
        """The lane timeline as a plotly figure."""
        from .report import timeline_figure  # noqa: PLC0415

        return timeline_figure(self)
