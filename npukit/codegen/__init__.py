"""Code generation: exported C projects that build and run (no tvm imported here).

Modules: ``targets`` (build targets as data), ``makefile`` (the project's Makefile), ``runner``
(the ``main.c`` runner), ``memfit`` (section sizes and memory fit); ``runtime/`` holds the C files
copied into projects (``npk_npy`` .npy I/O, Cortex-M7 startup and linker script); ``kernels``
holds the reference C kernel libraries and their Python helpers.
"""
