"""A TVM Relax IRModule given as the model: modules written with TVMScript or a BlockBuilder, and
the modules TVM's own frontends return, studied in the module's own words."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import DIGITS_ONNX, missing_tool

import npukit


def _from_onnx(**kw):
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    return from_onnx(onnx.load(str(DIGITS_ONNX)), **kw)


def test_weights_a_frontend_kept_as_parameters_are_the_models_weights():
    """``from_onnx(keep_params_in_input=True)`` makes every weight a parameter of ``main`` after its
    ``num_input`` inputs, the values in its ``params`` attribute.  They were read as eight more model
    inputs to feed: every conv "with computed (not constant) weights" stayed off the DLA and the
    bias reshapes were costed as ops.  Bound as constants, the study is the one of the same module
    without them."""
    kept = npukit.import_model(_from_onnx(keep_params_in_input=True)).graph
    plain = npukit.import_model(_from_onnx()).graph
    assert [kept.tensors[t].name for t in kept.inputs] == ["input"]
    assert [(op.name, op.kind) for op in kept.ops] == [(op.name, op.kind) for op in plain.ops]
    conv = kept.ops[0]
    assert conv.kind == "conv2d" and kept.tensors[conv.inputs[1]].kind == "const"
    assert kept.tensors[conv.inputs[1]].name == "conv1.weight"  # the parameter's name
    s = npukit.Study(_from_onnx(keep_params_in_input=True), "arm-dsp-dla")
    assert list(s.placement["processor"]) == list(npukit.Study(_from_onnx(), "arm-dsp-dla").placement["processor"])
    assert s.placement["processor"].iloc[0] == "dla"


def _tuple_outputs():
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 8), "float32")):
            with R.dataflow():
                parts = R.split(x, 2, axis=1)
                a = R.nn.relu(x)
                b = R.sigmoid(x)
                R.output(parts, a, b)
            return (parts, (b, a))

    return Module


def test_each_returned_tensor_keeps_its_variables_name():
    """A returned tuple var's fields were named ``parts`` and ``t0.1`` (npukit's internal tensor id,
    shown in the build report and the error figures), and the fields of a returned nested tuple went
    by their tensor ids (``t2``, ``t1``)."""
    g = npukit.import_model(_tuple_outputs()).graph
    assert g.output_names == ("parts:0", "parts:1", "b", "a")
    assert [g.tensors[t].name for t in g.outputs] == ["parts:0", "parts:1", "b", "a"]


def _calls_a_helper(private: bool):
    """main calling ``helper`` (a private function, else a public one: with a global symbol)."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Module:
        @R.function(private=True)
        def helper(a: R.Tensor((1, 4), "float32")) -> R.Tensor((1, 4), "float32"):
            b = R.nn.relu(a)
            return b

        @R.function
        def main(x: R.Tensor((1, 4), "float32")):
            cls = Module
            y = cls.helper(x)
            z = R.sigmoid(y)
            return z

    if not private:
        gv = Module.get_global_var("helper")
        Module[gv] = Module[gv].with_attr("global_symbol", "helper")
    return Module


def _branches():
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 4), "float32"), flag: R.Tensor((), "bool")):
            if flag:
                y = R.nn.relu(x)
                z = y
            else:
                z = R.sigmoid(x)
            return z

    return Module


def test_a_binding_with_no_operator_is_refused_by_its_own_variable():
    """A call of another Relax function was blamed on the binding after it ("node 'z' (relax.sigmoid)
    calls the function 'helper'"), an if / else on "an op the importer added"; each is named by
    its own variable, and the advice for a helper works."""
    import pytest
    from tvm import relax

    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(_calls_a_helper(private=False))
    assert str(ei.value) == ("<IRModule>: 'y' calls the Relax function 'helper'; npukit reads the operators of main "
                             "itself: declare 'helper' with @R.function(private=True) and inline it with "
                             "relax.transform.InlinePrivateFunctions()")  # fmt: skip
    with pytest.raises(npukit.UnsupportedOpError) as ei:
        npukit.import_model(_branches())
    assert str(ei.value) == ("<IRModule>: 'z' is an if / else; npukit does not support control flow: give main one "
                             "path of operators")  # fmt: skip
    inlined = relax.transform.InlinePrivateFunctions()(_calls_a_helper(private=True))
    assert [(op.name, op.kind) for op in npukit.import_model(inlined).graph.ops] == [("b", "relu"), ("z", "sigmoid")]


