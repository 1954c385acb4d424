"""A TVM Relax IRModule given as the model: modules written with TVMScript or a BlockBuilder, and
the modules TVM's own frontends return, studied in the module's own words."""

from __future__ import annotations

from conftest import DIGITS_ONNX

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
