"""Code generation for exported projects; ``kernels`` holds the reference C kernel libraries."""