def _shared_dim():
    """Two modules: ``y: (m, 3)`` and ``y: (m, k)``, ``x: (n, m)`` in both."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Cols3:
        @R.function
        def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("m", 3), "float32")):
            z = R.matmul(x, y)
            return z

    @I.ir_module
    class ColsK:
        @R.function
        def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("m", "k"), "float32")):
            z = R.matmul(x, y)
            return z

    return Cols3, ColsK


def test_a_symbolic_dim_pinned_on_one_input_is_pinned_on_every_input():
    """``m`` pinned through ``x`` is ``m`` in ``y`` too (BindSymbolicVars binds it everywhere), but
    ``y`` was refused as symbolic with the hint ``input_shapes={'y': (1, 3)}``, a size for ``m``
    that contradicts the one given; it is ``(4, 3)`` now, and a dim left open is asked for with the
    size given to ``m``."""
    cols3, cols_k = _shared_dim()
    g = npukit.import_model(cols3, input_shapes={"x": (2, 4)}).graph
    assert [(g.tensors[t].name, g.tensors[t].shape) for t in g.inputs] == [("x", (2, 4)), ("y", (4, 3))]
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.import_model(cols_k, input_shapes={"x": (2, 4)})
    assert str(ei.value) == ("<IRModule>: input 'y' dim 1 is symbolic ('k') in shape [4, k]; npukit needs static "
                             "shapes: pin it with npukit.Study(..., input_shapes={'y': (4, K)}) or --input-shape y=4,K, "
                             "with K the size to study (the model leaves it open)")  # fmt: skip
    with pytest.raises(npukit.ShapeError) as ei:  # (two sizes for m: said as such)
        npukit.import_model(cols3, input_shapes={"x": (2, 4), "y": (5, 3)})
    assert str(ei.value) == "<IRModule>: input_shapes gives the symbolic dim m both 4 and 5"


def _int8_module():
    """The model's own integer arithmetic, as a Relax module writes it: int8 conv2d and matmul
    accumulating into int32 (no scale, no zero point)."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    rng = np.random.default_rng(1)
    w = rng.integers(-5, 5, (8, 3, 3, 3)).astype("int8")
    m = rng.integers(-5, 5, (8, 4)).astype("int8")

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 3, 4, 4), "int8"), v: R.Tensor((1, 8), "int8")):
            with R.dataflow():
                acc = R.nn.conv2d(x, R.const(w), padding=(1, 1), out_dtype="int32")
                act = R.nn.relu(acc)
                dot = R.matmul(v, R.const(m), out_dtype="int32")
                R.output(act, dot)
            return (act, dot)

    return Module


def test_an_accelerator_leaves_the_models_integer_conv_and_matmul_to_the_host():
    """The kernel library's conv2d and matmul take float or quantized values: placed on the DLA, an
    int8 conv2d into int32 made a program that failed (``npukit_model_run failed with status 2 in
    partition 0 on dla``: NPK_ERR_DTYPE), and an int8 one into int8 saturated where TVM wraps."""
    s = npukit.Study(_int8_module(), "arm-dsp-dla", placement="first-fit")
    assert list(zip(s.placement["name"], s.placement["processor"])) == [("acc", "arm"), ("act", "dla"), ("dot", "arm")]
    dla = s.placement.set_index("name")["dla"]
    why = "code generation cannot run it here: the kernel library has no call for {} of the model's int8 integers"
    assert dla["acc"] == why.format("conv2d")
    assert dla["dot"] == why.format("matmul") + " (fully connected layers run as 1x1 convolutions)"  # (the profile's note)


