# vmath.inc's routines (vexp_d, ...) as an object of their own, linked by generated kernels
# (hostlib/graph/souffle_codegen.py) so that they are assembled once.

	.set	noreorder
	.include "vmath.inc"
