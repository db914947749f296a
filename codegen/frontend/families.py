"""The family names: which template could implement a classified node.

Why its own module: the classifier (ops) and each op family's own classifier (conv_ops, pool_ops,
...) name families, and the family modules are imported by ops, so the shared names cannot live in
ops without an import circle. ops re-exports all of them.
"""

ELEMENTWISE = "elementwise"
GEMM = "gemm"
SOFTMAX = "softmax"
LAYER_NORM = "layer_norm"
REDUCTION = "reduction"
BATCH_NORM = "batch_norm"
VIEW = "view"  # metadata only (view, transpose, getitem of a tuple, ...): no kernel
SCALAR = "scalar"  # Python values computed from sizes
OTHER = "other"  # stays PyTorch
INPUT = "input"
ATTR = "attr"
OUTPUT = "output"