@pytest.mark.slow
def test_the_generated_program_of_an_integer_module_matches_tvms_own_build(tmp_path):
    """The exported program's outputs are TVM's (relax.build + VM) on the same inputs, bit for bit."""
    import tvm
    from tvm import relax

    from npukit.codegen.build import make, run_program

    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    mod = _int8_module()
    rng = np.random.default_rng(2)
    inputs = [rng.integers(-128, 128, (1, 3, 4, 4)).astype("int8"), rng.integers(-128, 128, (1, 8)).astype("int8")]
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    want = [o.numpy() for o in vm["main"](*[tvm.runtime.tensor(a) for a in inputs])]
    s = npukit.Study(mod, "arm-dsp-dla", placement="first-fit")
    s.export(tmp_path / "p")
    make(tmp_path / "p")
    (tmp_path / "w").mkdir()
    got = run_program(tmp_path / "p", ["./model"], inputs, [a.shape for a in inputs], tmp_path / "w")
    assert [g.dtype for g in got] == [np.dtype("int32")] * 2
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_the_host_never_runs_tvms_kernel_where_it_writes_another_type_than_the_op_declares():
    """TVM 0.27 legalizes an int8 ``avg_pool2d`` (its Relax type: int8) into a kernel that writes
    int64: the host's C from TVM wrote 8 bytes per int8 element of the output buffer (AddressSanitizer:
    global-buffer-overflow in ``__tvm_ffi_npk_host_0_f0``).  The host runs the kernel library's call
    instead, which writes the declared int8."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 3, 4, 4), "int8")):
            with R.dataflow():
                q = R.nn.avg_pool2d(x, pool_size=(2, 2), strides=(2, 2))
                R.output(q)
            return q

    code = npukit.Study(Module, "arm-dsp-dla").code
    assert "host/npk_host_tvm.c" not in code
    assert "npk_tensor t_t0 = {(void *)(outputs->out0), NPK_S8, 4, {1, 3, 2, 2}" in code["src/model.c"]
    assert "if ((st = npk_avg_pool2d(&t_in0, &t_t0, &pool)) != 0) return st;" in code["src/model.c"]


def _odd_parameters():
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class ShapeParam:
        @R.function
        def main(x: R.Tensor((1, 4), "float32"), s: R.Shape([1, 4])):
            y = R.nn.relu(x)
            return y

    @I.ir_module
    class ScalarParam:
        @R.function
        def main(x: R.Tensor((1, 4), "float32"), k: R.Prim("float32")):
            y = R.multiply(x, k)
            return y

    @I.ir_module
    class RankOnly:
        @R.function
        def main(x: R.Tensor(ndim=2, dtype="float32")):
            y = R.nn.relu(x)
            return y

    return ShapeParam, ScalarParam, RankOnly


def test_a_parameter_input_shapes_cannot_pin_is_refused_for_what_it_is():
    """A shape or scalar parameter of main, and a tensor declaring a rank but no shape, were all
    "input 'x' has unknown rank; pin it with input_shapes={'x': (1, 3, 224, 224)}": a rank-4 hint
    for a rank-2 tensor, and pinned as told, "input 'x' has an unknown shape"."""
    shape_param, scalar_param, rank_only = _odd_parameters()
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(shape_param)
    assert str(ei.value) == ("<IRModule>: input 's' is a shape (R.Shape); npukit takes tensor inputs: give main one "
                             "tensor parameter per input (a scalar as R.Tensor((), dtype))")  # fmt: skip
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(scalar_param)
    assert str(ei.value) == ("<IRModule>: input 'k' is a scalar (R.Prim); npukit takes tensor inputs: give main one "
                             "tensor parameter per input (a scalar as R.Tensor((), dtype))")  # fmt: skip
    for shapes in (None, {"x": (1, 4)}):
        with pytest.raises(npukit.ShapeError) as ei:
            npukit.import_model(rank_only, input_shapes=shapes)
        assert str(ei.value) == ("<IRModule>: input 'x' declares rank 2 but no shape; npukit needs static shapes: "
                                 'declare its dims in main, e.g. R.Tensor(("d0", "d1"), "float32"), and pin symbolic '
                                 "ones with input_shapes")  # fmt: skip


def test_a_returned_tuple_of_variables_names_its_outputs_by_them():
    """TVM's frontends bind main's result to one tuple var (``gv = (lv3, lv4)``, a one-field tuple
    for a single output): its outputs were ``gv:0``, ``gv:1``, not the variables the tuple holds."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 4), "float32")):
            with R.dataflow():
                a = R.nn.relu(x)
                b = R.sigmoid(x)
                gv = (a, b)
                R.output(gv)
            return gv

    assert npukit.import_model(Module).graph.output_names == ("a", "b")


