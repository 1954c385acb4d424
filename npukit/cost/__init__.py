"""The cost model (no tvm): per-op and per-boundary figures as value types with named terms, each
traceable to its formula, the profile fields and the op attributes it came from.

Stated model (docs/cost-model.md says the same in prose):

Kernels.  Each fused composite of the plan (a BYOC pattern match, e.g. dequantize-conv2d-add-
quantize-clip) is one kernel.  Outside composites (the host's ops) a MAC op and the elementwise
epilogue chain after it (each op the only reader of the one before, same partition, not a model
output) are one kernel, as the processor's own compiler fuses them (TVM FuseOps, TFLite fused
activations).  Every other op is a kernel of its own.  A kernel is costed as one unit and its
figures are reported on its anchor op: the member with the most MACs (then the most vector work;
on ties the first).  The other members report zero cycles and a trace naming the anchor and their
role:

* input: a ``dequantize`` feeding the anchor at an integer bit-width: no work, the integer kernel
  reads the integer values (the zero point folds into the bias);
* view (reshape, squeeze, ...): no work, no data;
* epilogue: an elementwise op after the anchor (add, multiply, quantize, clip, relu, ...);
* serial: anything else, costed as its own work after the anchor's.

A member whose values never leave its kernel (every reader is inside it) and that owns no weight
runs at the anchor's width, whatever its own (``cost.members.inner_width``): nothing rounds,
stores or converts its values there -- the simulation and the generated code leave them wide --,
so a layer bit-width on it (a conv's bias add) has no effect; the per-op table's ``bits_note`` and
``explain`` say so, and ``Study.set_bits`` warns.

The width b an op runs at (``npukit.pipeline.widths``): its layer's bit-width, else its
processor's setting, else the processor's default_bits -- but fp16 where that says fp32, the model
holds every float value of the op as float16 and the processor runs fp16 (a processor without fp16
arithmetic computes in fp32, the tensors still held as float16), and a kernel member's as above.

Per op on processor p at bit-width b (the op's MACs and vector ops come from ``npukit.opset``):

* util_mac = u_in * fill(OC, channels_out) * fill(pixels, pixels) where fill(n, P) =
  n / (ceil(n / P) * P) is how full P lanes (or one step of P) are kept, and
  u_in = fill(IC/groups, channels_in), or with mac_array.kernel_taps = t > 1 the larger of that
  and fill(IC/groups, channels_in / t) * fill(KH*KW, t) (t kernel taps share the input lanes:
  depthwise, few input channels); matmul uses K, N, M.
* util_vec = fill(innermost output dim, vector_lanes), innermost as the processor holds the tensor:
  an image (a conv's, pool's or resize's activation, and what elementwise ops, norms, softmax and
  rank-keeping reductions carry on from it) puts channels innermost on an NHWC or tiled processor
  and its last spatial dim on an NCHW one, whichever order the file holds it in; any other tensor
  its last dim; a dim of one element takes no place (``npukit.cost.layouts``).
* util_red = 1, or with the processor's ``reduction`` table (scalar code, e.g. a CPU running
  untuned compiled loops): K = the products accumulated into one output (IC/groups*KH*KW for a
  conv, K for a matmul); util_red = 1 when K <= unroll (the compiler unrolls the reduction and
  vectorises across outputs), else serial * (unroll / K)^exponent (one dependent accumulation
  chain per output, overlapped less with its neighbours the longer it is).
* mac_cycles = MACs / (macs_per_cycle[b] * util_mac * util_red * eff); vec_cycles = vector_ops /
  (vector_ops_per_cycle[b] * util_vec * eff); eff = efficiency[kernel class], else
  efficiency[op kind], else efficiency["*"] (the trace names the key used).  Kernel class:
  KIND.depthwise (a conv with groups > 1 and one input channel per group), KIND.pointwise (a conv
  with a 1-tap kernel and groups 1), matmul.gemv (a matmul with one output row, M * batch = 1),
  else the op kind.

Per kernel (``npukit.cost.kernel.kernel_cost``, the one place these are evaluated):

* compute_cycles: with an output stage (output_elems_per_cycle > 0) and an anchor with MACs,
  max(anchor mac + vec cycles, anchor output elements / output_elems_per_cycle), the epilogue
  running in that stage at no extra cost; with an output stage and a vector anchor, the anchor's
  cycles (the epilogue runs in the same pass); without one, the anchor's cycles + the epilogue
  members' vec_cycles, at the anchor's efficiency (its class's: they run inside its loop nest).
  Plus the serial members' cycles.  Plus, for every input an op reads from another kernel of the
  same partition held otherwise than it holds it (a layer bit-width: the producer wrote it at its
  width; the float side of a (de)quantize, see bytes, when it is stored between two kernels), its
  conversion as it loads: 2 * elements / vector_ops_per_cycle[b] (b the reader's width); those
  ops count in vector_ops and energy, and the input's bytes are read at the producer's width.  A
  value made inside the reader's own kernel is read as it is: nothing converts it.
  Between processors the boundary converts (below).
* bytes: every tensor at its op's bit-width (int4 / int2 packed, in whole bytes; int32 bias when b
  is an integer width -- a constant with one dimension above 1 that no MAC op reads as its weight: a
  1x1 depthwise conv's [C, 1, 1, 1] weight is held at b; index tensors keep their dtype), never wider than the model holds it (a model's integer
  tensor keeps its width, a float16 tensor is 16 bits at fp32: ``tables.model_width``, as the
  generated code stores it and the simulation runs it), but the float side of the model's own input quantize
  and output dequantize -- a model input a quantize reads, a model output a dequantize writes --
  in its own dtype (fp32 for float32) whatever the op's width: the op itself converts it
  (``tables.own_widths``; inside the model a (de)quantize stands for an integer op's
  requantisation, which an int8 program folds, and its float side is held at its width).  A tensor produced and consumed inside one kernel moves
  nothing.  An activation that stays in one partition and fits in half the processor's on-chip
  memory moves through on-chip memory; other activations move through DRAM; constant weights and
  biases are read at weight_bytes_per_cycle; a lookup (take, gather) reads of its constant table the
  rows it gathers (its output's bytes), once.  When weights and input do not fit on chip together,
  the input is streamed once per weight tile (half the on-chip memory):
  dram_in = in_bytes * ceil(w_bytes / (onchip_bytes / 2)).
* act_cycles = dram_bytes / dram_bytes_per_cycle + onchip_bytes / onchip_bytes_per_cycle;
  weight_cycles = weight_bytes / weight_bytes_per_cycle;
  memory_cycles = act_cycles + weight_cycles (weight_port "shared") or
  max(act_cycles, weight_cycles) (weight_port "separate": weights come over their own bus).
* overhead_cycles = op_overhead_cycles (once per kernel; none for a kernel of views)
  + call_overhead_cycles (on the kernel holding the first op of an offloaded partition)
* cycles = max(compute_cycles, memory_cycles) + overhead_cycles
* latency_us = cycles / clock_mhz
* energy_uj = (MACs * pJ_per_mac[b] + vector_ops * pJ_per_op[b] + (dram_bytes + weight_bytes)
  * pJ_per_byte + onchip_bytes * pJ_per_onchip_byte) / 1e6 + static_mw * latency_us / 1e3, where
  vector_ops counts the work actually executed (an output stage costs one op per output element)

Per boundary tensor from processor s to processor d, held on s at bits(s) -- its producer's
bit-width (a model input: its own dtype) -- and on d at bits(d) -- its first reader's there (a model
output no op on the host reads: its own dtype) --, each the tensor's own dtype where that op is the
model's own input quantize or output dequantize and the tensor its float side (so the boundary
before a model's input QUANTIZE moves the float tensor and converts nothing: the QUANTIZE does):

* bytes = ceil(elements * bits / 8) (whole bytes: seven packed int4 values take 4) at the width
  the tensor travels: bits(d) when the (de/re)quantize
  runs on the sending processor ([conversion] quantize_on = "src", or "host" when the host sends),
  else bits(s)
* transfer_us = latency_us + k * bytes / (bandwidth_gbps * 1000), k = 2 through shared DRAM
  (write, then read), else 1
* layout_us (only when the layouts differ and the tensor has rank 4, any other rank being row-major,
  and only when they hold it in different memory orders: none where every element stays at its
  offset -- NCHW <-> NHWC with C = 1 or H = W = 1, a tiled layout whose C is whole tiles and is NHWC
  apart from dims of one element; the trace says which, ``npukit.cost.layouts.same_memory``; the
  transfer and any (de/re)quantize are charged as ever): a copy, ops * elements /
  vector_ops_per_cycle[w] + 2 * bytes(s) / dram_bytes_per_cycle, in cycles of the converting
  processor ([conversion] layout_on), bytes(s) = ceil(elements * bits(s) / 8); w is the data's own width
  (ops = 1) unless another width's vector rate moves more bits per cycle (rate * bits: a CPU without
  an FPU copies fp32 as integers), then ops = bits(data) / bits(w)
* quantize_us (only when the tensor is held differently at the two widths: a model's integer tensor
  keeps its width at any op width): 2 * elements / vector_ops_per_cycle + 2 * bytes(s) /
  dram_bytes_per_cycle, likewise on [conversion] quantize_on
* energy_uj = bytes * link pJ/byte / 1e6 + each conversion's (ops * elements * energy_pj_per_op at
  the width its time is taken at + 2 * bytes(s) * pJ_per_byte) / 1e6 + static_mw * us / 1e3

Every figure's trace (``OpCost.trace``, ``boundary_trace``) is rendered from the same terms the
figures were computed with.
"""

from .boundary import BoundaryCost, Conversion, boundary_cost, boundary_trace, qkind
from .grouping import OpContext, contexts, kernels
from .kernel import KernelCost, kernel_cost
from .mac_array import fill, kernel_class_of
from .model import CostModel, OpCost
from .tables import Tables, elem_bits, held_width, input_bits, tensor_bytes
from .trace import Trace

__all__ = [
    "BoundaryCost", "Conversion", "CostModel", "KernelCost", "OpContext", "OpCost", "Tables", "Trace",
    "boundary_cost", "boundary_trace", "contexts", "elem_bits", "fill", "held_width", "input_bits", "kernel_class_of",
    "kernel_cost", "kernels", "qkind", "tensor_bytes",
]  # fmt: skip