def test_a_python_file_is_told_how_its_module_is_studied(tmp_path):
    """``npukit study mymod.py`` (a TVMScript module) said "accepted: .onnx, .tflite, .pt2, or pass a
    torch.export.ExportedProgram or a Relax IRModule", which no command line can do."""
    p = tmp_path / "mymod.py"
    p.write_text("from tvm.script import ir as I\n")
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(p)
    assert str(ei.value) == (f"{p}: a Python file is code, not a model file; a Relax IRModule it builds (TVMScript "
                             "@I.ir_module, a BlockBuilder) or a torch.export.ExportedProgram is studied from Python by "
                             "passing the object: npukit.Study(mod, soc); files accepted: .onnx, .tflite, .pt2")  # fmt: skip


def _opaque_and_unknown():
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Packed:
        @R.function
        def main(x: R.Tensor((1, 4), "float32")):
            with R.dataflow():
                r = R.nn.relu(x)
                ext = R.call_dps_packed("my_kernel", (r,), out_ty=R.Tensor((1, 4), "float32"))
                R.output(ext)
            return ext

    @I.ir_module
    class Unknown:
        @R.function
        def main(x: R.Tensor((1, 4), "float32")):
            with R.dataflow():
                r = R.nn.relu(x)
                n = R.grad.no_grad(r)
                R.output(n)
            return n

    return Packed, Unknown


def test_an_op_npukit_cannot_count_is_named_once_with_what_to_do():
    """A Relax module's node is its op: it was said twice ("'ext' (relax.call_dps_packed, as
    relax.call_dps_packed)"), and an opaque packed call got the closest op names
    ('collapse_sum_like', 'logical_and' ...) as its hint."""
    packed, unknown = _opaque_and_unknown()
    with pytest.raises(npukit.UnsupportedOpError) as ei:
        npukit.import_model(packed)
    assert str(ei.value) == ("<IRModule>: 1 op(s) npukit has no entry for (no work formula, no rules): 'ext' "
                             "(relax.call_dps_packed); an opaque call_dps_packed has no work npukit can count: write "
                             "the kernel as a TIR function called with R.call_tir")  # fmt: skip
    with pytest.raises(npukit.UnsupportedOpError) as ei:
        npukit.import_model(unknown)
    assert str(ei.value) == ("<IRModule>: 1 op(s) npukit has no entry for (no work formula, no rules): 'n' "
                             "(relax.grad.no_grad); for 'no_grad': closest valid names: 'affine_grid', 'not_equal', "
                             "'logical_and', 'log_add_exp', 'nonzero'")  # fmt: skip


def test_a_conv_whose_weights_are_an_input_says_so():
    """A module taking its weights as parameters of main (no values kept for them) has weights that
    are model inputs: the DLA's refusal called them "computed (not constant) weights"."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")):
            with R.dataflow():
                conv = R.nn.conv2d(x, w, padding=(1, 1))
                R.output(conv)
            return conv

    s = npukit.Study(Module, "arm-dsp-dla", placement="first-fit")
    row = s.placement.set_index("name").loc["conv"]
    assert row["processor"] == "arm"
    assert row["dla"] == "code generation cannot run it here: conv2d whose weights are the model input 'w', not constants"


def test_a_returned_constant_is_named_by_its_position():
    """A constant main returns has no variable: its output was named ``c0``, npukit's id of the
    constant."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((1, 4), "float32")):
            y = R.nn.relu(x)
            return (y, x, R.const(np.ones((1, 4), "float32")))

    g = npukit.import_model(Module).graph
    assert g.output_names == ("y", "x", "output 2")
    assert g.tensors[g.outputs[2]].kind == "const"


def test_two_parameters_named_alike_are_refused_naming_the_name():
    """A BlockBuilder's main with two parameters both named 'x' was studied with inputs ['x', 'x']:
    set_data({'x': a}) could feed only one of them."""
    from tvm import relax

    bb = relax.BlockBuilder()
    a, b = (relax.Var("x", relax.TensorType((1, 4), "float32")) for _ in range(2))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(a, b))
        bb.emit_func_output(out)
    with pytest.raises(npukit.ModelError) as e:
        npukit.Study(bb.get(), "arm-dsp-dla")
    assert str(e.value) == ("<IRModule>: main's parameters 0 and 1 are both named 'x'; npukit gives and reports a "
                            "model's inputs by name: give each parameter a name of its own")  # fmt: skip
